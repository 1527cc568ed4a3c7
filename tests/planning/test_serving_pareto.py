"""`pareto --isl/--osl`: the serving grid for every device asked (agg and disagg unless --mode), its frontier
per (device, mode) plus the overall one, and the serving frontier figure."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from specplan.cli import app
from specplan.planning.frontier import serving_frontier


def _dominated_or_on(points, front):
    """Every point on the frontier or dominated by one of its points (>= on both axes)."""
    fu, fg = front[:, 0], front[:, 1]
    return all(np.any((fu >= u) & (fg >= g)) for u, g in points)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("serving")
    res = CliRunner().invoke(app, ["pareto", "-m", "llama-3.1-8b", "--isl", "2048", "--osl", "512", "-H", "h200-sxm",
                                   "-H", "b200", "--mechanisms", "eagle3", "--acceptance", "eagle3=0.7",
                                   "--max-draft-len", "3", "--max-tpot-ms", "15", "--figures", "all", "--tp", "1",
                                   "--grid-csv", "-o", str(out)])
    assert res.exit_code == 0, res.output
    return out, res.output


def test_serving_pareto_has_rows_for_each_device_and_writes_its_figure(run):
    out, text = run
    grid = pd.read_csv(out / "serving_grid.csv")
    front = pd.read_csv(out / "serving_frontier.csv")
    assert set(grid["hardware"]) == {"h200-sxm", "b200"} and set(grid["mode"]) == {"agg", "disagg"}
    for h in ("h200-sxm", "b200"):
        for mode in ("agg", "disagg"):
            s = front[front["scope"] == f"hardware={h} mode={mode}"]
            assert set(s["set"]) == {"baseline", "speculation", "overall"}, (h, mode)
            assert set(s["hardware"]) == {h} and set(s["mode"]) == {mode}
    assert grid.loc[grid["mode"] == "disagg", "pools"].str.fullmatch(r"\d+P\d+D").all()  # every disagg row: xPyD
    assert grid.loc[grid["mode"] == "agg", "pools"].isna().all()
    assert (out / "serving_frontier.png").stat().st_size > 10_000
    assert "serving_frontier" in text and "heatmap, tiles, acceptance, breakdown are drawn for the batch grid" in text


def test_serving_frontier_is_the_frontier_of_the_sla_points(run):
    out, _ = run
    grid = pd.read_csv(out / "serving_grid.csv")
    front = pd.read_csv(out / "serving_frontier.csv")
    assert 0 < grid["meets_sla"].sum() < len(grid)  # the SLA binds
    assert front["meets_sla"].all() and (front["tpot_ms"] <= 15 + 1e-9).all()
    for (h, mode), sub in grid[grid["meets_sla"]].groupby(["hardware", "mode"]):
        f = front[(front["scope"] == f"hardware={h} mode={mode}") & (front["set"] == "overall")]
        fp = f[["tokens_per_s_per_user", "tokens_per_s_per_gpu"]].to_numpy()
        # no grid point dominates a frontier point; every grid point is on or under the frontier
        pts = sub[["tokens_per_s_per_user", "tokens_per_s_per_gpu"]].to_numpy()
        for u, g in fp:
            assert not np.any((pts[:, 0] >= u) & (pts[:, 1] >= g) & ((pts[:, 0] > u) | (pts[:, 1] > g)))
        assert _dominated_or_on(pts, fp)
        base = front[(front["scope"] == f"hardware={h} mode={mode}") & (front["set"] == "baseline")]
        assert (base["draft_len"] == 0).all()


def test_serving_frontier_figure_sla_line_labels_and_curves(figure_checks):
    """Hand-made grid: the SLA line sits at 1000 / TPOT tokens/s per user; each (device, mode) gets a solid
    speculation curve and a dashed D = 0 curve; labels read (TP, concurrency, D, pools)."""
    from specplan.plots.serving_frontier import plot_serving_frontier

    rows = []
    for h in ("h200-sxm", "b200"):
        for mode, pools in (("agg", None), ("disagg", "1P1D")):
            for d in (0, 3):
                for c in (1, 8, 64):
                    u = 200.0 / c ** 0.3 * (1.5 if d else 1.0)
                    rows.append({"hardware": h, "tp": 2, "mode": mode, "mechanism": "eagle3" if d else "none",
                                 "draft_len": d, "concurrency": float(c), "pools": pools, "tpot_ms": 1e3 / u,
                                 "ttft_ms": 50.0, "tokens_per_s_per_user": u, "tokens_per_s_per_gpu": u * c / 2,
                                 "meets_sla": True})
    front = serving_frontier(pd.DataFrame(rows))
    fig = plot_serving_frontier(front, max_tpot_ms=10.0)
    ax = fig.axes[0]
    sla = [ln for ln in ax.get_lines() if ln.get_label().startswith("SLA: TPOT <= 10 ms")]
    assert len(sla) == 1 and sla[0].get_xdata()[0] == pytest.approx(100.0)  # 1000 / 10 ms
    labels = [ln.get_label() for ln in ax.get_lines()]
    for h in ("h200-sxm", "b200"):
        for mode in ("agg", "disagg"):
            assert f"{h}, {mode}: with speculation" in labels
            assert f"{h}, {mode}: without speculation (D = 0)" in labels
    texts = [t.get_text() for t in ax.texts]
    assert "(2, 1, 3, 1P1D)" in texts or "(2, 1, 3, -)" in texts
    import re

    assert texts and all(re.fullmatch(r"\(2, \d+, 3, (-|1P1D)\)", t) for t in texts)
    legend_over_line, unlabelled_log_axes = figure_checks

    assert legend_over_line(fig) == [] and unlabelled_log_axes(fig) == []


def test_sla_without_a_workload_is_an_error(tmp_path):
    res = CliRunner().invoke(app, ["pareto", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--max-tpot-ms", "10", "-o",
                                   str(tmp_path)])
    assert res.exit_code != 0 and "needs --isl and --osl" in str(res.exception or res.output)


def test_of_equal_points_the_frontier_keeps_the_lowest_ttft():
    """A saturated engine repeats one (tok/s/user, tok/s/GPU) point over concurrency with a growing TTFT: the
    frontier kept an arbitrary one of them (a TTFT of 22 s where 1.4 s was on offer)."""
    import pandas as pd

    from specplan.planning.frontier import serving_frontier

    g = pd.DataFrame({"mechanism": ["eagle3"] * 4 + ["none"], "draft_len": [4, 4, 4, 4, 0],
                      "concurrency": [724.0, 339.0, 861.0, 386.0, 10.0],
                      "tokens_per_s_per_user": [20.7, 20.7, 20.7, 20.7, 100.0],
                      "tokens_per_s_per_gpu": [6307.4] * 4 + [900.0], "ttft_ms": [9000.0, 1420.0, 22600.0, 3000.0, 50.0],
                      "meets_sla": [True] * 5, "hardware": ["h100-sxm"] * 5, "mode": ["agg"] * 5})
    f = serving_frontier(g)
    spec = f[(f["set"] == "speculation") & (f["scope"] == "overall")]
    assert list(spec["concurrency"]) == [339.0] and list(spec["ttft_ms"]) == [1420.0]


def test_serving_pareto_sweeps_every_tp_and_writes_the_frontier_only_by_default(tmp_path):
    """Without --tp the serving pareto sweeps TP 1, 2, 4, 8 where the heads divide (it swept TP 1 only, against its
    help); without --grid-csv it writes the frontier tables, not the whole grid (tens of MB)."""
    res = CliRunner().invoke(app, ["pareto", "-m", "llama-3.1-8b", "--isl", "1024", "--osl", "256", "-H", "h100-sxm",
                                   "--mechanisms", "eagle3", "--acceptance", "eagle3=0.7", "--max-draft-len", "1",
                                   "--mode", "agg", "--no-plots", "--timings", "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    front = pd.read_csv(tmp_path / "serving_frontier.csv")
    assert "h100-sxm TP 1, 2, 4, 8 x agg" in res.output  # llama-3.1-8b's 32 heads divide by each
    assert not (tmp_path / "serving_grid.csv").exists() and not (tmp_path / "serving_grid.parquet").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["serving_energy_frontier.csv", "serving_frontier.csv"]
    assert len(front) > 0 and "the whole grid with --grid-csv" in res.output
    assert "timings (CPU s): serving grid " in res.output  # --timings is honoured (it printed nothing)

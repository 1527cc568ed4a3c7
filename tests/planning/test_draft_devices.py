"""Draft devices are not free: frontier per device, pareto --per, study summary rows, columns doc; pareto plots
show the best frontier point's setup."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specplan.core.errors import SpecplanError
from specplan.planning.frontier import best_at, frontier
from specplan.planning.sweep import columns_doc, sweep
from specplan.speculation.spec import DraftSearch
from specplan.planning.sweep import SweepAxes
from specplan.speculation.spec import DraftPlacement

REPO = Path(__file__).resolve().parents[2]
LPU_DRAFT = dict(axes=SweepAxes(tp=[2], batch_max=64, batch_points=12, contexts=[8192]),
                 drafts=DraftSearch(["external"], max_draft_len=6),
                 draft=DraftPlacement("qwen3.5-35b-a3b", "groq-3-lpu"), progress=False)


@pytest.fixture(scope="module")
def lpu_grid():
    return sweep("qwen3.5-122b-a10b", "b200", **LPU_DRAFT)


def test_frontier_ranks_per_device(lpu_grid):
    g = lpu_grid
    assert (g.loc[g["draft_len"] > 0, "draft_devices"] > 0).all()
    per_gpu = frontier(g, sets=["overall"])
    per_dev = frontier(g, sets=["overall"], per="device")
    assert (per_gpu["draft_len"] > 0).any()  # the draft chips are free per target GPU ...
    fits = g[g["fits"]]
    top = fits.loc[fits["tok_s_device"].idxmax()]
    assert per_dev["tok_s_device"].max() == pytest.approx(float(top["tok_s_device"]))
    # ... and each device-frontier point is undominated in (tok_s_user, tok_s_device)
    for _, r in per_dev.iterrows():
        better = fits[(fits["tok_s_user"] >= r["tok_s_user"]) & (fits["tok_s_device"] > r["tok_s_device"])]
        assert better.empty
    lv = [float(per_dev["tok_s_user"].min())]
    assert best_at(per_dev, lv, per="device")["tok_s_device"].iloc[0] == pytest.approx(per_dev["tok_s_device"].max())
    with pytest.raises(SpecplanError, match="per: must be one of gpu, device"):
        frontier(g, per="chip")


def test_columns_doc_has_device_columns_with_units():
    doc = columns_doc()
    assert "| `draft_devices` |" in doc and "| `tok_s_device` |" in doc
    line = next(x for x in doc.splitlines() if x.startswith("| `tok_s_device`"))
    assert "draft devices included" in line and "(tokens/s per device)" in line
    assert "(devices)" in next(x for x in doc.splitlines() if x.startswith("| `draft_devices`"))


def _pareto(tmp_path, *extra):
    return subprocess.run([sys.executable, "-m", "specplan", "pareto", "-m", "qwen3.5-122b-a10b", "-H", "b200",
                           "--tp", "2", "--batch-max", "64", "--batch-points", "12", "--max-draft-len", "6",
                           "--mechanisms", "external", "--draft-model", "qwen3.5-35b-a3b", "--draft-hardware",
                           "groq-3-lpu", "-c", "8192", "--no-plots", "--no-progress", "-o", str(tmp_path), *extra],
                          capture_output=True, text=True)


def test_pareto_per_device(tmp_path):
    p = _pareto(tmp_path / "d", "--per", "device")
    assert p.returncode == 0, p.stderr
    best = pd.read_csv(tmp_path / "d" / "best_at_interactivity.csv")
    front = pd.read_csv(tmp_path / "d" / "frontier.csv")
    o = front[front["set"] == "overall"]
    # the device frontier never keeps a point another beats on tok_s_device at >= interactivity
    for _, r in o.iterrows():
        assert not ((o["tok_s_user"] >= r["tok_s_user"]) & (o["tok_s_device"] > r["tok_s_device"])).any()
    assert len(best) > 0
    bad = _pareto(tmp_path / "x", "--per", "chip")
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "per: must be one of" in bad.stderr


def test_pareto_plots_use_the_best_frontier_point(small_grid):
    from specplan.planning.frontier import best_setup

    front = frontier(small_grid)
    s = best_setup(small_grid, front)
    spec = front[front["set"] == "speculation"]
    r = spec.loc[spec["tok_s_gpu"].idxmax()]
    assert (s["hardware"], s["tp"], s["context_len"], s["batch"]) == (str(r["hardware"]), int(r["tp"]),
                                                                      int(r["context_len"]), int(r["batch"]))
    assert s["fits"] and s["batch"] != 16
    none = best_setup(small_grid.assign(fits=False), frontier(small_grid.assign(fits=False)))
    assert none["fits"] is False


def test_pareto_titles_name_the_plotted_point(tmp_path, monkeypatch):
    from specplan import plots as P
    from specplan.cli import sweep_cmd

    titles = []

    def spy(fig, stem, formats=("png", "svg")):
        titles.append((Path(stem).name, fig.axes[0].get_title()))
        return []

    monkeypatch.setattr(P, "save_figure", spy)
    df = sweep("llama-3.1-8b", "h100-sxm", axes=SweepAxes(batch_max=48, tp=[1, 2], contexts=[1024]),
               drafts=DraftSearch(max_draft_len=4, mechanisms=["eagle3"], acceptance={"eagle3": 0.7}), progress=False)
    sweep_cmd.write_pareto(df, frontier(df), tmp_path, "llama-3.1-8b", figures=tuple(sweep_cmd.FIGURES))
    t = dict(titles)
    assert "best frontier point" in t["speedup_heatmap"] and "best frontier point" in t["breakdown"]
    spec = frontier(df)
    r = spec[spec["set"] == "speculation"].sort_values("tok_s_gpu").iloc[-1]
    assert f"B = {int(r['batch'])}," in t["breakdown"] and f"TP {int(r['tp'])}" in t["breakdown"]
    titles.clear()
    sweep_cmd.write_pareto(df.assign(fits=False), frontier(df.assign(fits=False)), tmp_path, "llama-3.1-8b",
                           figures=("breakdown",))
    assert "DOES NOT FIT" in dict(titles)["breakdown"]


def test_lpu_draft_study_shows_draft_devices(tmp_path):
    from specplan.plots.study_plots import run_study

    s = run_study(REPO / "examples" / "studies" / "draft_placement_lpu_vs_gpu.yaml", tmp_path, progress=False)
    lpu = next(v for v in s["variants"] if "groq" in v["variant"])
    gpu = s["variants"][0]
    assert lpu["devices_at_max_tok_s_gpu"]["draft"] > 100 and lpu["devices_at_max_tok_s_gpu"]["target"] == 4
    assert gpu["devices_at_max_tok_s_gpu"]["draft"] == 0
    # per GPU the LPU draft looks like a win; per device it is not
    assert lpu["max_tok_s_gpu"]["speculation"] > gpu["max_tok_s_gpu"]["speculation"]
    assert lpu["max_tok_s_device"]["speculation"] < lpu["max_tok_s_device"]["baseline"]
    md = (tmp_path / "summary.md").read_text()
    assert "devices there: target + draft" in md and "max tok/s/device (draft devices counted)" in md
    assert np.isfinite(lpu["max_tok_s_device"]["speculation"])

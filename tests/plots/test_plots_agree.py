"""Plots that agree with the numbers, checked on the Figure objects: tick labels on every log axis, no legend
over a data line, adaptive's TPOT panel equal to the table's statistic, the break-even line only where points
fit, the acceptance figure naming each mechanism's α."""

from __future__ import annotations

import numpy as np
import pytest
from specplan.adaptive.run import PolicyOptions

pytest.importorskip("matplotlib", reason="matplotlib is not installed: the figure tests need it "
                    "(a dependency of specplan: pip install -e .)")

from specplan import plots as P  # noqa: E402
from specplan.planning import figures as F  # noqa: E402




def _figures(small_grid):
    return {"frontier": P.plot_frontier(F.frontier_figure(small_grid)), "heatmap": P.plot_speedup_heatmap(small_grid),
            "tiles": P.plot_attention_tiles(F.attention_tiles("h100-sxm")), "tiles_b200": P.plot_attention_tiles(
                F.attention_tiles("b200", head_dim=256, kv_heads=1, groups=(4, 8, 16, 32))),
            "acceptance": P.plot_acceptance(small_grid),
            "breakdown": P.plot_breakdown(F.step_breakdown("llama-3.1-8b", "h100-sxm", 1, 8, 8192))}


def test_every_log_axis_has_tick_labels_and_no_legend_covers_a_line(small_grid, figure_checks):
    legend_over_line, unlabelled_log_axes = figure_checks  # noqa: F841
    for name, fig in _figures(small_grid).items():
        assert unlabelled_log_axes(fig) == [], name
        assert legend_over_line(fig) == [], name


def test_attention_tiles_runtime_axis_has_several_labels():
    """The left panel spans less than two decades: 1-2-5 labels, not one '100'."""
    fig = P.plot_attention_tiles(F.attention_tiles("b200", head_dim=256, kv_heads=1))
    fig.canvas.draw()
    a1 = fig.axes[0]
    lo, hi = a1.get_ylim()
    labels = [t.get_text() for t in a1.get_yticklabels() if t.get_text() and lo <= t.get_position()[1] <= hi]
    assert len(labels) >= 3, labels


def test_the_checks_catch_what_they_should(figure_checks):
    """A legend put over a line, and a log axis inside one decade with matplotlib's default labels, are caught."""
    legend_over_line, unlabelled_log_axes = figure_checks  # noqa: F841
    fig, ax = P._figure(5, 4)
    ax.plot([1, 2, 3], [1, 2, 3], label="data")
    ax.legend(loc="center")
    assert legend_over_line(fig) == ["data"]
    fig, ax = P._figure(5, 4)
    ax.plot([1, 2], [120, 180])
    ax.set_yscale("log")
    ax.yaxis.set_minor_formatter(P.matplotlib.ticker.NullFormatter())
    assert unlabelled_log_axes(fig) == [": y"]


def test_heatmap_break_even_line_stops_where_points_do_not_fit():
    """A grid with speedup = 1 + 0.05 (20 − B) − 0.1 D (break-even at B = 20 − 2D) where batches above 12 do not
    fit: the break-even line has no vertex above the row of B = 12 (drawn over every cell, it reached B = 18)."""
    import pandas as pd

    b, d = np.meshgrid(np.arange(1, 21), np.arange(0, 9), indexing="ij")
    b, d = b.ravel(), d.ravel()
    df = pd.DataFrame({"hardware": "h100-sxm", "context_len": 1024, "tp": 1,
                       "mechanism": np.where(d == 0, "none", "ngram"), "batch": b, "draft_len": d,
                       "speedup": np.where(d == 0, 1.0, 1 + 0.05 * (20 - b) - 0.1 * d), "fits": b <= 12})
    fig = P.plot_speedup_heatmap(df, hardware="h100-sxm", mechanism="ngram", tp=1, context_len=1024)
    ax = fig.axes[0]
    verts = np.concatenate([p.vertices for c in ax.collections if type(c).__name__.endswith("ContourSet")
                            for p in c.get_paths() if len(p.vertices)])
    assert len(verts) > 0
    assert verts[:, 1].max() <= 11 + 1e-9  # row 11 is B = 12, the largest batch that fits
    assert verts[:, 1].min() <= 20 - 2 * 8 - 1 + 1e-9  # and it still runs down to B = 4 at D = 8 (row 3)


def test_acceptance_figure_names_each_mechanism_alpha(small_grid):
    from specplan.planning.grid_acceptance import acceptance_legend

    fig = P.plot_acceptance(small_grid, acceptance=acceptance_legend(small_grid, "llama-3.1-8b",
                                                                     {"eagle3": "0.7", "ngram": "0.4",
                                                                      "dflash": "3.1@4"}))
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "eagle3: α = 0.7" in texts and "ngram: α = 0.4" in texts and "dflash: AL 3.1 at D = 4" in texts
    # Without the values given, α1 = AL(1) − 1 read off the grid: 0.7 for an i.i.d. rate 0.7.
    texts = [t.get_text() for t in P.plot_acceptance(small_grid).axes[0].get_legend().get_texts()]
    assert "eagle3: α1 = AL(1) − 1 = 0.70" in texts


def test_adaptive_tpot_panel_is_the_tables_statistic(figure_checks):
    """The per-policy TPOT markers are the table's p50 and p99; the time panel is the median of per-request
    TPOT (finish − first token) / (OSL − 1) of the requests finishing in each window, checked by hand."""
    legend_over_line, unlabelled_log_axes = figure_checks  # noqa: F841
    from specplan.adaptive import build_workload, run_requests
    from specplan.adaptive.workload import synthetic
    from specplan.adaptive.report import series_figure, summary_markdown

    a, i, o = synthetic(200, 512, 64, rate_per_s=20.0, seed=1)
    wl = build_workload(a, i, o, dist="beta:6,2", seed=1)
    res = run_requests("llama-3.1-8b", "h100-sxm", wl, ["fixed:1", "fixed:3", "oracle"], opts=PolicyOptions(seed=1))
    fig = series_figure(res["series"], res["policies"], "t")
    summ = fig.axes[-1]
    p50 = [ln.get_ydata()[0] for ln in summ.get_lines() if ln.get_gid() == "tpot-p50"]
    p99 = [ln.get_ydata()[0] for ln in summ.get_lines() if ln.get_gid() == "tpot-p99"]
    assert p50 == [r["tpot_p50_ms"] for r in res["policies"]]
    assert p99 == [r["tpot_p99_ms"] for r in res["policies"]]
    table = summary_markdown(res)
    for v in p50 + p99:  # the same numbers the table prints
        assert (f"{v:,.3f}" if v < 10 else f"{v:,.1f}") in table
    assert "TPOT" in fig.axes[3].get_ylabel() and "median" in fig.axes[3].get_ylabel()
    assert fig._suptitle.get_text() == "t"
    assert legend_over_line(fig) == []
    # Overlapping policies stay visible: each line its own (colour, style) pair.
    lines = fig.axes[0].get_lines()
    assert len({(ln.get_color(), ln.get_linestyle()) for ln in lines}) == len(lines) == 2
    # The time panel by hand: median of the requests finishing in each window.
    from specplan.adaptive.metrics import window_medians

    t = np.array([0.1, 0.2, 0.3, 1.5, 1.6, 2.9])
    x = np.array([5.0, 1.0, 3.0, 7.0, np.nan, 2.0])
    got = window_medians(t, x, np.array([0.0, 1.0, 2.0, 3.0]))
    assert got.tolist() == [3.0, 7.0, 2.0]
    assert np.isnan(window_medians(t, x, np.array([0.0, 10.0, 20.0]))[1])


def test_study_figures_label_log_axes_and_keep_legends_off_lines(figure_checks):
    legend_over_line, unlabelled_log_axes = figure_checks  # noqa: F841
    from specplan import study as S
    from specplan.plots import study_plots as SP
    from specplan.planning.frontier import frontier
    from specplan.planning.sweep import sweep

    study = {"name": "g", "base": {"model": "llama-3.1-8b", "hardware": "h100-sxm", "tp": [1],
                                   "batch": [1, 2, 4, 8, 16, 32], "max_draft_len": 5, "context": [8192],
                                   "mechanisms": {"ngram": 0.6}},
             "variants": [{"name": "G 8", "model": {"num_kv_heads": 4}}, {"name": "on b200", "hardware": "b200"}]}
    st = S.load_study(study)
    scs = S.expand(st)
    grids = [sweep(sc["model"], sc["hardware"], progress=False, **S.sweep_kwargs(sc)) for sc in scs]
    per_batch = []
    for sc, df in zip(scs, grids):
        fit = df[df["fits"] & (df["draft_len"] >= 1)]
        per_batch.append((sc["name"], fit.loc[fit.groupby("batch")["speedup"].idxmax().to_numpy()], 8192))
    figs = {"frontier_variants": SP.plot_frontier_variants(st, scs, [frontier(g) for g in grids]),
            "speedup": SP.plot_best_speedup(st, per_batch),
            "recommended_d": SP.plot_recommended_d(st, scs, [int(g["draft_len"].max()) for g in grids], per_batch)}
    for name, fig in figs.items():
        assert unlabelled_log_axes(fig) == [], name
        assert legend_over_line(fig) == [], name

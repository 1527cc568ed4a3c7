"""Every figure has a title, axis labels with units and a legend (checked on the Figure objects)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("matplotlib", reason="matplotlib is not installed: the figure tests need it "
                    "(a dependency of specplan: pip install -e .)")

from specplan import plots as P  # noqa: E402
from specplan.planning import figures as F  # noqa: E402

UNIT = re.compile(r"\(.+\)")


def _check(fig):
    axes = [a for a in fig.axes if getattr(a, "_colorbar", None) is None]
    assert axes
    for ax in axes:
        assert ax.get_title(), "missing title"
        for label in (ax.get_xlabel(), ax.get_ylabel()):
            assert label and UNIT.search(label), f"axis label without unit: {label!r}"
        leg = ax.get_legend()
        assert leg is not None and len(leg.get_texts()) > 0, "missing legend"
    for ax in fig.axes:
        if getattr(ax, "_colorbar", None) is not None:
            assert UNIT.search(ax.get_ylabel())


def test_all_five_figures(small_grid):
    figs = [P.plot_frontier(F.frontier_figure(small_grid)), P.plot_speedup_heatmap(small_grid),
            P.plot_attention_tiles(F.attention_tiles("h100-sxm")), P.plot_acceptance(small_grid),
            P.plot_breakdown(F.step_breakdown("llama-3.1-8b", "h100-sxm", 1, 8, 8192))]
    for f in figs:
        _check(f)


def test_frontier_labels_do_not_overlap(small_grid):
    fig = P.plot_frontier(F.frontier_figure(small_grid), max_labels=30)
    r = fig.canvas.get_renderer()
    ax = fig.axes[0]
    boxes = [t.get_window_extent(r) for t in ax.texts]
    assert len(boxes) >= 3
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            assert not boxes[i].overlaps(boxes[j])
    assert all(re.fullmatch(r"[\w ]+ \(\d+, \d+, \d+\)", t.get_text()) for t in ax.texts)


def test_attention_tiles_step_at_128_rows():
    import numpy as np

    d, curves = F.attention_tile_curves("h100-sxm", groups=(8,), context_len=32768, batch=64)
    t = curves[8]
    # G(1+D) <= 128 up to D = 15: flat while memory-bound; the 129th row (D = 16) adds a tile.
    assert t[16] > t[15]
    assert np.allclose(t[16:32], t[16], rtol=0.02)  # partly filled second tile costs a full tile


def test_split_modules_keep_the_old_import_paths():
    """plots.py became the package specplan.plots and the table writers moved to specplan.core.tables: the names
    stay importable from where they were (the same objects)."""
    from specplan.planning import sweep
    from specplan.core import tables
    from specplan.plots import canvas, frontier_plot, heatmap

    assert sweep.write_table is tables.write_table and sweep.csv_bytes is tables.csv_bytes
    assert sweep.round_significant is tables.round_significant
    assert P.save_figure is canvas.save_figure and P._figure is canvas._figure
    assert P.plot_frontier is frontier_plot.plot_frontier and P.colorbar_ticks is heatmap.colorbar_ticks
    for name in P.__all__:
        assert getattr(P, name) is not None, name


def test_energy_frontier_tells_devices_apart_over_a_binned_grid():
    """The serving energy/cost figure: the rows as one binned density (not 10^5 dots over the lines), and the lowest
    cost per device (colour) with and without speculation (solid / dashed), named in the legend."""
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd

    from specplan.planning.figures import energy_figure
    from specplan.plots.cost_plot import plot_energy_frontier

    import numpy as np

    rng = np.random.default_rng(0)
    n = 4000
    df = pd.DataFrame({"hardware": np.where(np.arange(n) % 2, "h100-sxm", "b200"),
                       "draft_len": np.where(np.arange(n) % 4 < 2, 0, 3), "meets_sla": True,
                       "tokens_per_s_per_user": rng.uniform(20, 500, n), "joules_per_token": rng.uniform(0.05, 2, n),
                       "usd_per_mtok": rng.uniform(0.02, 1, n)})
    fig = plot_energy_frontier(energy_figure(df))
    for ax in fig.axes:
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert labels == ["b200, no speculation", "b200, speculative", "h100-sxm, no speculation",
                          "h100-sxm, speculative"]
        assert len(ax.collections) == 1  # one hexbin, no scatter of every row
        colors = {ln.get_label(): ln.get_color() for ln in ax.get_lines()}
        assert colors["b200, speculative"] == colors["b200, no speculation"] != colors["h100-sxm, speculative"]


def test_heatmap_hatches_the_d_beyond_the_acceptance_data():
    """D above the acceptance profile's largest measured D is marked as extrapolated (it was drawn unmarked)."""
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np
    import pandas as pd

    from specplan.plots.heatmap import plot_speedup_heatmap

    b, d = np.meshgrid(np.arange(1, 9), np.arange(0, 11))
    df = pd.DataFrame({"hardware": "h100-sxm", "mechanism": np.where(d.ravel() == 0, "none", "eagle3"),
                       "tp": 1, "context_len": 4096, "batch": b.ravel(), "draft_len": d.ravel(),
                       "speedup": 1.0 + 0.1 * d.ravel(), "fits": True})
    labels = lambda fig: [t.get_text() for t in fig.axes[0].get_legend().get_texts()]  # noqa: E731
    assert "D > 7: acceptance extrapolated" in labels(plot_speedup_heatmap(df, mechanism="eagle3", tp=1, d_max=7))
    assert not any("extrapolated" in x for x in labels(plot_speedup_heatmap(df, mechanism="eagle3", tp=1)))
    assert not any("extrapolated" in x for x in labels(plot_speedup_heatmap(df, mechanism="eagle3", tp=1, d_max=10)))

"""Shared fixtures for the planning (sweep, frontier), plots and study tests: one small real sweep."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from specplan.speculation.spec import DraftSearch
from specplan.planning.sweep import SweepAxes

ACC = {"eagle3": 0.7, "ngram": 0.4, "dflash": 0.75}

# The validated shipped profiles (specplan/profiles/validated_cache.py) of test runs go to a folder of their own, not
# to the user's ~/.cache; entries are keyed on content, so runs may share it. The CLI runs of the tests inherit it.
os.environ.setdefault("SPECPLAN_CACHE_DIR", os.path.join(tempfile.gettempdir(), "specplan-test-profile-cache"))


@pytest.fixture(scope="session")
def small_grid():
    from specplan.planning.sweep import sweep

    return sweep("llama-3.1-8b", ["h100-sxm", "b200"],
                 axes=SweepAxes(batch_max=48, tp=[1, 2], contexts=[1024, 65536]),
                 drafts=DraftSearch(max_draft_len=6, mechanisms=list(ACC), acceptance=ACC), progress=False)


# ------------------------------------------------------------------ figure checks (tests/plots, tests/planning)

def _data_lines(fig):
    """Every drawn data line of a figure (not tick-mark lines, not invisible or empty ones)."""
    out = []
    for ax in fig.axes:
        if not ax.get_visible() or getattr(ax, "_colorbar", None) is not None:
            continue
        for ln in ax.get_lines():
            if ln.get_label() == "_tick marks" or not ln.get_visible() or len(ln.get_xdata()) == 0:
                continue
            out.append(ln)
    return out


def legend_over_line(fig) -> list[str]:
    """Labels of data lines with a point (vertices and 20 points along each segment, in pixels) inside some
    legend's box; [] when no legend covers a line."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    boxes = [leg.get_window_extent(r) for ax in fig.axes if (leg := ax.get_legend()) is not None]
    boxes += [leg.get_window_extent(r) for leg in fig.legends]
    hits = []
    for ln in _data_lines(fig):
        xy = np.column_stack([np.asarray(ln.get_xdata(), float), np.asarray(ln.get_ydata(), float)])
        xy = xy[np.isfinite(xy).all(axis=1)]
        if xy.size == 0:
            continue
        px = ln.get_transform().transform(xy)
        if len(px) > 1 and ln.get_linestyle() not in ("None", "", " "):
            t = np.linspace(0, 1, 21)[:, None, None]
            px = (px[:-1][None] * (1 - t) + px[1:][None] * t).reshape(-1, 2)
        clip = ln.axes.get_window_extent(r)  # only what the axes show
        inside = (px[:, 0] >= clip.x0) & (px[:, 0] <= clip.x1) & (px[:, 1] >= clip.y0) & (px[:, 1] <= clip.y1)
        px = px[inside]
        for b in boxes:
            if np.any((px[:, 0] > b.x0) & (px[:, 0] < b.x1) & (px[:, 1] > b.y0) & (px[:, 1] < b.y1)):
                hits.append(ln.get_label())
    return hits


def unlabelled_log_axes(fig) -> list[str]:
    """'axes title: x' for each log axis with fewer than 2 tick labels within its limits."""
    fig.canvas.draw()
    bad = []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for name, axis, lims in (("x", ax.xaxis, ax.get_xlim()), ("y", ax.yaxis, ax.get_ylim())):
            if axis.get_scale() != "log":
                continue
            lo, hi = sorted(lims)
            shown = [t for t in axis.get_majorticklabels() + axis.get_minorticklabels()
                     if t.get_text() and t.get_visible() and lo * (1 - 1e-9) <= t.get_position()[name == "y"]
                     <= hi * (1 + 1e-9)]
            if len(shown) < 2:
                bad.append(f"{ax.get_title()}: {name}")
    return bad


@pytest.fixture
def figure_checks():
    """(legend_over_line, unlabelled_log_axes): checks on matplotlib Figure objects."""
    return legend_over_line, unlabelled_log_axes

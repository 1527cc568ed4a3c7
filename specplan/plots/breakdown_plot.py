"""Figure 5: the target's step time by kernel class at every D, stacked bars at their true D."""

from __future__ import annotations

import matplotlib
import matplotlib.patches
import numpy as np

from specplan.plots.canvas import _figure, tick_marks

CLASS_COLORS = {"gemm": "#4C72B0", "attention": "#DD8452", "state": "#DA8BC3", "moe": "#55A868", "elementwise": "#8172B3",
                "communication": "#C44E52", "overhead": "#937860"}


def plot_breakdown(b, title=None):
    """Figure 5: step time of the target by kernel class as D grows (q_len = 1 + D), stacked bars
    (`planning.figures.StepBreakdown`)."""
    d = b.draft_len
    fig, ax = _figure(max(7.6, 0.22 * d.size + 2), 4.8, margins=(0.62, 0.1, 0.5, 0.16))
    x = d.astype(float)  # bars at their true D (gaps in the list stay gaps)
    width = 0.7 * (float(np.min(np.diff(np.unique(d)))) if d.size > 1 else 1.0)
    bottom = np.zeros(d.size)
    for c, t_s in b.breakdown_s.items():  # Rectangles as artists: ax.bar's per-bar data-limit update costs most
        v = np.broadcast_to(t_s, d.shape) * 1e3
        if not np.any(v > 0):
            continue
        label = c
        for k in np.flatnonzero(v > 0):
            ax.add_artist(matplotlib.patches.Rectangle((x[k] - width / 2, bottom[k]), width, v[k],
                                                       color=CLASS_COLORS.get(c), label=label))
            label = "_nolegend_"
        bottom = bottom + v
    lo, hi = float(x.min()) - width / 2, float(x.max()) + width / 2
    ax.set_xlim(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))  # the limits ax.bar's autoscale would set
    step = max(1, int(np.ceil(d.size / 20)))
    ax.set_xticks(x[::step], [str(v) for v in d[::step]])  # every step-th D labelled, a mark at every D
    if step > 1:
        tick_marks(ax, x, "x", gid="draft-len-ticks")
    ax.set_xlabel("draft length D (verified tokens per sequence = 1 + D)")
    ax.set_ylabel("target step time (ms)")
    ax.set_title(title or f"Step-time breakdown: {b.model_id} on {b.hardware_id}, TP {b.tp}, B = {b.batch}, "
                          f"context {b.context_len:,}")
    ax.legend(fontsize=8, loc="upper left", title="kernel class", title_fontsize=8)
    ax.set_ylim(0, bottom.max() * 1.35 if bottom.max() > 0 else 1)
    ax.grid(True, axis="y", alpha=0.3)
    return fig

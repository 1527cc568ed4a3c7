"""Figure 1: tokens/s per GPU against tokens/s per user, with and without speculation, frontier points
labelled 'mechanism (B, D, TP)' (the curves: `planning.figures.frontier_figure`)."""

from __future__ import annotations

import matplotlib
import numpy as np

from specplan.plots.canvas import _figure, log_minor_marks, plain_log_axes
from specplan.plots.labels import place_labels

def frontier_label(r) -> str:
    """'eagle3 (B, D, TP)' of one frontier row ('no spec' when D = 0)."""
    mech = str(r["mechanism"]) if int(r["draft_len"]) > 0 else "no spec"
    return f"{mech} ({int(r['batch'])}, {int(r['draft_len'])}, {int(r['tp'])})"


def _label_candidates(spec, col: str, n: int) -> list[int]:
    """Row positions of `n` frontier points spread evenly in log interactivity, both ends first."""
    x = np.log(spec["tok_s_user"].to_numpy(dtype=float))
    order = []
    for mk in np.linspace(x.min(), x.max(), n):
        j = int(np.argmin(np.abs(x - mk)))
        if j not in order:
            order.append(j)
    ends, middle = order[:1] + order[-1:], order[1:-1]
    return list(dict.fromkeys(ends + middle[::2] + middle[1::2]))  # spread: ends, every other, then the rest


def plot_frontier(ff, title: str | None = None, max_labels: int = 8, label_hardware: bool | None = None):
    """Figure 1: frontier with (solid) and without (dashed) speculation for each curve pair of `ff`
    (`planning.figures.FrontierFigure`: each device, or device and context); up to `max_labels` points per curve
    labelled 'mechanism (B, D, TP)', placed inside the axes without overlaps; throughput per target GPU or per
    device (draft devices included) as `ff.per` says."""
    col, per, groups = ff.throughput_column, ff.per, ff.curves
    extra_in = 0.15 * max(0, len(groups) - 2)  # one legend row per curve pair past two
    fig, ax = _figure(8.8, 6.2 + extra_in, margins=(0.8, 0.15, 1.12 + extra_in, 0.16))
    colors = matplotlib.colormaps["tab10"]
    labelled = []
    for i, cv in enumerate(groups):
        base, spec, name = cv.baseline, cv.speculation, cv.name
        c = colors(i % 10)
        ax.plot(base["tok_s_user"], base[col], "--", color=c, lw=1.3, alpha=0.8,
                label=f"{name}: without speculation (D = 0)")
        ax.plot(spec["tok_s_user"], spec[col], "-", color=c, lw=2.0, marker="o", ms=3,
                label=f"{name}: with speculation (best D)")
        labelled.append((name, spec, c))
    if any(not x.empty for _, x, _ in labelled):
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain_log_axes(ax)
        ax.margins(x=0.12, y=0.18)  # room for labels at the ends of the frontier
    else:
        ax.text(0.5, 0.5, "no point fits in memory", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("interactivity (tokens/s per user)")
    ax.set_ylabel("throughput (tokens/s per GPU)" if per == "gpu" else
                  "throughput (tokens/s per device, draft devices included)")
    ax.set_title(title or "Throughput vs interactivity frontier, with and without speculation")
    ax.grid(True, which="major", alpha=0.3)
    leg = ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, fontsize=7.5, frameon=False,
                    title="point labels: mechanism (B, D, TP) = (batch, draft length, tensor parallel)",
                    title_fontsize=7.5)
    items = []
    per_device = [[(h, float(s.loc[j, "tok_s_user"]), float(s.loc[j, col]), frontier_label(s.loc[j]), c)
                   for j in _label_candidates(s, col, 3 * max_labels)] for h, s, c in labelled if not s.empty]
    for k in range(max(map(len, per_device), default=0)):  # devices take turns so each gets its labels
        items += [p[k] for p in per_device if k < len(p)]
    if any(not x.empty for _, x, _ in labelled):
        log_minor_marks(ax)  # limits are final: cheap minor ticks (labels placed against these limits)
    place_labels(fig, ax, items, avoid=[leg], per_group=max_labels)
    return fig

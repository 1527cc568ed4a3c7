"""Figure 2: speedup over batch x D for one (device, TP, mechanism, context), a colour bar centred on 1."""

from __future__ import annotations

import matplotlib
import matplotlib.patches
import matplotlib.ticker
import numpy as np
from matplotlib.colors import TwoSlopeNorm
from matplotlib.lines import Line2D

from specplan.plots.canvas import _figure, tick_marks

def _pick(df, hardware, mechanism, tp, context_len):
    d = df
    hardware = hardware or str(d["hardware"].iloc[0])
    d = d[d["hardware"] == hardware]
    context_len = int(d["context_len"].min()) if context_len is None else int(context_len)
    d = d[d["context_len"] == context_len]
    if tp is None:
        fitting = d[d["fits"]]
        tp = int((fitting if not fitting.empty else d)["tp"].min())
    d = d[d["tp"] == tp]
    spec = d[d["draft_len"] >= 1]
    if mechanism is None:
        mechanism = (str(spec.loc[spec["speedup"].idxmax(), "mechanism"]) if not spec.empty else "none")
    return d, hardware, mechanism, int(tp), context_len


def colorbar_ticks(vmin: float, vmax: float) -> list[float]:
    """Colour-bar ticks of a TwoSlopeNorm centred on 1: about four each side of 1 and 1 itself."""
    def side(lo, hi):
        loc = matplotlib.ticker.MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10])
        return [float(v) for v in loc.tick_values(lo, hi) if lo - 1e-9 <= v <= hi + 1e-9]
    below = [v for v in side(vmin, 1.0) if v < 1.0] or [vmin]
    above = [v for v in side(1.0, vmax) if v > 1.0] or [vmax]
    return below + [1.0] + above


def plot_speedup_heatmap(df, hardware=None, mechanism=None, tp=None, context_len=None, title=None, d_max=None):
    """Figure 2: speedup over batch (rows) x D (columns); infeasible points grey; break-even contour; D beyond
    `d_max` (the largest D the acceptance data covers) hatched as extrapolated."""
    d, hardware, mechanism, tp, context_len = _pick(df, hardware, mechanism, tp, context_len)
    sub = d[(d["mechanism"] == mechanism) | (d["draft_len"] == 0)]
    batches = np.sort(sub["batch"].unique())
    drafts = np.sort(sub["draft_len"].unique())
    grid = np.full((batches.size, drafts.size), np.nan)
    fit = np.zeros_like(grid, dtype=bool)
    bi = np.searchsorted(batches, sub["batch"].to_numpy())
    di = np.searchsorted(drafts, sub["draft_len"].to_numpy())
    grid[bi, di] = sub["speedup"].to_numpy(dtype=float)
    fit[bi, di] = sub["fits"].to_numpy(dtype=bool)
    fig, ax = _figure(7.6, 5.6, margins=(0.62, 0.1, 0.8, 0.16))
    shown = np.where(fit, grid, np.nan)
    lo, hi = np.nanmin(grid), np.nanmax(grid)
    norm = TwoSlopeNorm(vcenter=1.0, vmin=min(lo, 0.99), vmax=max(hi, 1.01))
    cmap = matplotlib.colormaps["RdBu_r"].with_extremes(bad="#bbbbbb")
    im = ax.imshow(shown, origin="lower", aspect="auto", cmap=cmap, norm=norm, interpolation="nearest",
                   extent=(-0.5, drafts.size - 0.5, -0.5, batches.size - 0.5))
    cb = fig.colorbar(im, ax=ax)
    cb.set_ticks(colorbar_ticks(norm.vmin, norm.vmax))
    cb.ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:.3g}"))
    cb.set_label("speedup over D = 0 at the same batch (x)")
    handles = []
    spec_cols = drafts >= 1
    sg = shown[:, spec_cols]  # points that fit only: the break-even line stops at the "does not fit" region
    if (spec_cols.sum() > 1 and batches.size > 1 and np.isfinite(sg).any()
            and np.nanmin(sg) < 1 < np.nanmax(sg)):
        ax.contour(np.flatnonzero(spec_cols), np.arange(batches.size), np.ma.masked_invalid(sg), levels=[1.0],
                   colors="k", linewidths=1.2)
        handles.append(Line2D([], [], color="k", lw=1.2, label="speedup = 1 (break-even)"))
    best = np.nanargmax(np.where(fit, grid, -np.inf), axis=1)
    has = fit.any(axis=1)
    ax.plot(best[has], np.arange(batches.size)[has], "k.", ms=4)
    handles.append(Line2D([], [], color="k", marker=".", ls="", label="best D at each batch"))
    handles.append(matplotlib.patches.Patch(color="#bbbbbb", label="does not fit in memory"))
    beyond = np.flatnonzero(drafts > d_max) if d_max is not None else np.array([], dtype=int)
    if beyond.size:  # the acceptance there continues a curve fitted on D <= d_max
        ax.axvspan(beyond[0] - 0.5, drafts.size - 0.5, facecolor="none", edgecolor="k", hatch="//", lw=0,
                   alpha=0.45)
        handles.append(matplotlib.patches.Patch(facecolor="none", edgecolor="k", hatch="//",
                                                label=f"D > {d_max:g}: acceptance extrapolated"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.11), ncol=3, fontsize=7.5,
              frameon=False)
    step_d = max(1, drafts.size // 12)
    ax.set_xticks(np.arange(0, drafts.size, step_d), [str(v) for v in drafts[::step_d]])
    step_b = max(1, int(np.ceil(batches.size / 24)))
    ax.set_yticks(np.arange(0, batches.size, step_b), [str(v) for v in batches[::step_b]])  # every k-th labelled
    tick_marks(ax, np.arange(batches.size), "y", gid="batch-row-ticks")  # a tick mark on every batch row
    ax.set_xlabel("draft length D (tokens per iteration)")
    ax.set_ylabel("batch B (concurrent sequences)")
    ax.set_title(title or f"Speedup: {mechanism} on {hardware}, TP {tp}, context {context_len:,} tokens")
    return fig

"""Figures (matplotlib, Agg canvas, no pyplot state): one function per figure, each returning the Figure.

1. `plot_frontier`: tokens/s per GPU against tokens/s per user, with and without speculation, a thinned set
   of frontier points labelled (B, D, TP) with overlapping labels dropped.
2. `plot_speedup_heatmap`: speedup over batch x D for one (device, TP, mechanism, context).
3. `plot_attention_tiles`: attention runtime and normalized throughput against D for several G (128-row tiles).
4. `plot_acceptance`: acceptance length against D per mechanism.
5. `plot_breakdown`: step time by kernel class against D.

`save_figure` writes PNG and SVG atomically; SVG is deterministic (fixed hash salt, no date).
Import this module lazily: it imports matplotlib.
"""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib
import matplotlib.markers  # noqa: F401
import matplotlib.patches  # noqa: F401
import matplotlib.ticker  # noqa: F401

matplotlib.use("Agg", force=False)
import numpy as np  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.colors import TwoSlopeNorm  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from specplan.io import atomic_write_bytes  # noqa: E402

RC = {"svg.hashsalt": "specplan", "svg.fonttype": "path", "font.size": 9, "axes.titlesize": 10}
CLASS_COLORS = {"gemm": "#4C72B0", "attention": "#DD8452", "state": "#DA8BC3", "moe": "#55A868", "elementwise": "#8172B3",
                "communication": "#C44E52", "overhead": "#937860"}


def _figure(w: float = 8.0, h: float = 5.2, ncols: int = 1, margins: tuple | None = None):
    """Figure and axes on an Agg canvas. margins (left, right, bottom, top[, wspace]) in inches: fixed margins
    (`fit_margins`, the top grows with the title lines) instead of matplotlib's constrained layout, whose
    solve costs about as much as drawing the figure; None: constrained layout."""
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(w, h), dpi=110, layout=None if margins else "constrained")
        FigureCanvasAgg(fig)
        axes = fig.subplots(1, ncols)
    if margins:
        fig._specplan_margins = tuple(margins)
        for ax in np.atleast_1d(axes):
            ax.set_title("", y=1.0)  # a fixed title place: no search for top-side ticks at every draw
        fit_margins(fig)
    return fig, axes


def _lines(text) -> int:
    """Lines of a title (0 when empty)."""
    return text.count("\n") + 1 if text else 0


def fit_margins(fig) -> None:
    """Set a fixed-margin figure's subplot box from its margins in inches; the top margin adds one line
    height (1.2 x font size) per line of the tallest axes title and of the suptitle (nothing is laid out)."""
    margins = getattr(fig, "_specplan_margins", None)
    if margins is None:
        return
    left, right, bottom, top, *rest = margins
    w, h = fig.get_size_inches()
    title_in = max((_lines(ax.get_title()) * ax.title.get_fontsize() * 1.2 / 72 for ax in fig.axes), default=0.0)
    sup = fig._suptitle
    if sup is not None and sup.get_text():
        title_in += _lines(sup.get_text()) * sup.get_fontsize() * 1.2 / 72 + 0.08
    main = [ax for ax in fig.axes if getattr(ax, "_colorbar", None) is None]
    ncols = max(1, len(main))
    wspace = rest[0] / ((w - left - right - rest[0] * (ncols - 1)) / ncols) if rest and ncols > 1 else None
    fig.subplots_adjust(left=left / w, right=1 - right / w, bottom=bottom / h, top=1 - (top + title_in) / h,
                        wspace=wspace)


def tick_marks(ax, positions, axis: str = "y", gid: str | None = None):
    """Unlabelled minor-size tick marks at data `positions` on the left (y) or bottom (x) spine, drawn as one
    line of tick markers: matplotlib makes every tick its own artist with two lines and two texts, which for
    a hundred ticks is most of a figure's build and drawing time. Returns the Line2D."""
    pos = np.asarray(positions, dtype=float)
    zero = np.zeros(pos.size)
    xy, marker, tr = ((zero, pos), matplotlib.markers.TICKLEFT, ax.get_yaxis_transform()) if axis == "y" else \
        ((pos, zero), matplotlib.markers.TICKDOWN, ax.get_xaxis_transform())
    rc = matplotlib.rcParams
    line, = ax.plot(*xy, ls="", marker=marker, ms=rc[f"{axis}tick.minor.size"], mew=rc[f"{axis}tick.minor.width"],
                    color=rc[f"{axis}tick.color"], transform=tr, clip_on=False, gid=gid, label="_tick marks")
    return line


def plain_log_axes(ax, x: bool = True, y: bool = True) -> None:
    """Log axes with plain numbers (1000, 2000) instead of 10^x labels."""
    fmt = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}")
    for on, axis in ((x, ax.xaxis), (y, ax.yaxis)):
        if on:
            axis.set_major_formatter(fmt)
            axis.set_minor_formatter(matplotlib.ticker.FuncFormatter(
                lambda v, _: f"{v:,.0f}" if str(int(round(v / 10 ** np.floor(np.log10(v)))))[0] in "25" else ""))


def save_figure(fig, stem, formats=("png", "svg")) -> list[Path]:
    """Write `stem.<fmt>` for each format atomically; SVG and PNG carry no date, SVG ids use a fixed salt.

    A fixed-margin figure (`_figure(margins=...)`) gets its margins refitted to its titles; a constrained
    layout is solved once, before the first write, and then switched off: no format solves it again or draws
    the figure an extra time for it. PNGs are zlib level 1 (about 1.3x the bytes of the default level 6, same
    pixels)."""
    out = []
    fit_margins(fig)
    engine = fig.get_layout_engine()
    if engine is not None:
        with matplotlib.rc_context(RC):
            engine.execute(fig)  # solve the layout once, without the full draw savefig would do for it
        fig.set_layout_engine("none")  # every format draws at these positions
    for fmt in formats:
        buf = io.BytesIO()
        meta = {"Date": None} if fmt == "svg" else ({"Software": None} if fmt == "png" else None)
        extra = {"pil_kwargs": {"compress_level": 1}} if fmt == "png" else {}
        with matplotlib.rc_context(RC):
            fig.savefig(buf, format=fmt, metadata=meta, **extra)
        p = Path(f"{stem}.{fmt}")
        atomic_write_bytes(p, buf.getvalue())
        out.append(p)
    return out


# Label offsets tried in order (points from the anchor; ha, va): right-above first, then around the point.
_OFFSETS = [(5, 5, "left", "bottom"), (5, -5, "left", "top"), (-5, 5, "right", "bottom"),
            (-5, -5, "right", "top"), (0, 9, "center", "bottom"), (0, -9, "center", "top"),
            (14, 14, "left", "bottom"), (14, -14, "left", "top"), (-14, 14, "right", "bottom"),
            (-14, -14, "right", "top"), (0, 22, "center", "bottom"), (0, -22, "center", "top"),
            (26, 4, "left", "center"), (-26, 4, "right", "center"), (24, 30, "left", "bottom"),
            (-24, -30, "right", "top"), (24, -30, "left", "top"), (-24, 30, "right", "bottom"),
            (0, 38, "center", "bottom"), (0, -38, "center", "top")]


# Leader lines start at the label's corner (or edge centre) nearest its point: no clipping against the box.
_REL = {"left": 0.0, "bottom": 0.0, "center": 0.5, "right": 1.0, "top": 1.0}


def place_labels(fig, ax, items, avoid=(), per_group: int = 8, pad_px: float = 2.0) -> list:
    """Greedy label placer: for each (group, x, y, text, color) item, in order, try the `_OFFSETS` around the
    point and keep the first position whose box lies inside the axes and overlaps no placed label, no curve
    of the axes and no `avoid` artist (e.g. the legend); at most `per_group` labels per group. Fixes the
    layout first (fixed margins: `fit_margins` and the axis limits, no draw; a layout engine: one draw, then
    the engine is switched off), so the boxes tested are the boxes drawn. A label's size is measured once;
    candidate boxes are shifted copies, tested against all taken boxes in numpy. Returns the placed texts."""
    if getattr(fig, "_specplan_margins", None) is not None:
        fit_margins(fig)
        ax.get_xlim(), ax.get_ylim()  # autoscale now, as the draw would
    else:
        fig.draw_without_rendering()
        fig.set_layout_engine("none")
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    taken = [a.get_window_extent(renderer) for a in avoid if a is not None]
    boxes = np.vstack([np.array([[b.x0, b.y0, b.x1, b.y1] for b in taken], dtype=float).reshape(-1, 4),
                       _line_boxes(ax)])
    px = fig.dpi / 72.0
    placed, count = [], {}
    for group, x, y, text, color in items:
        if count.get(group, 0) >= per_group:
            continue
        X, Y = ax.transData.transform((x, y))
        probe = ax.text(0, 0, text, fontsize=7, transform=None)
        w, h = probe.get_window_extent(renderer).size
        probe.remove()
        for dx, dy, ha, va in _OFFSETS:
            x0 = X + dx * px - {"left": 0.0, "center": w / 2, "right": w}[ha] - pad_px
            y0 = Y + dy * px - {"bottom": 0.0, "center": h / 2, "top": h}[va] - pad_px
            x1, y1 = x0 + w + 2 * pad_px, y0 + h + 2 * pad_px
            if abs(dx) + abs(dy) > 12:  # a leader line, from the label's corner to the point, is in the box too
                cx, cy = x0 + pad_px + _REL[ha] * w, y0 + pad_px + _REL[va] * h
                x0, x1, y0, y1 = min(x0, X, cx), max(x1, X, cx), min(y0, Y, cy), max(y1, Y, cy)
            if x0 < frame.x0 or x1 > frame.x1 or y0 < frame.y0 or y1 > frame.y1:
                continue
            if boxes.size and np.any((boxes[:, 0] < x1) & (boxes[:, 2] > x0) & (boxes[:, 1] < y1) &
                                     (boxes[:, 3] > y0)):
                continue
            t = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=7,
                            color=color, annotation_clip=True,
                            arrowprops=dict(arrowstyle="-", color=color, lw=0.6, alpha=0.7, shrinkA=0, shrinkB=2,
                                            patchA=None, relpos=(_REL[ha], _REL[va]))
                            if abs(dx) + abs(dy) > 12 else None)
            t.set_in_layout(False)
            bb = t.get_window_extent(renderer).padded(pad_px)  # the real box (checked, then kept)
            if (bb.x0 < frame.x0 or bb.x1 > frame.x1 or bb.y0 < frame.y0 or bb.y1 > frame.y1 or (boxes.size and np.any(
                    (boxes[:, 0] < bb.x1) & (boxes[:, 2] > bb.x0) & (boxes[:, 1] < bb.y1) & (boxes[:, 3] > bb.y0)))):
                t.remove()
                continue
            t.set_gid(f"frontier-label:{group}")
            t.set_bbox(dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.75))
            boxes = np.vstack([boxes, [bb.x0, bb.y0, bb.x1, bb.y1]])
            placed.append(t)
            count[group] = count.get(group, 0) + 1
            break
    return placed


def _line_boxes(ax, step_px: float = 5.0, r_px: float = 2.5) -> np.ndarray:
    """(n, 4) display-space boxes (x0, y0, x1, y1) along every line of `ax`, one per `step_px` of its length,
    so that labels are not placed across the curves."""
    pts = []
    for line in ax.get_lines():
        xy = ax.transData.transform(np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float))
        xy = xy[np.all(np.isfinite(xy), axis=1)]
        if len(xy) == 0:
            continue
        seg = np.hypot(*np.diff(xy, axis=0).T) if len(xy) > 1 else np.zeros(0)
        s = np.r_[0.0, np.cumsum(seg)]  # arc length at each vertex
        at = np.arange(0.0, s[-1] + step_px, step_px) if s[-1] > 0 else np.zeros(1)
        pts.append(np.column_stack([np.interp(at, s, xy[:, 0]), np.interp(at, s, xy[:, 1])]))
    if not pts:
        return np.zeros((0, 4))
    p = np.vstack(pts)
    return np.column_stack([p - r_px, p + r_px])


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


def plot_frontier(df, title: str | None = None, max_labels: int = 8, label_hardware: bool | None = None,
                  per: str = "gpu"):
    """Figure 1: frontier with (solid) and without (dashed) speculation for each device; up to `max_labels`
    points per device labelled 'mechanism (B, D, TP)', placed inside the axes without overlaps.
    per: throughput per target GPU ('gpu') or per device, draft devices included ('device')."""
    from specplan.frontier import frontier, throughput_column

    col = throughput_column(per)

    fig, ax = _figure(8.8, 6.2, margins=(0.8, 0.15, 1.12, 0.16))
    hws = [str(h) for h in df["hardware"].unique()]
    colors = matplotlib.colormaps["tab10"]
    labelled = []
    for i, h in enumerate(hws):
        f = frontier(df[df["hardware"] == h], sets=["baseline", "overall"], per=per)
        base = f[f["set"] == "baseline"]
        spec = f[f["set"] == "overall"]
        c = colors(i % 10)
        ax.plot(base["tok_s_user"], base[col], "--", color=c, lw=1.3, alpha=0.8,
                label=f"{h}: without speculation (D = 0)")
        ax.plot(spec["tok_s_user"], spec[col], "-", color=c, lw=2.0, marker="o", ms=3,
                label=f"{h}: with speculation (best D)")
        labelled.append((h, spec.reset_index(drop=True), c))
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
    place_labels(fig, ax, items, avoid=[leg], per_group=max_labels)
    return fig


def best_setup(df, front, per: str = "gpu") -> dict:
    """Device, TP, context, batch and mechanism of the best frontier point (highest throughput `per` on the
    speculation frontier, else the overall one) for the heat map and breakdown; `fits` False (first device,
    smallest TP, context and batch 16) when no point fits."""
    from specplan.frontier import throughput_column

    col = throughput_column(per)
    for name in ("speculation", "overall"):
        f = front[front["set"] == name]
        if not f.empty:
            r = f.loc[f[col].idxmax()]
            return {"hardware": str(r["hardware"]), "tp": int(r["tp"]), "context_len": int(r["context_len"]),
                    "layout": str(r["layout"]) if "layout" in r else None,
                    "batch": int(r["batch"]), "draft_len": int(r["draft_len"]),
                    "mechanism": str(r["mechanism"]) if int(r["draft_len"]) > 0 else None, "fits": True}
    return {"hardware": str(df["hardware"].iloc[0]), "tp": int(df["tp"].min()), "layout": None,
            "context_len": int(df["context_len"].min()), "batch": 16, "draft_len": 0, "mechanism": None,
            "fits": False}


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


def plot_speedup_heatmap(df, hardware=None, mechanism=None, tp=None, context_len=None, title=None):
    """Figure 2: speedup over batch (rows) x D (columns); infeasible points grey; break-even contour."""
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
    sg = grid[:, spec_cols]
    if spec_cols.sum() > 1 and batches.size > 1 and np.nanmin(sg) < 1 < np.nanmax(sg):
        ax.contour(np.flatnonzero(spec_cols), np.arange(batches.size), sg, levels=[1.0], colors="k",
                   linewidths=1.2)
        handles.append(Line2D([], [], color="k", lw=1.2, label="speedup = 1 (break-even)"))
    best = np.nanargmax(np.where(fit, grid, -np.inf), axis=1)
    has = fit.any(axis=1)
    ax.plot(best[has], np.arange(batches.size)[has], "k.", ms=4)
    handles.append(Line2D([], [], color="k", marker=".", ls="", label="best D at each batch"))
    handles.append(matplotlib.patches.Patch(color="#bbbbbb", label="does not fit in memory"))
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


def attention_tile_curves(hw, groups=(4, 8, 16, 32), context_len=32768, batch=8, head_dim=128, kv_heads=8,
                          max_draft_len=40, kv_dtype="bf16"):
    """(D, {G: runtime_s}) of one decode/verify attention kernel (costs.attention) as D grows."""
    from specplan.costs.attention import attention_time_s
    from specplan.profiles.registry import load_hardware

    hw = load_hardware(hw)
    d = np.arange(0, max_draft_len + 1)
    out = {}
    for g in groups:
        q = 1 + d
        out[g] = attention_time_s(hw, batch, q, context_len + q, g * kv_heads, kv_heads, head_dim,
                                  kv_dtype=kv_dtype, compute_dtype="bf16")
    return d, out


def plot_attention_tiles(hw, groups=(4, 8, 16, 32), contexts=(32768, 131072), batch=8, head_dim=128,
                         kv_heads=8, max_draft_len=40, title=None):
    """Figure 3 (after Figures 4-5 of the source): attention runtime against D for several G, stepping up
    each time G x (1 + D) crosses a multiple of 128 rows; right: throughput normalized to D = 0."""
    from specplan.profiles.registry import load_hardware

    hw = load_hardware(hw)
    fig, (a1, a2) = _figure(10.5, 4.6, ncols=2, margins=(0.68, 0.1, 0.5, 0.16, 0.62))
    colors = matplotlib.colormaps["tab10"]
    styles = ["-", "--", ":", "-."]
    marks = ["o", "x", "s", "^"]
    for ci, ctx in enumerate(contexts):
        d, curves = attention_tile_curves(hw, groups, ctx, batch, head_dim, kv_heads, max_draft_len)
        # Curves of two contexts can coincide (normalized throughput): the first is drawn wide and pale, the
        # next thin with markers on staggered D, so both stay visible.
        style = dict(ls=styles[ci % len(styles)], lw=3.2 if ci == 0 else 1.3, alpha=0.45 if ci == 0 else 1.0,
                     marker=marks[ci % len(marks)], ms=4, mfc="none")
        for i, (g, t) in enumerate(curves.items()):
            style["markevery"] = ((len(contexts) * i + ci) % 8, 8)  # each line marks its own D values
            lab = f"G = {g}, {ctx // 1024}K"
            a1.step(d, t * 1e6, where="mid", color=colors(i), label=lab, **style)
            thr = (1 + d) / t
            a2.plot(d, thr / thr[0], color=colors(i), label=lab, **style)
    for i, g in enumerate(groups):
        knee = 128 / g - 1
        if knee <= max_draft_len:
            a2.axvline(knee, color=colors(i), lw=0.8, alpha=0.5)
    a1.set_yscale("log")
    a1.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    a1.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    a1.set_xlabel("draft length D (tokens per iteration)")
    a1.set_ylabel("attention kernel runtime per layer (µs)")
    a1.set_title(f"Runtime per layer ({hw.id}, B = {batch}, {kv_heads} KV heads, head dim {head_dim})")
    a2.set_xlabel("draft length D (tokens per iteration)")
    a2.set_ylabel("attention throughput, normalized to D = 0 (x)")
    a2.set_title("Normalized throughput; thin lines: D = 128/G - 1")
    for a in (a1, a2):
        a.grid(True, alpha=0.3)
        a.legend(fontsize=7, ncol=2, loc="upper left")
    fig.suptitle(title or "Decode attention with speculation: 128-row tiles (runtime steps at G(1+D) = k x 128)")
    return fig


def plot_acceptance(df, title=None):
    """Figure 4: acceptance length against D for each mechanism in the grid (AL = 1 + D bound dashed)."""
    fig, ax = _figure(7.0, 4.8, margins=(0.48, 0.1, 0.5, 0.16))
    spec = df.loc[df["draft_len"] >= 1, ["mechanism", "draft_len", "acceptance_length"]]
    dmax = int(df["draft_len"].max()) if len(df) else 1
    ax.plot([0, dmax], [1, 1 + dmax], ls="--", color="grey", lw=1, label="upper bound AL = 1 + D")
    mean = spec.groupby(["mechanism", "draft_len"], observed=True)["acceptance_length"].mean()  # one pass
    for mech in sorted(mean.index.unique(level=0), key=str):
        g = mean.xs(mech, level=0)
        ax.plot(np.r_[0, g.index.to_numpy()], np.r_[1.0, g.to_numpy()], marker="o", ms=3, label=str(mech))
    ax.set_xlabel("draft length D (tokens per iteration)")
    ax.set_ylabel("acceptance length AL (tokens per iteration)")
    ax.set_title(title or "Acceptance length vs draft length, per mechanism")
    top = float(spec["acceptance_length"].max()) if not spec.empty else 2.0
    ax.set_ylim(0.8, max(2.0, top * 1.25))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig


def plot_breakdown(model, hw, tp=1, batch=8, context_len=8192, draft_lens=(0, 1, 2, 3, 4, 7, 8, 15, 16),
                   title=None, **kw):
    """Figure 5: step time of the target by kernel class as D grows (q_len = 1 + D), stacked bars."""
    from specplan.profiles.registry import load_hardware, load_model
    from specplan.step import CLASSES, step_time

    m, h = load_model(model), load_hardware(hw)
    d = np.asarray(draft_lens)
    r = step_time(m, h, tp, batch, 1 + d, context_len, **kw)
    fig, ax = _figure(max(7.6, 0.22 * d.size + 2), 4.8, margins=(0.62, 0.1, 0.5, 0.16))
    x = d.astype(float)  # bars at their true D (gaps in the list stay gaps)
    width = 0.7 * (float(np.min(np.diff(np.unique(d)))) if d.size > 1 else 1.0)
    bottom = np.zeros(d.size)
    for c in CLASSES:  # Rectangles added as artists: ax.bar's per-bar data-limit update is most of its cost
        v = np.broadcast_to(r.breakdown_s[c], d.shape) * 1e3
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
    ax.set_title(title or f"Step-time breakdown: {m.id} on {h.id}, TP {tp}, B = {batch}, "
                          f"context {context_len:,}")
    ax.legend(fontsize=8, loc="upper left", title="kernel class", title_fontsize=8)
    ax.set_ylim(0, bottom.max() * 1.35 if bottom.max() > 0 else 1)
    ax.grid(True, axis="y", alpha=0.3)
    return fig

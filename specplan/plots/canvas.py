"""Figure canvas: Agg figures without pyplot state, fixed margins in inches, cheap tick marks, log axes with
plain numbers, and `save_figure` (PNG / SVG written atomically, no date, SVG ids from a fixed salt).

Importing this module imports matplotlib (and selects the Agg backend); import it lazily.
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
from matplotlib.figure import Figure  # noqa: E402

from specplan.core.io import atomic_write_bytes  # noqa: E402

RC = {"svg.hashsalt": "specplan", "svg.fonttype": "path", "font.size": 9, "axes.titlesize": 10}


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


def log_minor_marks(ax) -> None:
    """On log axes whose limits are final: label 1, 2 and 5 of each decade as major ticks and draw the other
    minor positions (3, 4, 6, 7, 8, 9) as one line of tick marks (`tick_marks`), instead of ~25 minor Tick
    artists per axis (each two lines and two texts: most of a log figure's drawing time)."""
    fmt = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}")
    ax.set_xlim(ax.get_xlim())  # freeze the limits: the marks must not widen them
    ax.set_ylim(ax.get_ylim())
    for axis, lims, name in ((ax.xaxis, ax.get_xlim(), "x"), (ax.yaxis, ax.get_ylim(), "y")):
        if axis.get_scale() != "log":
            continue
        axis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(fmt)
        axis.set_minor_locator(matplotlib.ticker.NullLocator())
        lo, hi = sorted(lims)
        dec = np.arange(np.floor(np.log10(lo)), np.ceil(np.log10(hi)) + 1)
        pos = (10.0 ** dec[:, None] * np.array([3.0, 4.0, 6.0, 7.0, 8.0, 9.0])[None, :]).ravel()
        tick_marks(ax, pos[(pos >= lo) & (pos <= hi)], axis=name)


def log_tick_labels(ax, axis: str = "y", base: float = 10.0, min_labels: int = 3) -> None:
    """Label a log axis whose limits are final with at least `min_labels` plain numbers: decades, else 1-2-5
    of each decade, else every integer multiple (a range inside one decade would otherwise show one label or
    none). base 2: every power of two."""
    a = ax.yaxis if axis == "y" else ax.xaxis
    lo, hi = sorted(ax.get_ylim() if axis == "y" else ax.get_xlim())
    fmt = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}")
    subs_try = [(1.0,)] if base == 2 else [(1.0,), (1.0, 2.0, 5.0), tuple(float(k) for k in range(1, 10))]
    for subs in subs_try:
        loc = matplotlib.ticker.LogLocator(base=base, subs=subs, numticks=50)
        ticks = [t for t in loc.tick_values(lo, hi) if lo <= t <= hi]
        if len(ticks) >= min_labels:
            break
    a.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    a.set_major_formatter(fmt)
    a.set_minor_formatter(matplotlib.ticker.NullFormatter())


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

"""Figure 3: attention runtime and normalized throughput against D for several G (128-row tiles)."""

from __future__ import annotations

import matplotlib
import matplotlib.ticker

from specplan.plots.canvas import _figure, log_tick_labels

def plot_attention_tiles(tiles, title=None):
    """Figure 3 (after Figures 4-5 of the source): attention runtime against D for several G
    (`planning.figures.AttentionTiles`), stepping up each time G x (1 + D) crosses a multiple of 128 rows; right:
    throughput normalized to D = 0."""
    groups, contexts, d = tiles.groups, tiles.contexts, tiles.draft_len
    fig, (a1, a2) = _figure(10.5, 5.2, ncols=2, margins=(0.68, 0.1, 1.05, 0.16, 0.62))
    colors = matplotlib.colormaps["tab10"]
    styles = ["-", "--", ":", "-."]
    marks = ["o", "x", "s", "^"]
    for ci, ctx in enumerate(contexts):
        curves = tiles.runtime_s[ctx]
        # Curves of two contexts can coincide (normalized throughput): the first is drawn wide and pale, the
        # next thin with markers on staggered D, so both stay visible.
        style = dict(ls=styles[ci % len(styles)], lw=3.2 if ci == 0 else 1.3, alpha=0.45 if ci == 0 else 1.0,
                     marker=marks[ci % len(marks)], ms=4, mfc="none")
        for i, (g, t) in enumerate(curves.items()):
            style["markevery"] = ((len(contexts) * i + ci) % 8, 8)  # each line marks its own D values
            lab = f"G = {g}, {ctx // 1024}K" if ctx >= 1024 else f"G = {g}, {ctx}"
            a1.step(d, t * 1e6, where="mid", color=colors(i), label=lab, **style)
            thr = (1 + d) / t
            a2.plot(d, thr / thr[0], color=colors(i), label=lab, **style)
    for i, g in enumerate(groups):
        knee = 128 / g - 1
        if knee <= tiles.max_draft_len:
            a2.axvline(knee, color=colors(i), lw=0.8, alpha=0.5)
    a1.set_yscale("log")
    a1.set_ylim(a1.get_ylim())  # final limits, then labels on enough ticks (1-2-5, or 1..9, per decade)
    log_tick_labels(a1, "y")
    a1.set_xlabel("draft length D (tokens per iteration)")
    a1.set_ylabel("attention kernel runtime per layer (µs)")
    a1.set_title(f"Runtime per layer ({tiles.hardware_id}, B = {tiles.batch}, {tiles.kv_heads} KV heads, "
                 f"head dim {tiles.head_dim})")
    a2.set_xlabel("draft length D (tokens per iteration)")
    a2.set_ylabel("attention throughput, normalized to D = 0 (x)")
    a2.set_title("Normalized throughput; thin lines: D = 128/G - 1")
    for a in (a1, a2):
        a.grid(True, alpha=0.3)
    # Legends beside the panels' data: below each panel, never over a curve.
    for a in (a1, a2):
        a.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.13), frameon=False)
    fig.suptitle(title or "Decode attention with speculation: 128-row tiles (runtime steps at G(1+D) = k x 128)")
    return fig

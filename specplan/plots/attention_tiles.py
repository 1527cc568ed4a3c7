"""Figure 3: attention runtime and normalized throughput against D for several G (128-row tiles)."""

from __future__ import annotations

import matplotlib
import matplotlib.ticker
import numpy as np

from specplan.plots.canvas import _figure, log_tick_labels

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
    fig, (a1, a2) = _figure(10.5, 5.2, ncols=2, margins=(0.68, 0.1, 1.05, 0.16, 0.62))
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
            lab = f"G = {g}, {ctx // 1024}K" if ctx >= 1024 else f"G = {g}, {ctx}"
            a1.step(d, t * 1e6, where="mid", color=colors(i), label=lab, **style)
            thr = (1 + d) / t
            a2.plot(d, thr / thr[0], color=colors(i), label=lab, **style)
    for i, g in enumerate(groups):
        knee = 128 / g - 1
        if knee <= max_draft_len:
            a2.axvline(knee, color=colors(i), lw=0.8, alpha=0.5)
    a1.set_yscale("log")
    a1.set_ylim(a1.get_ylim())  # final limits, then labels on enough ticks (1-2-5, or 1..9, per decade)
    log_tick_labels(a1, "y")
    a1.set_xlabel("draft length D (tokens per iteration)")
    a1.set_ylabel("attention kernel runtime per layer (µs)")
    a1.set_title(f"Runtime per layer ({hw.id}, B = {batch}, {kv_heads} KV heads, head dim {head_dim})")
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

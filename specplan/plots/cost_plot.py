"""Energy and cost frontier of the serving grid: J/token and $/Mtok against tokens/s per user, with and without
speculation (the lowest J/token or $/Mtok reachable at or above each interactivity, under the SLA)."""

from __future__ import annotations

import matplotlib
import numpy as np

from specplan.plots.canvas import _figure, plain_log_axes


def lower_envelope(user, value) -> tuple[np.ndarray, np.ndarray]:
    """Points (tok/s/user ascending) of the lowest `value` reachable at or above each tok/s/user."""
    u, v = np.asarray(user, dtype=float), np.asarray(value, dtype=float)
    order = np.argsort(-u, kind="stable")  # from the fastest user down: running minimum of the value
    best = np.minimum.accumulate(v[order])
    keep = np.r_[True, best[1:] < best[:-1]]
    return u[order][keep][::-1], best[keep][::-1]


def plot_energy_frontier(df, title: str = ""):
    """Two panels (J/token, $/Mtok) against tokens/s per user for the SLA-meeting rows of a serving grid: the rows
    as a faint binned density (there are 10^5-10^6 of them), over it the lowest cost at each tokens/s/user or
    faster per device (colour) with and without speculation (solid, dashed)."""
    ok = df[df["meets_sla"]] if "meets_sla" in df else df
    panels = [c for c in ("joules_per_token", "usd_per_mtok") if c in ok]
    fig, axes = _figure(11.0, 4.8, ncols=len(panels), margins=(0.8, 0.2, 0.75, 0.5, 0.9))
    axes = np.atleast_1d(axes)
    devices = list(dict.fromkeys(ok["hardware"])) if "hardware" in ok else [None]
    for ax, col in zip(axes, panels):
        x_all, y_all = ok["tokens_per_s_per_user"].to_numpy(dtype=float), ok[col].to_numpy(dtype=float)
        keep = np.isfinite(x_all) & (x_all > 0) & np.isfinite(y_all) & (y_all > 0)  # what log axes can show
        pos = ok[keep]
        if not len(pos):  # e.g. OSL 1: no decode, so no tokens/s per user
            ax.text(0.5, 0.5, "no row with a tokens/s per user and a positive cost to draw", ha="center",
                    va="center", transform=ax.transAxes)
            ax.set_xlabel("tokens/s per user")
            continue
        ax.hexbin(x_all[keep], y_all[keep], xscale="log", yscale="log", gridsize=60, bins="log", cmap="Greys",
                  alpha=0.35, linewidths=0, mincnt=1)
        for i, hw in enumerate(devices):
            on = pos if hw is None else pos[pos["hardware"] == hw]
            for name, sub, style in (("no speculation", on[on["draft_len"] == 0], "--"),
                                     ("speculative", on[on["draft_len"] > 0], "-")):
                if len(sub):
                    x, y = lower_envelope(sub["tokens_per_s_per_user"], sub[col])
                    label = f"{hw}, {name}" if hw is not None else name
                    ax.plot(x, y, style, color=f"C{i}", drawstyle="steps-post", lw=1.6, label=label)
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain_log_axes(ax, y=False)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("tokens/s per user")
        ax.set_ylabel("J per output token (GPU board)" if col == "joules_per_token" else "$ per million output tokens")
        ax.legend(fontsize=7, title="lowest at >= tok/s/user (grey: all rows)", title_fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
    if title:
        fig.suptitle(title)
    return fig

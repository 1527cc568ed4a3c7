"""Energy and cost frontier of the serving grid: J/token and $/Mtok against tokens/s per user, with and without
speculation (the lowest J/token or $/Mtok reachable at or above each interactivity, under the SLA)."""

from __future__ import annotations

import matplotlib
import numpy as np

from specplan.plots.canvas import _figure, plain_log_axes


def plot_energy_frontier(ef, title: str = ""):
    """Two panels (J/token, $/Mtok) against tokens/s per user for the SLA-meeting rows of a serving grid
    (`planning.figures.EnergyFigure`): the rows as a faint binned density (there are 10^5-10^6 of them), over it the
    lowest cost at each tokens/s/user or faster per device (colour) with and without speculation (solid, dashed)."""
    fig, axes = _figure(11.0, 4.8, ncols=len(ef.panels), margins=(0.8, 0.2, 0.75, 0.5, 0.9))
    axes = np.atleast_1d(axes)
    for ax, panel in zip(axes, ef.panels):
        col = panel.column
        if not len(panel.tok_s_user):  # e.g. OSL 1: no decode, so no tokens/s per user
            ax.text(0.5, 0.5, "no row with a tokens/s per user and a positive cost to draw", ha="center",
                    va="center", transform=ax.transAxes)
            ax.set_xlabel("tokens/s per user")
            continue
        ax.hexbin(panel.tok_s_user, panel.value, xscale="log", yscale="log", gridsize=60, bins="log", cmap="Greys",
                  alpha=0.35, linewidths=0, mincnt=1)
        for cv in panel.curves:
            name, style = ("speculative", "-") if cv.speculative else ("no speculation", "--")
            label = f"{cv.hardware}, {name}" if cv.hardware is not None else name
            ax.plot(cv.tok_s_user, cv.value, style, color=f"C{ef.devices.index(cv.hardware)}", drawstyle="steps-post",
                    lw=1.6, label=label)
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

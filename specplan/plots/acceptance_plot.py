"""Figure 4: acceptance length against D per mechanism."""

from __future__ import annotations

import numpy as np

from specplan.plots.canvas import _figure

def plot_acceptance(df, title=None, acceptance: dict | None = None):
    """Figure 4: acceptance length against D for each mechanism in the grid (AL = 1 + D bound dashed); each
    mechanism's legend entry gives its acceptance (`acceptance` {mechanism: 'α = 0.8'}, else α1 = AL(1) - 1,
    the first position's acceptance rate, read off the grid)."""
    fig, ax = _figure(7.0, 5.6, margins=(0.48, 0.1, 1.3, 0.16))
    spec = df.loc[df["draft_len"] >= 1, ["mechanism", "draft_len", "acceptance_length"]]
    dmax = int(df["draft_len"].max()) if len(df) else 1
    ax.plot([0, dmax], [1, 1 + dmax], ls="--", color="grey", lw=1, label="upper bound AL = 1 + D")
    mean = spec.groupby(["mechanism", "draft_len"], observed=True)["acceptance_length"].mean()  # one pass
    for mech in sorted(mean.index.unique(level=0), key=str):
        g = mean.xs(mech, level=0)
        what = (acceptance or {}).get(str(mech))
        if what is None and 1 in g.index:
            what = f"α1 = AL(1) − 1 = {float(g.loc[1]) - 1:.2f}"
        ax.plot(np.r_[0, g.index.to_numpy()], np.r_[1.0, g.to_numpy()], marker="o", ms=3,
                label=f"{mech}: {what}" if what else str(mech))
    ax.set_xlabel("draft length D (tokens per iteration)")
    ax.set_ylabel("acceptance length AL (tokens per iteration)")
    ax.set_title(title or "Acceptance length vs draft length, per mechanism")
    top = float(spec["acceptance_length"].max()) if not spec.empty else 2.0
    ax.set_ylim(0.8, max(2.0, top * 1.25))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False,
              title="α = acceptance rate (per drafted token); AL@D = measured acceptance length at D",
              title_fontsize=7.5)
    return fig

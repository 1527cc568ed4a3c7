"""Serving frontier figure: tokens/s per GPU against tokens/s per user (1 / TPOT) of the serving model, with
and without speculation, aggregated and disaggregated, for each device; the TPOT SLA as a line; frontier points
labelled (TP, concurrency, D, pools)."""

from __future__ import annotations

import matplotlib
import numpy as np

from specplan.plots.canvas import _figure, log_minor_marks, plain_log_axes
from specplan.plots.frontier_plot import _label_candidates
from specplan.plots.labels import place_labels

MODE_MARKER = {"agg": "o", "disagg": "s"}


def serving_label(r) -> str:
    """'(TP, concurrency, D, pools)' of one serving frontier row ('-' for pools in agg mode)."""
    pools = r.get("pools")
    pools = "-" if pools is None or (isinstance(pools, float) and np.isnan(pools)) else str(pools)
    return f"({int(r['tp'])}, {float(r['concurrency']):g}, {int(r['draft_len'])}, {pools})"


def plot_serving_frontier(front, title: str | None = None, max_tpot_ms: float | None = None,
                          max_ttft_ms: float | None = None, max_labels: int = 6):
    """The per-(device, mode) frontiers of a `serving_frontier` table: speculation (solid) and D = 0 (dashed),
    one colour per device, marker o for agg and s for disagg; the TPOT SLA as a vertical line at 1000 / TPOT
    tokens/s per user (a request's tokens/s = 1 / TPOT); up to `max_labels` points per curve labelled."""
    f = front[front["scope"] != "overall"] if "scope" in front.columns else front
    keys = list(dict.fromkeys(zip(f["hardware"].astype(str), f["mode"].astype(str))))
    n_rows = 2 * len(keys) + (1 if max_tpot_ms else 0)
    extra_in = 0.15 * max(0, (n_rows + 1) // 2 - 2)
    fig, ax = _figure(8.8, 6.2 + extra_in, margins=(0.8, 0.15, 1.12 + extra_in, 0.16))
    hws = list(dict.fromkeys(h for h, _ in keys))
    colors = matplotlib.colormaps["tab10"]
    curves = []
    for h, mode in keys:
        c = colors(hws.index(h) % 10)
        sub = f[(f["hardware"].astype(str) == h) & (f["mode"].astype(str) == mode)]
        for name, ls, lw, what in (("baseline", "--", 1.3, "without speculation (D = 0)"),
                                   ("speculation", "-", 2.0, "with speculation")):
            s = sub[sub["set"] == name].sort_values("tokens_per_s_per_user").reset_index(drop=True)
            if s.empty:
                continue
            ax.plot(s["tokens_per_s_per_user"], s["tokens_per_s_per_gpu"], ls=ls, lw=lw, color=c,
                    marker=MODE_MARKER.get(mode, "o"), ms=3.5 if name == "speculation" else 2.5,
                    mfc=c if name == "speculation" else "none", alpha=1.0 if name == "speculation" else 0.8,
                    label=f"{h}, {mode}: {what}")
            curves.append((f"{h}/{mode}/{name}", s.rename(columns={"tokens_per_s_per_user": "tok_s_user"}), c))
    has = any(not s.empty for _, s, _ in curves)
    if has:
        ax.set_xscale("log")
        ax.set_yscale("log")
        plain_log_axes(ax)
        ax.margins(x=0.12, y=0.18)
    else:
        ax.text(0.5, 0.5, "no configuration to draw: none fits, meets the SLA and decodes (OSL >= 2)", ha="center",
                va="center", transform=ax.transAxes)
    if max_tpot_ms:
        ax.axvline(1e3 / max_tpot_ms, color="k", lw=1.1, ls="-.",
                   label=f"SLA: TPOT <= {max_tpot_ms:g} ms (tokens/s per user >= {1e3 / max_tpot_ms:.4g})")
    ax.set_xlabel("interactivity (tokens/s per user = 1 / TPOT)")
    ax.set_ylabel("throughput (output tokens/s per GPU)")
    sla = "; ".join(x for x in (f"TPOT <= {max_tpot_ms:g} ms" if max_tpot_ms else "",
                                f"TTFT <= {max_ttft_ms:g} ms" if max_ttft_ms else "") if x)
    ax.set_title((title or "Serving frontier: throughput vs interactivity") +
                 (f"\nonly configurations meeting the SLA ({sla})" if sla else
                  "\nno SLA given (--max-tpot-ms, --max-ttft-ms): every stable configuration that fits"))
    ax.grid(True, which="major", alpha=0.3)
    leg = None
    if ax.get_legend_handles_labels()[0]:  # nothing drawn (OSL 1, nothing meets the SLA): no empty legend
        leg = ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, fontsize=7.5, frameon=False,
                        title="point labels: (TP, concurrency, D, pools); markers: o agg, s disagg",
                        title_fontsize=7.5)
    if has:
        log_minor_marks(ax)
    per_curve = [[(g, float(s.loc[j, "tok_s_user"]), float(s.loc[j, "tokens_per_s_per_gpu"]),
                   serving_label(s.loc[j]), c) for j in _label_candidates(s, "tokens_per_s_per_gpu", 3 * max_labels)]
                 for g, s, c in curves if not s.empty and g.endswith("speculation")]
    items = []
    for k in range(max(map(len, per_curve), default=0)):
        items += [p[k] for p in per_curve if k < len(p)]
    place_labels(fig, ax, items, avoid=[leg] if leg is not None else [], per_group=max_labels)
    return fig

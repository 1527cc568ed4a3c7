"""Figures of a study (frontier per variant, best speedup and recommended D vs batch, attention tiles).

The plotting layer over `specplan.study`: `specplan.study` and `specplan.study_report` never import
matplotlib or `specplan.plots`; `run_study` here runs a study and writes its tables, summary and figures.
"""

from __future__ import annotations

from pathlib import Path

from specplan import plots as P
from specplan import study


def write_study_plots(st, scenarios, grids, fronts, outdir: Path) -> list[str]:
    """Write the study's figures named in `st.plots` into `outdir`; return the paths written."""
    written = []
    if "frontier" in st.plots:
        fig, ax = P._figure(8.4, 5.4)
        cm = P.matplotlib.colormaps["tab10"]
        for i, (sc, fr) in enumerate(zip(scenarios, fronts)):
            b, s = fr[fr["set"] == "baseline"], fr[fr["set"] == "overall"]
            ax.plot(b["tok_s_user"], b["tok_s_gpu"], "--", color=cm(i % 10), lw=1.2, alpha=0.8)
            ax.plot(s["tok_s_user"], s["tok_s_gpu"], "-", color=cm(i % 10), lw=2, label=sc["name"])
        ax.plot([], [], "--", color="grey", label="without speculation (D = 0)")
        ax.set_xscale("log"), ax.set_yscale("log")
        P.plain_log_axes(ax)
        ax.set_xlabel("interactivity (tokens/s per user)")
        ax.set_ylabel("throughput (tokens/s per GPU)")
        ax.set_title(f"{st.name}: frontier per variant (solid: with speculation)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="lower left")
        written += P.save_figure(fig, outdir / "frontier_variants")
    per_batch = []
    for sc, df in zip(scenarios, grids):
        fit = df[df["fits"] & (df["draft_len"] >= 1)]
        if fit.empty:
            continue
        ctx = st.summary_context if st.summary_context is not None else int(df["context_len"].min())
        fit = fit[fit["context_len"] == ctx]
        idx = fit.groupby("batch")["speedup"].idxmax()
        per_batch.append((sc["name"], fit.loc[idx.to_numpy()].sort_values("batch"), ctx))
    for key, col, ylabel, ttl in (("speedup", "speedup", "best speedup over D = 0 (x)", "best speedup vs batch"),
                                  ("recommended_d", "draft_len", "recommended D (tokens per iteration)",
                                   "recommended D (best speedup) vs batch")):
        if key not in st.plots or not per_batch:
            continue
        fig, ax = P._figure(7.6, 4.8)
        marks = "osv^D<>p"
        for i, (name, s, ctx) in enumerate(per_batch):
            ax.plot(s["batch"], s[col], marker=marks[i % len(marks)], ms=6 - i, lw=2.2 - 0.4 * (i % 4),
                    label=name, drawstyle="steps-mid" if key != "speedup" else "default")
        if key == "recommended_d":
            ax.yaxis.set_major_locator(P.matplotlib.ticker.MaxNLocator(integer=True))
        if key == "speedup":
            ax.axhline(1.0, color="grey", lw=0.8, ls=":", label="break-even")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(P.matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("batch B (concurrent sequences)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{st.name}: {ttl}\n(context {per_batch[0][2]:,} tokens; feasible points only)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        written += P.save_figure(fig, outdir / key)
    if "attention" in st.plots:
        sc = scenarios[0]
        gs = sorted({s["model"].group_size for s in scenarios})
        m = sc["model"]
        fig = P.plot_attention_tiles(sc["hardware"][0], groups=tuple(gs), head_dim=m.head_dim,
                                     kv_heads=max(1, min(s["model"].num_kv_heads for s in scenarios)))
        written += P.save_figure(fig, outdir / "attention_tiles")
    return [str(p) for p in written]


def run_study(path_or_dict, outdir, progress: bool | None = None) -> dict:
    """`specplan.study.run_study` with the figures: results, frontier, plots and summary.md/json."""
    return study.run_study(path_or_dict, outdir, progress=progress, plot=write_study_plots)

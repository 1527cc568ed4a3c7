"""Figures of a study (frontier per variant, best speedup and recommended D vs batch, attention tiles).

The plotting layer over `specplan.study.spec`: `specplan.study.spec` and `specplan.study.report` never import
matplotlib or `specplan.plots`; `run_study` here runs a study and writes its tables, summary and figures.
"""

from __future__ import annotations

from pathlib import Path

from specplan import plots as P
from specplan.study import spec as study


def write_study_plots(st, scenarios, figs, outdir: Path) -> list[str]:
    """Write the study's figures named in `st.plots` into `outdir` from their numbers (`planning.figures.
    StudyFigures`); return the paths written (a serving study: its serving frontier, one colour per variant and
    device)."""
    if figs.serving_front is not None:
        return _serving_study_plot(st, scenarios, figs.serving_front, outdir) if "frontier" in st.plots else []
    written = []
    if "frontier" in st.plots:
        written += P.save_figure(plot_frontier_variants(st, scenarios, figs.fronts, figs.device_fronts),
                                 outdir / "frontier_variants")
    per_batch = figs.per_batch
    for key in ("speedup", "recommended_d"):
        if key not in st.plots or not per_batch:
            continue
        fig = (plot_recommended_d(st, scenarios, figs.d_limits, per_batch) if key == "recommended_d"
               else plot_best_speedup(st, per_batch))
        written += P.save_figure(fig, outdir / key)
    if figs.tiles is not None:
        written += P.save_figure(P.plot_attention_tiles(figs.tiles), outdir / "attention_tiles")
    return [str(p) for p in written]


def plot_best_speedup(st, per_batch):
    """Best speedup over D = 0 against batch, one line per variant (legend beside the axes)."""
    fig, ax = P._figure(8.6, 4.8)
    marks = "osv^D<>p"
    for i, (name, s, ctx) in enumerate(per_batch):
        ax.plot(s["batch"], s["speedup"], marker=marks[i % len(marks)], ms=6 - i, lw=2.2 - 0.4 * (i % 4),
                label=name)
    ax.axhline(1.0, color="grey", lw=0.8, ls=":", label="break-even")
    _batch_axis(ax)
    ax.set_ylabel("best speedup over D = 0 (x)")
    ax.set_title(f"{st.name}: best speedup vs batch\n(context {per_batch[0][2]:,} tokens; feasible points only)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    return fig


def _batch_axis(ax) -> None:
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(P.matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("batch B (concurrent sequences)")
    ax.grid(True, alpha=0.3)


def _devices_phrase(fr, sc) -> str:
    """'2-4 GPUs + 8-16 groq-3-lpu chips' of a variant's speculation frontier (draft devices when any)."""
    spec = fr[fr["set"] == "overall"]
    if spec.empty or int(spec["draft_devices"].max()) == 0:
        return ""
    rng = lambda c: (f"{int(spec[c].min())}" if spec[c].min() == spec[c].max()  # noqa: E731
                     else f"{int(spec[c].min())}-{int(spec[c].max())}")
    dh = sc.get("draft_hardware")
    where = getattr(dh, "id", None) or "draft"
    unit = "chips" if getattr(dh, "kind", "") == "lpu" else "devices"
    return f"{rng('target_devices')} target + {rng('draft_devices')} {where} {unit}"


def plot_frontier_variants(st, scenarios, fronts, device_fronts=None):
    """Frontier of every variant (`fronts`, per target GPU); when some variant drafts on other devices (e.g. LPU
    chips), a second panel counts them (`device_fronts`: tokens/s per device) and the legend says how many each
    variant spends."""
    extra = device_fronts is not None
    fig, axes = P._figure(13.0 if extra else 8.4, 5.6, ncols=2 if extra else 1)
    axes = list(axes) if extra else [axes]
    cm = P.matplotlib.colormaps["tab10"]
    for k, ax in enumerate(axes):
        col = "tok_s_gpu" if k == 0 else "tok_s_device"
        drawn = 0
        for i, (sc, fr) in enumerate(zip(scenarios, fronts)):
            f = fr if k == 0 else device_fronts[i]
            b, s = f[f["set"] == "baseline"], f[f["set"] == "overall"]
            drawn += len(b) + len(s)
            ax.plot(b["tok_s_user"], b[col], "--", color=cm(i % 10), lw=1.2, alpha=0.8)
            dev = _devices_phrase(fr, sc)
            ax.plot(s["tok_s_user"], s[col], "-", color=cm(i % 10), lw=2,
                    label=sc["name"] + (f" ({dev})" if dev else ""))
        ax.plot([], [], "--", color="grey", label="without speculation (D = 0)")
        if drawn:
            ax.set_xscale("log"), ax.set_yscale("log")
            P.plain_log_axes(ax)
        else:  # nothing fits in memory: a result, drawn as such (log axes over nothing fail)
            ax.text(0.5, 0.5, "no configuration fits in memory", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel("interactivity (tokens/s per user)")
        ax.set_ylabel("throughput (tokens/s per GPU)" if k == 0 else
                      "throughput (tokens/s per device, draft devices counted)")
        ax.set_title("per target GPU (draft devices not counted)" if extra and k == 0 else
                     "per device: the draft's chips counted" if extra else
                     f"{st.name}: frontier per variant (solid: with speculation)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7.5, loc="lower left")
    if extra:
        fig.suptitle(f"{st.name}: frontier per variant (solid: with speculation)")
    return fig


def plot_recommended_d(st, scenarios, d_limits, per_batch):
    """Recommended D against batch, one panel per variant (shared axes, whole D at its true value: no offsets);
    a dotted reference at D = tile/G − 1 for the variant's G; points at the largest D searched (`d_limits`, one per
    variant) are ringed and named as at the search limit."""
    import numpy as np

    n = len(per_batch)
    ncols = min(n, 3)
    nrows = int(np.ceil(n / ncols))
    with P.matplotlib.rc_context(P.RC):
        fig = P.matplotlib.figure.Figure(figsize=(3.4 * ncols + 0.6, 2.9 * nrows + 1.5), dpi=110,
                                         layout="constrained")
        P.matplotlib.backends.backend_agg.FigureCanvasAgg(fig)
        axes = np.atleast_1d(fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)).ravel()
    cm = P.matplotlib.colormaps["tab10"]
    names = [sc["name"] for sc in scenarios]
    show_ref = len({sc["model"].group_size for sc in scenarios}) > 1 or bool(st.plots and "attention" in st.plots)
    d_top = 0
    for ax, (name, s, ctx) in zip(axes, per_batch):
        k = names.index(name)
        c = cm(k % 10)
        ax.plot(s["batch"], s["draft_len"], marker="o", ms=5, color=c, lw=1.6, drawstyle="steps-mid")
        top = d_limits[k]
        d_top = max(d_top, top)
        at = s[s["draft_len"] >= top]
        if not at.empty:
            ax.plot(at["batch"], at["draft_len"], "o", ms=11, mfc="none", mec="k", mew=1.0)
        if show_ref:
            sc = scenarios[k]
            g, rows = sc["model"].group_size, sc["hardware"][0].attention.tile_rows
            ax.axhline(rows / g - 1, color=c, lw=1.0, ls=":", alpha=0.9)
            ax.text(0.98, rows / g - 1, f"D = {rows}/G − 1 = {rows / g - 1:g} (G = {g})", color=c, fontsize=7,
                    ha="right", va="bottom", transform=ax.get_yaxis_transform())
        ax.set_title(name, fontsize=9)
        _batch_axis(ax)
        ax.set_xlabel("")
    for ax in axes[n:]:
        ax.set_visible(False)
    ax0 = axes[0]
    ax0.yaxis.set_major_locator(P.matplotlib.ticker.MaxNLocator(integer=True))
    fig.supxlabel("batch B (concurrent sequences)", fontsize=9)
    fig.supylabel("recommended D (tokens per iteration)", fontsize=9)
    fig.suptitle(f"{st.name}: recommended D (best speedup) vs batch, one panel per variant\n(context "
                 f"{per_batch[0][2]:,} tokens; feasible points only; ringed: at the search limit D = {d_top}, "
                 f"raise max_draft_len)", fontsize=10)
    return fig


def run_study(path_or_dict, outdir, progress: bool | None = None) -> dict:
    """`specplan.study.spec.run_study` with the figures: results, frontier, plots and summary.md/json."""
    return study.run_study(path_or_dict, outdir, progress=progress, plot=write_study_plots)


def _serving_study_plot(st, scenarios, front, outdir: Path) -> list[str]:
    """serving_frontier.png: the per-(variant, device, mode) frontiers of a serving study."""
    from specplan.plots.serving_frontier import plot_serving_frontier

    f = front[front["scope"] != "overall"].copy()
    f["hardware"] = f["variant"].astype(str) + ": " + f["hardware"].astype(str)
    keys = {(sc["grid"]["isl"], sc["grid"]["osl"], sc["grid"].get("max_tpot_ms"), sc["grid"].get("max_ttft_ms"))
            for sc in scenarios}
    if len(keys) == 1:  # one workload and SLA: in the title, the TPOT SLA as a line
        isl, osl, tpot, ttft = keys.pop()
        fig = plot_serving_frontier(f, title=f"Serving study {st.name}: ISL {isl:,}, OSL {osl:,}", max_tpot_ms=tpot,
                                    max_ttft_ms=ttft)
    else:  # variants differ in workload or SLA: each curve holds its own variant's rows meeting its SLA
        fig = plot_serving_frontier(f, title=f"Serving study {st.name}: each variant at its own ISL, OSL and SLA "
                                             f"(summary.md)")
    return [str(p) for p in P.save_figure(fig, outdir / "serving_frontier")]

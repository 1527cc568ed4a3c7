"""Files of an adaptive run (`specplan adaptive -o DIR`): summary.md, results.json, series CSVs, time-series plots."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from specplan.core.records import record
from specplan.adaptive.records import RequestsRun, WindowSeries

SUMMARY = ("policy", "tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms", "ttft_p50_ms", "ttft_p99_ms",
           "tokens_per_s_per_gpu", "tokens_per_s_per_user", "slo_attainment", "goodput_tokens_per_s",
           "mean_draft_len", "mean_batch")


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.1f}"
    return str(v)


def summary_markdown(res: RequestsRun, title: str = "") -> str:
    """The per-policy table as markdown, the lossy and bound rows marked."""
    rows = res.policies
    lines = [f"# {title or 'Adaptive speculation'}", "",
             f"{res.model} on {res.hardware}; {res.requests} requests ({res.source}).", "",
             "| " + " | ".join(SUMMARY) + " |", "|" + "---|" * len(SUMMARY)]
    for r in rows:
        name = r.policy + (" (lossy)" if r.lossy else "") + (" (bound)" if r.bound else "")
        lines.append("| " + " | ".join([name] + [_fmt(r.get(c)) for c in SUMMARY[1:]]) + " |")
    for r in rows:
        if r.lossy:
            lines += ["", f"`{r.policy}` is lossy: {100 * r.relaxed_token_fraction:.1f} % of its output tokens "
                          "were accepted only by the relaxed test (α' = α + relax·(1 − α)); not comparable with the "
                          "lossless rows."]
        if r.bound:
            lines += ["", f"`{r.policy}` bounds every lossless policy on this seed: its TPOT percentiles are lower "
                          "bounds, its tokens/s and TPOT-SLO attainment upper bounds (docs/adaptive.md)."]
    return "\n".join(lines) + "\n"


STYLES = ("-", "--", ":", "-.")  # line styles cycled with the colours: policies that coincide stay visible


def series_figure(series: dict[str, WindowSeries], rows: list | None = None, title: str = ""):
    """Over time, one line per policy: D, decode batch, AL and the median TPOT of the requests finishing in each
    window; then the whole run's TPOT p50 and p99 per policy, the numbers of the table (`rows`). The legend sits
    beside the panels, never over a line; policies that coincide differ in line style and width."""
    import matplotlib
    import numpy as np

    from specplan.plots import RC

    with matplotlib.rc_context(RC):
        fig = matplotlib.figure.Figure(figsize=(10.5, 9.6), dpi=110, layout="constrained")
        matplotlib.backends.backend_agg.FigureCanvasAgg(fig)
        gs = fig.add_gridspec(5, 1, height_ratios=(1, 1, 1, 1, 1.1))
        axs = [fig.add_subplot(gs[0])]
        axs += [fig.add_subplot(gs[k], sharex=axs[0]) for k in (1, 2, 3)]
        summ = fig.add_subplot(gs[4])
    cm = matplotlib.colormaps["tab10"]
    names = list(series)
    per_request = any(s.request_tpot_p50_ms is not None for s in series.values())
    for i, name in enumerate(names):
        s = series[name]
        style = dict(color=cm(i % 10), ls=STYLES[(i // 10 + i) % len(STYLES)], lw=2.2 - 1.0 * (i % 3) / 2)
        for ax, y in zip(axs, (s.draft_len, s.batch, s.al, s.request_tpot_p50_ms if per_request else s.tpot_ms)):
            ax.plot(s.t_s, y, label=name, **style)
    labels = ("draft length D", "decode batch", "AL (tokens / step)",
              "TPOT (ms): median of the requests\nfinishing in each window" if per_request
              else "step time / AL (ms)")
    for ax, lab in zip(axs, labels):
        ax.set_ylabel(lab, fontsize=8)
        ax.grid(alpha=0.3)
    for ax in axs[:-1]:
        ax.tick_params(labelbottom=False)
    axs[-1].set_xlabel("time (s)")
    axs[0].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False, title="policy")
    rows = [r for r in (rows or []) if r.tpot_p50_ms is not None]
    x = np.arange(len(rows))
    for k, r in enumerate(rows):
        c = cm(names.index(r.policy) % 10) if r.policy in names else "k"
        summ.plot([k], [r.tpot_p50_ms], "o", color=c, ms=7, gid="tpot-p50")
        summ.plot([k], [r.tpot_p99_ms], "^", color=c, ms=7, mfc="none", gid="tpot-p99")
        summ.plot([k, k], [r.tpot_p50_ms, r.tpot_p99_ms], "-", color=c, lw=0.8, alpha=0.6)
    summ.set_xticks(x, [r.policy + (" (bound)" if r.bound else " (lossy)" if r.lossy else "")
                        for r in rows], fontsize=8)
    summ.set_xlim(-0.6, max(len(rows), 1) - 0.4)
    summ.set_ylabel("TPOT per request (ms)", fontsize=8)
    summ.set_title("whole run, per policy: TPOT p50 (●) and p99 (△) of the requests — the table's numbers",
                   fontsize=9)
    summ.grid(alpha=0.3, axis="y")
    summ.set_ylim(bottom=0)
    if rows:
        from matplotlib.lines import Line2D

        summ.legend(handles=[Line2D([], [], color="k", marker="o", ls="", label="p50"),
                             Line2D([], [], color="k", marker="^", mfc="none", ls="", label="p99")],
                    loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.suptitle(title or "Adaptive speculation over time (windows of the run; every policy on the same "
                 "requests)", fontsize=10)
    return fig


def plot_series(series: dict[str, WindowSeries], stem, rows: list | None = None, title: str = "") -> list[Path]:
    """`series_figure` written as stem.png and stem.svg."""
    from specplan.plots import save_figure

    return save_figure(series_figure(series, rows, title), stem)


def write_report(res: RequestsRun, out_dir, title: str = "", plot_stem=None) -> list[Path]:
    """summary.md, results.json, series_<policy>.csv and adaptive_timeseries.png/svg under out_dir."""
    import io

    from specplan.core.jsonable import to_jsonable
    from specplan.core.io import atomic_write_text  # umask mode, no partial file on failure or Ctrl-C

    d = Path(out_dir)
    paths = [d / "summary.md", d / "results.json"]
    atomic_write_text(paths[0], summary_markdown(res, title))
    atomic_write_text(paths[1], json.dumps(to_jsonable({"policies": res.policies}), indent=2) + "\n")
    for name, s in res.series.items():
        p = d / f"series_{name.replace(':', '_').replace('/', '_').replace('=', '')}.csv"
        f = io.StringIO(newline="")
        w = csv.writer(f, lineterminator="\r\n")
        w.writerow(list(s))
        cols = ([None if not np.isfinite(x) else x for x in np.round(np.asarray(v, float), 5).tolist()]
                for v in s.values())  # a window without a finished request has no latency: an empty cell, not nan
        w.writerows(zip(*cols))
        atomic_write_text(p, f.getvalue())
        paths.append(p)
    if res.series:
        fig_title = title or (f"Adaptive speculation: {res.model} on {res.hardware}, {res.requests} requests "
                              f"({res.source})")
        paths += plot_series(res.series, plot_stem or d / "adaptive_timeseries", res.policies, fig_title)
    return paths


@record
class Example:
    """The committed example's run: requests, arrival rate and α ramped from start to end, ISL / OSL, seed, model,
    hardware, SLO (ms) and policies."""

    requests: int = 3000
    rate_start: float = 4.0
    rate_end: float = 30.0
    alpha_start: float = 0.9
    alpha_end: float = 0.4
    isl: int = 512
    osl: int = 256
    seed: int = 0
    model: str = "llama-3.1-8b"
    hardware: str = "h100-sxm"
    max_tpot_ms: float = 8.0
    max_ttft_ms: float = 500.0
    policies: tuple = ("fixed:1", "fixed:3", "fixed:5", "sglang", "model", "model:slo=0", "model:acc=0", "adasd",
                       "oracle")


EXAMPLE = Example()
EXAMPLE_COMMAND = ("specplan adaptive --model llama-3.1-8b --hardware h100-sxm --workload examples/adaptive/workload.csv "
                   "--policies fixed:1,fixed:3,fixed:5,sglang,model,model:slo=0,model:acc=0,adasd,oracle "
                   "--max-draft-len 8 --max-tpot-ms 8 --max-ttft-ms 500 -o examples/adaptive")


def make_example(root) -> list[Path]:
    """The committed example: α shifts 0.9 → 0.4 while the load rises (examples/adaptive/, docs/plots/)."""
    from specplan.adaptive import build_workload, run_requests
    from specplan.adaptive.run import PolicyOptions
    from specplan.adaptive.workload import ramp_workload, write_workload_csv

    e = EXAMPLE
    root = Path(root)
    d = root / "examples" / "adaptive"
    d.mkdir(parents=True, exist_ok=True)
    cols = ramp_workload(e.requests, e.rate_start, e.rate_end, e.alpha_start, e.alpha_end, e.isl, e.osl, seed=e.seed)
    write_workload_csv(d / "workload.csv", cols)
    wl = build_workload(cols["arrival_s"], cols["isl"], cols["osl"], alpha=cols["alpha"],
                        source="examples/adaptive/workload.csv")
    res = run_requests(e.model, e.hardware, wl, list(e.policies),
                       opts=PolicyOptions(d_max=8, max_tpot_s=e.max_tpot_ms / 1e3, max_ttft_s=e.max_ttft_ms / 1e3,
                                          seed=e.seed))
    title = (f"Adaptive example: α shifts {e.alpha_start} → {e.alpha_end} while the arrival rate rises "
             f"{e.rate_start:g} → {e.rate_end:g} requests/s")
    paths = write_report(res, d, title, plot_stem=root / "docs" / "plots" / "adaptive_example_timeseries")
    s = d / "summary.md"
    s.write_text(s.read_text() + f"\nRegenerate: `python scripts/make_adaptive_example.py` (or `{EXAMPLE_COMMAND}`).\n"
                 f"SLO: TPOT <= {e.max_tpot_ms:g} ms and TTFT <= {e.max_ttft_ms:g} ms. Plot: "
                 "docs/plots/adaptive_example_timeseries.png.\n")
    return paths

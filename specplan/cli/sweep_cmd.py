"""`specplan pareto` (grid sweep, frontier, plots) and `specplan study` (YAML what-if studies).

pandas and matplotlib are imported inside the commands so that `specplan --help` starts fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from specplan.cli.app import app
from specplan.cli.serving_options import Concurrency, Engine, Isl, Mode, Osl, Pools, RequestRate, StartupCohort
from specplan.cli.parsing import (DEFAULT_FIGURES, FIGURE_FORMATS, FIGURES, comma_list, figure_formats,  # noqa: F401
                                  figure_names, fold_ids, int_list, mech_values, model_context, one_number)
from specplan.costs.precision import Dtypes
from specplan.planning.sweep import MAX_DRAFT_LEN, SweepAxes
from specplan.speculation.spec import DraftPlacement, DraftSearch


DEFAULT_CONTEXT = 1024  # tokens in the KV cache when pareto gets no --context (stated in its output)
_ACCEPTANCE_FORM = "MECH=VALUE (rate 0.8, AL@D 3.2@4, p1,p2,.. or a profile)"


def write_pareto(df, front, outdir: Path, model, hardware: dict | None = None, figures=DEFAULT_FIGURES,
                 per: str = "gpu", acceptance_label: str = "", formats=("png",), grid_csv: bool = False,
                 timings: dict | None = None, acceptance: dict | None = None,
                 d_max: dict | None = None) -> list[Path]:
    """Grid Parquet (and CSV with grid_csv), frontier CSV, best-at-interactivity CSV, columns doc and the
    figures named in `figures` (FIGURES keys; each in every one of `formats`).

    model: the target's profile (or id); hardware: {id: profile} of the swept devices, so profiles loaded
    from YAML paths are never looked up again by id. The heat map and the breakdown show the device, TP,
    context and batch of the best frontier point (`planning.frontier.best_setup`; every figure's numbers come from
    `planning.figures`); their titles say so, or that nothing fits. timings: filled with the CPU seconds of the
    tables and of the figures. d_max: {mechanism: the largest D its acceptance data covers} (the heat map hatches
    the D beyond it)."""
    import time

    from specplan.planning import figures as F
    from specplan.planning.frontier import best_at, best_setup, interactivity_levels
    from specplan.core.io import atomic_write_text
    from specplan.profiles.registry import load_hardware, load_model
    from specplan.planning.sweep import columns_doc
    from specplan.core.tables import write_table

    t0 = time.process_time()
    written = write_table(df, outdir / "grid", parquet=True, csv=grid_csv)
    written += write_table(front, outdir / "frontier", parquet=False)
    written += write_table(best_at(front, interactivity_levels(front), per=per), outdir / "best_at_interactivity",
                           parquet=False)
    atomic_write_text(outdir / "columns.md", columns_doc() + "\n")
    written.append(outdir / "columns.md")
    t1 = time.process_time()
    if timings is not None:
        timings.update(tables_s=t1 - t0, figures_s=0.0, import_s=0.0)
    if not figures:
        return written
    from specplan import plots as P

    if timings is not None:  # importing matplotlib is start-up, not drawing
        timings["import_s"] = time.process_time() - t1
        t1 = time.process_time()

    m = load_model(model)
    hws = dict(hardware or {})
    best = best_setup(df, front, per)
    hw_id, tp, ctx, batch = best.hardware, best.tp, best.context_len, best.batch
    hw = hws.get(hw_id) or load_hardware(hw_id)
    unit = "tok/s/GPU" if per == "gpu" else "tok/s/device"
    where = (f"best frontier point ({unit}): B = {batch}, D = {best.draft_len}" if best.fits
             else "DOES NOT FIT in memory (no feasible point)")
    ctxs = ", ".join(f"{int(c):,}" for c in sorted(df["context_len"].unique()))
    devs = ", ".join(str(h) for h in df["hardware"].unique())
    title = (f"{m.id} on {devs}, context {ctxs} tokens\nthroughput vs interactivity"  # 2 lines: no clipping
             + (f"\nacceptance: {acceptance_label}" if acceptance_label else ""))
    if "frontier" in figures:
        written += P.save_figure(P.plot_frontier(F.frontier_figure(df, per), title=title), outdir / "frontier",
                                 formats=formats)
    if "heatmap" in figures:
        written += _heatmap(P, df, best, hw_id, tp, ctx, where, outdir, formats,
                            (d_max or {}).get(best.mechanism))
    if "tiles" in figures:
        swept_ctx = tuple(int(c) for c in sorted(df["context_len"].unique()))[:3]  # the grid's contexts
        others = [str(h) for h in df["hardware"].unique() if str(h) != hw_id]
        tiles_title = (f"Decode attention with speculation on {hw_id} (the best point's device"
                       + (f"; also swept: {', '.join(others)}" if others else "") + ")\n"
                       "128-row tiles: runtime steps at G(1+D) = k x 128")
        tiles = F.attention_tiles(hw, head_dim=m.head_dim, kv_heads=max(1, m.heads_per_device(tp)[1]),
                                  contexts=swept_ctx)
        written += P.save_figure(P.plot_attention_tiles(tiles, title=tiles_title), outdir / "attention_tiles",
                                 formats=formats)
    if "acceptance" in figures:
        written += P.save_figure(P.plot_acceptance(df, acceptance=acceptance), outdir / "acceptance", formats=formats)
    if "breakdown" in figures:
        ds = sorted(int(x) for x in df["draft_len"].unique())  # every D of the grid, bars at their true D
        br = P.plot_breakdown(F.step_breakdown(m, hw, tp, batch=batch, context_len=ctx, draft_lens=ds,
                                               layout=best.layout))
        ax = br.axes[0]
        ax.set_title(f"{ax.get_title()}\n({where})")
        written += P.save_figure(br, outdir / "breakdown", formats=formats)
    if timings is not None:
        timings["figures_s"] = time.process_time() - t1
    return written


def _heatmap(P, df, best, hw_id, tp, ctx, where, outdir, formats, d_max=None) -> list[Path]:
    """The speedup heat map of the best frontier point's device, TP, context (and layout)."""
    sub = df[(df["hardware"] == hw_id) & (df["tp"] == tp) & (df["context_len"] == ctx)]
    lay = best.layout
    if lay is not None and "layout" in sub:  # several layouts may share a TP (tp8, tp8ep8): keep the best one's
        sub = sub[sub["layout"] == lay]
    heat = P.plot_speedup_heatmap(sub, hardware=hw_id, mechanism=best.mechanism, tp=tp, context_len=ctx,
                                  d_max=d_max)
    ax = heat.axes[0]
    ax.set_title(f"{ax.get_title()}\n({where})")
    return P.save_figure(heat, outdir / "speedup_heatmap", formats=formats)


@app.command("pareto")
def pareto(
    model: str = typer.Option(..., "--model", "-m", help="Target model id or profile YAML."),
    hardware: List[str] = typer.Option(..., "--hardware", "-H", help="Device id or YAML; repeat for several."),
    batch_max: Optional[int] = typer.Option(None, "--batch-max", help="Largest batch (default: largest that fits)."),
    batch_points: int = typer.Option(128, "--batch-points", help="Batch values when batch-max is larger."),
    max_draft_len: int = typer.Option(MAX_DRAFT_LEN, "--max-draft-len", help="D from 0 to this (every command's default)."),
    mechanisms: Optional[List[str]] = typer.Option(None, "--mechanisms", "--mechanism", callback=fold_ids,
                                                   help="Comma list or repeat (default: all that apply)."),
    acceptance: Optional[List[str]] = typer.Option(None, "--acceptance", help="MECH=VALUE: rate 0.8, AL@D 3.2@4, "
                                                   "per-position 0.9,0.8 or a profile id; repeat."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Acceptance from published profiles of a dataset "
                                          "or class: code, chat, math, ... (docs/acceptance_datasets.md)."),
    tp: Optional[List[str]] = typer.Option(None, "--tp", help="TP degrees, comma list (default 1,2,4,8 where heads divide)."),
    layouts: Optional[List[str]] = typer.Option(None, "--layouts", help="Layouts instead of --tp, comma list: tp8, "
                                                "dp8ep8, tp8ep4, tp4pp2 (docs/parallel.md)."),
    context: Optional[List[str]] = typer.Option(None, "--context", "-c", help="Context lengths, comma list; 8k = 8192 (default 1024)."),
    draft_model: Optional[str] = typer.Option(None, "--draft-model", help="External draft model (mechanism external)."),
    draft_hardware: Optional[str] = typer.Option(None, "--draft-hardware", help="Device of an external draft."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="Weights and GEMM math dtype."),
    kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="KV-cache dtype; default or auto: the checkpoint's declared KV format, else 16-bit (the engines' auto rule)."),
    per: str = typer.Option("gpu", "--per", help="Rank throughput per target GPU (gpu) or per device, draft "
                            "devices included (device): use device when drafts run on other hardware."),
    no_plots: bool = typer.Option(False, "--no-plots", help="No figures (as --figures none)."),
    figures: Optional[str] = typer.Option(None, "--figures", help="Figures to draw: all, none, or a comma list of "
                                          "frontier, heatmap, tiles, acceptance, breakdown (default frontier); energy: the "
                                          "serving grid's J/token and $/Mtok frontier (with --isl/--osl)."),
    grid_csv: bool = typer.Option(False, "--grid-csv", help="Also write the grid as CSV (grid.parquet always; "
                                  "with --isl/--osl the whole serving grid, CSV and Parquet, only with this flag)."),
    timings: bool = typer.Option(False, "--timings", help="Print the CPU seconds of sweep, frontier, tables and "
                                 "figures."),
    formats: Optional[str] = typer.Option(None, "--formats", help="Figure formats, comma list of png, svg "
                                          "(default png; png,svg also writes SVGs, about twice the figure time)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bar on a terminal."),
    outdir: Path = typer.Option(..., "-o", "--out", "--output", help="Output folder."),
    engine: Engine = None,
    mode: Mode = None,
    isl: Isl = None,
    osl: Osl = None,
    concurrency: Concurrency = None,
    request_rate: RequestRate = None,
    pools: Pools = None,
    max_ttft_ms: Optional[float] = typer.Option(None, "--max-ttft-ms", help="Serving SLA (with --isl/--osl): "
                                                "time to first token (ms)."),
    max_tpot_ms: Optional[float] = typer.Option(None, "--max-tpot-ms", help="Serving SLA (with --isl/--osl): "
                                                "time per output token (ms)."),
    startup_cohort: StartupCohort = False,
) -> None:
    """Sweep batch x D x mechanism x TP x context x device; write grid, frontier and plots. With --isl/--osl:
    the serving grid (device x TP x mode x mechanism x D x concurrency [x pools]; agg and disagg unless --mode),
    its frontier and the serving frontier figure."""
    from specplan.core.errors import SpecplanError
    from specplan.serving.workload import workload_from_options
    from specplan.cli.dataset_option import dataset_acceptance

    acceptance = dataset_acceptance(dataset, model, comma_list(mechanisms) or None, acceptance, draft_model)
    concurrency = one_number(concurrency, "--concurrency")
    request_rate = one_number(request_rate, "--request-rate")
    wl = workload_from_options(isl, osl, concurrency, request_rate, mode or ("disagg" if pools else "agg"), pools,
                               require_load=False, startup_cohort=startup_cohort)
    if wl is not None:
        if layouts:
            raise SpecplanError("pareto: the serving model (--isl/--osl) takes --tp only, not --layouts")
        _serving_pareto(model, hardware, wl, int_list(tp, "--tp") or None,
                        [mode] if mode else ["disagg"] if pools else ["agg", "disagg"], engine,
                        comma_list(mechanisms) or None, mech_values(acceptance, _ACCEPTANCE_FORM), max_draft_len,
                        concurrency is None and request_rate is None, Path(outdir), dict(dtype=dtype, kv_dtype=kv_dtype, draft_model=draft_model,
                                                                    max_ttft_ms=max_ttft_ms, max_tpot_ms=max_tpot_ms),
                        figure_names(figures, no_plots), figure_formats(formats), grid_csv, timings)
        return
    for name, v in (("--max-ttft-ms", max_ttft_ms), ("--max-tpot-ms", max_tpot_ms)):
        if v is not None:
            raise SpecplanError(f"{name}: a serving SLA, needs --isl and --osl")

    _batch_pareto(model, hardware, tp, layouts, context, mechanisms, acceptance, batch_max, batch_points,
                  max_draft_len, draft_model, draft_hardware, dtype, kv_dtype, per, figures, no_plots, formats,
                  grid_csv, outdir, progress, timings)


@app.command("study")
def study(
    path: Path = typer.Argument(..., help="Study YAML (see docs/studies.md)."),
    outdir: Path = typer.Option(..., "-o", "--out", "--output", help="Output folder."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bar on a terminal."),
) -> None:
    """Run a YAML what-if study: base scenario + variants; results, plots and summary.md."""
    from specplan.core.io import check_output_dir
    from specplan.plots.study_plots import run_study

    check_output_dir(outdir)
    summary = run_study(path, outdir, progress=None if progress else False)
    print(f"study {summary['study']}: {len(summary['variants'])} variants")
    if summary.get("kind") == "serving":
        for v in summary["variants"]:
            b = max((x for x in (v["best"], v["best_without_speculation"]) if x),
                    key=lambda x: x["tokens_per_s_per_gpu"], default=None)  # the more tokens/s/GPU of the two
            best = (f"best {b['tokens_per_s_per_gpu']:,.0f} tok/s/GPU with {b['mechanism']} D {int(b['draft_len'])} at "
                    f"concurrency {b['concurrency']:g}, TP {int(b['tp'])} on {b['hardware']}"
                    + (f" (speculation x{v['speculation_gain']:.2f} over none)" if v["speculation_gain"] else "")
                    if b else "no configuration meets the SLA")
            print(f"  {v['variant']}: {best}")
        print(f"wrote {Path(outdir) / 'summary.md'}, serving_results.csv, serving_frontier.csv and "
              f"{len(summary['plots'])} plot files")
        return
    for v in summary["variants"]:
        b = v["best"]
        limit = (f" — at the search limit D = {v['max_draft_len_searched']} (raise max_draft_len)"
                 if b and b["draft_len"] >= v["max_draft_len_searched"] else "")
        best = f"best speedup x{b['speedup']:.2f} at (B {b['batch']}, D {b['draft_len']}, TP {b['tp']}, " \
               f"{b['mechanism']}){limit}" if b else "no feasible speculative point"
        print(f"  {v['variant']}: {best}")
    print(f"wrote {Path(outdir) / 'summary.md'} and {len(summary['plots'])} plot files")


def _batch_pareto(model, hardware, tp, layouts, context, mechanisms, acceptance, batch_max, batch_points,
                  max_draft_len, draft_model, draft_hardware, dtype, kv_dtype, per, figures, no_plots, formats,
                  grid_csv, outdir, progress, timings) -> None:
    """pareto without a workload: the batch x D x mechanism x layout x context x device grid, its frontiers
    (overall and per device and context), tables and figures; --timings prints each phase's CPU seconds."""
    from specplan.planning.frontier import frontier, throughput_column
    from specplan.planning.sweep import sweep
    from specplan.profiles.registry import load_hardware, load_model

    from specplan.core.io import check_output_dir, ready_output_dir
    from specplan.planning.grid_acceptance import acceptance_d_max, acceptance_label, acceptance_legend

    check_output_dir(outdir)  # a bad -o is an error before the sweep
    throughput_column(per)  # a bad --per is an error before the sweep
    fmts = figure_formats(formats)  # and a bad --formats
    figs = figure_names(figures, no_plots)  # and bad --figures
    ready_output_dir(outdir)  # and a folder that cannot be written (/proc/x, a read-only mount), proven by a probe
    m = load_model(model)  # resolved once: a YAML path is never looked up again by its id
    hws = [load_hardware(h) for h in hardware]
    mechs = comma_list(mechanisms) or None
    contexts = int_list(context, "--context") or [DEFAULT_CONTEXT]
    model_context(model, max(contexts))  # the longest listed context, as the other commands check one
    acc = mech_values(acceptance, _ACCEPTANCE_FORM)
    import time

    t_imp = time.process_time()
    import pandas  # noqa: F401  (the sweep and the tables need them: imported here, counted as start-up)
    import pyarrow.parquet  # noqa: F401

    t0 = time.process_time()
    df = sweep(m, hws,
               axes=SweepAxes(batch_max=batch_max, batch_points=batch_points, tp=int_list(tp, "--tp"), layouts=comma_list(layouts) or None, contexts=contexts),
               drafts=DraftSearch(max_draft_len=max_draft_len, mechanisms=mechs, acceptance=acc),
               dtypes=Dtypes(dtype=dtype, kv_dtype=kv_dtype),
               draft=DraftPlacement(model=draft_model, hardware=draft_hardware), progress=None if progress else False)
    _print_swept(df, contexts, context, mechs)
    t1 = time.process_time()
    by = ["hardware", "context_len"] + (["layout"] if len(comma_list(layouts)) > 1 else [])
    front = frontier(df, per=per, by=by)
    t2 = time.process_time()
    cost: dict = {}
    written = write_pareto(df, front, Path(outdir), m, {h.id: h for h in hws}, figures=figs, per=per,
                           acceptance_label=acceptance_label(df, m.id, acc), formats=fmts, grid_csv=grid_csv,
                           timings=cost, acceptance=acceptance_legend(df, m.id, acc),
                           d_max=acceptance_d_max(df, m.id, acc))
    if timings:
        work = time.process_time() - t0 - cost["import_s"]
        print(f"timings (CPU s): sweep {t1 - t0:.2f}, frontier {t2 - t1:.2f}, tables {cost['tables_s']:.2f}, "
              f"figures {cost['figures_s']:.2f} (imports, not counted: pandas and pyarrow {t0 - t_imp:.2f}, "
              f"matplotlib {cost['import_s']:.2f}); the command's work {work:.2f} = "
              f"{work / max(t2 - t0, 1e-9):.2f}x sweep + frontier")
    _print_written(df, front, by, written)


def _print_swept(df, contexts, context, mechs) -> None:
    """What the grid swept: contexts, mechanisms (and those left out, why), the D range."""
    from specplan.speculation.speedup import mechanism_names

    swept = [str(x) for x in df["mechanism"].unique() if str(x) != "none"]
    print(f"context: {', '.join(f'{c:,}' for c in contexts)} tokens"
          + ("" if context else " (default; --context 8k,32k for others)"))
    left = [x for x in mechanism_names() if x != "none" and x not in swept]
    print(f"mechanisms: {', '.join(swept) or 'none'}"
          + ("" if mechs else f" (default: those with a shipped acceptance profile or --acceptance; not swept: "
                              f"{', '.join(left)}, which need --acceptance MECH=VALUE or a draft model)"))
    print(f"draft length D: 0 ... {int(df['draft_len'].max())} (--max-draft-len, default {MAX_DRAFT_LEN}; a "
          f"shipped acceptance profile may cap it)")


def _print_written(df, front, by: list, written: list) -> None:
    """The grid and frontier counts, then every file written."""
    n_fit = int(df["fits"].sum())
    n_scopes = int(front["scope"].nunique()) - 1 if len(front) else 0
    print(f"{len(df):,} grid points ({n_fit:,} fit in memory), {len(front):,} frontier rows: the overall frontier "
          f"and one per ({', '.join(by)}) ({n_scopes}), told apart by frontier.csv's scope column")
    for p in written:
        print(f"wrote {p}")


def _serving_pareto(model, hardware: list, wl, tps: list[int] | None, modes: list[str], engine, mechs, acc,
                    max_draft_len, search, outdir: Path, kw, figures=("frontier",), formats=("png",),
                    grid_csv: bool = False, timings: bool = False) -> None:
    """pareto --isl/--osl: serving_frontier.csv (set and scope columns: overall and per (device, mode)) and the serving frontier figure
    (tokens/s/GPU vs tokens/s/user); with --grid-csv the whole grid (serving_grid.csv and .parquet: every device,
    TP and mode). TPs: the given ones, else 1, 2, 4, 8 where the heads divide and the device's
    scale-up domain holds them (planning.sweep.tp_choices, as the batch pareto)."""
    import time

    from specplan.core.io import atomic_write_text, check_output_dir, ready_output_dir
    from specplan.core.tables import write_table
    from specplan.planning.serving_pareto import serving_pareto
    from specplan.profiles.registry import load_hardware, load_model

    check_output_dir(outdir)
    m = load_model(model)
    hws = list({h.id: h for h in (load_hardware(x) for x in hardware)}.values())
    ready_output_dir(outdir)  # writable, proven by a probe file, before the grid is priced
    from specplan.planning.options import GridOptions, Sla
    from specplan.speculation.spec import DraftSearch

    sla = Sla(kw.get("max_ttft_ms"), kw.get("max_tpot_ms"))
    sp = serving_pareto(m, hws, wl, tps, modes, dict(
        engine=engine, drafts=DraftSearch(mechs, acc, max_draft_len), sla=sla,
        grid=GridOptions(search_concurrency=search),
        **{k: v for k, v in kw.items() if v is not None and k not in ("max_ttft_ms", "max_tpot_ms")}))
    df, front, swept = sp.grid, sp.frontier, sp.tps_by_hardware
    t2 = time.process_time()
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    if grid_csv:  # the whole grid is 10^5-10^6 rows (tens of MB): written when asked for
        text_cols = {c: "string" for c in df.columns if df[c].dtype == object}  # pools: 'xPyD' or none (agg)
        written += write_table(df.astype(text_cols), outdir / "serving_grid", parquet=True, csv=False)
    tables = ([("serving_grid.csv", df)] if grid_csv else []) + [("serving_frontier.csv", front)]
    if sp.energy_frontier is not None:
        tables.append(("serving_energy_frontier.csv", sp.energy_frontier))
    for name, t in tables:
        atomic_write_text(outdir / name, t.to_csv(index=False))
        written.append(outdir / name)
    t3 = time.process_time()
    if "frontier" in figures:
        from specplan import plots as P
        from specplan.plots.serving_frontier import plot_serving_frontier

        title = (f"{m.id} serving on {', '.join(h.id for h in hws)}: ISL {wl.isl:,}, OSL {wl.osl:,}, "
                 f"TP {', '.join(map(str, sorted({t for v in swept.values() for t in v})))}")
        fig = plot_serving_frontier(front, title=title, max_tpot_ms=kw.get("max_tpot_ms"),
                                    max_ttft_ms=kw.get("max_ttft_ms"))
        written += P.save_figure(fig, outdir / "serving_frontier", formats=formats)
    if "energy" in figures and "joules_per_token" in df:
        from specplan import plots as P
        from specplan.planning.figures import energy_figure
        from specplan.plots.cost_plot import plot_energy_frontier

        title = (f"{m.id} on {', '.join(h.id for h in hws)}, ISL {wl.isl}, OSL {wl.osl}: energy and cost per "
                 f"output token")
        written += P.save_figure(plot_energy_frontier(energy_figure(df), title), outdir / FIGURES["energy"],
                                 formats=formats)
    if timings:
        print(f"timings (CPU s): serving grid {sp.grid_cpu_s:.2f}, frontier {sp.frontier_cpu_s:.2f}, tables {t3 - t2:.2f}, "
              f"figures {time.process_time() - t3:.2f} (matplotlib's import counted in figures)")
    left = [f for f in figures if f not in ("frontier", "energy")]
    if left:
        print(f"figures: {', '.join(left)} are drawn for the batch grid only (without --isl/--osl); the serving "
              f"grid draws serving_frontier and energy")
    n_ok = int(df["meets_sla"].sum())
    n_bad = int((~df["stable"]).sum())
    sla = ("meet the SLA" if kw.get("max_ttft_ms") is not None or kw.get("max_tpot_ms") is not None else
           "fit and have a steady state")
    unstable = (f"; {n_bad:,} have no steady state (arrivals over capacity: stable false, no times or "
                f"throughputs in their rows)" if n_bad else "")
    tp_text = "; ".join(f"{h} TP {', '.join(map(str, v))}" for h, v in swept.items())
    print(f"{len(df):,} serving configurations ({n_ok:,} {sla}{unstable}) over {tp_text} x {', '.join(modes)}; "
          f"{len(front):,} frontier rows: the overall frontier and "
          f"one per (device, mode), told apart by serving_frontier.csv's scope column"
          + ("" if grid_csv else "; the whole grid with --grid-csv"))
    for p in written:
        print(f"wrote {p}")

"""`specplan pareto` (grid sweep, frontier, plots) and `specplan study` (YAML what-if studies).

pandas and matplotlib are imported inside the commands so that `specplan --help` starts fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from specplan.cli.app import app
from specplan.cli.parsing import comma_list, int_list, mech_values


_ACCEPTANCE_FORM = "MECH=VALUE (rate 0.8, AL@D 3.2@4, p1,p2,.. or a profile)"


def write_pareto(df, front, outdir: Path, model_id: str, plots: bool = True, per: str = "gpu") -> list[Path]:
    """Grid CSV+Parquet, frontier CSV, best-at-interactivity CSV, columns doc and the five plots.

    The heat map and the breakdown show the device, TP, context and batch of the best frontier point
    (`plots.best_setup`); their titles say so, or that nothing fits."""
    from specplan.frontier import best_at, interactivity_levels
    from specplan.io import atomic_write_text
    from specplan.sweep import columns_doc, write_table

    written = write_table(df, outdir / "grid", parquet=True)
    written += write_table(front, outdir / "frontier", parquet=False)
    written += write_table(best_at(front, interactivity_levels(front), per=per), outdir / "best_at_interactivity",
                           parquet=False)
    atomic_write_text(outdir / "columns.md", columns_doc() + "\n")
    written.append(outdir / "columns.md")
    if not plots:
        return written
    from specplan import plots as P
    from specplan.profiles.registry import load_model

    m = load_model(model_id)
    best = P.best_setup(df, front, per)
    hw, tp, ctx, batch = best["hardware"], best["tp"], best["context_len"], best["batch"]
    unit = "tok/s/GPU" if per == "gpu" else "tok/s/device"
    where = (f"best frontier point ({unit}): B = {batch}, D = {best['draft_len']}" if best["fits"]
             else "DOES NOT FIT in memory (no feasible point)")
    written += P.save_figure(P.plot_frontier(df, per=per, title=f"{model_id}: throughput vs interactivity, "
                                             "with and without speculation"), outdir / "frontier")
    sub = df[(df["hardware"].astype(str) == hw) & (df["tp"] == tp) & (df["context_len"] == ctx)]
    heat = P.plot_speedup_heatmap(sub, hardware=hw, mechanism=best["mechanism"], tp=tp, context_len=ctx)
    ax = heat.axes[0]
    ax.set_title(f"{ax.get_title()}\n({where})")
    written += P.save_figure(heat, outdir / "speedup_heatmap")
    written += P.save_figure(P.plot_attention_tiles(hw, head_dim=m.head_dim,
                                                    kv_heads=max(1, m.heads_per_device(tp)[1])),
                             outdir / "attention_tiles")
    written += P.save_figure(P.plot_acceptance(df), outdir / "acceptance")
    dmax = int(df["draft_len"].max())
    ds = sorted({0, 1, 2, 3, 4, 7, 8, 15, 16, dmax} & set(range(dmax + 1)))
    br = P.plot_breakdown(m, hw, tp, batch=batch, context_len=ctx, draft_lens=ds)
    ax = br.axes[0]
    ax.set_title(f"{ax.get_title()}\n({where})")
    written += P.save_figure(br, outdir / "breakdown")
    return written


@app.command("pareto")
def pareto(
    model: str = typer.Option(..., "--model", "-m", help="Target model id or profile YAML."),
    hardware: List[str] = typer.Option(..., "--hardware", "-H", help="Device id or YAML; repeat for several."),
    batch_max: Optional[int] = typer.Option(None, "--batch-max", help="Largest batch (default: largest that fits)."),
    batch_points: int = typer.Option(128, "--batch-points", help="Batch values when batch-max is larger."),
    max_draft_len: int = typer.Option(8, "--max-draft-len", help="D from 0 to this."),
    mechanisms: Optional[List[str]] = typer.Option(None, "--mechanisms", help="Comma list or repeat (default: all that apply)."),
    acceptance: Optional[List[str]] = typer.Option(None, "--acceptance", help="MECH=VALUE: rate 0.8, AL@D 3.2@4, "
                                                   "per-position 0.9,0.8 or a profile id; repeat."),
    tp: Optional[List[str]] = typer.Option(None, "--tp", help="TP degrees, comma list (default 1,2,4,8 where heads divide)."),
    context: Optional[List[str]] = typer.Option(None, "--context", "-c", help="Context lengths, comma list; 8k = 8192 (default 1024)."),
    draft_model: Optional[str] = typer.Option(None, "--draft-model", help="External draft model (mechanism external)."),
    draft_hardware: Optional[str] = typer.Option(None, "--draft-hardware", help="Device of an external draft."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="Weights and GEMM math dtype."),
    kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="KV-cache dtype."),
    per: str = typer.Option("gpu", "--per", help="Rank throughput per target GPU (gpu) or per device, draft "
                            "devices included (device): use device when drafts run on other hardware."),
    no_plots: bool = typer.Option(False, "--no-plots", help="Skip the figures."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bar on a terminal."),
    outdir: Path = typer.Option(..., "--out", "-o", help="Output folder."),
) -> None:
    """Sweep batch x D x mechanism x TP x context x device; write grid, frontier and plots."""
    from specplan.frontier import frontier
    from specplan.profiles.registry import load_model
    from specplan.sweep import sweep

    from specplan.frontier import throughput_column

    throughput_column(per)  # a bad --per is an error before the sweep
    mechs = comma_list(mechanisms) or None
    df = sweep(model, list(hardware), batch_max=batch_max, batch_points=batch_points, max_draft_len=max_draft_len,
               mechanisms=mechs, acceptance=mech_values(acceptance, _ACCEPTANCE_FORM), tp=int_list(tp, "--tp"),
               contexts=int_list(context, "--context") or [1024], draft_model=draft_model,
               draft_hardware=draft_hardware, dtype=dtype, kv_dtype=kv_dtype, progress=None if progress else False)
    front = frontier(df, per=per)
    written = write_pareto(df, front, Path(outdir), load_model(model).id, plots=not no_plots, per=per)
    n_fit = int(df["fits"].sum())
    print(f"{len(df):,} grid points ({n_fit:,} fit in memory), {len(front):,} frontier rows")
    for p in written:
        print(f"wrote {p}")


@app.command("study")
def study(
    path: Path = typer.Argument(..., help="Study YAML (see docs/studies.md)."),
    outdir: Path = typer.Option(..., "--out", "-o", help="Output folder."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bar on a terminal."),
) -> None:
    """Run a YAML what-if study: base scenario + variants; results, plots and summary.md."""
    from specplan.study_plots import run_study

    summary = run_study(path, outdir, progress=None if progress else False)
    print(f"study {summary['study']}: {len(summary['variants'])} variants")
    for v in summary["variants"]:
        b = v["best"]
        best = f"best speedup x{b['speedup']:.2f} at (B {b['batch']}, D {b['draft_len']}, TP {b['tp']}, " \
               f"{b['mechanism']})" if b else "no feasible speculative point"
        print(f"  {v['variant']}: {best}")
    print(f"wrote {Path(outdir) / 'summary.md'} and {len(summary['plots'])} plot files")

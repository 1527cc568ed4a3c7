"""`specplan bench`, `specplan calibrate`, `specplan validate`: measure -> fit -> score (torch only for bench)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from specplan.cli.app import app
from specplan.cli.output import print_json

INSTALL_HINT = "torch is not installed: pip install 'specplan[bench]'  (CPU wheel: pip install torch==2.13.0)"


@app.command("bench")
def bench(
    what: str = typer.Argument("all", help="gemm | attention | all"),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Model id/YAML: time its decode GEMM shapes."),
    tp: int = typer.Option(1, "--tp", help="Tensor parallelism for the model's GEMM shapes."),
    shapes: Optional[Path] = typer.Option(None, "--shapes", help="YAML/JSON with 'gemm', 'm' and/or 'attention'."),
    device: str = typer.Option("cuda", "--device", help="cuda | cpu"),
    dtype: str = typer.Option("bf16", "--dtype", help="bf16 | fp16 | fp32 | fp8 (fp8: GEMM only)."),
    kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="KV dtype for attention (default --dtype)."),
    max_m: Optional[int] = typer.Option(None, "--max-m", help="Largest GEMM M."),
    reps: Optional[int] = typer.Option(None, "--reps", help="Repetitions per point (median reported)."),
    output: Path = typer.Option(..., "-o", "--out", "--output", help="Measured CSV (bench all: _gemm/_attention suffixes)."),
) -> None:
    """Time decode-step GEMMs and decode/verify attention with torch; write the measured CSV."""
    if what not in ("gemm", "attention", "all"):
        raise typer.BadParameter("must be gemm, attention or all", param_hint="WHAT")
    if model is None and shapes is None:
        raise typer.BadParameter("give --model M or --shapes FILE", param_hint="--model/--shapes")
    from specplan.core.io import check_output_file

    check_output_file(output)
    try:
        import torch  # noqa: F401
    except ImportError:
        print(INSTALL_HINT, file=sys.stderr)
        raise typer.Exit(2)
    from specplan.bench import harness

    from specplan.core.loader import read_yaml_or_json

    data = read_yaml_or_json(shapes, "shapes file") if shapes else {}
    gemm_shapes = data.get("gemm", [])
    if model is not None:
        from specplan.profiles.registry import load_model
        from specplan.costs.shapes import model_gemm_shapes

        gemm_shapes = [{"n": s.n, "k": s.k, "name": s.name} for s in model_gemm_shapes(load_model(model), tp)]
    notes: list[str] = []
    out = str(output)
    if what in ("gemm", "all") and gemm_shapes:
        rows = harness.bench_gemm(gemm_shapes, data.get("m"), device=device, dtype=dtype, max_m=max_m, notes=notes,
                                  timing=harness.TimingPlan(reps=reps))
        path = out if what == "gemm" else harness.split_path(out, "gemm")
        harness.write_csv(rows, path, harness.GEMM_COLUMNS)
        print(f"wrote {len(rows)} GEMM rows to {path}", file=sys.stderr)
    if what in ("attention", "all"):
        configs = data.get("attention", list(harness.DEFAULT_ATTENTION_CONFIGS))
        adt = "bf16" if dtype == "fp8" else dtype
        rows = harness.bench_attention(configs, device=device, dtype=adt, kv_dtype=kv_dtype, notes=notes,
                                       timing=harness.TimingPlan(reps=reps))
        path = out if what == "attention" else harness.split_path(out, "attention")
        harness.write_csv(rows, path, harness.ATTENTION_COLUMNS)
        print(f"wrote {len(rows)} attention rows to {path}", file=sys.stderr)
    for n in notes:
        print(f"note: {n}", file=sys.stderr)


def _read_filtered(path: Path, device: Optional[str], framework: Optional[str]):
    """Read a measured table and keep the rows of one device / framework (substring)."""
    from specplan.bench.families import check_measured, detect_family, read_measured

    df = read_measured(path)
    df = check_measured(df, detect_family(df.columns), str(path))  # blank / inf / zero cells: one line, before fitting
    if device and "device" in df:
        df = df[df["device"].astype(str).str.lower() == device.lower()]
    if framework and "framework" in df:
        df = df[df["framework"].astype(str).str.lower().str.contains(framework.lower(), regex=False)]
    return df


@app.command("calibrate")
def calibrate_cmd(
    measured: List[Path] = typer.Argument(..., help="Measured CSV(s) (.csv or .csv.gz): GEMM, attention, all-reduce."),
    hardware: str = typer.Option(..., "--hardware", "-H", help="Base hardware id or YAML."),
    output: Path = typer.Option(..., "-o", "--out", "--output", help="Calibrated profile YAML to write."),
    device: Optional[str] = typer.Option(None, "--device", help="Fit only rows of this device (e.g. h100-sxm)."),
    framework: Optional[str] = typer.Option(None, "--framework", help="Fit only rows whose framework contains this."),
    new_id: Optional[str] = typer.Option(None, "--id", help="id of the new profile (default: output file stem)."),
) -> None:
    """Fit the profile's efficiencies (least squares on log time) and write a new profile YAML."""
    from specplan.bench.calibrate import calibrate, profile_yaml
    from specplan.core.errors import SpecplanError
    from specplan.core.io import atomic_write_text, check_output_file
    from specplan.profiles.registry import load_hardware

    check_output_file(output)
    tables = [(p.name, _read_filtered(p, device, framework)) for p in measured]
    if all(df.empty for _, df in tables):
        raise SpecplanError("calibrate: no rows left after --device/--framework")
    name = output.name
    for ext in (".yaml", ".yml"):
        name = name.removesuffix(ext)
    hw = calibrate(tables, load_hardware(hardware), new_id or name)
    atomic_write_text(output, profile_yaml(hw))
    fits = hw.calibration["fits"]
    done = ", ".join(f"{k} ({v['rows']} rows)" for k, v in fits.items()) or "nothing"
    print(f"wrote {output}: fitted {done}")


@app.command("validate")
def validate_cmd(
    measured: Path = typer.Argument(..., help="Measured CSV (.csv or .csv.gz)."),
    hardware: str = typer.Option(..., "--hardware", "-H", help="Hardware id or YAML."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON (rows, mape, median_ape, p90_ape, by_kind, ...)."),
    out_dir: Optional[Path] = typer.Option(None, "-o", "--out", "--output", help="Write rows.csv, summary.json, scatter.png here."),
    device: Optional[str] = typer.Option(None, "--device", help="Only rows of this device."),
    framework: Optional[str] = typer.Option(None, "--framework", help="Only rows whose framework contains this."),
    kernel: Optional[str] = typer.Option(None, "--kernel", help="Only rows whose kernel contains this."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="Only this dtype (attention/MLA: the KV dtype)."),
    min_time_us: Optional[float] = typer.Option(None, "--min-time-us", help="Only rows measured at >= this (us)."),
    min_nk: Optional[int] = typer.Option(None, "--min-nk", help="GEMM: only N and K >= this."),
    max_m: Optional[int] = typer.Option(None, "--max-m", help="GEMM: only M <= this."),
    kv_exceeds_l2: bool = typer.Option(False, "--kv-exceeds-l2", help="Attention: only KV bytes above the L2."),
    keep_fallback: bool = typer.Option(False, "--keep-fallback", help="Attention: keep fallback-kernel rows."),
    engine: Optional[str] = typer.Option(None, "--engine", "-e", help="Price the rows as this engine runs them "
                                         "(id or YAML: its all-reduce family, eager collectives, MoE kernels, GEMM "
                                         "scales, attention families); 'auto': each row's framework column."),
) -> None:
    """Predict every measured row; print MAPE / median / p90 APE per kernel class, dtype and regime."""
    from specplan.bench.families import read_measured
    from specplan.validation.kernels import Filters, format_summary, validate, write_report_dir
    from specplan.core.io import check_output_dir
    from specplan.profiles.registry import load_hardware

    if out_dir is not None:
        check_output_dir(out_dir)
    hw = load_hardware(hardware)
    f = Filters(device, framework, kernel, dtype, min_time_us, min_nk, max_m, kv_exceeds_l2, not keep_fallback)
    eng = None
    if engine is not None:
        from specplan.bench.families import AUTO_ENGINE
        from specplan.profiles.registry import load_engine

        eng = AUTO_ENGINE if engine.strip().lower() == AUTO_ENGINE else load_engine(engine)
    rows, summary, fallback = validate(read_measured(measured), hw, f, source=str(measured), engine=eng)
    summary["by_kernel"] = by_kernel(rows)
    if out_dir is not None:
        write_report_dir(rows, summary, fallback, out_dir)
    if json_out:
        print_json(summary)
        return
    print(format_summary(summary))
    if len(summary["by_kernel"]) > 1:
        print(format_by_kernel(summary["by_kernel"]))
    if out_dir is not None:
        print(f"wrote {out_dir}/rows.csv, summary.json, scatter.png")


def by_kernel(rows) -> dict:
    """rows, MAPE, median and p90 APE (percent) per measured kernel (e.g. sdpa_flash vs triton_packed)."""
    from specplan.validation.kernels import metrics

    if "kernel" not in rows or rows.empty:
        return {}
    return {str(k): metrics(g["ape_pct"]) for k, g in rows.groupby(rows["kernel"].astype(str), sort=True)}


def format_by_kernel(table: dict) -> str:
    """Per-kernel lines, headed by a warning that the overall figures above mix the kernels."""
    lines = [f"this table mixes {len(table)} kernels ({', '.join(table)}): the overall MAPE above mixes them; "
             f"per kernel (or --kernel NAME):",
             f"{'kernel':<44}{'rows':>8}{'MAPE%':>8}{'med%':>8}{'p90%':>8}"]
    for k, m in table.items():
        lines.append(f"{k:<44}{m['rows']:>8}{m['mape']:>8.1f}{m['median_ape']:>8.1f}{m['p90_ape']:>8.1f}")
    return "\n".join(lines)

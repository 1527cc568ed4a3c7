"""`specplan validate-serving` (serving.md, magicdec.md) and `specplan validate-speculation` (speculation_load.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from specplan.cli.app import app


@app.command("validate-serving")
def validate_serving(
    outdir: Path = typer.Option(Path("docs/validation"), "-o", "--out", "--output", help="Folder of serving.md and magicdec.md."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Print each leave-group-out fold."),
) -> None:
    """Fit engine numbers on reference/serving_h100.csv (groups left out in turn), score every row; MagicDec."""
    from specplan.core.io import ready_output_dir

    ready_output_dir(outdir, "--out")  # at once, before the imports and the fitting (about 40 s)
    from specplan.validation.serving_report import write_reports

    say = (lambda s: print(s, file=sys.stderr, flush=True)) if progress else None
    for p in write_reports(outdir, progress=say):
        print(f"wrote {p}")


@app.command("validate-speculation")
def validate_speculation(
    out: Path = typer.Option(Path("docs/validation/speculation_load.md"), "-o", "--out", "--output", help="Report path."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Print each setup as it is priced."),
) -> None:
    """Score speculative speedups under load (reference/speculation_load/) with setups left out; write the report."""
    from specplan.validation.speculation_load import write_report

    say = (lambda s: print(s, file=sys.stderr, flush=True)) if progress else None
    print(f"wrote {write_report(out, progress=say)}")

"""`specplan validate-serving`: regenerate docs/validation/serving.md and magicdec.md."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from specplan.cli.app import app


@app.command("validate-serving")
def validate_serving(
    outdir: Path = typer.Option(Path("docs/validation"), "--out", "-o", help="Folder of serving.md and magicdec.md."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Print each leave-group-out fold."),
) -> None:
    """Fit engine numbers on reference/serving_h100.csv (groups left out in turn), score every row; MagicDec."""
    from specplan.core.io import ready_output_dir

    ready_output_dir(outdir, "--out")  # at once, before the imports and the minutes of fitting
    from specplan.validation.serving_report import write_reports

    say = (lambda s: print(s, file=sys.stderr, flush=True)) if progress else None
    for p in write_reports(outdir, progress=say):
        print(f"wrote {p}")

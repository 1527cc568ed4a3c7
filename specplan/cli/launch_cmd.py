"""`specplan launch RESULT.json --engine E`: the launch command / config of a saved `recommend --json` answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from specplan.cli.app import app
from specplan.core.errors import SpecplanError


@app.command("launch")
def launch(
    result: Path = typer.Argument(..., help="A saved `specplan recommend ... --json` answer."),
    engine: str = typer.Option(..., "--engine", "-e", help="vllm | sglang | trtllm | dynamo (a DynamoGraphDeployment: prefill and decode workers, or one "
                                "aggregated worker)."),
    backend: Optional[str] = typer.Option(None, "--backend", help="Engine of Dynamo's workers: sglang | vllm | "
                                          "trtllm (default: the answer's engine when it is one, else sglang)."),
    kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="KV-cache dtype when the answer does not say."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="Weight dtype when the answer does not say."),
    draft_model: Optional[str] = typer.Option(None, "--draft-model", help="Draft model id / HF repo."),
    json_out: bool = typer.Option(False, "--json", help="Print {engine, version, argv, files, notes} as JSON."),
) -> None:
    """Print the command (and config files) that run the answer's best point on an engine (docs/launch.md)."""
    from dataclasses import asdict

    from specplan.cli.output import print_json
    from specplan.planning.launch.emit import build, engine_notes, plan_from_answer, render

    try:
        answer = json.loads(result.read_text())
    except json.JSONDecodeError as exc:
        raise SpecplanError(f"{result}: not JSON ({exc.msg} at line {exc.lineno})") from None
    plan = plan_from_answer(answer, kv_dtype=kv_dtype, dtype=dtype, draft_model=draft_model)
    out = build(engine, plan, backend=backend)
    out.notes += engine_notes(answer.get("engine") if isinstance(answer.get("engine"), str) else None, out.engine,
                              out.files) if "engine" in answer else []
    if json_out:
        print_json(asdict(out))
        return
    print(render(out))


@app.command("validate-power")
def validate_power(
    outdir: Path = typer.Option(Path("docs/validation"), "-o", "--out", "--output", help="Folder of power.md."),
) -> None:
    """Fit H100's dynamic power split on public measured rows, score every H100 row (docs/validation/power.md)."""
    from specplan.validation.power import write_report

    print(f"wrote {write_report(outdir)}")

"""`specplan bench-speed`: time the commands users wait for (specplan.bench.speed) and write docs/performance.md."""

from __future__ import annotations

from typing import List, Optional

import typer

from specplan.cli.app import app


@app.command("bench-speed")
def bench_speed(
    only: Optional[List[str]] = typer.Option(None, "--only", help="Time only the commands whose name contains "
                                             "this (e.g. recommend, pareto, study); repeat."),
    repeat: int = typer.Option(3, "--repeat", min=1, max=100, help="Timed runs per command (the fewest CPU "
                               "seconds kept), after one warm-up run."),
    timeout_s: float = typer.Option(600.0, "--timeout", min=1.0, max=86400.0, help="Seconds allowed per run."),
    profiles: bool = typer.Option(True, "--profiles/--no-profiles", help="One cProfile run per command, its top "
                                  "entries in the report."),
    doc: bool = typer.Option(True, "--doc/--no-doc", help="Write the report into docs/performance.md (else print "
                             "it)."),
) -> None:
    """CPU seconds of the commands of issue 43 (cold recommend, step and serving pareto, recommend --gpus, the
    g-sweep study), each a ratio to a fixed numpy reference computation, with cProfile summaries."""
    from specplan.bench.speed import DOC, run

    text = run(list(only or []), repeat, timeout_s, profiles, DOC if doc else None)
    if not doc:
        print(text)

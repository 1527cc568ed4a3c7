"""Command-line interface: thin typer commands over the Python API (parse, call, print).

Each command family lives in its own module and registers on `app`; heavy libraries are imported inside
the commands that need them so that `specplan --help` starts fast.
"""

from __future__ import annotations

import sys

from specplan.cli.app import app
from specplan.errors import SpecplanError

# Register command modules (import for side effects).
from specplan.cli import profiles_cmd, step_cmd  # noqa: E402,F401

for _optional in ("spec_cmd", "sweep_cmd", "bench_cmd", "adaptive_cmd"):
    try:
        __import__(f"specplan.cli.{_optional}")
    except ModuleNotFoundError as _exc:  # a command family not written yet
        if _exc.name != f"specplan.cli.{_optional}":
            raise


def main() -> None:
    """Entry point: run the app; bad input is one line on stderr and exit code 2, never a traceback."""
    try:
        app(standalone_mode=True)
    except SpecplanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        print(f"error: {exc.filename}: {exc.strerror}", file=sys.stderr)
        sys.exit(2)

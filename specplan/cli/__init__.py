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


def _click_exceptions(name: str) -> tuple:
    """The click exception class `name` from click and from typer's vendored copy, whichever exist."""
    out = []
    for mod in ("click.exceptions", "typer._click.exceptions"):
        try:
            cls = getattr(__import__(mod, fromlist=[name]), name, None)
        except ImportError:
            continue
        if cls is not None:
            out.append(cls)
    return tuple(out)


def main() -> None:
    """Entry point: run the app; bad input is one line on stderr and exit code 2, never a traceback."""
    no_args, usage, abort = (_click_exceptions(n) for n in ("NoArgsIsHelpError", "UsageError", "Abort"))
    try:
        rc = app(standalone_mode=False)
        sys.exit(rc if isinstance(rc, int) else 0)
    except no_args as exc:  # bare `specplan` or a bare group: show the help
        ctx = getattr(exc, "ctx", None)
        print(ctx.get_help() if ctx else str(exc))
        sys.exit(0)
    except usage as exc:
        ctx = getattr(exc, "ctx", None)
        where = f"{ctx.command_path}: " if ctx else ""
        print(f"error: {where}{' '.join(exc.format_message().split())}", file=sys.stderr)
        sys.exit(2)
    except abort:
        print("error: aborted", file=sys.stderr)
        sys.exit(1)
    except SpecplanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except (FileNotFoundError, IsADirectoryError, PermissionError) as exc:
        print(f"error: {exc.filename}: {exc.strerror}", file=sys.stderr)
        sys.exit(2)

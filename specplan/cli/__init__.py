"""Command-line interface: thin typer commands over the Python API (parse, call, print).

Each command family lives in its own module and registers on `app`; heavy libraries are imported inside
the commands that need them so that `specplan --help` starts fast.
"""

from __future__ import annotations

import os
import sys


def _program_run() -> bool:
    """Whether this process is the `specplan` program (console script or `python -m specplan`), not a library
    user or a test importing the CLI (who get every command)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None:
        return spec.name in ("specplan.__main__", "specplan.cli.__main__")
    return bool(sys.argv) and sys.argv[0].replace("\\", "/").rsplit("/", 1)[-1] in ("specplan", "specplan.exe")


# One OpenBLAS thread in a run of the program, unless the user sets it (issue 43): specplan's numpy work is
# element-wise (no large matrix products), and OpenBLAS starting a thread per core costs about 0.06 CPU s at
# numpy's import (0.13 -> 0.07 s here), a sixth of the README's main job. Set before numpy is first imported.
if _program_run():
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from specplan.cli.app import app  # noqa: E402
from specplan.core.errors import SpecplanError  # noqa: E402

# Command modules, registered on `app` by importing them (for side effects).
COMMAND_MODULES = ("profiles_cmd", "step_cmd", "predict_cmd", "recommend_cmd", "sweep_cmd", "bench_cmd", "adaptive_cmd", "serving_cmd",
                   "validate_cmd", "launch_cmd", "speed_cmd")
# The module of each command (and group), so that a run of the `specplan` program imports only its command's
# module (a cold command pays for no other command's imports and typer builds one command, not all). A command
# missing here still works: its run imports every module (tests/cli/test_lazy_commands.py checks this map).
MODULE_OF = {"profiles": "profiles_cmd", "model": "profiles_cmd", "step": "step_cmd", "predict": "predict_cmd",
             "recommend": "recommend_cmd", "pareto": "sweep_cmd", "study": "sweep_cmd", "bench": "bench_cmd",
             "calibrate": "bench_cmd", "validate": "bench_cmd", "adaptive": "adaptive_cmd",
             "validate-serving": "serving_cmd", "validate-speculation": "serving_cmd",
             "validate-kernels": "validate_cmd", "validate-step": "validate_cmd", "validate-eagle3": "validate_cmd",
             "validate-parallel": "validate_cmd", "validate-round": "validate_cmd", "validate-inferencex": "validate_cmd",
             "launch": "launch_cmd",
             "validate-power": "launch_cmd", "bench-speed": "speed_cmd"}


def _modules_to_register() -> tuple:
    """The command modules to import: only the named command's in a program run that names a known command,
    else all of them (help, an unknown command, any import of the CLI as a library)."""
    if _program_run() and len(sys.argv) > 1 and sys.argv[1] in MODULE_OF:
        return (MODULE_OF[sys.argv[1]],)
    return COMMAND_MODULES


for _module in _modules_to_register():
    try:
        __import__(f"specplan.cli.{_module}")
    except ModuleNotFoundError as _exc:  # a command family not written yet
        if _exc.name != f"specplan.cli.{_module}":
            raise


def _float_bound(option: str):
    """A typer callback that refuses a non-finite or out-of-bounds value of a float option (one line, exit 2)."""

    def check(value):
        if value is None:
            return value
        from specplan.core.limits import check_option

        check_option(value, option)
        return value

    return check


def guard_float_options(typer_app) -> None:
    """Give every float option of every command a bounds check (specplan.core.limits.float_rule) before the
    command runs: no command sees inf, nan or a value past its quantity's bounds (issue 25)."""
    import inspect
    import typing

    import typer

    for cmd in typer_app.registered_commands:
        fn = cmd.callback
        hints = typing.get_type_hints(fn, include_extras=True)
        for name, prm in inspect.signature(fn).parameters.items():
            hint, info = hints.get(name), prm.default
            if typing.get_origin(hint) is typing.Annotated:
                hint, *meta = typing.get_args(hint)
                info = next((m for m in meta if isinstance(m, typer.models.OptionInfo)), info)
            if not isinstance(info, typer.models.OptionInfo) or info.callback is not None:
                continue
            if float not in [t for t in (typing.get_args(hint) or (hint,)) if t is not type(None)]:
                continue
            decls = [d for d in (*info.param_decls, info.default) if isinstance(d, str) and d.startswith("--")]
            info.callback = _float_bound(decls[0] if decls else f"--{name.replace('_', '-')}")
    for group in typer_app.registered_groups:
        guard_float_options(group.typer_instance)


guard_float_options(app)


def _click_exceptions(name: str) -> tuple:
    """The click exception class `name` from click and from typer's vendored copy, whichever exist (click only
    when something imported it: a click never imported raises nothing, and importing it costs a cold command;
    a typer without a vendored copy has imported click by now)."""
    out = []
    for mod in ("click.exceptions", "typer._click.exceptions"):
        if mod == "click.exceptions" and "click" not in sys.modules:
            continue
        try:
            cls = getattr(__import__(mod, fromlist=[name]), name, None)
        except ImportError:
            continue
        if cls is not None:
            out.append(cls)
    return tuple(out)


def _out_of_memory_line(argv: list) -> str:
    """The out-of-memory line, naming the option of the largest number on the command line (the likeliest cause:
    a size, a count, a length) so the user knows what to make smaller."""
    best = None
    for opt, val in zip(argv, argv[1:]):
        if not (isinstance(opt, str) and opt.startswith("-")) or opt.startswith("---"):
            continue
        for part in str(val).split(","):
            low = part.strip().lower()
            try:
                x = float(low[:-1]) * 1024 if low.endswith("k") else float(low)
            except ValueError:
                continue
            if x == x and (best is None or abs(x) > best[0]):
                best = (abs(x), opt.split("=")[0], part.strip())
    if best is None or best[0] < 2:
        return "out of memory: the grid is too large; use fewer batch, D, context or TP values"
    return (f"out of memory: the work is too large for this machine; the largest value given is {best[1]} "
            f"{best[2]}: use a smaller one (or fewer batch, D, context or TP values)")


def _click_group():
    """The click group behind `app` (built by typer)."""
    import typer.main

    return typer.main.get_command(app)


def _terminated(signum, frame):
    """SIGTERM (a killed run) unwinds like Ctrl-C, so temporary files are removed on the way out."""
    raise KeyboardInterrupt


def main() -> None:
    """Entry point: run the app; bad input is one line on stderr and exit code 2, never a traceback.

    Ctrl-C and SIGTERM end the run with one line and exit code 130 after the atomic writers removed their
    temporary files."""
    import signal

    no_args, usage, abort = (_click_exceptions(n) for n in ("NoArgsIsHelpError", "UsageError", "Abort"))
    try:
        old_term = signal.signal(signal.SIGTERM, _terminated)
    except ValueError:  # not the main thread
        old_term = None
    try:
        from specplan.cli.foreign import foreign_flag_error

        foreign = foreign_flag_error(sys.argv[1:], _click_group)
        if foreign:
            raise SpecplanError(foreign)
        rc = app(standalone_mode=False)
        if rc == 130:  # click turns Ctrl-C (and our SIGTERM) into exit code 130, silently
            print("error: interrupted (no partial output left behind)", file=sys.stderr)
        sys.exit(rc if isinstance(rc, int) else 0)
    except no_args as exc:  # bare `specplan` or a bare group: show the help
        ctx = getattr(exc, "ctx", None)
        print(ctx.get_help() if ctx else str(exc))
        sys.exit(0)
    except usage as exc:
        ctx = getattr(exc, "ctx", None)
        where = f"{ctx.command_path}: " if ctx else ""
        print(f"error: {where}{' '.join(exc.format_message().split())}"[:2000], file=sys.stderr)
        sys.exit(2)
    except abort as exc:  # click turns Ctrl-C (and our SIGTERM) into Abort
        if isinstance(exc.__context__, KeyboardInterrupt):
            print("error: interrupted (no partial output left behind)", file=sys.stderr)
            sys.exit(130)
        print("error: aborted", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("error: interrupted (no partial output left behind)", file=sys.stderr)
        sys.exit(130)
    except SpecplanError as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        sys.exit(2)
    except OSError as exc:  # a path the file system refuses: missing, a folder, too long, under a file, ...
        from specplan.core.errors import brief

        name = brief(str(exc.filename), 200) if exc.filename is not None else "file"
        print(f"error: {name}: {exc.strerror or exc}", file=sys.stderr)
        sys.exit(2)
    except MemoryError:
        print(f"error: {_out_of_memory_line(sys.argv[1:])}"[:2000], file=sys.stderr)
        sys.exit(2)
    finally:
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)

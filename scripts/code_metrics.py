"""Count the structure limits of issue #37 with an AST walk: wide functions, string-key subscripts, long CLI modules, long bodies."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "specplan"
TABLE_FOLDERS = ("bench", "plots", "study", "planning/launch")
PARAM_EXEMPT = ("cli", "validation")
BODY_EXEMPT = ("bench", "plots")
MAX_PARAMS, MAX_BODY_LINES, MAX_CLI_LINES = 10, 80, 400


def _rel(path: Path) -> str:
    return path.relative_to(PKG).as_posix()


def _under(rel: str, folders) -> bool:
    return any(rel == f or rel.startswith(f + "/") for f in folders)


def _n_params(fn) -> int:
    a = fn.args
    return len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None) \
        - (1 if a.args and a.args[0].arg in ("self", "cls") else 0)


def _body_lines(fn) -> int:
    first = fn.body[0]
    if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant) and len(fn.body) > 1:
        first = fn.body[1]
    return fn.end_lineno - first.lineno + 1


def _is_triton(fn) -> bool:
    return any("jit" in ast.unparse(d) for d in fn.decorator_list)


def _string_subscripts(tree) -> int:
    n = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            n += 1
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            n += 1
    return n


def measure(pkg: Path = PKG):
    """Return (wide functions, string subscripts outside cli/, validation/ and the table folders, long CLI modules, long bodies) for `pkg`."""
    wide, long_bodies, long_cli, subs = [], [], [], 0
    for path in sorted(pkg.rglob("*.py")):
        rel = _rel(path)
        text = path.read_text()
        tree = ast.parse(text)
        if rel.startswith("cli/") and len(text.splitlines()) > MAX_CLI_LINES:
            long_cli.append((rel, len(text.splitlines())))
        if not _under(rel, TABLE_FOLDERS + PARAM_EXEMPT):
            subs += _string_subscripts(tree)
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or _is_triton(fn):
                continue
            if not _under(rel, PARAM_EXEMPT) and _n_params(fn) > MAX_PARAMS:
                wide.append((rel, fn.name, fn.lineno, _n_params(fn)))
            if not _under(rel, BODY_EXEMPT) and _body_lines(fn) > MAX_BODY_LINES:
                long_bodies.append((rel, fn.name, fn.lineno, _body_lines(fn)))
    return wide, subs, long_cli, long_bodies


def main() -> int:
    wide, subs, long_cli, long_bodies = measure()
    verbose = "-v" in sys.argv
    print(f"functions over {MAX_PARAMS} parameters (outside cli/, validation/): {len(wide)}")
    if verbose:
        for w in sorted(wide, key=lambda w: -w[3]):
            print(f"  {w[0]}:{w[2]} {w[1]} {w[3]}")
    print(f"string-constant subscripts outside {', '.join(PARAM_EXEMPT + TABLE_FOLDERS)}: {subs}")
    print(f"cli modules over {MAX_CLI_LINES} lines: {len(long_cli)}")
    for m in long_cli:
        print(f"  {m[0]} {m[1]}")
    print(f"function bodies over {MAX_BODY_LINES} lines (outside bench/, plots/): {len(long_bodies)}")
    if verbose:
        for b in sorted(long_bodies, key=lambda b: -b[3]):
            print(f"  {b[0]}:{b[2]} {b[1]} {b[3]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

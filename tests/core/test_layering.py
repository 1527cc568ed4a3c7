"""The one-way layering of the package as a checked contract (docs/architecture.md): a module imports only from
its own folder and the folders below it in LAYERS. Imports inside functions count too (the CLI's lazy imports)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "specplan"

# Bottom to top; the pipeline as the folder list reads.
LAYERS = ["core", "profiles", "costs", "model", "speculation", "serving", "planning", "bench", "validation",
          "study", "plots", "adaptive", "docgen", "api", "cli", "__main__"]
RANK = {name: i for i, name in enumerate(LAYERS)}


def _room(module: str) -> str:
    """The folder (or top-level module) a dotted specplan module lives in."""
    parts = module.split(".")
    return "specplan" if len(parts) == 1 else parts[1]


def _absolute(path: Path, pkg: Path, level: int, module: str | None) -> str:
    """The dotted module a relative import `from .module` / `from ..module` in `path` names."""
    parts = list(path.relative_to(pkg.parent).with_suffix("").parts)
    package = parts if parts[-1] == "__init__" else parts[:-1]
    package = [p for p in package if p != "__init__"]
    base = package[: len(package) - (level - 1)] if level > 1 else package
    return ".".join(base + ([module] if module else []))


def _string_import(node: ast.Call) -> str | None:
    """The module an `importlib.import_module("...")` or `__import__("...")` call names, where its first argument
    is a string or an f-string that starts with a constant (`f"specplan.cli.{name}"` gives `specplan.cli.`)."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name not in ("import_module", "__import__") or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value).rstrip(".")
    return None


def _imports(path: Path, pkg: Path = PKG) -> list[str]:
    """Every specplan module a file imports, at any depth: absolute and relative imports and imports by string."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            module = node.module if node.level == 0 else _absolute(path, pkg, node.level, node.module)
            if not (module or "").startswith("specplan"):
                continue
            if module == "specplan" or (node.level and not node.module):
                out += [f"{module}.{a.name}" for a in node.names]
            else:
                out.append(module)
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.startswith("specplan")]
        elif isinstance(node, ast.Call):
            target = _string_import(node)
            if target and target.startswith("specplan"):
                out.append(target)
    return out


def _violations(pkg: Path = PKG) -> list[str]:
    bad = []
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg.parent).with_suffix("")
        src = _room(".".join(rel.parts))
        if src in ("specplan", "__init__"):
            continue
        for target in _imports(path, pkg):
            dst = _room(target)
            if dst in ("specplan", src):
                continue
            if dst not in RANK or src not in RANK:
                bad.append(f"{rel}: {target} (a folder missing from LAYERS: place it in the pipeline)")
            elif RANK[dst] > RANK[src]:
                bad.append(f"{rel} ({src}) imports {target} ({dst}), a higher layer")
    return bad


def test_no_lower_layer_imports_a_higher_one():
    assert _violations() == []


# Folders a figure module may not import (issue 37: plots draw what planning computed; they compute nothing). The
# layers allow them (plots sits above planning); this narrower rule keeps plots/ to core/, study/ and itself.
DRAW_ONLY = {"plots": ("planning", "model", "costs", "speculation", "serving", "profiles")}


def _computing_imports(pkg: Path = PKG) -> list[str]:
    """Imports of a computing folder by a draw-only folder (DRAW_ONLY), at any depth, relative and by string too."""
    bad = []
    for room, banned in DRAW_ONLY.items():
        for path in sorted((pkg / room).rglob("*.py")):
            rel = path.relative_to(pkg.parent).with_suffix("")
            bad += [f"{rel} imports {t}: {room}/ draws, {_room(t)}/ computes" for t in _imports(path, pkg)
                    if _room(t) in banned]
    return bad


def test_plots_import_no_computing_layer():
    """plots/ receives numbers (planning/figures.py, the grid and frontier tables) and imports none of the folders
    that compute them."""
    assert _computing_imports() == []


def test_the_draw_only_rule_catches_a_plot_that_computes(tmp_path):
    """A planted plots module importing planning inside a function, costs relatively and profiles by string is
    reported three times; importing core and another plots module is not."""
    source = ("import importlib\nfrom specplan.core.io import atomic_write_bytes\nfrom .canvas import _figure\n\n"
              "def f(df):\n    from specplan.planning.frontier import frontier\n"
              "    from ..costs.attention import attention_time_s\n"
              "    return importlib.import_module('specplan.profiles.registry')\n")
    fake = tmp_path / "specplan" / "plots"
    fake.mkdir(parents=True)
    (fake / "bad.py").write_text(source)
    assert _computing_imports(tmp_path / "specplan") == [
        "specplan/plots/bad imports specplan.planning.frontier: plots/ draws, planning/ computes",
        "specplan/plots/bad imports specplan.costs.attention: plots/ draws, costs/ computes",
        "specplan/plots/bad imports specplan.profiles.registry: plots/ draws, profiles/ computes"]


def test_every_folder_has_a_place_in_the_layers():
    rooms = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    rooms |= {p.stem for p in PKG.glob("*.py") if p.stem != "__init__"}
    assert rooms <= set(LAYERS), rooms - set(LAYERS)


def _planted(tmp_path, folder: str, source: str) -> list[str]:
    """The checker's findings on a package holding one planted module, specplan/<folder>/bad.py."""
    fake = tmp_path / "specplan" / folder
    fake.mkdir(parents=True)
    (fake / "bad.py").write_text(source)
    return _violations(tmp_path / "specplan")


def test_the_contract_catches_an_upward_import(tmp_path):
    """The checker itself: a costs module importing planning inside a function is reported."""
    assert _planted(tmp_path, "costs", "def f():\n    from specplan.planning.sweep import sweep\n") == [
        "specplan/costs/bad (costs) imports specplan.planning.sweep (planning), a higher layer"]


def test_at_most_eight_loose_modules():
    loose = [p.name for p in PKG.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(loose) <= 8, loose


def test_the_contract_catches_a_relative_upward_import(tmp_path):
    """A relative import climbing out of its folder (`from ..planning import sweep` in costs/) is reported."""
    assert _planted(tmp_path, "costs", "from ..planning.sweep import sweep\nfrom .gemm import gemm_time_s\n") == [
        "specplan/costs/bad (costs) imports specplan.planning.sweep (planning), a higher layer"]


def test_the_contract_catches_an_import_by_string(tmp_path):
    """`importlib.import_module("specplan.cli...")` and `__import__(f"specplan.planning.{x}")` count as imports."""
    source = ("import importlib\n\ndef f(x):\n    importlib.import_module('specplan.cli.app')\n"
              "    return __import__(f'specplan.planning.{x}')\n")
    assert _planted(tmp_path, "model", source) == [
        "specplan/model/bad (model) imports specplan.cli.app (cli), a higher layer",
        "specplan/model/bad (model) imports specplan.planning (planning), a higher layer"]


def test_relative_imports_resolve_to_their_folder():
    """bench/harness.py's `from .timing import measure` is specplan.bench.timing; `from .. import x` climbs."""
    harness = PKG / "bench" / "harness.py"
    assert _absolute(harness, PKG, 1, "timing") == "specplan.bench.timing"
    assert _absolute(harness, PKG, 2, "core") == "specplan.core"
    assert _absolute(PKG / "bench" / "__init__.py", PKG, 1, "timing") == "specplan.bench.timing"


def test_no_old_path_aliases():
    """The pre-layout import paths are gone (issue 37): `specplan.sweep` no longer imports."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("specplan.sweep")
    assert not (PKG / "core" / "aliases.py").exists()

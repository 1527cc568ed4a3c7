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


def _imports(path: Path) -> list[str]:
    """Every specplan module a file imports, at any depth."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("specplan"):
            out += [node.module] if node.module != "specplan" else [f"specplan.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.startswith("specplan")]
    return out


def _violations(pkg: Path = PKG) -> list[str]:
    bad = []
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg.parent).with_suffix("")
        src = _room(".".join(rel.parts))
        if src in ("specplan", "__init__"):
            continue
        for target in _imports(path):
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


def test_every_folder_has_a_place_in_the_layers():
    rooms = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    rooms |= {p.stem for p in PKG.glob("*.py") if p.stem != "__init__"}
    assert rooms <= set(LAYERS), rooms - set(LAYERS)


def test_the_contract_catches_an_upward_import(tmp_path):
    """The checker itself: a costs module importing planning inside a function is reported."""
    fake = tmp_path / "specplan" / "costs"
    fake.mkdir(parents=True)
    (fake / "bad.py").write_text("def f():\n    from specplan.planning.sweep import sweep\n")
    assert _violations(tmp_path / "specplan") == [
        "specplan/costs/bad (costs) imports specplan.planning.sweep (planning), a higher layer"]


def test_at_most_eight_loose_modules():
    loose = [p.name for p in PKG.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(loose) <= 8, loose


OLD_PATHS = ["specplan.errors", "specplan.limits", "specplan.loader", "specplan.io", "specplan.progress",
             "specplan.dtypes", "specplan.tables", "specplan.shapes", "specplan.precision", "specplan.step",
             "specplan.memory", "specplan.parallel", "specplan.acceptance_spec", "specplan.predict",
             "specplan.recommend", "specplan.recommend_serving", "specplan.capacity", "specplan.sweep",
             "specplan.frontier", "specplan.study_report", "specplan.study_plots", "specplan.adaptive_report",
             "specplan.parallel_validation", "specplan.serving.validation", "specplan.serving.report",
             "specplan.serving.magicdec", "specplan.bench.validate", "specplan.bench.framework_fit"]


@pytest.mark.parametrize("old", OLD_PATHS)
def test_old_import_paths_still_work(old):
    """Paths from before the move (README, notebooks, users' code) give the moved module itself, for one release."""
    from specplan.core.aliases import OLD_TO_NEW

    mod = importlib.import_module(old)
    assert mod is importlib.import_module(OLD_TO_NEW[old])
    assert not (PKG / (old.split(".", 1)[1].replace(".", "/") + ".py")).exists()


def test_old_from_imports_of_the_readme_work():
    from specplan.sweep import sweep  # noqa: F401  (README's API section before the move)
    from specplan.frontier import frontier  # noqa: F401
    from specplan.recommend import recommend  # noqa: F401
    from specplan.step import step_time  # noqa: F401
    from specplan.study import load_study, run_study  # noqa: F401
    from specplan import sweep as sweep_module
    from specplan.planning import sweep as new

    assert sweep_module is new

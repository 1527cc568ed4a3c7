"""Old module paths (before the one-folder-per-concept layout) kept importable for one release.

`import specplan.sweep` gives the module `specplan.planning.sweep` itself (the same object, so monkeypatching
either name patches both). Registered by specplan/__init__.py as a meta-path finder; nothing is imported until
an old name is asked for."""

from __future__ import annotations

import importlib
import importlib.machinery
import sys

OLD_TO_NEW = {
    "specplan.errors": "specplan.core.errors", "specplan.limits": "specplan.core.limits",
    "specplan.loader": "specplan.core.loader", "specplan.io": "specplan.core.io",
    "specplan.progress": "specplan.core.progress", "specplan.dtypes": "specplan.core.dtypes",
    "specplan.tables": "specplan.core.tables",
    "specplan.shapes": "specplan.costs.shapes", "specplan.precision": "specplan.costs.precision",
    "specplan.step": "specplan.model.step", "specplan.memory": "specplan.model.memory",
    "specplan.parallel": "specplan.model.parallel",
    "specplan.acceptance_spec": "specplan.speculation.acceptance_spec",
    "specplan.predict": "specplan.planning.predict", "specplan.recommend": "specplan.planning.recommend",
    "specplan.recommend_serving": "specplan.planning.recommend_serving",
    "specplan.capacity": "specplan.planning.capacity", "specplan.sweep": "specplan.planning.sweep",
    "specplan.frontier": "specplan.planning.frontier",
    "specplan.study_report": "specplan.study.report", "specplan.study_plots": "specplan.plots.study_plots",
    "specplan.adaptive_report": "specplan.adaptive.report",
    "specplan.parallel_validation": "specplan.validation.parallel",
    "specplan.serving.validation": "specplan.validation.serving",
    "specplan.serving.report": "specplan.validation.serving_report",
    "specplan.serving.magicdec": "specplan.validation.magicdec",
    "specplan.bench.validate": "specplan.validation.kernels",
    "specplan.bench.framework_fit": "specplan.validation.framework_fit",
}


class _AliasLoader:
    """Loads an old name as the already-importable module under its new name."""

    def __init__(self, new: str):
        self.new = new

    def create_module(self, spec):
        return importlib.import_module(self.new)

    def exec_module(self, module) -> None:
        return None


class _AliasFinder:
    """Finds the old module names of OLD_TO_NEW."""

    def find_spec(self, fullname, path=None, target=None):
        new = OLD_TO_NEW.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(new))


def register() -> None:
    """Put the alias finder on sys.meta_path once."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.append(_AliasFinder())

"""The quickstart notebook runs top to bottom (skipped when nbclient or a kernel is missing)."""

from __future__ import annotations

from pathlib import Path

import pytest

NB = Path(__file__).resolve().parents[2] / "notebooks" / "quickstart.ipynb"


def test_quickstart_notebook_runs(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.read(NB, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = "".join(str(o) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "grid points" in outputs and "ms per step" in outputs

"""validate: per-kernel figures for a CSV that mixes kernels; a whole-step CSV points to scripts/validate_step.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from specplan.bench.families import detect_family
from specplan.core.errors import SpecplanError

REPO = Path(__file__).resolve().parents[2]
QLEN = REPO / "bench_data" / "h200_attention_qlen.csv"
STEP = REPO / "bench_data" / "h200_step_llama8b.csv"


def run(*args):
    return subprocess.run([sys.executable, "-m", "specplan", *args], capture_output=True, text=True)


def test_mixed_kernels_get_their_own_figures(tmp_path):
    p = run("validate", str(QLEN), "-H", "h200-sxm")
    assert p.returncode == 0, p.stderr
    assert "mixes 2 kernels (sdpa_flash, triton_packed)" in p.stdout
    lines = {x.split()[0]: x.split() for x in p.stdout.splitlines() if x.startswith(("sdpa_flash", "triton_packed"))}
    assert set(lines) == {"sdpa_flash", "triton_packed"}
    j = json.loads(run("validate", str(QLEN), "-H", "h200-sxm", "--json").stdout)
    assert set(j["by_kernel"]) == {"sdpa_flash", "triton_packed"}
    assert sum(v["rows"] for v in j["by_kernel"].values()) == j["rows"]
    assert int(lines["sdpa_flash"][1]) == j["by_kernel"]["sdpa_flash"]["rows"]
    p = run("validate", str(QLEN), "-H", "h200-sxm", "-o", str(tmp_path))
    assert "by_kernel" in json.loads((tmp_path / "summary.json").read_text())


def test_one_kernel_prints_no_kernel_block():
    p = run("validate", str(QLEN), "-H", "h200-sxm", "--kernel", "sdpa_flash")
    assert p.returncode == 0, p.stderr
    assert "mixes" not in p.stdout


def test_step_csv_points_to_validate_step():
    p = run("validate", str(STEP), "-H", "h200-sxm")
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and "scripts/validate_step.py" in p.stderr and "whole-step CSV" in p.stderr
    with pytest.raises(SpecplanError, match="scripts/validate_step.py"):
        detect_family(["foo", "bar"])
    assert detect_family(pd.read_csv(QLEN, nrows=1).columns) == "attention"

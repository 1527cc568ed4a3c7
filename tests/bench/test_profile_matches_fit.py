"""The built-in H100 profile carries the efficiencies the committed validation report fitted (no drift)."""

import json
from pathlib import Path

import pytest

from specplan.profiles.registry import load_hardware

ROOT = Path(__file__).resolve().parents[2]


def test_h100_profile_equals_the_committed_fit():
    fit = json.loads((ROOT / "docs" / "validation" / "h100_fit.json").read_text())
    h = load_hardware("h100-sxm")
    assert h.kernel_overhead_s == pytest.approx(fit["gemm"]["kernel_overhead_s"], rel=0.01)
    assert h.attention.mem_bw_fraction == pytest.approx(fit["attention"]["mem_bw_fraction"], abs=0.002)
    assert h.attention.cta_overhead_s == pytest.approx(fit["attention"]["cta_overhead_s"], rel=0.01)
    for k in ("custom_bw_fraction", "nccl_bw_fraction"):
        assert getattr(h.allreduce, k) == pytest.approx(fit["allreduce"][k], abs=0.002), k

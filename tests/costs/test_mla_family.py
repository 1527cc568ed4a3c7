"""Issue 10 item 1: MLA decode attention uses FlashMLA's 64-row tile and the efficiencies fitted on the MLA table
(engine_profiles/kernels/mla-latent.yaml); checked against a hand-computed byte total and the committed fit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from specplan.profiles.registry import load_hardware, load_kernel_family, load_model
from specplan.model.step import step_time
from specplan.costs.precision import Dtypes

ROOT = Path(__file__).resolve().parents[2]


def test_mla_family_is_64_rows_with_the_committed_fit():
    fam = load_kernel_family("mla-latent")
    fit = json.loads((ROOT / "docs" / "validation" / "h100_fit.json").read_text())["mla"]
    assert fam.tile_rows == fit["tile_rows"] == 64
    assert fam.mem_bw_fraction == pytest.approx(fit["mem_bw_fraction"], rel=0.01)
    assert fam.compute_fraction == pytest.approx(fit["compute_fraction"], rel=0.01)


def _deepseek_h200_by_hand(tile_rows: int, compute_fraction: float, bw_fraction: float) -> float:
    """DeepSeek-V3 on H200, TP 8 (16 heads per GPU over one latent KV head), B 16, 32K, q_len 1, bf16 KV, per
    layer: memory = (16 x 32769 x 576 x 2 B latent + rope KV + Q in / O out 16 x 16 x (576 + 512) x 2 B) over
    4.8 TB/s x bw_fraction + one wave of 16 CTAs (1.33 us); compute = 16 sequences x one padded tile of
    `tile_rows` rows x 2 x 32769 x (576 + 512) FLOPs over 989.4 TFLOPS x compute_fraction; the larger of the two."""
    memory = (16 * 32769 * 576 * 2.0 + 16 * 16 * (576 + 512) * 2.0) / (4.8e12 * bw_fraction) + 1.33e-6
    compute = 16 * 1 * 2.0 * tile_rows * 32769 * (576 + 512) / (989.4e12 * compute_fraction)
    return max(memory, compute)


def test_deepseek_v3_h200_attention_by_hand():
    fam = load_kernel_family("mla-latent")
    hw = load_hardware("h200-sxm")
    assert hw.mem_bandwidth_bytes_s == 4.8e12 and hw.attention.cta_overhead_s == 1.33e-6
    assert hw.peak_flops["bf16"] == 989.4e12
    r = step_time("deepseek-v3", hw, 8, 16, 1, 32768, precision=Dtypes(kv_dtype="bf16"))
    after = _deepseek_h200_by_hand(64, fam.compute_fraction, fam.mem_bw_fraction)
    assert float(r.breakdown_s["attention"]) == pytest.approx(61 * after, rel=1e-9)
    # the 128-row tile at the schema-default 0.45 (the old pricing) is compute-bound at about twice the KV read
    before = _deepseek_h200_by_hand(128, 0.45, hw.attention.mem_bw_fraction)
    assert 0.45 < after / before < 0.65


def test_mla_tile_rule_is_64_over_g():
    from specplan.speculation.guidelines import attention_tile_rows

    m = load_model("deepseek-v3")
    hw = load_hardware("h200-sxm")
    assert attention_tile_rows(m, hw) == 64
    # verify rows G·(1 + D) = 16·(1 + D): flat up to D = 64/16 − 1 = 3, a second tile from D = 4 (compute-bound)
    t = [float(step_time(m, hw, 8, 64, 1 + d, 32768, precision=Dtypes(kv_dtype="bf16")).breakdown_s["attention"]) for d in range(8)]
    assert t[3] < 1.05 * t[0]
    assert t[4] > 1.3 * t[3]
    assert np.all(np.diff(t) > -1e-12)

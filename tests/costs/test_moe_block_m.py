"""The row tile of an engine's MoE kernel picked from the batch (EngineProfile.moe_block_m): SGLang 0.5.12 runs
gpt-oss's MXFP4 experts on Hopper through triton_kernels' matmul_ogs, whose block_m follows the mean rows per expert
(costs/moe.py triton_kernels_block_m); a verify of many tokens per sequence pays its padded rows in compute."""

import math

import numpy as np
import pytest

from specplan.costs.moe import (ExpertLayer, MoeKernel, grouped_gemm_compute_s, moe_experts_cost,
                                triton_kernels_block_m)
from specplan.profiles.engine import EngineProfile, engine_hardware
from specplan.profiles.registry import load_engine, load_hardware


def test_triton_kernels_block_m_by_hand():
    """opt_flags.py make_default_opt_flags_nvidia over 128 experts: t = max(1, rows // 128); t <= 64:
    max(16, min(next_pow2(2 t), 64)); else max(16, min(next_pow2(t), 128))."""
    rows = [4, 1024, 1152, 2560, 8192, 12800, 40000]
    # t:     1,    8,    9,   20,   64,   100,   312
    # 2t:    2,   16,   18,   40,  128 (-> 64), t: 100 -> 128, 312 -> 512 -> 128
    np.testing.assert_array_equal(triton_kernels_block_m(rows, 128), [16, 16, 32, 64, 64, 128, 128])


def test_a_given_tile_replaces_the_fitted_tile_shapes():
    """gpt-oss's gate_up GEMM (N 5760, K 2880) over 128 experts with 20 rows each (a block-10 verify of 64
    sequences: 640 tokens x top-4 = 2560 rows): 128 x ceil(20 / 64) x ceil(5760 / 128) = 5760 tiles of 64 x 128, in
    ceil(5760 / 132) = 44 waves, each 2 x 64 x 128 x 2880 FLOP at 0.6 of an SM's bf16 share; the fitted 32-row tile
    has as many tiles of half the rows: half the time."""
    hw = load_hardware("h100-sxm")
    assert hw.sm_count == 132 and hw.moe.tile_rows == [32] and hw.moe.tile_cols == [128]
    per_sm = hw.peak("bf16") / 132 * 0.6
    hand = 44 * 2.0 * 64 * 128 * 2880 / per_sm
    got = grouped_gemm_compute_s(hw, "bf16", 0.6, 128.0, 2560.0, (5760, 2880), tile_rows=64.0)
    assert float(got) == pytest.approx(hand, rel=1e-12)
    fitted = grouped_gemm_compute_s(hw, "bf16", 0.6, 128.0, 2560.0, (5760, 2880))
    assert float(got / fitted) == pytest.approx(2.0, rel=1e-12)
    assert math.ceil(128 * math.ceil(20 / 64) * math.ceil(5760 / 128) / 132) == 44


def test_moe_layer_prices_the_triton_kernels_tile():
    """One gpt-oss MoE layer (hidden 2880, expert FFN 2880, 128 experts, top-4) at 640 tokens: 2560 rows over the
    128 x (1 - (1 - 4/128)^640) = 128.0 touched experts, 20 rows each: block_m 64, so gate_up (N 5760) and down
    (N 2880) run 44 and ceil(128 x 23 / 132) = 23 waves of 64 x 128 tiles; the layer is compute-bound there and
    costs more than with the fitted 32-row tile. At 64 tokens (t = 2: block_m 16) the tile is half the fitted one."""
    hw = load_hardware("h100-sxm")
    layer = ExpertLayer(2880, 2880, 128, 4)
    per_sm = hw.peak("bf16") / 132 * hw.moe.compute_fraction["bf16"]
    hand = (44 + 23) * 2.0 * 64 * 128 * 2880 / per_sm
    e = 128 * (1 - (1 - 4 / 128) ** 640)
    got = grouped_gemm_compute_s(hw, "bf16", hw.moe.compute_fraction["bf16"], e, 2560.0, (5760, 2880), (2880, 2880),
                                 tile_rows=triton_kernels_block_m(2560.0, 128))
    assert float(got) == pytest.approx(hand, rel=1e-9)
    tk = moe_experts_cost(hw, 640.0, layer, "mxfp4", "bf16", kernel=MoeKernel(13, block_m="triton_kernels"))
    fit = moe_experts_cost(hw, 640.0, layer, "mxfp4", "bf16", kernel=MoeKernel(13))
    assert float(tk.compute_s) > float(tk.memory_s) and float(tk.time_s) > 1.2 * float(fit.time_s)
    small_tk = moe_experts_cost(hw, 64.0, layer, "mxfp4", "bf16", kernel=MoeKernel(13, block_m="triton_kernels"))
    small_fit = moe_experts_cost(hw, 64.0, layer, "mxfp4", "bf16", kernel=MoeKernel(13))
    assert float(small_tk.time_s) < float(small_fit.time_s)  # fewer padded rows, the same weights read
    # SGLang runs triton_kernels only at ep_size 1 (srt/server_args.py): under EP the fitted tiles stay
    ep2 = moe_experts_cost(hw, 640.0, layer, "mxfp4", "bf16", ep=2, kernel=MoeKernel(13, block_m="triton_kernels"))
    assert float(ep2.time_s) == float(moe_experts_cost(hw, 640.0, layer, "mxfp4", "bf16", ep=2,
                                                       kernel=MoeKernel(13)).time_s)


def test_sglang_0_5_12_runs_mxfp4_experts_with_the_rule_on_hopper_only():
    h100, a100 = load_hardware("h100-sxm"), load_hardware("a100-sxm-80gb")
    old = load_engine("sglang-0.5.12")
    assert engine_hardware(h100, old).moe_block_m == {"mxfp4": "triton_kernels"}
    assert engine_hardware(a100, old).moe_block_m == {}
    assert engine_hardware(h100, load_engine("sglang")).moe_block_m == {}  # 0.5.23 not read: the fitted tiles
    d = old.model_dump()
    with pytest.raises(ValueError, match="moe_block_m.hopper.mxfp4: one of triton_kernels"):
        EngineProfile.model_validate({**d, "moe_block_m": {"hopper": {"mxfp4": "cutlass"}}})
    with pytest.raises(ValueError, match="missing for moe_block_m"):
        EngineProfile.model_validate({**d, "sources": {k: v for k, v in d["sources"].items() if k != "moe_block_m"}})


def test_triton_kernels_tiles_run_at_the_triton_fraction_by_hand():
    """The layer above at 640 tokens as triton_kernels runs it: (44 + 23) waves of 64 x 128 tiles, each
    2 x 64 x 128 x 2880 FLOP at 0.302 of an SM's bf16 share (h100-sxm moe.triton_compute_fraction, fitted on vLLM's
    Triton fused-MoE rows) where the cutlass rows' 0.600 priced it before: 1.40 ms against 0.70 ms of grouped-GEMM
    compute, and the layer (compute-bound over its 0.62 ms of reads) 1.69 x as long."""
    from specplan.costs.moe import tile_fraction

    hw = load_hardware("h100-sxm")
    assert hw.moe.triton_compute_fraction == {"bf16": 0.302} and hw.moe.compute_fraction["bf16"] == 0.600
    assert hw.peak("bf16") == pytest.approx(989.4e12, rel=1e-6) and hw.sm_count == 132
    hand = (44 + 23) * 2.0 * 64 * 128 * 2880 / (989.4e12 / 132 * 0.302)
    assert hand == pytest.approx(1.397e-3, rel=1e-3)
    got = grouped_gemm_compute_s(hw, "bf16", tile_fraction(hw, "bf16", True), 128.0, 2560.0, (5760, 2880),
                                 (2880, 2880), tile_rows=64.0)
    assert float(got) == pytest.approx(hand, rel=1e-6)
    layer = ExpertLayer(2880, 2880, 128, 4)
    cutlass = hw.model_copy(update={"moe": hw.moe.model_copy(update={"triton_compute_fraction": {}})})
    tk = moe_experts_cost(hw, 640.0, layer, "mxfp4", "bf16", kernel=MoeKernel(13, block_m="triton_kernels"))
    before = moe_experts_cost(cutlass, 640.0, layer, "mxfp4", "bf16", kernel=MoeKernel(13, block_m="triton_kernels"))
    assert float(tk.compute_s) > float(tk.memory_s) and float(before.compute_s) > float(before.memory_s)
    # the soft roofline corner adds a little to each compute term (the grouped-GEMM parts are 0.600 / 0.302 apart)
    assert hand < float(tk.compute_s) < 1.05 * hand
    assert hand * 0.302 / 0.600 < float(before.compute_s) < 1.2 * hand * 0.302 / 0.600
    assert float(tk.time_s / before.time_s) == pytest.approx(1.69, abs=0.01)


def test_tile_fraction_falls_back_to_the_cutlass_fraction():
    """Only a kernel a row-tile rule names takes the Triton fraction, and only for a format it lists (fp8 keeps the
    cutlass rows' 0.484); the same kernel under EP (SGLang's other path) keeps the cutlass fractions."""
    from specplan.costs.moe import tile_fraction

    hw = load_hardware("h100-sxm")
    assert tile_fraction(hw, "bf16", True) == 0.302
    assert tile_fraction(hw, "bf16", False) == 0.600
    assert tile_fraction(hw, "fp8", True) == 0.484
    assert tile_fraction(hw, "fp4", True) is None  # no fitted fraction: the dense-GEMM rule
    assert load_hardware("a100-sxm-80gb").moe.triton_compute_fraction == {}


def test_triton_fraction_is_validated():
    from specplan.profiles.hardware import MoEGroupedEfficiency

    with pytest.raises(ValueError, match="triton_compute_fraction.mxfp9: a MoE weight format"):
        MoEGroupedEfficiency(triton_compute_fraction={"mxfp9": 0.3})
    with pytest.raises(ValueError, match=r"triton_compute_fraction.bf16: must be in"):
        MoEGroupedEfficiency(triton_compute_fraction={"bf16": 1.5})


def test_h100_triton_fraction_is_the_kernel_reports_fit():
    """hardware_profiles/h100-sxm.yaml holds the fraction `specplan validate-kernels` fits on vLLM's Triton rows
    (docs/validation/h100_fit.json moe.triton_compute_fraction), rounded to 3 digits; h200-sxm carries it."""
    import json
    from pathlib import Path

    fit = json.loads((Path(__file__).resolve().parents[2] / "docs" / "validation" / "h100_fit.json").read_text())
    got = fit["moe"]["triton_compute_fraction"]["bf16"]
    assert load_hardware("h100-sxm").moe.triton_compute_fraction["bf16"] == pytest.approx(got, abs=5e-4)
    assert load_hardware("h200-sxm").moe.triton_compute_fraction == load_hardware("h100-sxm").moe.triton_compute_fraction

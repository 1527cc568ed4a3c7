"""GEMM roofline checked by hand."""

import numpy as np
import pytest

from specplan.costs.gemm import gemm_bytes, gemm_cost, gemm_flops, gemm_time_s
from specplan.core.errors import SpecplanError
from specplan.profiles.registry import load_hardware


@pytest.fixture(scope="module")
def h100():
    return load_hardware("h100-sxm")


def test_flops_and_bytes_closed_form():
    assert gemm_flops(64, 4096, 4096) == 2 * 64 * 4096 * 4096
    assert gemm_bytes(64, 4096, 1024, 2, 1, 2) == 64 * 1024 * 2 + 4096 * 1024 * 1 + 64 * 4096 * 2


def test_ridge_point_spec_and_effective(h100):
    assert h100.ridge_flops_per_byte("bf16") == pytest.approx(989.4e12 / 3.35e12, rel=1e-9)
    e = h100.kernel_eff("bf16")
    eff = 989.4e12 * e.compute_max_fraction / (3.35e12 * e.mem_bw_fraction)
    assert h100.ridge_flops_per_byte("bf16", effective=True) == pytest.approx(eff, rel=1e-9)


def test_memory_bound_small_m_equals_bytes_over_bandwidth(h100):
    e = h100.kernel_eff("bf16")
    t = gemm_time_s(h100, 1, 4096, 4096)
    # far below the ridge: the memory term alone (the soft corner adds < 1e-7 here), plus the per-K latency
    by_hand = (4096 * 2 + 4096 * 4096 * 2 + 4096 * 2) / (3.35e12 * e.mem_bw_fraction) + h100.kernel_overhead_s
    by_hand += e.k_latency_s * 4096
    assert t == pytest.approx(by_hand, rel=1e-4)


def test_compute_bound_large_m(h100):
    c = gemm_cost(h100, 8192, 8192, 8192)
    assert c.regime == 1  # compute
    e = h100.kernel_eff("bf16")
    f = 2 * 8192**3
    comp = (f + e.compute_half_flops) / (989.4e12 * e.compute_max_fraction)
    mem = 3 * 8192**2 * 2 / (3.35e12 * e.mem_bw_fraction)
    p = e.roofline_sharpness  # soft roofline corner: (comp^p + mem^p)^(1/p), mem/comp ~ 0.1 here
    by_hand = (comp**p + mem**p) ** (1 / p) + h100.kernel_overhead_s + e.k_latency_s * 8192
    assert c.time_s == pytest.approx(by_hand, rel=1e-4)


def test_time_monotone_in_m_and_vectorized(h100):
    m = np.arange(1, 4097)
    t = gemm_time_s(h100, m, 4096, 4096)
    assert t.shape == m.shape
    assert np.all(np.diff(t) >= -1e-15)


def test_weight_only_quantization_reads_fewer_bytes(h100):
    w16 = gemm_time_s(h100, 1, 8192, 8192, weight_dtype="bf16")
    w4 = gemm_time_s(h100, 1, 8192, 8192, weight_dtype="int4", compute_dtype="bf16")
    assert w4 < 0.4 * w16


def test_unsupported_dtype_is_an_error():
    a100 = load_hardware("a100-sxm-80gb") if _has("a100-sxm-80gb") else None
    if a100 is None:
        pytest.skip("no A100 hardware profile is shipped, so the fp8-on-A100 error cannot be checked")
    with pytest.raises(SpecplanError, match="cannot compute in fp8"):
        gemm_time_s(a100, 1, 1024, 1024, weight_dtype="fp8", compute_dtype="fp8")


def test_more_bandwidth_never_slower(h100):
    fast = h100.model_copy(update={"mem_bandwidth_bytes_s": h100.mem_bandwidth_bytes_s * 1.5})
    m = np.array([1, 16, 256, 4096])
    assert np.all(gemm_time_s(fast, m, 4096, 4096) <= gemm_time_s(h100, m, 4096, 4096))


def _has(i):
    from specplan.profiles.registry import hardware_ids

    return i in hardware_ids()


def test_mxfp4_has_its_own_scale_overhead_and_computes_on_fp4_units():
    from specplan.core.dtypes import dtype_bytes

    assert dtype_bytes("mxfp4") == 0.5 + 1 / 32  # one E8M0 scale per 32 elements
    assert dtype_bytes("fp4") == 0.5 + 1 / 16  # NVFP4: one fp8 scale per 16 elements
    b200 = load_hardware("b200")
    assert b200.peak("mxfp4") == b200.peak("fp4")
    h = load_hardware("h100-sxm")  # no fp4 units: weight-only MXFP4, math in bf16
    assert gemm_cost(h, 1, 2880, 2880, "mxfp4", "bf16").compute_s > 0


# --- FP4 and Blackwell (issue 22)


def test_fp4_has_its_own_efficiency_block_derived_from_fp8():
    from specplan.profiles.registry import load_hardware

    for hid in ("b200", "gb200"):
        hw = load_hardware(hid)
        fp4, fp8, bf16 = hw.kernel_eff("fp4"), hw.kernel_eff("fp8"), hw.kernel_eff("bf16")
        assert fp4 is not bf16 and fp4.compute_max_fraction == fp8.compute_max_fraction == 0.583
        assert fp4.compute_half_flops == 2 * fp8.compute_half_flops  # the same efficiency at the same M
        assert hw.peak("fp4") == 2 * hw.peak("fp8")


def test_fp4_gemm_moves_its_activation_quantization_and_scales():
    from specplan.costs.gemm import gemm_cost
    from specplan.profiles.registry import load_hardware

    hw = load_hardware("b200")
    m, n, k = 8192.0, 7168.0, 7168.0
    c = gemm_cost(hw, m, n, k, "fp4", "bf16")
    eff = hw.kernel_eff("fp4")
    # operands in NVFP4 (0.5 B + one fp8 scale per 16 = 0.5625 B), bf16 out, plus the quantization of the input:
    # 16-bit read + 0.5625 B written per element
    by_hand = m * k * 0.5625 + n * k * 0.5625 + m * n * 2 + m * k * (2 + 0.5625)
    assert float(c.memory_s) >= by_hand / (hw.mem_bandwidth_bytes_s * eff.mem_bw_fraction) * (1 - 1e-9)
    flops = 2 * m * n * k
    assert float(c.compute_s) >= (flops + eff.compute_half_flops) / (hw.peak("fp4") * 0.583) * (1 - 1e-9)


def test_fa3_does_not_run_on_blackwell():
    from specplan.profiles.registry import load_engine, load_hardware
    from specplan.speculation.speedup import engine_families

    h100, b200 = load_hardware("h100-sxm"), load_hardware("b200")
    assert [f.id for f in engine_families("vllm", h100)[:2]] == ["fa3", "fa3"]
    assert [f.id for f in engine_families("vllm", b200)[:2]] == ["flashinfer", "flashinfer"]  # vLLM's SM100 pick
    assert [f.id for f in engine_families("sglang", b200)[:2]] == ["trtllm-xqa", "trtllm-xqa"]  # trtllm_mha
    assert engine_families("trtllm", b200)[0].id == "trtllm-xqa"
    for e in ("vllm", "sglang", "trtllm"):
        eng = load_engine(e)
        assert all(eng.family_id(r, b200) != "fa3" for r in ("decode_attention", "verify_attention",
                                                               "prefill_attention", "mla_attention"))


def test_compute_half_n_doubles_compute_at_n_equal_half(h100):
    """An efficiency block with compute_half_n = N prices the compute term twice the plain one (1 + N / N)."""
    e = h100.kernel_eff("bf16")
    blk = e.model_copy(update={"compute_half_n": 4096.0})
    slow = h100.model_copy(update={"efficiency": {**h100.efficiency, "bf16": blk}})
    plain, half = gemm_cost(h100, 8192, 4096, 8192), gemm_cost(slow, 8192, 4096, 8192)
    f = 2 * 8192 * 4096 * 8192
    comp = (f + e.compute_half_flops) / (989.4e12 * e.compute_max_fraction)
    assert e.compute_half_n == 0.0  # shipped profiles carry no N dependence
    assert float(half.compute_s) >= 2 * comp * (1 - 1e-9) > float(plain.compute_s) * 1.5


def test_large_tile_switch_divides_compute_only_in_its_range(h100):
    """A large-tile switch at M >= 8192, K >= 6144 with scale 1.25 prices the compute term 1/1.25 of the plain one
    there (M 8192, K 8192: 2 x 8192 x 8192 x 8192 FLOPs, compute-bound), and leaves M 8191 or K 6143 alone."""
    e = h100.kernel_eff("fp8").model_copy(update={"roofline_sharpness": 0.0})  # the hard max: compute_s unmixed
    blk = e.model_copy(update={"large_tile_min_m": 8192, "large_tile_min_k": 6144, "large_tile_compute_scale": 1.25})
    fast = h100.model_copy(update={"efficiency": {**h100.efficiency, "fp8": blk}})
    h100 = h100.model_copy(update={"efficiency": {**h100.efficiency, "fp8": e}})
    f = 2 * 8192 * 8192 * 8192
    comp = (f + e.compute_half_flops) / (1978.9e12 * e.compute_max_fraction)  # H100 SXM dense fp8 peak
    assert float(gemm_cost(h100, 8192, 8192, 8192, "fp8", "fp8").compute_s) == pytest.approx(comp, rel=1e-9)
    assert float(gemm_cost(fast, 8192, 8192, 8192, "fp8", "fp8").compute_s) == pytest.approx(comp / 1.25, rel=1e-9)
    for m, k in ((8191, 8192), (8192, 6143)):
        assert float(gemm_cost(fast, m, 8192, k, "fp8", "fp8").compute_s) == pytest.approx(
            float(gemm_cost(h100, m, 8192, k, "fp8", "fp8").compute_s), rel=1e-12)
    got = gemm_cost(fast, np.array([4096.0, 8192.0, 16384.0]), 8192, 8192, "fp8", "fp8").compute_s
    plain = gemm_cost(h100, np.array([4096.0, 8192.0, 16384.0]), 8192, 8192, "fp8", "fp8").compute_s
    assert list(np.round(plain / got, 12)) == [1.0, 1.25, 1.25]
    assert load_hardware("h100-sxm").kernel_eff("fp8").large_tile_min_m == 0  # an engine sets it (gemm_large_tile)


def test_vllm_large_tile_switch_is_vllm_dispatch_thresholds(h100):
    """vllm.yaml's switch sits where vLLM's SM90 fp8 dispatch picks its 256x128 cooperative kernel (m >= 8192 and
    k >= 6144, scaled_mm_sm90_fp8_dispatch.cuh, vllm 0.24.0 / 0.34.0); the engine-adjusted H100 block carries it."""
    from specplan.profiles.engine import engine_hardware
    from specplan.profiles.registry import load_engine

    eng = load_engine("vllm")
    tile = eng.gemm_large_tile["fp8"]
    assert (tile.min_m, tile.min_k) == (8192, 6144)
    blk = engine_hardware(h100, eng).kernel_eff("fp8")
    assert (blk.large_tile_min_m, blk.large_tile_min_k, blk.large_tile_compute_scale) == (8192, 6144,
                                                                                          tile.compute_scale)
    assert load_engine("vllm-0.10").gemm_large_tile == eng.gemm_large_tile  # inherited (extends: vllm)
    assert not load_engine("sglang").gemm_large_tile and not load_engine("trtllm").gemm_large_tile

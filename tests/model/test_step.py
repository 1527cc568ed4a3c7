"""Decode step checked by hand: memory-bound small batch, breakdown, regimes, invariants."""

import numpy as np
import pytest

from specplan.model.memory import kv_bytes_per_seq, memory_usage, weight_bytes
from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_hardware, load_model
from specplan.model.step import CLASSES, StepKernels, step_time


@pytest.fixture(scope="module")
def llama():
    return load_model("llama-3.1-8b")


@pytest.fixture(scope="module")
def h100():
    return load_hardware("h100-sxm")


def test_llama8b_batch1_memory_bound_by_hand(llama, h100):
    """(weight bytes + KV bytes) / (bandwidth x efficiency) + launches x overhead, within 10% (issue 2's
    criterion), and within 5% as a regression guard (the model is 3.3% above this by-hand figure today:
    the GEMMs' K-latency term and the element-wise traffic are not in it)."""
    r = step_time(llama, h100, batch=1, q_len=1, context_len=1024)
    params = 8_030_261_248  # published parameter count (model_configs.csv)
    weight_b = params * 2 - 128256 * 4096 * 2  # the embedding table is not streamed in decode
    kv_b = 32 * 2 * 8 * 128 * 2 * 1025
    eff = h100.kernel_eff("bf16").mem_bw_fraction
    # Launches counted by hand: per layer 4 GEMMs (QKV, O, gate_up, down), attention, RoPE, SiLU-and-mul,
    # 2 norm+residual; then the embedding, the final norm and the LM head.
    launches = 32 * (4 + 1 + 1 + 1 + 2) + 2 + 1
    by_hand = (weight_b + kv_b) / (3.35e12 * eff) + launches * h100.kernel_overhead_s
    assert float(r.total_s) == pytest.approx(by_hand, rel=0.10)
    assert float(r.total_s) == pytest.approx(by_hand, rel=0.05)
    assert r.kernels == launches
    assert r.regime("gemm") == "memory"
    assert r.regime("attention") == "memory"


def test_breakdown_sums_to_total(llama, h100):
    b = np.array([1, 8, 64, 256])
    r = step_time(llama, h100, batch=b, q_len=4, context_len=4096)
    assert np.allclose(sum(r.breakdown_s[c] for c in CLASSES), r.total_s)


def test_vectorized_grid_matches_pointwise(llama, h100):
    b = np.array([1, 16, 128])[:, None]
    q = np.array([1, 5, 17])[None, :]
    grid = step_time(llama, h100, batch=b, q_len=q, context_len=2048).total_s
    for i, bi in enumerate([1, 16, 128]):
        for j, qj in enumerate([1, 5, 17]):
            assert grid[i, j] == pytest.approx(float(step_time(llama, h100, batch=bi, q_len=qj, context_len=2048).total_s))


def test_monotone_in_batch_context_and_q(llama, h100):
    b = np.arange(1, 257)
    assert np.all(np.diff(step_time(llama, h100, batch=b, context_len=4096).total_s) >= 0)
    c = np.arange(0, 131072, 1024)
    assert np.all(np.diff(step_time(llama, h100, batch=8, context_len=c).total_s) >= 0)
    q = np.arange(1, 33)
    assert np.all(np.diff(step_time(llama, h100, batch=64, q_len=q, context_len=4096).total_s) >= 0)


def test_more_bandwidth_never_slower(llama, h100):
    fast = h100.model_copy(update={"mem_bandwidth_bytes_s": 2 * h100.mem_bandwidth_bytes_s})
    b = np.array([1, 32, 512])
    assert np.all(step_time(llama, fast, batch=b, context_len=8192).total_s <= step_time(llama, h100, batch=b, context_len=8192).total_s)


def test_tp_adds_communication_and_splits_weights(llama, h100):
    r1 = step_time(llama, h100, tp=1, batch=8, context_len=1024)
    r4 = step_time(llama, h100, tp=4, batch=8, context_len=1024)
    assert float(r1.breakdown_s["communication"]) == 0
    assert float(r4.breakdown_s["communication"]) > 0
    assert float(r4.breakdown_s["gemm"]) < 0.35 * float(r1.breakdown_s["gemm"])


def test_memory_closed_forms(llama, h100):
    p = resolve_precision(llama, h100)
    assert weight_bytes(llama, 1, p) == pytest.approx(8_030_261_248 * 2, rel=0.001)
    assert kv_bytes_per_seq(llama, 1, "bf16", 1000) == 32 * 2 * 8 * 128 * 2 * 1000
    m = memory_usage(llama, h100, 1, np.array([1, 10_000]), 1024, p)
    assert list(m.fits) == [True, False]
    per_seq = (m.total_bytes[1] - m.weights_bytes) / 10_000
    assert float(m.max_batch) == np.floor((h100.mem_capacity_bytes * 0.9 - m.weights_bytes) / per_seq)


def test_kv_heads_replicated_when_tp_exceeds_them():
    m = load_model("llama-3.1-8b")
    assert m.heads_per_device(8) == (4, 1)
    assert m.g_dev(8) == 4


def test_lpu_needs_enough_chips_and_no_launch_overhead():
    m = load_model("llama-3.3-70b")
    lpu = load_hardware("groq-lpu")
    r = step_time(m, lpu, batch=1, context_len=2048)
    p = resolve_precision(m, lpu)
    total = memory_usage(m, lpu, 1, 1, 2048, p, reserve=0).total_bytes
    assert int(r.devices) == int(np.ceil(total / lpu.mem_capacity_bytes))
    assert float(r.breakdown_s["overhead"]) == pytest.approx((int(r.devices) - 1) * lpu.chip_hop_latency_s)


def test_step_never_faster_with_more_batch_or_tokens_under_tp():
    m = load_model("llama-3.3-70b")
    hw = load_hardware("h100-sxm")
    for tp in (2, 4, 8):
        b = np.arange(1, 1025)[:, None]
        q = np.arange(1, 17)[None, :]
        t = step_time(m, hw, tp, b, q, 1024).total_s
        assert np.all(np.diff(t, axis=0) >= -1e-12) and np.all(np.diff(t, axis=1) >= -1e-12)


def test_communication_regime_is_latency_at_batch_1_and_bandwidth_at_large_batch():
    m = load_model("llama-3.3-70b")
    r = step_time(m, load_hardware("h100-sxm"), 8, np.array([1, 4096]), 1, 1024)
    assert list(r.regime("communication")) == ["latency", "bandwidth"]


def test_kv_heads_must_split_or_replicate_evenly():
    from specplan.core.errors import SpecplanError

    m = load_model("llama-3.1-8b").model_copy(update={"num_kv_heads": 4, "num_q_heads": 48})
    assert m.heads_per_device(8) == (6, 1)  # 4 KV heads replicated over 8 devices
    odd = load_model("llama-3.1-8b").model_copy(update={"num_kv_heads": 12, "num_q_heads": 48})
    with pytest.raises(SpecplanError, match="neither divides nor is a multiple of the 12 KV heads"):
        odd.heads_per_device(8)


def test_unknown_routing_is_an_error_even_on_a_dense_model(llama, h100):
    from specplan.core.errors import SpecplanError

    with pytest.raises(SpecplanError, match="routing"):
        step_time(llama, h100, batch=1, kernels=StepKernels(routing="foo"))


def test_kv_dtype_defaults_to_the_checkpoints():
    m = load_model("nemotron-3.5-lightning-30b-a3b")
    assert m.kv_cache_dtype == "fp8"
    assert resolve_precision(m, load_hardware("b200")).kv == "fp8"
    assert resolve_precision(m, load_hardware("b200"), kv_dtype="bf16").kv == "bf16"
    assert resolve_precision(load_model("llama-3.1-8b"), load_hardware("h100-sxm")).kv == "bf16"

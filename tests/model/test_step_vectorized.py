"""Issue 38 (search speed): the vectorized pricing of a step (a layer's GEMMs in one call, costs/gemm.gemm_costs)
and step_time's cache answer exactly what the scalar path does.

Every reference number here comes from the scalar path, computed apart from the code under test: gemm_cost called
once per GEMM shape (costs/shapes.layer_gemms, lm_head_gemm), and _step_time called afresh outside the cache."""

import numpy as np
import pytest

from specplan.costs.gemm import gemm_cost, gemm_costs
from specplan.costs.precision import resolve_precision
from specplan.costs.shapes import layer_gemms, lm_head_gemm
from specplan.model.parallel import Layout
from specplan.model.step import STEP_CACHE, StepCache, StepKernels, _step_time, step_time
from specplan.profiles.registry import load_hardware, load_model


def _scalar_gemm_busy_s(model, hw, lay, prec, b_rank, q):
    """The gemm class's busy seconds by the scalar path: gemm_cost per GEMM shape of every layer group (at the DP
    rank's tokens, count = the group's layers) and the LM head, max(compute, memory) summed in step order."""
    tokens = b_rank * q
    busy = np.zeros(np.shape(tokens))
    for g in model.groups():
        for s in layer_gemms(model, g, lay.tp):
            c = gemm_cost(hw, tokens, s.n, s.k, prec.w(s.module), prec.compute, count=g.count)
            busy = busy + np.maximum(c.compute_s, c.memory_s)
    lm = lm_head_gemm(model, lay.tp)
    c = gemm_cost(hw, tokens, lm.n, lm.k, prec.w("lm_head"), prec.compute)
    return busy + np.maximum(c.compute_s, c.memory_s)


@pytest.mark.parametrize("model_id,hw_id,dtype,lay", [
    ("deepseek-r1", "h200-sxm", "fp8", Layout(tp=8, ep=8)),     # TEP 8
    ("deepseek-r1", "h200-sxm", "fp8", Layout(dp=8, ep=8)),     # DEP 8
    ("deepseek-r1", "gb200", "fp8", Layout(dp=32, ep=32)),      # DEP 32 in an NVL72 domain
    ("deepseek-r1", "b200", "fp4", Layout(dp=8, ep=8)),         # NVFP4: the activation-quantization bytes
    ("llama-3.1-8b", "h100-sxm", None, Layout(tp=2)),           # dense, TP only
], ids=["tep8", "dep8", "dep32-gb200", "dep8-fp4", "llama-tp2"])
def test_vectorized_gemms_equal_the_scalar_gemm_costs(model_id, hw_id, dtype, lay):
    model, hw = load_model(model_id), load_hardware(hw_id)
    prec = resolve_precision(model, hw, dtype, None)
    b = np.array([[1.0], [8.0], [64.0], [512.0]]) * lay.dp  # the instance's sequences over its DP ranks
    q = np.array([1.0, 3.0])
    r = _step_time(model, hw, 1, b, q, 2048, prec, lay, StepKernels(), None)
    want = _scalar_gemm_busy_s(model, hw, lay, prec, lay.per_rank_batch(b), q)
    assert r.breakdown_s["gemm"].shape == want.shape == (4, 2)
    # same operations on the same numbers, summed in the same order: equal to the last bit, not approximately
    np.testing.assert_array_equal(r.breakdown_s["gemm"], want)


def test_gemm_costs_rows_are_gemm_cost_of_each_shape():
    hw = load_hardware("h100-sxm")
    m = np.array([1.0, 16.0, 300.0, 4096.0])
    nk = [(4096, 4096), (28672, 4096), (4096, 14336), (1024, 4096)]
    wd = ["fp8", "bf16", "fp8", "bf16"]  # two weight dtypes: two vectorized calls, answered in the given order
    got = gemm_costs(hw, m, nk, wd, "bf16", count=32)
    for (n, k), w, c in zip(nk, wd, got):
        ref = gemm_cost(hw, m, n, k, w, "bf16", count=32)
        for term in ("compute_s", "memory_s", "overhead_s"):
            np.testing.assert_array_equal(np.broadcast_to(getattr(c, term), m.shape),
                                          np.broadcast_to(getattr(ref, term), m.shape))


def test_step_cache_answers_a_repeat_with_the_fresh_answer_read_only():
    model, hw = load_model("deepseek-r1"), load_hardware("h200-sxm")
    prec = resolve_precision(model, hw, "fp8", None)
    lay = Layout(dp=8, ep=8)
    b = np.array([8.0, 64.0, 512.0])
    STEP_CACHE.clear()
    first = step_time(model, hw, 1, b, 2, 4096, precision=prec, layout=lay)
    again = step_time(model, hw, 1, b.copy(), 2, 4096, precision=prec, layout=lay)  # equal values, another array
    assert again is first and len(STEP_CACHE.entries) == 1
    fresh = _step_time(model, hw, 1, b, 2, 4096, prec, lay, None, None)
    np.testing.assert_array_equal(first.total_s, fresh.total_s)
    with pytest.raises(ValueError):  # a shared answer cannot be changed in place by one caller
        first.total_s[0] = 0.0
    # any argument that changes the step is a different entry: routing, the batch, the context
    skew = step_time(model, hw, 1, b, 2, 4096, precision=prec, layout=lay, kernels=StepKernels(routing="skew:2"))
    assert skew is not first and np.all(skew.total_s > first.total_s)  # the busiest EP rank gets 2x the mean
    assert step_time(model, hw, 1, b + 1, 2, 4096, precision=prec, layout=lay) is not first
    assert step_time(model, hw, 1, b, 2, 8192, precision=prec, layout=lay) is not first
    assert len(STEP_CACHE.entries) == 4


def test_step_cache_drops_the_least_recently_used_beyond_its_points():
    cache = StepCache(max_points=10)
    model, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    res = [_step_time(model, hw, 1, np.arange(1.0, 5.0), 1, c, None, None, None, None) for c in (1, 2, 3)]
    cache.put("a", (), res[0])
    cache.put("b", (), res[1])  # 8 points
    assert cache.get("a") is res[0]  # "a" is now the most recently used
    cache.put("c", (), res[2])  # 12 points > 10: "b" goes
    assert cache.get("b") is None and cache.get("a") is res[0] and cache.get("c") is res[2]
    assert cache.points == 8


def test_the_cache_follows_the_moe_verify_reuse_a_fit_sets():
    """The validation's fit prices verify steps inside costs.moe.verify_expert_reuse(value): a cached step from
    outside the block must not answer inside it. Mixtral-like verify (q = 4) at reuse 0.85 touches fewer expert
    tokens (1 + 3 x 0.15 per sequence instead of 4), so its MoE time can only fall, and it must equal the step
    priced with the cache emptied."""
    from specplan.costs.moe import distinct_tokens, verify_expert_reuse
    from specplan.model.step import STEP_CACHE, step_time

    args = ("deepseek-v3", "h100-sxm", 8, 8.0, 4, 4096)
    plain = float(step_time(*args).breakdown_s["moe"])
    with verify_expert_reuse(0.85):
        assert float(distinct_tokens(8.0, 4)) == pytest.approx(8 * (1 + 3 * 0.15))  # hand count: 11.6 tokens
        inside = float(step_time(*args).breakdown_s["moe"])
        STEP_CACHE.clear()
        fresh = float(step_time(*args).breakdown_s["moe"])
    assert inside == fresh and inside < plain
    assert float(step_time(*args).breakdown_s["moe"]) == plain

"""GPUs for a load searched independently in the test (issue 26): every layout split, every count up to --max-gpus,
a memory-bound load, and one whose answer equals --max-gpus.

Llama-3.1-8B on H100 (node of 8), decode only (--context, no prefill pool), no speculation. The test's own search:
for each layout (TP 1, 2, 4, 8) the best instance is max over B = 1..4096 of B x tokens/s/user with memory fitting
and tokens/s/user >= the target (evaluate() per batch); a count of g GPUs delivers max over layouts with g % GPUs = 0
of (g / GPUs) x that; the answer is the smallest multiple of 8 reaching the target.
"""

import math

import numpy as np
import pytest

from specplan.costs.precision import resolve_precision
from specplan.model.memory import weight_bytes
from specplan.planning.capacity import search
from specplan.profiles.registry import load_hardware, load_model
from specplan.speculation.speedup import evaluate
from specplan.planning.options import LoadTarget
from specplan.model.deployment import Deployment

M, H = "llama-3.1-8b", "h100-sxm"
LAYOUTS = ["tp1", "tp2", "tp4", "tp8"]


def _instance_best(tp, context, target_user):
    b = np.arange(1, 4097, dtype=float)
    r = evaluate(Deployment(M, H, tp=tp), batch=b, context_len=context)
    user = np.asarray(r["tokens_per_s_per_user"])
    ok = np.asarray(r["fits"]) & (user >= target_user)
    if not ok.any():
        return 0.0, 0
    i = int(np.argmax(np.where(ok, b * user, -1.0)))
    return float(b[i] * user[i]), int(b[i])


def _by_hand(context, target_user, max_gpus):
    inst = {tp: _instance_best(tp, context, target_user) for tp in (1, 2, 4, 8)}
    per_count = {g: max((g // tp * inst[tp][0] for tp in inst if g % tp == 0), default=0.0)
                 for g in range(8, max_gpus + 1, 8)}
    return inst, per_count


def test_every_count_and_split_by_hand():
    context, user, max_gpus = 4096, 40.0, 32
    inst, per_count = _by_hand(context, user, max_gpus)
    target = 0.5 * (per_count[16] + per_count[24])  # more than 16 GPUs give, less than 24
    ans = search(M, H, load=LoadTarget(tps=target, tps_per_user=user, context_len=context), max_gpus=max_gpus,
                 layouts=LAYOUTS)
    for row in ans["counts"]:
        assert row["tps"] == pytest.approx(per_count[row["gpus"]], rel=1e-9), row
    expect = min(g for g, t in per_count.items() if t >= target)
    assert expect == 24 and ans["best"]["gpus"] == 24
    assert ans["best"]["tps"] >= target > per_count[16]


def test_answer_equal_to_max_gpus_and_one_node_short():
    context, user = 4096, 40.0
    _, per_count = _by_hand(context, user, 16)
    target = 0.5 * (per_count[8] + per_count[16])
    ans = search(M, H, load=LoadTarget(tps=target, tps_per_user=user, context_len=context), max_gpus=16,
                 layouts=LAYOUTS)
    assert ans["best"]["gpus"] == 16  # = --max-gpus
    short = search(M, H, load=LoadTarget(tps=target, tps_per_user=user, context_len=context), max_gpus=8,
                   layouts=LAYOUTS)
    assert short["best"] is None and "8 GPUs (--max-gpus) fall short" in short["infeasible"]


def test_memory_bound_load_never_exceeds_the_device():
    """Context 100,000: a sequence's KV is 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes x 100,001 tokens =
    13.1 GB, so one H100 (0.9 x 85.9 GB usable, 16 GB of bf16 weights at TP 1) holds floor(61.3 / 13.1) = 4; at a low
    per-user target the best TP-1 instance is the largest batch that fits, never one over the memory."""
    m, hw = load_model(M), load_hardware(H)
    prec = resolve_precision(m, hw, None, None)
    kv = 32 * 8 * 128 * 2 * 2 * 100_001
    cap = 0.9 * hw.mem_capacity_bytes
    fit = math.floor((cap - weight_bytes(m, 1, prec)) / kv)
    assert fit == 4
    ans = search(M, H, load=LoadTarget(tps=50.0, tps_per_user=5.0, context_len=100_000), max_gpus=8, layouts=["tp1"])
    tp1 = ans["layouts"]["tp1"]
    assert tp1["batch"] in (fit - 1, fit)  # activations take a little of the last slot
    assert tp1["memory_gb"] * 1e9 <= cap
    assert ans["best"]["gpus"] == 8 and ans["best"]["tps"] == pytest.approx(8 * tp1["tps"])


def test_counts_below_the_prefill_pool_are_the_prefill_pool_alone():
    """ISL 8192 / OSL 64 at 1000 tokens/s: 15.6 requests/s, each prefill ~66 ms on a TP-8 group, so the pool at
    utilization <= 2/3 needs ceil(15.6 x 0.066 / (2/3)) = 2 groups = 16 GPUs (prefill_groups, tested in
    test_capacity_serving.py); every count up to 16 is the prefill pool alone: no decode GPU, no tokens/s."""
    from specplan.planning.capacity import prefill_gpus

    m, hw = load_model(M), load_hardware(H)
    pre, per_req = prefill_gpus(m, hw, resolve_precision(m, hw, None, None), 8192, 64, 1000.0, 8)
    assert pre == 8 * math.ceil(1000.0 / 64 * per_req / (2 / 3)) == 16
    ans = search(M, H, load=LoadTarget(tps=1000.0, tps_per_user=20.0, isl=8192, osl=64), max_gpus=24, layouts=LAYOUTS)
    for row in ans["counts"][:2]:
        assert row["why"] == "the prefill pool takes 16 GPUs (2 TP 8 groups, its smallest unit), leaving none for decoding"
        assert row["tps"] == 0.0 and row["decode_gpus"] == 0
    assert ans["best"]["gpus"] == 24 and ans["best"]["decode_gpus"] == 8

"""DP attention with a batch DP does not divide (issue 26): the busiest rank holds ceil(B / DP) sequences.

DeepSeek-V3 on 8 H200s at --dp 8 --tp 1 --ep 8, B = 9: one rank holds 2 sequences (ceil(9 / 8)), not 1.125.
KV per GPU: 2 x (61 layers x (512 + 64) latent x 2 bytes x (ctx + 1) tokens); attention per GPU: that of 2
sequences at TP 1.
"""

import math

import pytest

from specplan.costs.precision import resolve_precision
from specplan.model.memory import memory_usage
from specplan.model.parallel import Layout
from specplan.model.step import step_time
from specplan.profiles.registry import load_hardware, load_model

DP8 = Layout(tp=1, dp=8, ep=8)


@pytest.fixture(scope="module")
def ds():
    m, hw = load_model("deepseek-v3"), load_hardware("h200-sxm")
    return m, hw, resolve_precision(m, hw, None, None)


@pytest.mark.parametrize("batch", [9, 15, 17])
def test_kv_of_the_busiest_rank_rounds_up(ds, batch):
    m, hw, prec = ds
    ctx = 4096
    per_seq = 61 * 576 * 2 * (ctx + 1)
    rank = math.ceil(batch / 8)
    mem = memory_usage(m, hw, 1, batch, ctx, prec, layout=DP8)
    assert float(mem.kv_bytes) == pytest.approx(rank * per_seq)
    assert DP8.per_rank_batch(batch) == rank


def test_attention_of_the_busiest_rank_rounds_up(ds):
    m, hw, prec = ds
    r9 = step_time(m, hw, batch=9, q_len=1, context_len=4096, layout=DP8, precision=prec)
    two = step_time(m, hw, batch=2, q_len=1, context_len=4096, layout=Layout(tp=1), precision=prec)
    one = step_time(m, hw, batch=1, q_len=1, context_len=4096, layout=Layout(tp=1), precision=prec)
    assert float(r9.breakdown_s["attention"]) == pytest.approx(float(two.breakdown_s["attention"]), rel=1e-9)
    assert float(r9.breakdown_s["attention"]) > 1.5 * float(one.breakdown_s["attention"])

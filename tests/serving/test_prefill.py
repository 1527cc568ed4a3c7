"""Prefill through the roofline: causal attention FLOPs, chunk additivity, GEMM M = tokens (hand counts)."""

import numpy as np
import pytest

from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_hardware, load_kernel_family, load_model
from specplan.serving.prefill import mixed_step_s, prefill_attention_s, prefill_s
from specplan.model.step import step_time

H100 = load_hardware("h100-sxm")
M8 = load_model("llama-3.1-8b")
PREC = resolve_precision(M8, H100, None, None)


def test_prefill_attention_is_causal_flops_at_the_prefill_efficiency():
    # 4096 tokens, no prefix: 32 layers x 8 KV heads x ceil(4 * 4096 / 128) = 128 tiles x 128 rows x
    # mean key length (4096 + 1) / 2 x 2 x 256 FLOPs, at compute_fraction of the bf16 peak (compute-bound).
    fam = load_kernel_family("prefill-default")
    t = float(prefill_attention_s(M8, H100, 1, 4096, 0, PREC, fam))
    flops = 32 * 8 * 128 * 128 * (4097 / 2) * 2 * 256
    compute = flops / (H100.peak("bf16") * fam.compute_fraction)
    assert compute < t < compute * 1.05  # + launch overhead and KV write, both small


def test_chunked_prefill_attention_sums_to_the_whole_prompt():
    fam = load_kernel_family("prefill-default")
    whole = float(prefill_attention_s(M8, H100, 1, 8192, 0, PREC, fam))
    halves = float(prefill_attention_s(M8, H100, 1, 4096, 0, PREC, fam)
                   + prefill_attention_s(M8, H100, 1, 4096, 4096, PREC, fam))
    # causal key pairs: 8192 * 8193 / 2 = 4096 * 4097 / 2 + 4096 * (4096 + 4097 / 2); overheads counted twice
    assert halves == pytest.approx(whole, rel=0.01)


def test_mixed_step_without_decode_rows_is_gemms_at_m_tokens_plus_prefill_attention():
    fam = load_kernel_family("prefill-default")
    t = float(mixed_step_s(M8, H100, 1, 0, 0, 2048, 0, precision=PREC))
    r = step_time(M8, H100, 1, 2048, 1, 0, precision=PREC)
    nonattn = float(r.total_s - r.breakdown_s["attention"])
    assert t == pytest.approx(nonattn + float(prefill_attention_s(M8, H100, 1, 2048, 0, PREC, fam)))


def test_mixed_step_without_prefill_is_the_decode_step():
    t = mixed_step_s(M8, H100, 1, [1, 64], 4096, 0, 0, precision=PREC, engine="ideal")
    ref = step_time(M8, H100, 1, [1, 64], 1, 4096, precision=PREC).total_s
    np.testing.assert_allclose(t, ref, rtol=1e-12)


def test_prefill_packs_short_prompts_into_budget_steps():
    # 8 prompts of 1024 = 8192 tokens = one step at an 8192 budget; at 4096 two steps of 4096.
    one = float(prefill_s(M8, H100, 1, 1024, precision=PREC, n_seqs=8))
    two = float(prefill_s(M8, H100, 1, 1024, precision=PREC, n_seqs=8, budget_tokens=4096))
    assert two > one  # one more step (weights read twice, more launches)
    assert two == pytest.approx(2 * float(prefill_s(M8, H100, 1, 1024, precision=PREC, n_seqs=4)))


def test_prefill_grows_superlinearly_with_prompt_length():
    t = prefill_s(M8, H100, 1, [8192, 32768], precision=PREC)
    assert t[1] > 4 * t[0]  # causal attention is quadratic in ISL

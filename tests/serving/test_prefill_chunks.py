"""A prompt longer than the token budget (issue 26): several chunks, each its own step, with the causal pair count.

ISL 16000 at the 8192-token budget: chunks of 8192 and 7808 tokens; the second attends to the 8192 before it.
Causal (query, key) pairs over both chunks: 8192 · 8193/2 + 7808 · (8192 + 7809/2) = 16000 · 16001/2.
Llama-3.1-8B attention FLOPs: 32 layers x 32 query heads x pairs x 2 (QK, PV) x 2 x 128 (head dim), compute-bound
at the prefill family's fraction of the bf16 peak.
"""

import pytest

from specplan.costs.precision import resolve_precision
from specplan.model.step import step_time
from specplan.profiles.registry import load_hardware, load_kernel_family, load_model
from specplan.serving.prefill import prefill_s

H100 = load_hardware("h100-sxm")
M8 = load_model("llama-3.1-8b")
PREC = resolve_precision(M8, H100, None, None)


def _gemms_s(tokens):
    r = step_time(M8, H100, 1, tokens, 1, 0, precision=PREC, logits_rows=1)  # logits at the chunk's last row
    return float(r.total_s - r.breakdown_s["attention"])


def test_causal_pairs_of_two_chunks():
    assert 8192 * 8193 / 2 + 7808 * (8192 + 7809 / 2) == 16000 * 16001 / 2


def test_long_prompt_is_two_steps_with_causal_attention():
    fam = load_kernel_family("prefill-default")
    t = float(prefill_s(M8, H100, 1, 16000, precision=PREC, engine="ideal"))
    gemms = _gemms_s(8192) + _gemms_s(7808)  # two steps: weights read twice
    attn_flops = 32 * 32 * (16000 * 16001 / 2) * 2 * 2 * 128
    attn = attn_flops / (H100.peak("bf16") * fam.compute_fraction)
    # + the KV write and launches of each chunk (small): within 3 %
    assert gemms + attn < t < (gemms + attn) * 1.03
    # one chunk of 16000 (no split) would be the GEMMs once at M = 16000: the split costs more than that
    one_step = _gemms_s(16000) + attn
    assert t > one_step


def test_three_chunks_at_a_smaller_budget():
    """Budget 6000: chunks 6000, 6000, 4000 (ceil(16000 / 6000) = 3 steps); pairs unchanged."""
    fam = load_kernel_family("prefill-default")
    t = float(prefill_s(M8, H100, 1, 16000, precision=PREC, engine="ideal", budget_tokens=6000))
    gemms = 2 * _gemms_s(6000) + _gemms_s(4000)
    attn = 32 * 32 * (16000 * 16001 / 2) * 2 * 2 * 128 / (H100.peak("bf16") * fam.compute_fraction)
    assert gemms + attn < t < (gemms + attn) * 1.03

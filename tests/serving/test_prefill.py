"""Prefill through the roofline: causal attention FLOPs, chunk additivity, GEMM M = tokens (hand counts)."""

import numpy as np
import pytest

from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_hardware, load_kernel_family, load_model
from specplan.serving.prefill import mixed_step_s, StepMix, prefill_attention_s, prefill_s
from specplan.model.step import step_time
from specplan.costs.attention import AttentionHeads

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
    t = float(mixed_step_s(M8, H100, 1, StepMix(0, 0, 2048, 0), precision=PREC))
    r = step_time(M8, H100, 1, 2048, 1, 0, precision=PREC, logits_rows=1)  # logits at the prompt's last token
    nonattn = float(r.total_s - r.breakdown_s["attention"])
    assert t == pytest.approx(nonattn + float(prefill_attention_s(M8, H100, 1, 2048, 0, PREC, fam)))


def test_a_prompt_pays_the_lm_head_at_its_last_position_only():
    # the engines take logits at each prompt's last token: a 2048-token chunk skips the LM head's other 2047 rows,
    # 2 x 2047 x 128256 x 4096 FLOPs = 2.15 TFLOP, compute-bound at between 60 % and 100 % of the bf16 dense peak
    one = float(mixed_step_s(M8, H100, 1, StepMix(0, 0, 2048, 0), precision=PREC))
    every = step_time(M8, H100, 1, 2048, 1, 0, precision=PREC)
    every = float(every.total_s - every.breakdown_s["attention"]) + float(
        prefill_attention_s(M8, H100, 1, 2048, 0, PREC, load_kernel_family("prefill-default")))
    flops = 2 * 2047 * 128256 * 4096
    assert flops / H100.peak("bf16") < every - one < flops / (0.6 * H100.peak("bf16"))


def test_mixed_step_without_prefill_is_the_decode_step():
    t = mixed_step_s(M8, H100, 1, StepMix([1, 64], 4096, 0, 0), precision=PREC, engine="ideal")
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


# --- MLA prefill as the engines run it (issue 22): multi-head attention on per-head K / V (192 / 128) after
# decompressing the cached latent through kv_b_proj, not latent attention (576 / 512)

DSV3 = load_model("deepseek-v3")
PREC_DS = resolve_precision(DSV3, H100, None, None)


def test_mla_prefill_is_multi_head_attention_on_192_128_heads():
    # DeepSeek-V3, TP 8: 128 / 8 = 16 heads, each its own K / V head (no packing: 1 query row group per tile).
    # 32768 tokens, no prefix: per layer 16 heads x ceil(32768 / 128) = 256 tiles x 128 rows x mean key length
    # 32769 / 2 x 2 x (192 + 128) FLOPs at the prefill family's compute fraction of the bf16 peak; 61 layers.
    fam = load_kernel_family("prefill-default")
    t = float(prefill_attention_s(DSV3, H100, 8, 32768, 0, PREC_DS, fam))
    attention = 61 * 16 * 256 * 128 * (32769 / 2) * 2 * (192 + 128) / (H100.peak("bf16") * fam.compute_fraction)
    # + kv_b_proj on every key (2 x 32768 x 16 x 256 x 512 FLOPs a layer) less the absorbed BMMs it replaces (the
    # same FLOPs, but they write a 512-wide latent per head where kv_b writes 256: the swap saves ~1 %), launches
    assert attention * 0.97 < t < attention * 1.05
    latent = attention * (576 + 512) / (192 + 128)  # the latent form priced before: 3.4x the FLOPs
    assert t < latent / 3.2


def test_mla_prefill_prices_the_kv_b_proj_decompression_of_the_prefix():
    # A chunk after a long cached prefix decompresses the prefix too: the swap grows with the keys, and its growth
    # is the kv_b_proj GEMM's: 2 x keys x (16 heads x (128 nope + 128 v)) x 512 FLOPs (fp8 weights, compute-bound).
    from specplan.serving.prefill import mla_prefill_swap_s

    short = float(mla_prefill_swap_s(DSV3, H100, 8, 4096, 4096, PREC_DS))
    long = float(mla_prefill_swap_s(DSV3, H100, 8, 4096, 4096 + 65536, PREC_DS))
    extra_flops = 2 * 65536 * 16 * 256 * 512
    extra_bytes = 65536 * 512 * 1 + 65536 * 16 * 256 * 2  # fp8 latent in, 16-bit K_nope / V out
    eff = H100.kernel_eff(PREC_DS.compute)
    assert PREC_DS.compute == "fp8"
    compute = extra_flops / (H100.peak("fp8") * eff.compute_max_fraction)
    memory = extra_bytes / (H100.mem_bandwidth_bytes_s * eff.mem_bw_fraction)
    assert compute < long - short < compute + memory  # compute-bound, the soft roofline corner adds a share


def test_dsa_mla_prefill_stays_latent():
    # DeepSeek-V3.2 (an indexer: sparse attention) keeps the latent form in prefill: same price as before
    from specplan.costs.attention import attention_cost

    from pathlib import Path

    from specplan.profiles.hf_import import import_hf_config

    v32 = import_hf_config(Path(__file__).resolve().parents[1] / "profiles" / "hf_configs" /
                           "deepseek-ai--DeepSeek-V3.2-Exp_config.json")
    fam = load_kernel_family("prefill-default")
    prec = resolve_precision(v32, H100, None, None)
    t = float(prefill_attention_s(v32, H100, 8, 4096, 0, prec, fam))
    one = attention_cost(H100, 1, 4096, 4097 / 2, AttentionHeads(16, 1, 576, head_dim_v=512, latent=True), prec.kv,
                         prec.compute, family=fam).time_s
    assert t > 61 * float(one)


def test_hybrid_prefill_sums_each_layer_kind_by_its_count():
    # Qwen3-Next: full-attention layers priced as causal attention, linear-attention (gated delta) layers as a
    # recurrent state pass over the chunk, each times its layer count, plus the KV write (hand sum of the parts)
    from specplan.costs.attention import attention_cost, recurrent_state_cost
    from specplan.costs.gemm import elementwise_cost
    from specplan.model.memory import kv_bytes_per_token
    from specplan.model.step import ACT_BYTES

    m = load_model("qwen3-next-80b-a3b")
    prec = resolve_precision(m, H100, None, None)
    fam = load_kernel_family("prefill-default")
    n, tp = 2048.0, 2
    counts = {g.mixer: g.count for g in m.groups()}
    assert set(counts) == {"full", "linear"} and counts["linear"] > counts["full"] > 0
    qh, kvh = m.heads_per_device(tp)
    full = attention_cost(H100, 1, n, (n + 1) / 2, AttentionHeads(qh, kvh, m.head_dim), prec.kv, prec.compute,
                          family=fam).time_s
    la = m.linear_attention
    elems = la.num_v_heads / tp * la.head_k_dim * la.head_v_dim
    lin = recurrent_state_cost(H100, 1, n, elems * 4.0, 6.0 * elems, checkpoint=False).time_s
    kv = elementwise_cost(H100, n * (kv_bytes_per_token(m, tp, prec.kv, "full")
                                     + kv_bytes_per_token(m, tp, prec.kv, "sliding")) + n * m.hidden_size * ACT_BYTES)
    expect = counts["full"] * full + counts["linear"] * lin + kv.time_s
    assert float(prefill_attention_s(m, H100, tp, n, 0, prec, fam)) == pytest.approx(float(expect), rel=1e-12)
    # a one-token chunk: the state pass is bound by reading and writing the fp32 state (elems x 4 bytes)
    one = recurrent_state_cost(H100, 1, 1.0, elems * 4.0, 6.0 * elems, checkpoint=False).time_s
    full1 = attention_cost(H100, 1, 1.0, 1.0, AttentionHeads(qh, kvh, m.head_dim), prec.kv, prec.compute,
                           family=fam).time_s
    kv1 = elementwise_cost(H100, (kv_bytes_per_token(m, tp, prec.kv, "full")
                                  + kv_bytes_per_token(m, tp, prec.kv, "sliding")) + m.hidden_size * ACT_BYTES)
    assert float(prefill_attention_s(m, H100, tp, 1.0, 0, prec, fam)) == pytest.approx(
        float(counts["full"] * full1 + counts["linear"] * one + kv1.time_s), rel=1e-12)
    assert float(one) > float(recurrent_state_cost(H100, 1, 1.0, elems, 6.0 * elems, checkpoint=False).time_s)


def test_sparse_mla_prefill_is_latent_attention_per_device():
    # an MLA model with a DSA indexer (DeepSeek-V3.2 shape: V3 + indexer) prefills in latent form: each device's
    # num_q_heads / TP heads over one shared latent KV head of d_qk = kv_lora_rank + rope dim, d_v = kv_lora_rank
    from specplan.costs.attention import attention_cost
    from specplan.profiles.model import Indexer

    v3 = load_model("deepseek-v3")
    m = v3.model_copy(update={"indexer": Indexer(num_heads=64, head_dim=128, topk=2048)})
    prec = resolve_precision(m, H100, None, None)
    fam = load_kernel_family("prefill-default")
    n, tp = 1024.0, 8
    a = m.mla
    one = attention_cost(H100, 1, n, (n + 1) / 2,
                         AttentionHeads(m.num_q_heads // tp, 1, a.kv_lora_rank + a.qk_rope_head_dim,
                                        head_dim_v=a.kv_lora_rank, latent=True),
                         prec.kv, prec.compute, family=fam).time_s
    from specplan.costs.gemm import elementwise_cost
    from specplan.model.memory import kv_bytes_per_token
    from specplan.model.step import ACT_BYTES

    whole = float(prefill_attention_s(m, H100, tp, n, 0, prec, fam))
    full_layers = sum(g.count for g in m.groups() if g.mixer in ("full", "sliding"))
    assert full_layers == m.num_layers
    kv = elementwise_cost(H100, n * (kv_bytes_per_token(m, tp, prec.kv, "full")
                                     + kv_bytes_per_token(m, tp, prec.kv, "sliding")) + n * m.hidden_size * ACT_BYTES)
    assert whole == pytest.approx(full_layers * float(one) + float(kv.time_s), rel=1e-12)

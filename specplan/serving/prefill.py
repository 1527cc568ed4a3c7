"""Prefill and mixed (decode + prefill-chunk) steps through the same roofline kernels as a decode step.

Stable API (issue 14's simulator calls these; arrays broadcast, seconds out, GPU time only — engine host time
and launch costs are added by `EngineProfile.step_s`):

    mixed_step_s(model, hw, tp, StepMix(decode_batch, decode_context, prefill_tokens, prefill_context, q_len=1,
                 prefill_seqs=1), *, precision, engine=None, routing="random") -> np.ndarray  [s]
        one engine step holding `decode_batch` sequences with `q_len` new tokens each over `decode_context`
        cached tokens, plus a prefill chunk of `prefill_tokens` prompt tokens whose first token sits after
        `prefill_context` already-cached tokens of the same prompt. decode_batch may be 0, prefill_tokens 0.
    prefill_s(model, hw, tp, isl, *, precision, engine=None, budget_tokens=None, n_seqs=1) -> np.ndarray  [s]
        a whole prompt of `isl` tokens (n_seqs prompts together) in chunks of the engine's token budget,
        each chunk a step of its own (no decode rows): the prefill part of TTFT.
    EngineProfile.step_s(gpu_s, batch, kernels, graphed, prompt_tokens=0) -> np.ndarray  [s]
        an engine step from its GPU seconds: host/scheduler time (with prefill_tokens_s per prompt token it
        carries) and kernel launches, overlapped or added.

Model (docs/serving.md): the GEMMs, norms, MoE and all-reduces of a step depend only on its token count, so a
mixed step's non-attention part is that of a decode step with M = decode_batch * q_len + prefill_tokens, but for
the LM head and its logits all-gather, which run on the decode tokens and one row per prompt (step_time's
`logits_rows`: the engines take logits at each prompt's last position only); its
attention is the decode attention of the decode rows plus causal prefill attention of the chunk (query rows
tiled as in costs/attention.py, at the engine's prefill kernel family, mean key length prefill_context +
(tokens + 1) / 2, i.e. causal FLOPs), plus the KV-cache write of the chunk at memory speed. GEMMs run at the
engine's GEMM scales (`engine_hardware`; none for `ideal` / trtllm).
MLA prefill runs as the engines run it (SGLang `srt/models/deepseek_common/attention_backend_handler.py`:
MHA_ONE_SHOT / MHA_CHUNKED_KV for an extend without speculation; vLLM's MLA backends: `_forward_prefill` with
the context decompressed chunk by chunk): the cached latent of every key the chunk sees (context + chunk) is
decompressed through `kv_b_proj` (one GEMM, N = heads x (qk_nope + v_head), K = kv_lora_rank) into per-head K (192 =
nope 128 + rope 64) and V (128), and attention is multi-head (one K/V head per query head) at 16 bits, 3.4x fewer
FLOPs than the latent form (576 / 512) that decode and verification use; the absorbed q / o BMMs the decode step
prices for those tokens are not run (`mla_prefill_swap_s`). Not modelled: SGLang's absorbed path for a prefix
shorter than its chunked-prefix threshold; DSA models (an indexer: DeepSeek-V3.2) keep the latent form.
Linear-attention / Mamba layers read and write their state once per chunk (chunked scan, 6 FLOPs per state
element per token). Units: tokens are counts, contexts are tokens, results are seconds.
"""

from __future__ import annotations

import numpy as np

from specplan.core.records import record
from specplan.core.limits import check_prefill_steps
from specplan.core.unique import on_unique
from specplan.costs.attention import AttentionHeads, attention_cost, recurrent_state_cost
from specplan.costs.gemm import elementwise_cost, gemm_cost
from specplan.model.memory import kv_bytes_per_token
from specplan.profiles.engine import EngineProfile, engine_hardware
from specplan.profiles.registry import load_engine, load_kernel_family
from specplan.model.parallel import attention_tp, instance_call
from specplan.model.step import ACT_BYTES, StepKernels, step_time


def _nonattention_s(model, hw, tp, tokens, precision, routing, logits_rows=None):
    """Seconds of everything but the attention/mixer kernels of a step with `tokens` tokens (>= 1), its LM head
    on `logits_rows` of them (default: all; a prompt's chunk needs one row: step_time)."""
    rows = tokens if logits_rows is None else logits_rows

    def rest(n, k):  # a Layout's `tokens` are one DP rank's (every rank carrying as many: parallel.instance_call)
        t, lay, nn = instance_call(tp, np.maximum(n, 1.0))
        r = step_time(model, hw, t, nn, 1, 0, logits_rows=np.maximum(k, 1.0), precision=precision,
                      kernels=StepKernels(routing=routing), **lay)
        return r.total_s - r.breakdown_s["attention"]

    return on_unique(rest, tokens, rows)


def prefill_attention_s(model, hw, tp, tokens, context, precision, family=None) -> np.ndarray:
    """Seconds of the attention / mixer kernels of one prefill chunk of `tokens` tokens after `context` cached
    tokens, over all layers (causal: mean key length context + (tokens + 1) / 2), with the KV-cache write."""
    n = np.asarray(tokens, dtype=float)
    c0 = np.asarray(context, dtype=float)
    some = n > 0
    t = np.zeros(np.broadcast(n, c0).shape)
    kv_mean = c0 + (n + 1.0) / 2.0
    for g in model.groups():
        if g.mixer in ("full", "sliding"):
            kv = kv_mean if g.mixer == "full" else np.minimum(kv_mean, model.sliding_window)
            if model.mla is not None and model.indexer is None:
                cost = mla_prefill_attention_cost(model, hw, tp, n, kv, precision, family)
                t = t + g.count * mla_prefill_swap_s(model, hw, tp, n, c0 + n, precision)
            elif model.mla is not None:
                a = model.mla
                heads = AttentionHeads(model.num_q_heads // tp, 1, a.kv_lora_rank + a.qk_rope_head_dim,
                                       head_dim_v=a.kv_lora_rank, latent=True)
                cost = attention_cost(hw, 1, np.maximum(n, 1), kv, heads, precision.kv, precision.compute,
                                      family=family)
            else:
                qh, kvh = model.heads_per_device(tp)
                cost = attention_cost(hw, 1, np.maximum(n, 1), kv, AttentionHeads(qh, kvh, model.head_dim),
                                      precision.kv, precision.compute, family=family)
            t = t + g.count * cost.time_s
        elif g.mixer in ("linear", "mamba"):
            if g.mixer == "linear":
                la = model.linear_attention
                elems = la.num_v_heads / tp * la.head_k_dim * la.head_v_dim
            else:
                m = model.mamba
                elems = m.num_heads / tp * m.head_dim * m.d_state
            cost = recurrent_state_cost(hw, 1, np.maximum(n, 1), elems * 4.0, 6.0 * elems, checkpoint=False)
            t = t + g.count * cost.time_s
    kv_write = n * (kv_bytes_per_token(model, tp, precision.kv, "full")
                    + kv_bytes_per_token(model, tp, precision.kv, "sliding"))
    t = t + elementwise_cost(hw, kv_write + n * model.hidden_size * ACT_BYTES).time_s
    return np.where(some, t, 0.0)


def _sixteen(precision) -> str:
    """The 16-bit format decompressed MLA K / V are in (kv_b_proj's output: the activation dtype)."""
    return precision.compute if precision.compute in ("bf16", "fp16") else "bf16"


def mla_prefill_attention_cost(model, hw, tp, tokens, kv_len, precision, family=None):
    """Multi-head attention of an MLA prefill chunk: per device heads/tp query heads, each with its own K
    (qk_nope + qk_rope wide) and V (v_head wide), 16-bit (decompressed), `kv_len` keys per query (mean)."""
    a = model.mla
    n = model.num_q_heads // tp
    heads = AttentionHeads(n, n, a.qk_nope_head_dim + a.qk_rope_head_dim, head_dim_v=a.v_head_dim)
    return attention_cost(hw, 1, np.maximum(tokens, 1), kv_len, heads, _sixteen(precision), _sixteen(precision),
                          family=family)


def mla_prefill_swap_s(model, hw, tp, tokens, keys, precision) -> np.ndarray:
    """Seconds one MLA layer's prefill chunk adds to the decode step's GEMMs: kv_b_proj over the `keys` cached
    latents the chunk attends to (context + chunk), less the absorbed q_nope / output BMMs (k_absorb, v_absorb)
    that the decode-form step prices for the chunk's `tokens` and MHA prefill does not run."""
    a = model.mla
    heads = model.num_q_heads // tp
    w = precision.w("attention")
    kv_b = gemm_cost(hw, np.maximum(keys, 1), heads * (a.qk_nope_head_dim + a.v_head_dim), a.kv_lora_rank, w,
                     precision.compute).time_s
    n = np.maximum(tokens, 1)
    absorbed = (gemm_cost(hw, n, heads * a.kv_lora_rank, a.qk_nope_head_dim, w, precision.compute).time_s
                + gemm_cost(hw, n, heads * a.v_head_dim, a.kv_lora_rank, w, precision.compute).time_s)
    return kv_b - absorbed


def _families(engine: EngineProfile | None, hw=None):
    eng = load_engine(engine)
    return eng, load_kernel_family(eng.family_id("prefill_attention", hw))


@record
class StepMix:
    """What one engine step runs: `decode_batch` sequences x `q_len` tokens over `decode_context` cached tokens,
    plus a prefill chunk of `prefill_tokens` tokens (split evenly over `prefill_seqs` prompts) after
    `prefill_context` cached tokens of each prompt (numbers or arrays that broadcast)."""

    decode_batch: object
    decode_context: object
    prefill_tokens: object
    prefill_context: object = 0
    q_len: object = 1
    prefill_seqs: object = 1


def mixed_step_s(model, hw, tp, mix: StepMix, *, precision, engine=None, routing="random",
                 decode_family=None) -> np.ndarray:
    """GPU seconds of one step running `mix` (StepMix: decode rows and a prefill chunk)."""
    decode_batch, decode_context, q_len = mix.decode_batch, mix.decode_context, mix.q_len
    prefill_tokens, prefill_context, prefill_seqs = mix.prefill_tokens, mix.prefill_context, mix.prefill_seqs
    eng, pfam = _families(engine, hw)  # tp: an int, or a Layout with per-DP-rank batches and tokens
    one = bool(np.all(np.asarray(q_len) <= 1))
    if decode_family is None:
        decode_family = load_kernel_family(eng.family_id("decode_attention" if one else "verify_attention", hw))
    mla_fam = (load_kernel_family(eng.family_id("mla_attention" if one else "mla_verify_attention", hw))
               if model.mla is not None else None)
    hw = engine_hardware(hw, eng)
    b = np.asarray(decode_batch, dtype=float)
    q = np.asarray(q_len, dtype=float)
    p = np.asarray(prefill_tokens, dtype=float)
    t_, lay, b_inst = instance_call(tp, np.maximum(b, 1.0))
    dec = step_time(model, hw, t_, b_inst, q, decode_context, precision=precision,
                    kernels=StepKernels(routing=routing, attention_family=decode_family, mla_family=mla_fam), **lay)
    dec_tokens = b * q
    base = np.where(b > 0, dec.total_s - _nonattention_s(model, hw, tp, np.maximum(b, 1.0) * q, precision,
                                                           routing), 0.0)
    seqs = np.maximum(np.asarray(prefill_seqs, dtype=float), 1.0)
    logits_rows = dec_tokens + np.where(p > 0, seqs, 0.0)  # every decode token, one row per prompt
    rest = _nonattention_s(model, hw, tp, dec_tokens + p, precision, routing, logits_rows)
    pre = seqs * prefill_attention_s(model, hw, attention_tp(tp), p / seqs, prefill_context, precision, pfam)
    return base + rest + pre


def prefill_s(model, hw, tp, isl, *, precision, engine=None, budget_tokens=None, n_seqs=1,
              routing="random") -> np.ndarray:
    """GPU seconds to prefill `n_seqs` prompts of `isl` tokens in chunks of the token budget (one step each)."""
    eng, pfam = _families(engine, hw)
    hw = engine_hardware(hw, eng)
    budget = float(budget_tokens or eng.max_num_batched_tokens)
    isl = np.asarray(isl, dtype=float)
    total = isl * n_seqs
    # Prompts are packed into steps of `budget` tokens; a prompt longer than the budget is split into chunks.
    per_step = np.minimum(total, budget)
    steps = np.ceil(total / budget)
    if np.size(total):
        check_prefill_steps(np.max(total), budget, f"engine {eng.id} max_num_batched_tokens")
    out = np.zeros(np.shape(total))
    for k in range(int(np.max(steps)) if np.size(steps) else 0):
        live = k < steps
        chunk = np.where(live, np.minimum(per_step, total - k * per_step), 0.0)
        # Chunk k of a long prompt attends to the k * per_step tokens before it (one prompt per step when
        # isl > budget); when several short prompts share a step, each sees only its own prefix.
        ctx = np.where(isl > budget, k * per_step, 0.0)
        seqs = np.where(isl > budget, 1.0, np.maximum(1.0, chunk / np.maximum(isl, 1.0)))
        t = _nonattention_s(model, hw, tp, np.maximum(chunk, 1.0), precision, routing, seqs)
        t = t + seqs * prefill_attention_s(model, hw, attention_tp(tp), chunk / seqs, ctx, precision, pfam)
        out = out + np.where(live, t, 0.0)
    return out

"""Memory of a deployment per device: weights + KV cache + recurrent state + activations, against capacity."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specplan.core.dtypes import dtype_bytes
from specplan.model.parallel import Layout, layout_for
from specplan.costs.precision import Precision
from specplan.profiles.hardware import HardwareProfile
from specplan.profiles.model import ATTENTION_MIXERS, ModelProfile
from specplan.costs.shapes import layer_gemms, lm_head_gemm

DEFAULT_RESERVE = 0.10


def check_reserve(value) -> float:
    """The memory fraction kept free as a float in [0, 1), or a one-line error (NaN, a bool, a string, an array of
    other than one element)."""
    from specplan.core.errors import SpecplanError, brief

    v = np.asarray(value) if not isinstance(value, (str, bool)) and value is not None else None
    if v is None or v.size != 1 or v.dtype.kind not in "iuf":
        raise SpecplanError(f"reserve: must be a number in [0, 1), got {brief(value)}")
    r = float(v.reshape(-1)[0])
    if not 0.0 <= r < 1.0:
        raise SpecplanError(f"reserve: must be in [0, 1), got {r:g}")
    return r


def routed_expert_bytes(model: ModelProfile, lay: Layout, dtype: str) -> float:
    """Routed-expert weights of one MoE layer on one GPU: E / EP experts, each FFN split over expert-TP."""
    moe = model.moe
    mats = 3.0 if model.gated_ffn else 2.0
    width = moe.latent_size or model.hidden_size  # LatentMoE: the experts run in the latent width
    return (moe.num_experts // lay.ep) * mats * width * moe.expert_ffn_size / lay.expert_tp * dtype_bytes(dtype)


def weight_bytes(model: ModelProfile, tp: int, prec: Precision, layout: Layout | None = None) -> float:
    """Weight bytes held by one device (dense parts split over TP and replicated over DP ranks; routed experts
    E / EP per GPU split over expert-TP; PP: 1/PP of the layers, and the larger of embedding and LM head, on the
    heaviest stage; MTP modules are the drafter's and counted by the MTP mechanism, not here)."""
    lay = layout_for(tp, layout)
    tp = lay.tp
    total = 0.0
    for g in model.groups():
        layer = sum(s.n * s.k * dtype_bytes(prec.w(s.module)) for s in layer_gemms(model, g, tp))
        if g.ffn == "moe":
            layer += routed_expert_bytes(model, lay, prec.w("moe"))
        total += g.count * layer
    total /= lay.pp
    lm = lm_head_gemm(model, tp)
    head = lm.n * lm.k * dtype_bytes(prec.w("lm_head"))
    embed = 0.0
    if not model.tie_embeddings and model.kind == "model":  # draft heads share the target's embedding
        embed = model.vocab_size * model.hidden_size / tp * dtype_bytes(prec.w("embedding"))
    return total + (max(head, embed) if lay.pp > 1 else head + embed)


def mtp_weight_bytes(model: ModelProfile, tp: int, prec: Precision, layout: Layout | None = None) -> float:
    """Weights of the model's MTP modules per GPU (decoder layer + 2h -> h projection each; LM head shared),
    placed like the target's layers: dense parts over TP, routed experts over EP (engines run the MTP layer
    with the target's attention TP / DP and expert parallelism, on the last pipeline stage)."""
    from specplan.profiles.model import LayerGroup

    lay = layout_for(tp, layout)
    tp = lay.tp
    g = LayerGroup(mixer=model.mtp.mixer, ffn=model.mtp.ffn, count=1)
    layer = sum(s.n * s.k * dtype_bytes(prec.w("mtp")) for s in layer_gemms(model, g, tp))
    if g.ffn == "moe":
        layer += routed_expert_bytes(model, lay, prec.w("mtp"))
    layer += 2.0 * model.hidden_size * model.hidden_size / tp * dtype_bytes(prec.w("mtp"))
    return model.mtp.num_layers * layer


INDEXER_KEY_BYTES = 1.0 + 4.0 / 128  # DSA indexer keys: fp8 with one fp32 scale per 128 (DeepSeek's fp8_index)


def kv_bytes_per_token(model: ModelProfile, tp: int, kv_dtype: str, mixer: str = "full") -> float:
    """KV-cache bytes per cached token per device for all layers of one mixer kind (MLA latent replicated over the TP
    GPUs of a DP rank; under DP attention each rank holds only its own sequences, see memory_usage; layers that reuse another layer's KV hold none; DSA layers add their indexer key)."""
    total = 0.0
    for g in model.groups():
        if g.mixer != mixer or mixer not in ATTENTION_MIXERS or g.kv_shared:
            continue
        if model.compressed_attention is not None:  # DeepSeek-V4: one shared K=V head of head_dim
            per_layer = model.head_dim * dtype_bytes(kv_dtype)
        elif model.mla is not None:
            per_layer = (model.mla.kv_lora_rank + model.mla.qk_rope_head_dim) * dtype_bytes(kv_dtype)
            if model.indexer is not None:
                per_layer += model.indexer.head_dim * INDEXER_KEY_BYTES
        else:
            _, kv_dev = model.heads_per_device(tp, model.kv_heads_of(g))
            per_layer = 2 * kv_dev * model.head_dim_of(g) * dtype_bytes(kv_dtype)
        total += g.count * per_layer
    return total


def cached_tokens(model: ModelProfile, mixer: str, ctx) -> np.ndarray:
    """Tokens one layer of `mixer` keeps in its cache after `ctx` tokens: all (full), the window (sliding),
    the current chunk at most (chunked), compressed entries plus the sliding window (DeepSeek-V4 csa / hca)."""
    ctx = np.asarray(ctx, dtype=float)
    if mixer == "sliding":
        return np.minimum(ctx, model.sliding_window)
    if mixer == "chunked":
        return np.minimum(ctx, model.chunk_size)
    if mixer in ("csa", "hca"):
        ca = model.compressed_attention
        rate = ca.csa_rate if mixer == "csa" else ca.hca_rate
        return np.minimum(ctx, model.sliding_window or 0) + np.floor(ctx / rate)
    return ctx


def kv_bytes_per_seq(model: ModelProfile, tp: int, kv_dtype: str, context_len) -> np.ndarray:
    """KV bytes of one sequence of `context_len` tokens per device (windowed layers capped, see cached_tokens)."""
    ctx = np.asarray(context_len, dtype=float)
    total = np.zeros_like(ctx)
    for mixer in sorted({g.mixer for g in model.groups()} & set(ATTENTION_MIXERS)):
        total = total + kv_bytes_per_token(model, tp, kv_dtype, mixer) * cached_tokens(model, mixer, ctx)
    if model.compressed_attention is not None and model.indexer is not None:  # V4 csa: indexer keys per entry
        n_csa = sum(g.count for g in model.groups() if g.mixer == "csa")
        total = total + n_csa * model.indexer.head_dim * INDEXER_KEY_BYTES * np.floor(ctx / model.compressed_attention.csa_rate)
    return total


def state_bytes_per_seq(model: ModelProfile, tp: int, state_dtype: str | None = None) -> float:
    """Recurrent state (in `state_dtype`, default the profile's) + conv state (16-bit) per sequence per device,
    over all linear/Mamba layers."""
    b_state = dtype_bytes(state_dtype or model.state_dtype)
    total = 0.0
    for g in model.groups():
        if g.mixer == "linear":
            la = model.linear_attention
            s = la.num_v_heads * la.head_k_dim * la.head_v_dim * b_state
            s += (la.conv_kernel - 1) * (2 * la.num_k_heads * la.head_k_dim + la.num_v_heads * la.head_v_dim) * 2.0
            total += g.count * s / tp
        elif g.mixer == "mamba":
            m = model.mamba
            s = m.num_heads * m.head_dim * m.d_state * b_state
            s += (m.conv_kernel - 1) * (m.num_heads * m.head_dim + 2 * m.n_groups * m.d_state) * 2.0
            total += g.count * s / tp
    return total


def activation_bytes(model: ModelProfile, tp: int, tokens) -> np.ndarray:
    """Transient activations of one step: a few hidden-size buffers, the widest FFN buffer and fp32 logits."""
    t = np.asarray(tokens, dtype=float)
    widest = max(model.ffn_size, (model.moe.expert_ffn_size * model.moe.top_k) if model.moe else 0) / tp
    return t * (4.0 * model.hidden_size * 2.0 + 3.0 * widest * 2.0 + model.vocab_size / tp * 4.0)


@dataclass
class MemoryResult:
    """Bytes per device and whether the deployment fits (arrays over the batch/context grid)."""

    weights_bytes: float
    kv_bytes: np.ndarray
    state_bytes: np.ndarray
    activation_bytes: np.ndarray
    extra_bytes: np.ndarray
    total_bytes: np.ndarray
    capacity_bytes: float
    fits: np.ndarray
    max_batch: np.ndarray


def memory_usage(
    model: ModelProfile,
    hw: HardwareProfile,
    tp: int,
    batch,
    context_len,
    prec: Precision,
    q_len=1,
    reserve: float = DEFAULT_RESERVE,
    draft=None,
    layout: Layout | None = None,
) -> MemoryResult:
    """Per-device memory at `batch` sequences of `context_len` tokens (+ q_len new ones), with a reserve.

    `batch` counts the instance's sequences; under DP attention a GPU holds the KV of its DP rank's
    ceil(B / DP) sequences (an MLA latent once per sequence per DP rank, replicated over that rank's TP GPUs),
    and `max_batch` counts the instance (DP x one rank's). PP: a GPU holds 1/PP of the layers' KV.
    `draft` (a drafter's speculation.drafters.DraftCost, or anything with `fixed_bytes` and `per_seq_bytes`)
    adds its weights and its per-sequence KV/state. On an LPU the capacity is
    one chip's SRAM; callers size the chip count from `total_bytes` instead of testing `fits`.
    """
    lay = layout_for(tp, layout)
    tp = lay.tp
    b = lay.per_rank_batch(batch)
    ctx = np.asarray(context_len, dtype=float) + np.asarray(q_len, dtype=float)
    extra_fixed, extra_per_seq = (0.0, 0.0) if draft is None else (draft.fixed_bytes, draft.per_seq_bytes)
    w = weight_bytes(model, tp, prec, lay) + extra_fixed
    per_seq = kv_bytes_per_seq(model, tp, prec.kv, ctx) / lay.pp + np.asarray(extra_per_seq, dtype=float)
    state = state_bytes_per_seq(model, tp, prec.state) / lay.pp * np.asarray(q_len, dtype=float)  # one checkpoint per token
    act_per_seq = activation_bytes(model, tp, np.asarray(q_len, dtype=float))
    kv = b * per_seq
    st = b * state
    act = b * act_per_seq
    total = w + kv + st + act
    cap = hw.mem_capacity_bytes * (1.0 - reserve)
    seq_bytes = per_seq + state + act_per_seq
    max_b = lay.dp * np.floor(np.maximum(cap - w, 0.0) / np.maximum(seq_bytes, 1e-9))
    return MemoryResult(
        weights_bytes=w,
        kv_bytes=kv,
        state_bytes=st,
        activation_bytes=act,
        extra_bytes=np.asarray(extra_fixed + b * np.asarray(extra_per_seq, dtype=float)),
        total_bytes=total,
        capacity_bytes=cap,
        fits=total <= cap,
        max_batch=max_b,
    )

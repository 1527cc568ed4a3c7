"""Parameter counts of a ModelProfile, computed from its fields (exact for every architecture specplan ships).

Formulas (h = hidden_size, V = vocab_size, f = FFN size; every projection without bias unless the profile says so):

* Attention (full or sliding): q h x nq*hd (x2 with attn_output_gate), k and v h x nkv*hd, o nq*hd x h; optional biases
  on all four, qk_norm adds 2*hd, attention_sinks adds nq.
* MLA: q_a h x q_lora + norm q_lora + q_b q_lora x nq*(nope+rope) (or q h x nq*(nope+rope) without q_lora);
  kv_a h x (kv_lora+rope) + norm kv_lora; kv_b kv_lora x nq*(nope+v); o nq*v x h.
* Gated DeltaNet (linear attention, Qwen3-Next / Qwen3.5): in_proj_qkvz h x (2*nk*dk + 2*nv*dv), in_proj_ba h x 2*nv,
  conv1d (2*nk*dk + nv*dv) x kernel, dt_bias and A_log nv each, gated RMSNorm dv, out_proj nv*dv x h.
* Mamba-2 (Nemotron-H): d_inner = heads*head_dim; in_proj h x (2*d_inner + 2*groups*d_state + heads),
  conv1d (d_inner + 2*groups*d_state) x (kernel + 1 bias), dt_bias, A_log, D heads each, gated RMSNorm d_inner,
  out_proj d_inner x h.
* FFN: gated 3*h*f (SwiGLU), non-gated 2*h*f (relu^2); mlp_bias adds 2f+h (gated) or f+h.
* MoE layer: experts E x FFN(expert_ffn_size), router h x E (+E with router_bias), shared experts FFN(shared size),
  shared-expert gate h. Active: top_k experts instead of E.
* One RMSNorm (h) per mixer and per FFN of each layer, plus the final norm.
* Embedding V x h; LM head V x h (draft_vocab_size x h for an EAGLE-3 head), counted once when tied.
* MTP module: eh_proj 2h x h + 3 norms (embedding, hidden, output) + one decoder layer (mtp.mixer, mtp.ffn).
* EAGLE-3 head: fc 3h x h, its layer's q/k/v take 2h inputs (token embedding ++ fused hidden state), one extra norm;
  the embedding is the target's (reported as `embedding_shared`, not counted in `total`).
* Medusa heads: per head num_layers x ResBlock (h x h + bias h) + LM head h x V.

`total` and `active` exclude MTP modules (see `mtp`, `mtp_active`, `total_with_mtp`) and vision towers; `active`
counts the embedding and the LM head in full (DeepSeek convention, as in model_configs.csv).
"""

from __future__ import annotations

from dataclasses import dataclass

from specplan.core.records import Record, record
from specplan.profiles.model import ATTENTION_MIXERS, LayerGroup, ModelProfile

# Module keys used by `by_module`, the same keys as ModelProfile.module_dtypes.
MODULES = ("attention", "linear_attention", "mamba", "ffn", "moe", "shared_experts", "fc", "lm_head", "embedding",
           "other")


@record
class ParamCounts(Record):
    """Parameter counts of a profile (see param_counts); by_module maps module keys to their share of `total`."""

    total: int
    active: int
    embedding: int
    lm_head: int
    non_embedding: int
    mtp: int
    mtp_active: int
    total_with_mtp: int
    embedding_shared: int
    by_module: dict[str, int]


def _ffn(m: ModelProfile, f: int, width: int | None = None) -> int:
    """One FFN (or one expert) of intermediate size f on inputs of `width` (default hidden_size)."""
    if f <= 0:
        return 0
    h = width or m.hidden_size
    if m.gated_ffn:
        return 3 * h * f + ((2 * f + h) if m.mlp_bias else 0)
    return 2 * h * f + ((f + h) if m.mlp_bias else 0)


def _attention(m: ModelProfile, g: LayerGroup, in_dim: int | None = None) -> tuple[int, int]:
    """(projection weights, small extras) of one attention block (full, sliding, chunked; MLA; DeepSeek-V4)."""
    h = m.hidden_size
    x = in_dim or h
    nq = m.num_q_heads
    if m.compressed_attention is not None:
        return _compressed_attention(m, g.mixer)
    if m.mla is not None:
        a = m.mla
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        if a.q_lora_rank:
            q = x * a.q_lora_rank + a.q_lora_rank * nq * qk
            small = a.q_lora_rank
        else:
            q = x * nq * qk
            small = 0
        kv = x * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank * nq * (a.qk_nope_head_dim + a.v_head_dim)
        o = nq * a.v_head_dim * h
        small += a.kv_lora_rank
        if m.attention_bias:
            small += nq * qk + a.kv_lora_rank + a.qk_rope_head_dim + h
        proj = q + kv + o
        if m.indexer is not None:  # DeepSeek-V3.2 lightning indexer: wq_b, wk, weights_proj; LayerNorm on k
            ix = m.indexer
            proj += a.q_lora_rank * ix.num_heads * ix.head_dim + h * ix.head_dim + h * ix.num_heads
            small += 2 * ix.head_dim
        return proj, small
    nkv, hd = m.kv_heads_of(g), m.head_dim_of(g)
    kv_proj = 0 if g.kv_shared else (1 if g.k_eq_v else 2)
    q_out = nq * hd * (2 if m.attn_output_gate else 1)
    proj = x * q_out + kv_proj * x * nkv * hd + nq * hd * h
    small = 0
    if m.attention_bias:
        small += q_out + kv_proj * nkv * hd + h
    if m.qk_norm:
        small += hd if g.kv_shared else 2 * hd
    if m.attention_sinks:
        small += nq
    return proj, small


def _compressed_attention(m: ModelProfile, mixer: str) -> tuple[int, int]:
    """DeepSeek-V4 attention: q_a/q_b, one shared KV head, grouped output projection, sinks; plus the compressor
    of csa / hca layers (and the csa layers' lightning indexer). head_dim is the single KV head's width (512)."""
    ca, h, nq, hd = m.compressed_attention, m.hidden_size, m.num_q_heads, m.head_dim
    qr, og, ol = ca.q_lora_rank, ca.o_groups, ca.o_lora_rank
    proj = h * qr + qr * nq * hd + h * hd + (nq * hd // og) * og * ol + og * ol * h
    small = qr + hd + nq  # q_a_norm, kv_norm, sinks
    if mixer == "hca":  # kv_proj, gate_proj (h -> hd); position bias rate x hd; kv_norm
        proj += 2 * h * hd
        small += ca.hca_rate * hd + hd
    elif mixer == "csa":  # two overlapping series: kv_proj, gate_proj h -> 2 hd; the indexer's own compressor
        ix = m.indexer
        proj += 4 * h * hd + 4 * h * ix.head_dim + qr * ix.num_heads * ix.head_dim + h * ix.num_heads
        small += ca.csa_rate * 2 * hd + hd + ca.csa_rate * 2 * ix.head_dim + ix.head_dim
    return proj, small


def _linear_attention(m: ModelProfile) -> tuple[int, int]:
    la = m.linear_attention
    h = m.hidden_size
    key_dim, value_dim = la.num_k_heads * la.head_k_dim, la.num_v_heads * la.head_v_dim
    proj = h * (2 * key_dim + 2 * value_dim) + h * 2 * la.num_v_heads + value_dim * h
    small = (2 * key_dim + value_dim) * la.conv_kernel + 2 * la.num_v_heads + la.head_v_dim
    return proj, small


def _mamba(m: ModelProfile) -> tuple[int, int]:
    mb = m.mamba
    h = m.hidden_size
    d_inner = mb.num_heads * mb.head_dim
    gs = 2 * mb.n_groups * mb.d_state
    proj = h * (2 * d_inner + gs + mb.num_heads) + d_inner * h
    conv_dim = d_inner + gs
    small = conv_dim * (mb.conv_kernel + 1) + 3 * mb.num_heads + d_inner
    return proj, small


def _mixer(m: ModelProfile, g: LayerGroup, in_dim: int | None = None) -> dict[str, int]:
    mixer = g.mixer
    if mixer in ATTENTION_MIXERS:
        p, s = _attention(m, g, in_dim)
        return {"attention": p, "other": s}
    if mixer == "attn_linear":  # Nemotron NAS: attention replaced by one h x h linear
        return {"attention": m.hidden_size * m.hidden_size}
    if mixer == "linear":
        p, s = _linear_attention(m)
        return {"linear_attention": p, "other": s}
    if mixer == "mamba":
        p, s = _mamba(m)
        return {"mamba": p, "other": s}
    return {}


def _moe(m: ModelProfile, active: bool) -> dict[str, int]:
    e = m.moe
    h = m.hidden_size
    n = e.top_k if active else e.num_experts
    experts = n * _ffn(m, e.expert_ffn_size, e.latent_size or h)
    shared_f = e.shared_expert_ffn_size or (e.num_shared_experts * e.expert_ffn_size)
    shared = _ffn(m, shared_f) if (e.num_shared_experts or e.shared_expert_ffn_size) else 0
    router = h * e.num_experts + (e.num_experts if e.router_bias else 0)
    gate = h if e.shared_expert_gate else 0
    if e.latent_size:  # LatentMoE: fc1_latent_proj h -> latent, fc2_latent_proj latent -> h
        experts += 2 * h * e.latent_size
    return {"moe": experts, "shared_experts": shared, "other": router + gate}


def _layer(m: ModelProfile, g: LayerGroup, active: bool, in_dim: int | None = None) -> dict[str, int]:
    out: dict[str, int] = {}

    def add(d: dict[str, int]) -> None:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v

    h = m.hidden_size
    add(_mixer(m, g, in_dim))
    if g.ffn == "dense":
        add({"ffn": _ffn(m, m.ffn_size_of(g))})
    elif g.ffn == "moe":
        add(_moe(m, active))
    elif g.ffn == "linear":  # Nemotron NAS: FFN replaced by one h x h linear
        add({"ffn": h * h})
    norms = m.norms_per_layer if m.norms_per_layer is not None else (g.mixer != "none") + (g.ffn != "none")
    add({"other": norms * h})
    if m.per_layer_input_size:  # Gemma PLE: per_layer_input_gate h -> d, per_layer_projection d -> h, its norm
        add({"ffn": 2 * h * m.per_layer_input_size, "other": h})
    if m.compressed_attention is not None:  # two hyper-connections (attention, FFN): fn, base, scale
        hc = m.compressed_attention.hc_mult
        add({"other": 2 * ((2 + hc) * hc * hc * h + (2 + hc) * hc + 3)})
    return out


def _sum(parts: dict[str, int]) -> int:
    return int(sum(parts.values()))


def _acc(into: dict[str, int], parts: dict[str, int], times: int = 1) -> None:
    for k, v in parts.items():
        into[k] = into.get(k, 0) + v * times


def param_counts(model: ModelProfile) -> ParamCounts:
    """Parameter counts: total, active, embedding, lm_head, mtp, mtp_active, non_embedding, total_with_mtp, by_module.

    `by_module` splits `total` by the module keys of ModelProfile.module_dtypes (plus `fc` for an EAGLE-3 head's
    fusion layer and `other` for norms, routers, biases, convolutions and per-head scalars).
    """
    m = model
    h, V = m.hidden_size, m.vocab_size

    if m.kind == "medusa_heads":
        heads = m.num_draft_heads or 1
        res = heads * m.num_layers * (h * h + h)
        head = heads * h * V
        by = {"ffn": res, "lm_head": head}
        total = res + head
        return _result(total, total, 0, head, 0, 0, by, embedding_shared=V * h)

    by: dict[str, int] = {}
    by_active: dict[str, int] = {}
    eagle = m.kind == "eagle3_head"
    in_dim = 2 * h if eagle else None
    for g in m.groups():
        _acc(by, _layer(m, g, False, in_dim), g.count)
        _acc(by_active, _layer(m, g, True, in_dim), g.count)
    norm_other, norm_ffn = h, None
    if m.per_layer_input_size:  # Gemma PLE: table V_ple x (L * d), model projection h -> L * d, its norm
        d = m.per_layer_input_size
        norm_other, norm_ffn = h + d, h * m.num_layers * d
        ple = {"embedding": m.per_layer_vocab_size * m.num_layers * d}
        _acc(by, ple)
        _acc(by_active, ple)
    if m.compressed_attention is not None:  # DeepSeek-V4 hyper-connection head
        hc = m.compressed_attention.hc_mult
        norm_other += hc * hc * h + hc + 1
    final_norm = {"other": norm_other} if norm_ffn is None else {"other": norm_other, "ffn": norm_ffn}
    _acc(by, final_norm)
    _acc(by_active, final_norm)

    head_rows = m.draft_vocab_size if (eagle and m.draft_vocab_size) else V
    lm_head = head_rows * h
    embedding = V * h
    embedding_shared = 0
    if eagle:
        extra = {"fc": 3 * h * h, "other": h}  # fc fuses 3 target hidden states; hidden_norm
        _acc(by, extra)
        _acc(by_active, extra)
        embedding_shared, embedding = embedding, 0
    emb_parts = {"embedding": embedding, "lm_head": 0 if m.tie_embeddings else lm_head}
    _acc(by, emb_parts)
    _acc(by_active, emb_parts)

    mtp = mtp_active = 0
    if m.mtp is not None:
        base = 2 * h * h + 3 * h
        g = LayerGroup(mixer=m.mtp.mixer, ffn=m.mtp.ffn, count=1)
        mtp = m.mtp.num_layers * (base + _sum(_layer(m, g, False)))
        mtp_active = m.mtp.num_layers * (base + _sum(_layer(m, g, True)))

    return _result(_sum(by), _sum(by_active), by.get("embedding", 0), lm_head, mtp, mtp_active, by, embedding_shared)


def _result(total, active, embedding, lm_head, mtp, mtp_active, by, embedding_shared=0) -> ParamCounts:
    head_counted = by.get("lm_head", 0)
    return ParamCounts(
        total=int(total),
        active=int(active),
        embedding=int(embedding),
        lm_head=int(lm_head),
        non_embedding=int(total - embedding - head_counted),
        mtp=int(mtp),
        mtp_active=int(mtp_active),
        total_with_mtp=int(total + mtp),
        embedding_shared=int(embedding_shared),
        by_module={k: int(v) for k, v in by.items() if v},
    )


def module_dtype(model: ModelProfile, key: str) -> str:
    """Weight dtype of a by_module key; `other` (norms, routers, biases, convolutions) stays 16-bit in a quantized
    checkpoint unless module_dtypes names it."""
    from specplan.core.dtypes import dtype_bytes

    if key == "other" and "other" not in model.module_dtypes and dtype_bytes(model.weight_dtype) < 2:
        return "bf16"
    return model.dtype_of(key)


def weight_bytes(model: ModelProfile, include_mtp: bool = True) -> dict:
    """Weight bytes per module with the profile's module dtypes (block-scale overhead included); key `total`."""
    from specplan.core.dtypes import dtype_bytes

    pc = param_counts(model)
    out = {k: v * dtype_bytes(module_dtype(model, k)) for k, v in pc.by_module.items()}
    if include_mtp and pc.mtp:
        out["mtp"] = pc.mtp * dtype_bytes(model.dtype_of("mtp"))
    out["total"] = sum(out.values())
    return out


def param_summary(model: ModelProfile) -> list[str]:
    """Lines (YAML comments) with the derived parameter counts and the weight bytes per dtype of a profile."""
    from specplan.core.dtypes import dtype_bytes

    pc = param_counts(model)
    lines = [
        f"# parameters: total {pc.total:,} ({pc.total / 1e9:.2f} B), active per token {pc.active:,} "
        f"({pc.active / 1e9:.2f} B; embedding and LM head counted in both), "
        f"non-embedding active {(pc.active - pc.embedding - pc.by_module.get('lm_head', 0)) / 1e9:.2f} B",
    ]
    if pc.mtp:
        lines.append(f"# draft / MTP heads: {pc.mtp:,} ({pc.mtp / 1e9:.2f} B), active {pc.mtp_active / 1e9:.2f} B")
    if pc.embedding_shared:
        lines.append(f"# embedding shared with the target (not counted): {pc.embedding_shared:,}")
    by_dtype: dict[str, list] = {}
    for k, v in pc.by_module.items():
        d = module_dtype(model, k)
        by_dtype.setdefault(d, [0.0, []])
        by_dtype[d][0] += v * dtype_bytes(d)
        by_dtype[d][1].append(k)
    if pc.mtp:
        d = model.dtype_of("mtp")
        by_dtype.setdefault(d, [0.0, []])
        by_dtype[d][0] += pc.mtp * dtype_bytes(d)
        by_dtype[d][1].append("mtp")
    parts = [f"{d} {b / 1e9:.2f} GB ({', '.join(mods)})" for d, (b, mods) in sorted(by_dtype.items())]
    lines.append("# weight bytes by dtype (block scales included): " + "; ".join(parts))
    return lines

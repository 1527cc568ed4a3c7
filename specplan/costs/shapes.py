"""The GEMMs of one decoder layer (and the LM head) of a model under TP: names, N, K and weight module.

One list serves the step time (M = tokens), the weight memory (N * K * bytes) and the benchmark harness.
"""

from __future__ import annotations

from specplan.core.records import record
from specplan.profiles.model import ATTENTION_MIXERS, LayerGroup, ModelProfile


@record
class GemmShape:
    """y[M, n] = x[M, k] W[n, k]^T; `module` selects the weight dtype; per-device shapes under TP."""

    name: str
    n: int
    k: int
    module: str


def mixer_gemms(model: ModelProfile, group: LayerGroup | str, tp: int) -> list[GemmShape]:
    """GEMMs of one token mixer (attention projections, MLA projections, linear-attention / Mamba projections)."""
    g = group if isinstance(group, LayerGroup) else LayerGroup(mixer=group, ffn="none", count=1)
    mixer = g.mixer
    h = model.hidden_size
    if mixer == "attn_linear":  # Nemotron NAS: attention replaced by one h x h linear (columns split over TP)
        return [GemmShape("attn_linear", h // tp, h, "attention")]
    if mixer in ATTENTION_MIXERS:
        if model.compressed_attention is not None:
            return _compressed_attention_gemms(model, mixer, tp)
        if model.mla is not None:
            a = model.mla
            q_dev = model.num_q_heads // tp
            qk = a.qk_nope_head_dim + a.qk_rope_head_dim
            out = []
            if a.q_lora_rank:
                out.append(GemmShape("q_a", a.q_lora_rank, h, "attention"))  # replicated
                out.append(GemmShape("q_b", q_dev * qk, a.q_lora_rank, "attention"))
            else:
                out.append(GemmShape("q", q_dev * qk, h, "attention"))
            out += [
                GemmShape("kv_a", a.kv_lora_rank + a.qk_rope_head_dim, h, "attention"),  # replicated
                GemmShape("k_absorb", q_dev * a.kv_lora_rank, a.qk_nope_head_dim, "attention"),
                GemmShape("v_absorb", q_dev * a.v_head_dim, a.kv_lora_rank, "attention"),
                GemmShape("o", h, q_dev * a.v_head_dim, "attention"),
            ]
            if model.indexer is not None:  # DeepSeek-V3.2 lightning indexer (replicated: 64 small heads)
                ix = model.indexer
                out += [
                    GemmShape("indexer_q", ix.num_heads * ix.head_dim, a.q_lora_rank, "attention"),
                    GemmShape("indexer_k_w", ix.head_dim + ix.num_heads, h, "attention"),
                ]
            return out
        q_dev, kv_dev = model.heads_per_device(tp, model.kv_heads_of(g))
        d = model.head_dim_of(g)
        q_cols = q_dev * d * (2 if model.attn_output_gate else 1)
        kv_cols = (0 if g.kv_shared else (1 if g.k_eq_v else 2)) * kv_dev * d
        if model.kind == "eagle3_head":  # q/k/v read [token embedding ++ fused hidden state] = 2h inputs
            return [
                GemmShape("fc", h, 3 * h, "fc"),  # fuses three target hidden states 3h -> h
                GemmShape("qkv", q_cols + kv_cols, 2 * h, "attention"),
                GemmShape("o", h, q_dev * d, "attention"),
            ]
        return [
            GemmShape("qkv", q_cols + kv_cols, h, "attention"),
            GemmShape("o", h, q_dev * d, "attention"),
        ]
    if mixer == "linear":
        la = model.linear_attention
        n_in = 2 * la.num_k_heads * la.head_k_dim + 2 * la.num_v_heads * la.head_v_dim + 2 * la.num_v_heads
        return [
            GemmShape("la_in", n_in // tp, h, "linear_attention"),
            GemmShape("la_out", h, la.num_v_heads * la.head_v_dim // tp, "linear_attention"),
        ]
    if mixer == "mamba":
        m = model.mamba
        d_inner = m.num_heads * m.head_dim
        n_in = 2 * d_inner + 2 * m.n_groups * m.d_state + m.num_heads
        return [
            GemmShape("mamba_in", n_in // tp, h, "mamba"),
            GemmShape("mamba_out", h, d_inner // tp, "mamba"),
        ]
    return []


def _compressed_attention_gemms(model: ModelProfile, mixer: str, tp: int) -> list[GemmShape]:
    """DeepSeek-V4 attention GEMMs: q_a, kv and the compressors replicated (one KV head), q_b and the grouped
    output projection split over TP by heads."""
    ca, h, hd = model.compressed_attention, model.hidden_size, model.head_dim
    q_dev = model.num_q_heads // tp
    out = [
        GemmShape("q_a", ca.q_lora_rank, h, "attention"),
        GemmShape("q_b", q_dev * hd, ca.q_lora_rank, "attention"),
        GemmShape("kv", hd, h, "attention"),
        GemmShape("o_a", max(1, ca.o_groups * ca.o_lora_rank // tp), model.num_q_heads * hd // ca.o_groups, "attention"),
        GemmShape("o_b", h, max(1, ca.o_groups * ca.o_lora_rank // tp), "attention"),
    ]
    if mixer == "hca":
        out.append(GemmShape("compressor", 2 * hd, h, "attention"))
    elif mixer == "csa":
        ix = model.indexer
        out += [
            GemmShape("compressor", 4 * hd + 4 * ix.head_dim + ix.num_heads, h, "attention"),
            GemmShape("indexer_q", ix.num_heads * ix.head_dim, ca.q_lora_rank, "attention"),
        ]
    return out


def ffn_gemms(model: ModelProfile, group: LayerGroup | str, tp: int) -> list[GemmShape]:
    """Dense GEMMs of one FFN: the gated MLP, or for MoE the router, the shared experts and LatentMoE's latent
    projections (routed experts are costed by costs.moe)."""
    g = group if isinstance(group, LayerGroup) else LayerGroup(mixer="none", ffn=group, count=1)
    h = model.hidden_size
    up = 2 if model.gated_ffn else 1  # gated (SwiGLU): gate and up; else up only
    if g.ffn == "dense":
        f = model.ffn_size_of(g) // tp
        return [GemmShape("gate_up", up * f, h, "ffn"), GemmShape("down", h, f, "ffn")]
    if g.ffn == "linear":  # Nemotron NAS: FFN replaced by one h x h linear
        return [GemmShape("ffn_linear", h // tp, h, "ffn")]
    if g.ffn == "moe":
        moe = model.moe
        out = [GemmShape("router", moe.num_experts, h, "router")]
        fs = moe.shared_expert_ffn_size or moe.num_shared_experts * moe.expert_ffn_size
        if fs:
            out += [GemmShape("shared_gate_up", up * fs // tp, h, "shared_experts"),
                    GemmShape("shared_down", h, fs // tp, "shared_experts")]
        if moe.latent_size:  # LatentMoE: h -> latent before the experts, latent -> h after (replicated)
            out += [GemmShape("latent_in", moe.latent_size, h, "moe"), GemmShape("latent_out", h, moe.latent_size, "moe")]
        return out
    return []


def layer_gemms(model: ModelProfile, group: LayerGroup, tp: int) -> list[GemmShape]:
    """All dense GEMMs of one layer of `group`."""
    return mixer_gemms(model, group, tp) + ffn_gemms(model, group, tp)


def lm_head_gemm(model: ModelProfile, tp: int) -> GemmShape:
    """The LM head (vocabulary split over TP)."""
    vocab = model.draft_vocab_size or model.vocab_size
    return GemmShape("lm_head", vocab // tp, model.hidden_size, "lm_head")


def model_gemm_shapes(model: ModelProfile, tp: int = 1) -> list[GemmShape]:
    """Distinct (name, N, K) GEMM shapes of a decode step, for the benchmark harness."""
    seen, out = set(), []
    for g in model.groups():
        for s in layer_gemms(model, g, tp):
            if (s.n, s.k) not in seen:
                seen.add((s.n, s.k))
                out.append(s)
    s = lm_head_gemm(model, tp)
    if (s.n, s.k) not in seen:
        out.append(s)
    return out

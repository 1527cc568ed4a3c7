"""The GEMMs of one decoder layer (and the LM head) of a model under TP: names, N, K and weight module.

One list serves the step time (M = tokens), the weight memory (N * K * bytes) and the benchmark harness.
"""

from __future__ import annotations

from dataclasses import dataclass

from specplan.profiles.model import LayerGroup, ModelProfile


@dataclass(frozen=True)
class GemmShape:
    """y[M, n] = x[M, k] W[n, k]^T; `module` selects the weight dtype; per-device shapes under TP."""

    name: str
    n: int
    k: int
    module: str


def mixer_gemms(model: ModelProfile, mixer: str, tp: int) -> list[GemmShape]:
    """GEMMs of one token mixer (attention projections, MLA projections, linear-attention / Mamba projections)."""
    h = model.hidden_size
    if mixer in ("full", "sliding"):
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
            return out
        q_dev, kv_dev = model.heads_per_device(tp)
        d = model.head_dim
        q_cols = q_dev * d * (2 if model.attn_output_gate else 1)
        if model.kind == "eagle3_head":  # q/k/v read [token embedding ++ fused hidden state] = 2h inputs
            return [
                GemmShape("fc", h, 3 * h, "fc"),  # fuses three target hidden states 3h -> h
                GemmShape("qkv", q_cols + 2 * kv_dev * d, 2 * h, "attention"),
                GemmShape("o", h, q_dev * d, "attention"),
            ]
        return [
            GemmShape("qkv", q_cols + 2 * kv_dev * d, h, "attention"),
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


def ffn_gemms(model: ModelProfile, ffn: str, tp: int) -> list[GemmShape]:
    """Dense GEMMs of one FFN: the gated MLP, or for MoE the router and the shared experts (routed experts
    are costed by costs.moe)."""
    h = model.hidden_size
    up = 2 if model.gated_ffn else 1  # gated (SwiGLU): gate and up; else up only
    if ffn == "dense":
        f = model.ffn_size // tp
        return [GemmShape("gate_up", up * f, h, "ffn"), GemmShape("down", h, f, "ffn")]
    if ffn == "moe":
        moe = model.moe
        out = [GemmShape("router", moe.num_experts, h, "router")]
        fs = moe.shared_expert_ffn_size or moe.num_shared_experts * moe.expert_ffn_size
        if fs:
            out += [GemmShape("shared_gate_up", up * fs // tp, h, "moe"), GemmShape("shared_down", h, fs // tp, "moe")]
        return out
    return []


def layer_gemms(model: ModelProfile, group: LayerGroup, tp: int) -> list[GemmShape]:
    """All dense GEMMs of one layer of `group`."""
    return mixer_gemms(model, group.mixer, tp) + ffn_gemms(model, group.ffn, tp)


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

"""Architecture blocks of a Hugging Face config: attention dims (MLA), MoE, MTP, linear-attention / Mamba, flags."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from specplan.core.records import Record, record
from specplan.profiles.hf_fields import HfFields


@record(kw_only=True)
class MoeBlock(Record):
    """The profile's `moe` fields read from a config (optional ones left out while None)."""

    num_experts: int
    top_k: int
    expert_ffn_size: int
    num_shared_experts: int | None = None
    shared_expert_ffn_size: int | None = None
    shared_expert_gate: bool | None = None
    router_bias: bool | None = None
    n_group: int | None = None
    topk_group: int | None = None
    hash_layers: int | None = None
    latent_size: int | None = None
    dense_layers: int | None = None
    OPTIONAL = ("num_shared_experts", "shared_expert_ffn_size", "shared_expert_gate", "router_bias", "n_group",
                "topk_group", "hash_layers", "latent_size", "dense_layers")


@record(kw_only=True)
class MtpBlock(Record):
    """The profile's `mtp` fields: MTP layers and the mixer and FFN kind of each."""

    num_layers: int
    mixer: str
    ffn: str


@record(kw_only=True)
class MixerFields(Record):
    """The profile fields of the mixer kinds present (sliding window, chunk, linear attention, Mamba, state dtype)."""

    sliding_window: int | None = None
    chunk_size: int | None = None
    linear_attention: dict | None = None
    mamba: dict | None = None
    state_dtype: str | None = None
    OPTIONAL = ("sliding_window", "chunk_size", "linear_attention", "mamba", "state_dtype")


@record(kw_only=True)
class ArchFlags(Record):
    """Small architecture fields of the profile (tied embeddings, gates, norms, biases, sinks, draft vocabulary)."""

    tie_embeddings: bool
    attn_output_gate: bool | None = None
    qk_norm: bool | None = None
    norms_per_layer: int | None = None
    per_layer_input_size: int | None = None
    per_layer_vocab_size: int | None = None
    gated_ffn: bool | None = None
    attention_sinks: bool | None = None
    attention_bias: bool
    mlp_bias: bool
    draft_vocab_size: int | None = None
    OPTIONAL = ("attn_output_gate", "qk_norm", "norms_per_layer", "per_layer_input_size", "per_layer_vocab_size",
                "gated_ffn", "attention_sinks", "draft_vocab_size")


def _indexer(c: HfFields) -> dict[str, int]:
    return {"num_heads": c.int("index_n_heads"), "head_dim": c.int("index_head_dim"), "topk": c.int("index_topk")}


def _compress_rate(c: HfFields, kind: str, legacy: str, default: int) -> int:
    rates = c.get("compress_rates")
    if rates is not None and not isinstance(rates, dict):
        raise c.fail("compress_rates", f"expected an object, got {type(rates).__name__}")
    v = (rates or {}).get(kind, c.get(legacy, default=default))
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise c.fail(f"compress_rates.{kind}", f"expected an integer >= 1, got {v!r}")
    return v


def attention_dims(c: HfFields, fam: str, h: int, nq: int) -> dict[str, Any]:
    """{'mla': ..., 'head_dim': ...} for DeepSeek MLA (+ the V3.2 indexer), DeepSeek-V4's compressed attention, else
    {'head_dim': ...} (given or hidden_size / heads)."""
    if fam == "deepseek_v4":
        ca = {
            "csa_rate": _compress_rate(c, "compressed_sparse_attention", "compress_rate_csa", 4),
            "hca_rate": _compress_rate(c, "heavily_compressed_attention", "compress_rate_hca", 128),
            "q_lora_rank": c.int("q_lora_rank"),
            "o_groups": c.int("o_groups"),
            "o_lora_rank": c.int("o_lora_rank"),
            "hc_mult": c.int("hc_mult", default=1),
        }
        return {"compressed_attention": ca, "indexer": _indexer(c), "head_dim": c.int("head_dim")}
    if fam == "deepseek":
        q_lora = c.int("q_lora_rank", default=0, minimum=0)
        kv_lora, rope = c.int("kv_lora_rank"), c.int("qk_rope_head_dim")
        nope, v_dim = c.int("qk_nope_head_dim"), c.int("v_head_dim")
        mla = {"q_lora_rank": q_lora, "kv_lora_rank": kv_lora, "qk_rope_head_dim": rope, "qk_nope_head_dim": nope,
               "v_head_dim": v_dim}
        if not c.has("index_topk"):
            return {"mla": mla, "head_dim": nope + rope}
        if not q_lora:  # DeepSeek-V3.2 sparse attention (DSA)
            raise c.fail("q_lora_rank", "missing field (the DSA indexer reads the query latent)")
        return {"mla": mla, "head_dim": nope + rope, "indexer": _indexer(c)}
    if c.has("head_dim"):
        return {"head_dim": c.int("head_dim")}
    if h % nq:
        raise c.fail("head_dim", f"missing field, and hidden_size {h} is not a multiple of {nq} heads")
    return {"head_dim": h // nq}


def _no_experts_check(c: HfFields, fam: str) -> None:
    """An MoE config (top-k experts per token given, or an MoE-only family) whose expert count is 0 or null is an
    error naming the field, not a dense model imported without a word."""
    count = next((k for k in ("n_routed_experts", "num_experts", "num_local_experts") if k in c.data), None)
    top_k = c.get("num_experts_per_tok", "experts_per_token", "moe_topk")
    routed = isinstance(top_k, int) and not isinstance(top_k, bool) and top_k > 0
    if routed or fam in ("mixtral", "gpt_oss"):
        field = count or ("num_local_experts" if fam in ("mixtral", "gpt_oss") else "num_experts")
        why = f"num_experts_per_tok is {top_k}" if routed else f"a {fam} model is MoE"
        raise c.fail(field, f"an MoE config ({why}) needs >= 1 experts, got {c.data.get(field)!r}")


def moe_block(c: HfFields, fam: str, mt: str) -> MoeBlock | None:
    """The MoE fields (experts, top-k, expert FFN size, shared experts, router bias), None for dense models."""
    n_exp = c.int("n_routed_experts", "num_experts", "num_local_experts", default=0, minimum=0)
    if n_exp <= 0:
        _no_experts_check(c, fam)
        return None
    if fam == "gemma" and not c.bool("enable_moe_block", False):
        return None
    top_k = c.int("num_experts_per_tok", "experts_per_token", "moe_topk", "top_k_experts")
    if top_k > n_exp:
        raise c.fail("num_experts_per_tok", f"must be <= the {n_exp} routed experts, got {top_k}")
    if fam in ("mixtral", "gpt_oss", "llama4", "minimax_m2"):
        eff = c.int("intermediate_size")
    else:
        eff = c.int("moe_intermediate_size")
    moe = MoeBlock(num_experts=n_exp, top_k=top_k, expert_ffn_size=eff)
    if fam == "llama4":  # one shared expert of intermediate_size beside the routed ones, router without bias
        moe = replace(moe, num_shared_experts=1, shared_expert_ffn_size=eff)
    elif fam == "minimax_m2":
        moe = replace(moe, router_bias=True)  # e_score_correction_bias
    elif fam == "gemma":  # Gemma 4 MoE layers run their dense MLP beside the experts: an ungated-in-output shared FFN
        moe = replace(moe, num_shared_experts=1, shared_expert_ffn_size=c.int("intermediate_size"), router_bias=True)
    elif fam == "deepseek_v4":
        ns = c.int("n_shared_experts", default=0, minimum=0)
        if ns:
            moe = replace(moe, num_shared_experts=ns, shared_expert_ffn_size=ns * eff)
        types = c.list("mlp_layer_types")
        n_hash = sum(1 for t in types if t == "hash_moe") if types is not None else c.int(
            "num_hash_layers", default=3, minimum=0)
        moe = replace(moe, router_bias=True, hash_layers=n_hash or None)
    elif fam == "deepseek":
        ns = c.int("n_shared_experts", default=0, minimum=0)
        if ns:
            moe = replace(moe, num_shared_experts=ns, shared_expert_ffn_size=ns * eff)
        if c.get("topk_method") == "noaux_tc" or mt == "deepseek_v3":
            moe = replace(moe, router_bias=True)
        ng, tg = c.int("n_group", default=1), c.int("topk_group", default=1)
        if ng > 1 and tg < ng:  # group-limited routing (DeepSeek-V3: top-8 within 4 of 8 groups)
            moe = replace(moe, n_group=ng, topk_group=tg)
    elif fam == "qwen_hybrid" or fam == "qwen_moe":
        sf = c.int("shared_expert_intermediate_size", default=0, minimum=0)
        if sf:
            moe = replace(moe, num_shared_experts=1, shared_expert_ffn_size=sf, shared_expert_gate=True)
    elif fam == "nemotron_h":
        ns = c.int("n_shared_experts", default=0, minimum=0)
        sf = c.int("moe_shared_expert_intermediate_size", default=0, minimum=0)
        if ns or sf:
            moe = replace(moe, num_shared_experts=max(ns, 1), shared_expert_ffn_size=sf or ns * eff)
        latent = c.int("moe_latent_size") if c.get("moe_latent_size") is not None else None
        moe = replace(moe, router_bias=True, latent_size=latent)
    elif fam == "gpt_oss":
        moe = replace(moe, router_bias=True)
    return moe


def mtp_block(c: HfFields, mt: str, moe: MoeBlock | None) -> tuple[MtpBlock | None, str]:
    """(MTP fields or None, a note when the layer count is assumed rather than read)."""
    n_mtp = c.int("mtp_num_hidden_layers", "num_nextn_predict_layers", default=0, minimum=0)
    if n_mtp > 64:
        raise c.fail("num_nextn_predict_layers", f"must be <= 64 MTP layers, got {n_mtp:,}")
    note = ""
    if n_mtp == 0 and mt == "qwen3_next":
        n_mtp = 1  # Qwen3-Next checkpoints carry one MTP layer, but the config has no field for it
        note = "MTP: one layer assumed (Qwen3-Next checkpoints carry mtp.* weights; the config has no field)."
    if not n_mtp:
        return None, note
    mixer, ffn = "full", "moe" if moe is not None else "dense"
    blocks = c.list("mtp_layers_block_type")
    if not blocks and c.has("mtp_hybrid_override_pattern"):  # Nemotron-H: the MTP layer's pattern, e.g. "*E"
        names = {"*": "attention", "M": "mamba", "E": "moe", "-": "mlp"}
        pattern = str(c.get("mtp_hybrid_override_pattern"))
        if any(ch not in names for ch in pattern):
            raise c.fail("mtp_hybrid_override_pattern", f"unsupported symbols in {pattern!r} (M, *, -, E)")
        blocks = [names[ch] for ch in pattern]
    if blocks:
        names = [str(b) for b in blocks]
        mixer_name = next((x for x in names if x in ("attention", "mamba")), None)
        ffn_name = next((x for x in names if x in ("moe", "mlp")), None)
        mixer = {"attention": "full", "mamba": "mamba", None: "none"}[mixer_name]
        ffn = {"moe": "moe", "mlp": "dense", None: "none"}[ffn_name]
    if ffn == "moe" and moe is None:
        raise c.fail("num_experts", "missing field (the MTP layer has an MoE FFN)")
    return MtpBlock(num_layers=n_mtp, mixer=mixer, ffn=ffn), note


def _state_dtype(c: HfFields) -> str | None:
    """The recurrent-state dtype of linear-attention / Mamba layers, when the config names one."""
    state = c.get("mamba_ssm_dtype", "mamba_ssm_cache_dtype")  # Qwen3-Next / Qwen3.5, Nemotron-H
    if state is None:
        return None
    from specplan.core.dtypes import canonical_dtype
    from specplan.core.errors import SpecplanError

    try:
        return canonical_dtype(str(state))
    except SpecplanError:
        raise c.fail("mamba_ssm_dtype", f"unknown recurrent-state dtype '{state}'") from None


def mixer_blocks(c: HfFields, mixer_kinds: set[str]) -> MixerFields:
    """sliding_window, linear_attention and mamba fields for the mixer kinds present."""
    sliding = c.int("sliding_window", "sliding_window_size") if mixer_kinds & {"sliding", "csa", "hca"} else None
    chunk = c.int("attention_chunk_size") if "chunked" in mixer_kinds else None
    linear = mamba = None
    if "linear" in mixer_kinds:
        linear = {
            "num_k_heads": c.int("linear_num_key_heads"),
            "num_v_heads": c.int("linear_num_value_heads"),
            "head_k_dim": c.int("linear_key_head_dim"),
            "head_v_dim": c.int("linear_value_head_dim"),
            "conv_kernel": c.int("linear_conv_kernel_dim", default=4),
        }
    if "mamba" in mixer_kinds:
        mamba = {
            "num_heads": c.int("mamba_num_heads"),
            "head_dim": c.int("mamba_head_dim"),
            "d_state": c.int("ssm_state_size", "mamba_d_state"),
            "n_groups": c.int("n_groups", "mamba_n_groups", default=1),
            "conv_kernel": c.int("conv_kernel", "mamba_d_conv", default=4),
        }
    state = _state_dtype(c) if mixer_kinds & {"linear", "mamba"} else None
    return MixerFields(sliding_window=sliding, chunk_size=chunk, linear_attention=linear, mamba=mamba,
                       state_dtype=state)


def arch_flags(c: HfFields, fam: str, mt: str, eagle: bool) -> ArchFlags:
    """Small architecture flags: tied embeddings, gates, qk-norm, biases, sinks, EAGLE-3 draft vocabulary."""
    tie = c.bool("tie_word_embeddings", False)
    gate = c.bool("attn_output_gate", True) if fam == "qwen_hybrid" else None
    # (Llama 4's qk norm is a weightless L2 norm: no parameters)
    qk_norm = True if fam in ("qwen_moe", "qwen_hybrid", "gemma", "minimax_m2") or mt == "qwen3" else None
    norms = ple = ple_vocab = None
    if fam == "gemma":  # sandwich norms: input, post-attention, pre- and post-feedforward (+3 and the router
        # scale, counted as a norm, in MoE layers); per-layer embeddings (PLE) when the config has them
        norms = 8 if c.bool("enable_moe_block", False) else 4
        ple = c.int("hidden_size_per_layer_input", default=0, minimum=0) if mt.startswith("gemma4") else 0
        ple_vocab = c.int("vocab_size_per_layer_input", "vocab_size") if ple else None
    # Nemotron-H MLPs and experts are up/down only (relu^2), whatever the activation
    gated_ffn = False if fam == "nemotron_h" else None
    sinks = True if fam in ("deepseek_v4", "gpt_oss") else None
    bias = c.bool("attention_bias", False)
    mlp_bias = c.bool("mlp_bias", fam == "gpt_oss")
    draft_vocab = c.int("draft_vocab_size", default=None) if eagle else None
    return ArchFlags(tie_embeddings=tie, attn_output_gate=gate, qk_norm=qk_norm, norms_per_layer=norms,
                     per_layer_input_size=ple or None, per_layer_vocab_size=ple_vocab, gated_ffn=gated_ffn,
                     attention_sinks=sinks, attention_bias=bias, mlp_bias=mlp_bias, draft_vocab_size=draft_vocab)

"""Architecture family of a Hugging Face config and its per-layer (mixer, FFN) layout."""

from __future__ import annotations

from specplan.profiles.hf_fields import HfFields

_DENSE = {"llama", "mistral", "qwen3"}
_QWEN_MOE = {"qwen3_moe"}
_QWEN_HYBRID = {"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"}
_DEEPSEEK = {"deepseek_v2", "deepseek_v3"}
SUPPORTED = sorted(_DENSE | _QWEN_MOE | _QWEN_HYBRID | _DEEPSEEK | {"mixtral", "gpt_oss", "nemotron_h"})

_LAYER_TYPES = {
    "full_attention": "full",
    "attention": "full",
    "sliding_attention": "sliding",
    "linear_attention": "linear",
    "mamba": "mamba",
}


def family_of(c: HfFields, raw: dict) -> tuple[str, str, bool]:
    """(family, model_type, is_eagle3)."""
    mt = c.get("model_type")
    top_mt = raw.get("model_type")
    archs = raw.get("architectures") or []
    if not isinstance(archs, list):
        archs = [archs]
    eagle = any("eagle3" in str(a).lower() for a in archs) or (
        c.has("draft_vocab_size") and str(mt) in ("llama", "None")
    )
    if mt is None and top_mt is None:
        if eagle:
            return "dense", "llama", True
        raise c.fail("model_type", "missing field")
    mt = str(mt if mt is not None else top_mt)
    if mt in _DENSE:
        fam = "dense"
    elif mt in _QWEN_MOE:
        fam = "qwen_moe"
    elif mt in _QWEN_HYBRID:
        fam = "qwen_hybrid"
    elif mt in _DEEPSEEK:
        fam = "deepseek"
    elif mt in ("mixtral", "gpt_oss", "nemotron_h"):
        fam = mt
    else:
        raise c.fail("model_type", f"unsupported '{mt}' (supported: {', '.join(SUPPORTED)})")
    return fam, mt, eagle


def nemotron_layers(c: HfFields, L: int) -> list[tuple[str, str]]:
    """(mixer, ffn) per Nemotron-H layer: each layer is one block, a mixer or an FFN."""
    pattern = c.get("hybrid_override_pattern")
    types = c.list("layers_block_type")
    kinds = {"M": ("mamba", "none"), "*": ("full", "none"), "-": ("none", "dense"), "E": ("none", "moe")}
    named = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}
    if pattern is not None:
        field, seq = "hybrid_override_pattern", list(str(pattern))
    elif types is not None:
        field, seq = "layers_block_type", []
        for t in types:
            if str(t) not in named:
                raise c.fail(field, f"unsupported block type {t!r} (supported: {', '.join(named)})")
            seq.append(named[str(t)])
    else:
        raise c.fail("hybrid_override_pattern", "missing field (or layers_block_type)")
    if len(seq) != L:
        raise c.fail(field, f"has {len(seq)} layers, but num_hidden_layers is {L}")
    out = []
    for ch in seq:
        if ch not in kinds:
            raise c.fail(field, f"unsupported layer symbol {ch!r} (M=mamba, *=attention, -=MLP, E=MoE)")
        out.append(kinds[ch])
    return out


def layer_mixers(c: HfFields, fam: str, mt: str, L: int) -> list[str]:
    """Mixer kind per layer: full, sliding, linear (from layer_types, the hybrid interval or sliding-window fields)."""
    types = c.list("layer_types")
    if types is not None:
        if len(types) != L:
            raise c.fail("layer_types", f"has {len(types)} entries, but num_hidden_layers is {L}")
        out = []
        for t in types:
            if str(t) not in _LAYER_TYPES:
                raise c.fail("layer_types", f"unsupported layer type {t!r} (supported: {', '.join(_LAYER_TYPES)})")
            out.append(_LAYER_TYPES[str(t)])
        return out
    if fam == "qwen_hybrid":
        k = c.int("full_attention_interval", default=4)
        return ["full" if (i + 1) % k == 0 else "linear" for i in range(L)]
    if c.has("sliding_window"):
        if mt in ("mistral", "mixtral"):
            return ["sliding"] * L
        if c.bool("use_sliding_window", False):
            first = c.int("max_window_layers", default=L, minimum=0)
            return ["full" if i < first else "sliding" for i in range(L)]
    return ["full"] * L


def layer_ffns(c: HfFields, fam: str, L: int, has_moe: bool) -> list[str]:
    """FFN kind per layer: dense or moe (leading dense layers, layer frequency, mlp_only_layers)."""
    if not has_moe:
        return ["dense"] * L
    if fam == "deepseek":
        k = c.int("first_k_dense_replace", default=0, minimum=0)
        freq = c.int("moe_layer_freq", default=1)
        return ["moe" if (i >= k and i % freq == 0) else "dense" for i in range(L)]
    if fam in ("qwen_moe", "qwen_hybrid"):
        only = c.list("mlp_only_layers") or []
        step = c.int("decoder_sparse_step", default=1)
        return ["moe" if (i not in only and (i + 1) % step == 0) else "dense" for i in range(L)]
    return ["moe"] * L


def layer_groups(layers: list[tuple[str, str]]) -> list[dict]:
    """Runs of equal (mixer, ffn) collapsed to {mixer, ffn, count}, in first-seen order."""
    counts: dict[tuple[str, str], int] = {}
    for key in layers:
        counts[key] = counts.get(key, 0) + 1
    return [{"mixer": m, "ffn": f, "count": n} for (m, f), n in counts.items()]



def layer_kinds(c: HfFields, fam: str, mt: str, L: int, moe: dict | None) -> list[tuple[str, str]]:
    """(mixer, ffn) per layer of any supported family."""
    if fam == "nemotron_h":
        layers = nemotron_layers(c, L)
        if moe is None and any(f == "moe" for _, f in layers):
            raise c.fail("n_routed_experts", "missing field (the layer pattern has MoE layers)")
        return layers
    return list(zip(layer_mixers(c, fam, mt, L), layer_ffns(c, fam, L, moe is not None)))


def leading_dense_layers(layers: list[tuple[str, str]]) -> int:
    """Number of dense-FFN layers at the start when they are the only dense ones, else 0."""
    lead = 0
    while lead < len(layers) and layers[lead][1] == "dense":
        lead += 1
    n_dense = sum(1 for _, f in layers if f == "dense")
    return lead if n_dense == lead else 0


def is_default_layout(layers: list[tuple[str, str]], moe: dict | None) -> bool:
    """True when the profile needs no layer_groups: all full attention, MoE after the leading dense layers."""
    n_dense = sum(1 for _, f in layers if f == "dense")
    return all(m == "full" for m, _ in layers) and (
        (moe is None and n_dense == len(layers))
        or (moe is not None and n_dense == moe.get("dense_layers", 0))
    )

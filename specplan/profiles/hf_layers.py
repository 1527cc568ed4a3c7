"""Architecture family of a Hugging Face config and its per-layer (mixer, FFN) layout."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specplan.core.records import Record, record
from specplan.profiles.file_record import FileRecord
from specplan.profiles.hf_fields import HfFields

if TYPE_CHECKING:
    from specplan.profiles.hf_blocks import MoeBlock

_DENSE = {"llama", "mistral", "qwen3"}
_QWEN_MOE = {"qwen3_moe"}
_QWEN_HYBRID = {"qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"}
_DEEPSEEK = {"deepseek_v2", "deepseek_v3", "deepseek_v32"}
_LLAMA4 = {"llama4", "llama4_text"}
_GEMMA = {"gemma3", "gemma3_text", "gemma4", "gemma4_text"}
_OWN = {"mixtral", "gpt_oss", "nemotron_h", "minimax_m2", "deepseek_v4", "nemotron-nas"}  # family = model_type
SUPPORTED = sorted(_DENSE | _QWEN_MOE | _QWEN_HYBRID | _DEEPSEEK | _LLAMA4 | _GEMMA | _OWN)

# model_type values transformers itself maps to another (kimi_k25's text_config: kimi_k2 -> deepseek_v3)
_ALIASES = {"kimi_k2": "deepseek_v3", "deci": "nemotron-nas"}
# `architectures` class -> model_type, for a config whose model_type is not a transformers one
_ARCHITECTURES = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3_moe", "MixtralForCausalLM": "mixtral", "GptOssForCausalLM": "gpt_oss",
    "DeepseekV2ForCausalLM": "deepseek_v2", "DeepseekV3ForCausalLM": "deepseek_v3",
    "DeepseekV32ForCausalLM": "deepseek_v32", "DeepseekV4ForCausalLM": "deepseek_v4",
    "NemotronHForCausalLM": "nemotron_h", "DeciLMForCausalLM": "nemotron-nas", "MiniMaxM2ForCausalLM": "minimax_m2",
    "Llama4ForCausalLM": "llama4_text", "Llama4ForConditionalGeneration": "llama4",
    "Gemma3ForCausalLM": "gemma3_text", "Gemma3ForConditionalGeneration": "gemma3",
    "Gemma4ForCausalLM": "gemma4_text", "Gemma4ForConditionalGeneration": "gemma4",
}  # fmt: skip

_LAYER_TYPES = {
    "full_attention": "full",
    "attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    "indexed_attention": "full",  # DeepSeek-V3.2: MLA + lightning indexer (the indexer block says so)
    "compressed_sparse_attention": "csa",
    "heavily_compressed_attention": "hca",
    "linear_attention": "linear",
    "mamba": "mamba",
}


@record
class NasBlock(FileRecord):
    """One entry of a Nemotron NAS (DeciLM) config's block_configs."""

    attention: Any = None
    ffn: Any = None


@record
class NasAttention(FileRecord):
    """The attention part of a NAS block: skipped, a linear, or GQA with n_heads_in_group query heads per KV head."""

    no_op: Any = None
    replace_with_linear: Any = None
    n_heads_in_group: Any = None


@record
class NasFfn(FileRecord):
    """The FFN part of a NAS block: skipped, a linear, or an FFN of width multiplier ffn_mult."""

    no_op: Any = None
    replace_with_linear: Any = None
    ffn_mult: Any = None


@record(kw_only=True)
class LayerOverrides(Record):
    """A layer's own values of model fields (left out while None); a layer's overrides are its sorted items."""

    num_kv_heads: int | None = None
    ffn_size: int | None = None
    head_dim: int | None = None
    k_eq_v: bool | None = None
    kv_shared: bool | None = None
    OPTIONAL = ("num_kv_heads", "ffn_size", "head_dim", "k_eq_v", "kv_shared")

    def pairs(self) -> tuple:
        """The overrides as sorted (field, value) pairs, the form a layer tuple carries."""
        return tuple(sorted(self.items()))


def family_of(c: HfFields, raw: dict) -> tuple[str, str, bool, str]:
    """(family, model_type it is read as, is_eagle3, a note when the model_type was mapped to another)."""
    mt = c.get("model_type")
    top = HfFields(raw, c.where)
    top_mt = top.get("model_type")
    archs = top.get("architectures") or []
    if not isinstance(archs, list):
        archs = [archs]
    eagle = any("eagle3" in str(a).lower() for a in archs) or (
        c.has("draft_vocab_size") and str(mt) in ("llama", "None")
    )
    if mt is None and top_mt is None:
        if eagle:
            return "dense", "llama", True, ""
        if "quantization" in raw or "quant_algo" in raw:
            raise c.fail("model_type", "missing field: this is a quantization config (hf_quant_config.json); "
                                       "import the config.json beside it")
        raise c.fail("model_type", "missing field")
    mt = str(mt if mt is not None else top_mt)
    note = ""
    known = set(SUPPORTED)
    if mt not in known:
        via = _ALIASES.get(mt)
        arch = next((_ARCHITECTURES[str(a)] for a in archs if str(a) in _ARCHITECTURES), None)
        if via is not None:
            note = f"model_type {mt} read as {via} (transformers maps it so)."
        elif arch is not None:
            via = arch
            note = f"model_type {mt} read as {via} (architectures names {next(str(a) for a in archs)})."
        if via is not None:
            mt = via
    if mt in _DENSE:
        fam = "dense"
    elif mt in _QWEN_MOE:
        fam = "qwen_moe"
    elif mt in _QWEN_HYBRID:
        fam = "qwen_hybrid"
    elif mt in _DEEPSEEK:
        fam = "deepseek"
    elif mt in _LLAMA4:
        fam = "llama4"
    elif mt in _GEMMA:
        fam = "gemma"
    elif mt in _OWN:
        fam = mt
    else:
        raise c.fail("model_type", f"unsupported '{mt}' (supported: {', '.join(SUPPORTED)})")
    return fam, mt, eagle, note


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


def _defaults_pattern(c: HfFields, fam: str, mt: str, L: int) -> list[str] | None:
    """Mixer per layer for families whose configs may leave `layer_types` to the configuration class defaults."""
    if fam == "llama4":  # no_rope_layers[i] == 1: RoPE layer (chunked local), 0: global NoPE layer (full)
        rope = c.list("no_rope_layers") or [int((i + 1) % c.int("no_rope_layer_interval", default=4)) for i in range(L)]
        if len(rope) < L:
            raise c.fail("no_rope_layers", f"has {len(rope)} entries, but num_hidden_layers is {L}")
        local = "chunked" if c.has("attention_chunk_size") else "full"
        return [local if r else "full" for r in rope[:L]]
    if fam == "gemma":  # Gemma3TextConfig / Gemma4TextConfig: 5 sliding : 1 full, the last layer full
        k = c.int("sliding_window_pattern", default=6)
        out = ["sliding" if (i + 1) % k else "full" for i in range(L)]
        return out[:-1] + ["full"] if mt.startswith("gemma4") else out
    if fam == "deepseek_v4":  # compress_ratios (0 / 4 / 128 per layer) or the V4-Pro default: 2 hca, then hca/csa
        ratios = c.list("compress_ratios")
        if ratios is not None:
            names = {0: "sliding", 4: "csa", 128: "hca"}
            bad = [r for r in ratios if r not in names]
            if bad or len(ratios) < L:
                raise c.fail("compress_ratios", f"expected {L} entries of 0, 4 or 128, got {ratios!r}")
            return [names[r] for r in ratios[:L]]
        return ["hca"] * min(L, 2) + ["csa" if i % 2 else "hca" for i in range(max(L - 2, 0))]
    return None


def layer_mixers(c: HfFields, fam: str, mt: str, L: int) -> list[str]:
    """Mixer kind per layer (from layer_types, the hybrid interval, the family's default pattern or sliding-window
    fields)."""
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
    pattern = _defaults_pattern(c, fam, mt, L)
    if pattern is not None:
        return pattern
    if c.has("sliding_window"):
        if mt in ("mistral", "mixtral"):
            return ["sliding"] * L
        if c.bool("use_sliding_window", False):
            first = c.int("max_window_layers", default=L, minimum=0)
            return ["full" if i < first else "sliding" for i in range(L)]
    return ["full"] * L


def layer_ffns(c: HfFields, fam: str, L: int, has_moe: bool) -> list[str]:
    """FFN kind per layer: dense or moe (leading dense layers, layer frequency or step, mlp_only_layers, lists)."""
    if not has_moe:
        return ["dense"] * L
    types = c.list("mlp_layer_types")
    if types is not None and fam in ("deepseek", "deepseek_v4"):
        kinds = {"dense": "dense", "sparse": "moe", "moe": "moe", "hash_moe": "moe"}
        if len(types) != L or any(str(t) not in kinds for t in types):
            raise c.fail("mlp_layer_types", f"expected {L} entries of {', '.join(kinds)}")
        return [kinds[str(t)] for t in types]
    if fam == "deepseek":
        k = c.int("first_k_dense_replace", default=0, minimum=0)
        if k >= L:
            raise c.fail("first_k_dense_replace", f"must be below num_hidden_layers ({L}) in an MoE model, got {k}")
        freq = c.int("moe_layer_freq", default=1)
        return ["moe" if (i >= k and i % freq == 0) else "dense" for i in range(L)]
    if fam in ("qwen_moe", "qwen_hybrid"):
        only = c.list("mlp_only_layers") or []
        step = c.int("decoder_sparse_step", default=1)
        return ["moe" if (i not in only and (i + 1) % step == 0) else "dense" for i in range(L)]
    if fam == "llama4":  # moe_layers, else every interleave_moe_layer_step-th layer (Llama4TextConfig)
        moe_layers = c.list("moe_layers")
        if moe_layers is None:
            step = c.int("interleave_moe_layer_step", default=1)
            moe_layers = list(range(step - 1, L, step))
        return ["moe" if i in set(moe_layers) else "dense" for i in range(L)]
    return ["moe"] * L


def _find_multiple(n: int, k: int) -> int:
    return n if n % k == 0 else n + k - n % k


def nas_layers(c: HfFields, h: int, nq: int, L: int) -> list[tuple[str, str, tuple]]:
    """(mixer, ffn, overrides) per Nemotron NAS (DeciLM) block from `block_configs`: attention skipped (no_op),
    replaced by a linear, or GQA with nq / n_heads_in_group KV heads; FFN skipped, linear, or of width
    ffn_mult -> int(2 * ffn_mult * h / 3) rounded up to a multiple of 256 (reference/model_configs.csv)."""
    blocks = c.list("block_configs")
    if blocks is None:
        raise c.fail("block_configs", "missing field")
    if len(blocks) != L:
        raise c.fail("block_configs", f"has {len(blocks)} entries, but num_hidden_layers is {L}")
    out = []
    for i, b in enumerate(blocks):
        where = f"block_configs[{i}]"
        block = NasBlock.read(b) if isinstance(b, dict) else NasBlock()
        if not isinstance(block.attention, dict) or not isinstance(block.ffn, dict):
            raise c.fail(where, "expected an object with 'attention' and 'ffn'")
        att, ffn = NasAttention.read(block.attention), NasFfn.read(block.ffn)
        kv_heads = ffn_size = None
        if att.no_op:
            mixer = "none"
        elif att.replace_with_linear:
            mixer = "attn_linear"
        else:
            group = att.n_heads_in_group
            if not isinstance(group, int) or group < 1 or nq % group:
                raise c.fail(f"{where}.attention.n_heads_in_group", f"expected a divisor of {nq} heads, got {group!r}")
            mixer, kv_heads = "full", nq // group
        if ffn.no_op:
            kind = "none"
        elif ffn.replace_with_linear:
            kind = "linear"
        else:
            mult = ffn.ffn_mult
            if isinstance(mult, bool) or not isinstance(mult, (int, float)) or not 0 < mult <= 1000:
                raise c.fail(f"{where}.ffn.ffn_mult", f"expected a number in (0, 1000], got {mult!r}")
            kind, ffn_size = "dense", _find_multiple(int(2 * mult * h / 3), 256)
        out.append((mixer, kind, LayerOverrides(num_kv_heads=kv_heads, ffn_size=ffn_size).pairs()))
    return out


def gemma_overrides(c: HfFields, mt: str, mixers: list[str], L: int) -> list[tuple]:
    """Per-layer overrides of Gemma 4: global layers' own head dim / KV heads (attention_k_eq_v: no v projection),
    the last num_kv_shared_layers layers reuse earlier K/V (use_double_wide_mlp: twice the FFN there)."""
    if not mt.startswith("gemma4"):
        return [()] * L
    k_eq_v = c.bool("attention_k_eq_v", False)
    n_shared = c.int("num_kv_shared_layers", default=0, minimum=0)
    if n_shared and c.bool("use_double_wide_mlp", False) and c.bool("enable_moe_block", False):
        raise c.fail("use_double_wide_mlp", "not supported with enable_moe_block (the MLP beside the experts of the "
                                            "KV-shared layers would be twice as wide)")
    out = []
    for i, m in enumerate(mixers):
        head_dim = kv_heads = ffn_size = None
        full, shared = m == "full", i >= L - n_shared
        if full:
            head_dim = c.int("global_head_dim", default=512)
            if k_eq_v and c.has("num_global_key_value_heads"):
                kv_heads = c.int("num_global_key_value_heads")
        if shared and c.bool("use_double_wide_mlp", False):
            ffn_size = 2 * c.int("intermediate_size")
        out.append(LayerOverrides(num_kv_heads=kv_heads, ffn_size=ffn_size, head_dim=head_dim,
                                  k_eq_v=True if full and k_eq_v else None, kv_shared=True if shared else None).pairs())
    return out


def layer_groups(layers: list[tuple]) -> list[dict]:
    """Runs of equal (mixer, ffn, overrides) collapsed to {mixer, ffn, count, ...}, in first-seen order."""
    counts: dict[tuple, int] = {}
    for key in layers:
        counts[key] = counts.get(key, 0) + 1
    return [{"mixer": m, "ffn": f, "count": n, **dict(x)} for (m, f, x), n in counts.items()]


def layer_kinds(c: HfFields, fam: str, mt: str, L: int, moe: MoeBlock | None, h: int, nq: int) -> list[tuple]:
    """(mixer, ffn, overrides) per layer of any supported family."""
    if fam == "nemotron_h":
        layers = nemotron_layers(c, L)
        if moe is None and any(f == "moe" for _, f in layers):
            raise c.fail("n_routed_experts", "missing field (the layer pattern has MoE layers)")
        return [(m, f, ()) for m, f in layers]
    if fam == "nemotron-nas":
        return nas_layers(c, h, nq, L)
    mixers = layer_mixers(c, fam, mt, L)
    extras = gemma_overrides(c, mt, mixers, L) if fam == "gemma" else [()] * L
    return list(zip(mixers, layer_ffns(c, fam, L, moe is not None), extras))


def leading_dense_layers(layers: list[tuple]) -> int:
    """Number of dense-FFN layers at the start when they are the only dense ones, else 0."""
    lead = 0
    while lead < len(layers) and layers[lead][1] == "dense":
        lead += 1
    n_dense = sum(1 for x in layers if x[1] == "dense")
    return lead if n_dense == lead else 0


def is_default_layout(layers: list[tuple], moe: MoeBlock | None) -> bool:
    """True when the profile needs no layer_groups: all full attention, MoE after the leading dense layers."""
    n_dense = sum(1 for x in layers if x[1] == "dense")
    return all(x[0] == "full" and not x[2] for x in layers) and (
        (moe is None and n_dense == len(layers))
        or (moe is not None and n_dense == (moe.dense_layers or 0))
    )

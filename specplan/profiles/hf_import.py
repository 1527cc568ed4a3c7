"""Import a Hugging Face config.json (and hf_quant_config.json beside it) into a ModelProfile.

Supported model_type values: llama, mistral, mixtral, qwen3, qwen3_moe, qwen3_next, qwen3_5 / qwen3_5_text,
qwen3_5_moe / qwen3_5_moe_text, deepseek_v2, deepseek_v3, gpt_oss, nemotron_h, and the EAGLE-3 draft head
(LlamaForCausalLMEagle3). A config this module cannot handle raises SpecplanError with one line naming the file and
the missing or unsupported field.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from specplan.dtypes import canonical_dtype, dtype_bytes
from specplan.errors import SpecplanError
from specplan.profiles.model import ModelProfile
from specplan.profiles.registry import build, write_profile_yaml

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

# modelopt / hf_quant_config quant_algo values -> weight format
_QUANT_ALGOS = {
    "fp8": "fp8",
    "fp8_per_channel_per_token": "fp8",
    "fp8_pc_pt": "fp8",
    "fp8_block_scales": "fp8",
    "nvfp4": "fp4",
    "w4a16_nvfp4": "fp4",
    "w4a8_nvfp4_fp8": "fp4",
    "nvfp4_awq": "fp4",
    "mxfp4": "fp4",
    "w4a16_mxfp4": "fp4",
    "w4a8_mxfp4_fp8": "fp4",
    "w4a8_mxfp4_mxfp8": "fp4",
    "w4a16_awq": "int4",
    "w4a8_awq": "int4",
    "int4_awq": "int4",
    "w4a16_gptq": "int4",
    "w8a8_sq_per_channel": "int8",
    "int8": "int8",
    "int8_sq": "int8",
    "w8a16": "int8",
}

_MISSING = object()


class _Cfg:
    """Typed access to a config mapping; every failure is one line naming the file and the field."""

    def __init__(self, data: dict, where: str):
        self.data = data
        self.where = where

    def fail(self, field: str, msg: str) -> SpecplanError:
        return SpecplanError(f"{self.where}: {field}: {msg}")

    def has(self, name: str) -> bool:
        return self.data.get(name) is not None

    def get(self, *names: str, default: Any = None) -> Any:
        for n in names:
            if self.data.get(n) is not None:
                return self.data[n]
        return default

    def int(self, *names: str, default: Any = _MISSING, minimum: int = 1) -> int:
        for n in names:
            v = self.data.get(n)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v:
                raise self.fail(n, f"expected an integer, got {v!r}")
            if v < minimum:
                raise self.fail(n, f"must be >= {minimum}, got {v!r}")
            return int(v)
        if default is _MISSING:
            raise self.fail(names[0], "missing field")
        return default

    def bool(self, name: str, default: bool) -> bool:
        v = self.data.get(name)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise self.fail(name, f"expected true or false, got {v!r}")
        return v

    def list(self, name: str) -> list | None:
        v = self.data.get(name)
        if v is None:
            return None
        if not isinstance(v, list):
            raise self.fail(name, f"expected a list, got {type(v).__name__}")
        return v


def _read_json(path: Path) -> dict:
    if not path.is_file():
        raise SpecplanError(f"{path}: file not found")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SpecplanError(f"{path}: malformed JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecplanError(f"{path}: cannot read: {exc}") from None
    if not isinstance(data, dict):
        raise SpecplanError(f"{path}: expected a JSON object of config fields, got {type(data).__name__}")
    return data


def _flatten(raw: dict) -> dict:
    """The text model's fields: `text_config` (when nested) over the top-level fields."""
    text = raw.get("text_config")
    if isinstance(text, dict):
        top = {k: v for k, v in raw.items() if k not in ("text_config", "vision_config", "audio_config")}
        merged = dict(top)
        merged.update({k: v for k, v in text.items() if v is not None})
        merged["_top_model_type"] = raw.get("model_type")
        return merged
    return dict(raw)


def _repo_from_path(path: Path, raw: dict) -> str:
    name = raw.get("_name_or_path")
    if isinstance(name, str) and name.count("/") == 1 and not name.startswith((".", "/")):
        return name
    stem = path.name
    for suffix in ("_config.json", "-config.json", ".json"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    if stem == "config":
        return path.resolve().parent.name
    if "--" in stem:
        org, _, rest = stem.partition("--")
        return f"{org}/{rest}"
    return stem


def _slug(repo: str) -> str:
    name = repo.split("/")[-1].lower()
    return re.sub(r"[^a-z0-9.]+", "-", name).strip("-") or "imported-model"


def _quant_file_for(path: Path) -> Path | None:
    """hf_quant_config.json beside config.json, or `<prefix>_hf_quant_config.json` beside `<prefix>_config.json`."""
    cands = [path.parent / "hf_quant_config.json"]
    if path.name.endswith("_config.json") and path.name != "hf_quant_config.json":
        cands.insert(0, path.parent / (path.name[: -len("_config.json")] + "_hf_quant_config.json"))
    for c in cands:
        if c.is_file() and c.resolve() != path.resolve():
            return c
    return None


def _module_of(name: str) -> str | None:
    """Which module_dtypes key a checkpoint module name belongs to (None: norms, routers, convs; not tracked)."""
    n = name.lower()
    if n.startswith("mtp") or ".mtp" in n or n.startswith("model.mtp"):
        return "mtp"
    if "lm_head" in n:
        return "lm_head"
    if "embed" in n:
        return "embedding"
    if "conv1d" in n or "norm" in n or re.search(r"\.(gate|router)$", n) or n.endswith("shared_expert_gate"):
        return None
    if "expert" in n:
        return "moe"
    if "linear_attn" in n:
        return "linear_attention"
    if re.search(r"(mixer|mamba)\.(in_proj|out_proj)$", n):
        return "mamba"
    if re.search(r"(q_proj|k_proj|v_proj|o_proj|qkv_proj|q_a_proj|q_b_proj|kv_a_proj\w*|kv_b_proj|self_attn|attn)", n):
        return "attention"
    if re.search(r"(mlp|gate_proj|up_proj|down_proj|gate_up_proj|feed_forward)", n):
        return "ffn"
    return None


def _algo_dtype(algo: Any, where: str, field: str) -> str:
    key = str(algo).strip().lower()
    if key in _QUANT_ALGOS:
        return _QUANT_ALGOS[key]
    raise SpecplanError(f"{where}: {field}: unsupported quant_algo {algo!r} (known: {', '.join(sorted(_QUANT_ALGOS))})")


def _read_quant_config(qpath: Path, base: str) -> tuple[dict[str, str], str | None, str | None]:
    """(module dtypes, global weight dtype or None, kv-cache dtype or None) from a modelopt hf_quant_config.json."""
    data = _read_json(qpath)
    q = data.get("quantization", data)
    if not isinstance(q, dict):
        raise SpecplanError(f"{qpath}: quantization: expected an object")
    where = str(qpath)
    kv = q.get("kv_cache_quant_algo")
    kv_dtype = _algo_dtype(kv, where, "quantization.kv_cache_quant_algo") if kv else None
    algo = q.get("quant_algo")
    excluded = q.get("exclude_modules") or []
    if not isinstance(excluded, list):
        raise SpecplanError(f"{where}: quantization.exclude_modules: expected a list")
    votes: dict[str, Counter] = {}
    glob_dtype = None
    layers = q.get("quantized_layers")
    if algo is None:
        raise SpecplanError(f"{where}: quantization.quant_algo: missing field")
    if str(algo).upper() == "MIXED_PRECISION":
        if not isinstance(layers, dict) or not layers:
            raise SpecplanError(f"{where}: quantization.quantized_layers: missing for quant_algo MIXED_PRECISION")
        for name, spec in layers.items():
            mod = _module_of(name)
            if mod is None:
                continue
            a = spec.get("quant_algo") if isinstance(spec, dict) else None
            if a is None:
                raise SpecplanError(f"{where}: quantization.quantized_layers.{name}.quant_algo: missing field")
            votes.setdefault(mod, Counter())[_algo_dtype(a, where, f"quantized_layers.{name}.quant_algo")] += 1
    else:
        glob_dtype = _algo_dtype(algo, where, "quantization.quant_algo")
    for name in excluded:
        mod = _module_of(str(name).rstrip("*.") or str(name))
        if mod is not None:
            votes.setdefault(mod, Counter())[base] += 1
    modules = {}
    for mod, c in votes.items():
        # majority by count; ties go to the wider format (a conservative byte count)
        modules[mod] = max(c.items(), key=lambda kv_: (kv_[1], dtype_bytes(kv_[0])))[0]
    return modules, glob_dtype, kv_dtype


def _hf_quantization(c: _Cfg, family: str, base: str) -> tuple[str, dict[str, str]]:
    """(weight dtype, module dtypes) from an embedded `quantization_config`."""
    qc = c.get("quantization_config")
    if qc is None:
        return base, {}
    if not isinstance(qc, dict):
        raise c.fail("quantization_config", "expected an object")
    method = str(qc.get("quant_method", "")).lower()
    if method == "fp8":
        # block-wise FP8 (DeepSeek): every linear layer but the embedding and LM head
        return "fp8", {"embedding": base, "lm_head": base}
    if method == "mxfp4":
        # gpt-oss: MXFP4 experts; attention, router, embedding and LM head are not converted
        return base, {"moe": "fp4"}
    if method in ("awq", "gptq"):
        bits = qc.get("bits", qc.get("w_bit"))
        fmt = {4: "int4", 8: "int8"}.get(bits)
        if fmt is None:
            raise c.fail("quantization_config.bits", f"unsupported {method} bit width {bits!r}")
        return fmt, {"embedding": base, "lm_head": base}
    if method == "modelopt":
        algo = qc.get("quant_algo")
        if algo is None or str(algo).upper() == "MIXED_PRECISION":
            raise c.fail("quantization_config.quant_algo", "mixed precision needs hf_quant_config.json beside config.json")
        return _algo_dtype(algo, c.where, "quantization_config.quant_algo"), {"embedding": base, "lm_head": base}
    raise c.fail("quantization_config.quant_method", f"unsupported quant_method {qc.get('quant_method')!r}")


def _base_dtype(c: _Cfg) -> str:
    raw = c.get("torch_dtype", "dtype", default="bfloat16")
    try:
        return canonical_dtype(raw, where="torch_dtype")
    except SpecplanError as exc:
        raise SpecplanError(f"{c.where}: {exc}") from None


def _family(c: _Cfg, raw: dict) -> tuple[str, str, bool]:
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


def _nemotron_layers(c: _Cfg, L: int) -> list[tuple[str, str]]:
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


def _mixers(c: _Cfg, fam: str, mt: str, L: int) -> list[str]:
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


def _ffns(c: _Cfg, fam: str, L: int, has_moe: bool) -> list[str]:
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


def _groups(layers: list[tuple[str, str]]) -> list[dict]:
    counts: dict[tuple[str, str], int] = {}
    for key in layers:
        counts[key] = counts.get(key, 0) + 1
    return [{"mixer": m, "ffn": f, "count": n} for (m, f), n in counts.items()]


def hf_config_to_dict(raw: dict, where: str, quant: Path | None = None) -> dict:
    """The ModelProfile fields (a plain dict, not yet validated) for one Hugging Face config mapping."""
    c = _Cfg(_flatten(raw), where)
    fam, mt, eagle = _family(c, raw)
    L = c.int("num_hidden_layers", "n_layer", "num_layers")
    h = c.int("hidden_size", "d_model", "n_embd")
    nq = c.int("num_attention_heads", "n_head")
    nkv = c.int("num_key_value_heads", default=nq)
    V = c.int("vocab_size")

    d: dict[str, Any] = {"kind": "eagle3_head" if eagle else "model", "num_layers": L, "hidden_size": h}
    d.update(num_q_heads=nq, num_kv_heads=nkv, vocab_size=V)

    # --- MLA ------------------------------------------------------------------------------------------------
    if fam == "deepseek":
        mla = {
            "q_lora_rank": c.int("q_lora_rank", default=0, minimum=0),
            "kv_lora_rank": c.int("kv_lora_rank"),
            "qk_rope_head_dim": c.int("qk_rope_head_dim"),
            "qk_nope_head_dim": c.int("qk_nope_head_dim"),
            "v_head_dim": c.int("v_head_dim"),
        }
        d["mla"] = mla
        d["head_dim"] = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]
    elif c.has("head_dim"):
        d["head_dim"] = c.int("head_dim")
    else:
        if h % nq:
            raise c.fail("head_dim", f"missing field, and hidden_size {h} is not a multiple of {nq} heads")
        d["head_dim"] = h // nq

    # --- MoE --------------------------------------------------------------------------------------------------
    n_exp = c.int("n_routed_experts", "num_experts", "num_local_experts", default=0, minimum=0)
    moe = None
    if n_exp > 0:
        top_k = c.int("num_experts_per_tok", "experts_per_token", "moe_topk")
        if fam in ("mixtral", "gpt_oss"):
            eff = c.int("intermediate_size")
        else:
            eff = c.int("moe_intermediate_size")
        moe = {"num_experts": n_exp, "top_k": top_k, "expert_ffn_size": eff}
        if fam == "deepseek":
            ns = c.int("n_shared_experts", default=0, minimum=0)
            if ns:
                moe.update(num_shared_experts=ns, shared_expert_ffn_size=ns * eff)
            if c.get("topk_method") == "noaux_tc" or mt == "deepseek_v3":
                moe["router_bias"] = True
        elif fam == "qwen_hybrid" or fam == "qwen_moe":
            sf = c.int("shared_expert_intermediate_size", default=0, minimum=0)
            if sf:
                moe.update(num_shared_experts=1, shared_expert_ffn_size=sf, shared_expert_gate=True)
        elif fam == "nemotron_h":
            ns = c.int("n_shared_experts", default=0, minimum=0)
            sf = c.int("moe_shared_expert_intermediate_size", default=0, minimum=0)
            if ns or sf:
                moe.update(num_shared_experts=max(ns, 1), shared_expert_ffn_size=sf or ns * eff)
            moe["router_bias"] = True
            if c.get("moe_latent_size") is not None:
                raise c.fail("moe_latent_size", "LatentMoE is not supported")
        elif fam == "gpt_oss":
            moe["router_bias"] = True

    # --- per-layer mixer / FFN kinds ---------------------------------------------------------------------------
    if fam == "nemotron_h":
        layers = _nemotron_layers(c, L)
        if moe is None and any(f == "moe" for _, f in layers):
            raise c.fail("n_routed_experts", "missing field (the layer pattern has MoE layers)")
    else:
        mixers = _mixers(c, fam, mt, L)
        ffns = _ffns(c, fam, L, moe is not None)
        layers = list(zip(mixers, ffns))
    has_dense = any(f == "dense" for _, f in layers)

    # --- MTP ----------------------------------------------------------------------------------------------------
    n_mtp = c.int("mtp_num_hidden_layers", "num_nextn_predict_layers", default=0, minimum=0)
    mtp_note = ""
    if n_mtp == 0 and mt == "qwen3_next":
        n_mtp = 1  # Qwen3-Next checkpoints carry one MTP layer, but the config has no field for it
        mtp_note = "MTP: one layer assumed (Qwen3-Next checkpoints carry mtp.* weights; the config has no field)."
    if n_mtp:
        mtp = {"num_layers": n_mtp, "mixer": "full", "ffn": "moe" if moe is not None else "dense"}
        blocks = c.list("mtp_layers_block_type")
        if blocks:
            names = [str(b) for b in blocks]
            mixer = next((x for x in names if x in ("attention", "mamba")), None)
            ffn = next((x for x in names if x in ("moe", "mlp")), None)
            mtp["mixer"] = {"attention": "full", "mamba": "mamba", None: "none"}[mixer]
            mtp["ffn"] = {"moe": "moe", "mlp": "dense", None: "none"}[ffn]
        if mtp["ffn"] == "moe" and moe is None:
            raise c.fail("num_experts", "missing field (the MTP layer has an MoE FFN)")
        if mtp["ffn"] == "dense":
            has_dense = True
        d["mtp"] = mtp

    if has_dense:
        d["ffn_size"] = c.int("intermediate_size")
    if moe is not None:
        lead = 0
        while lead < L and layers[lead][1] == "dense":
            lead += 1
        n_dense = sum(1 for _, f in layers if f == "dense")
        if n_dense == lead and lead:
            moe["dense_layers"] = lead
        d["moe"] = moe

    default_layout = all(m == "full" for m, _ in layers) and (
        (moe is None and all(f == "dense" for _, f in layers))
        or (moe is not None and sum(1 for _, f in layers if f == "dense") == moe.get("dense_layers", 0))
    )
    if not default_layout:
        d["layer_groups"] = _groups(layers)

    mixer_kinds = {m for m, _ in layers} | ({d["mtp"]["mixer"]} if n_mtp else set())
    if "sliding" in mixer_kinds:
        d["sliding_window"] = c.int("sliding_window", "sliding_window_size")
    if "linear" in mixer_kinds:
        d["linear_attention"] = {
            "num_k_heads": c.int("linear_num_key_heads"),
            "num_v_heads": c.int("linear_num_value_heads"),
            "head_k_dim": c.int("linear_key_head_dim"),
            "head_v_dim": c.int("linear_value_head_dim"),
            "conv_kernel": c.int("linear_conv_kernel_dim", default=4),
        }
    if "mamba" in mixer_kinds:
        d["mamba"] = {
            "num_heads": c.int("mamba_num_heads"),
            "head_dim": c.int("mamba_head_dim"),
            "d_state": c.int("ssm_state_size", "mamba_d_state"),
            "n_groups": c.int("n_groups", "mamba_n_groups", default=1),
            "conv_kernel": c.int("conv_kernel", "mamba_d_conv", default=4),
        }

    # --- small architecture flags -------------------------------------------------------------------------------
    d["tie_embeddings"] = c.bool("tie_word_embeddings", False)
    if fam == "qwen_hybrid":
        d["attn_output_gate"] = c.bool("attn_output_gate", True)
    if fam in ("qwen_moe", "qwen_hybrid") or mt == "qwen3":
        d["qk_norm"] = True
    if fam == "nemotron_h":
        d["gated_ffn"] = False  # Nemotron-H MLPs and experts are up/down only (relu^2), whatever the activation
    d["attention_bias"] = c.bool("attention_bias", False)
    d["mlp_bias"] = c.bool("mlp_bias", fam == "gpt_oss")
    if fam == "gpt_oss":
        d["attention_sinks"] = True
    if eagle:
        dv = c.int("draft_vocab_size", default=None)
        if dv is not None:
            d["draft_vocab_size"] = dv

    # --- weight formats ---------------------------------------------------------------------------------------
    base = _base_dtype(c)
    weight, modules = _hf_quantization(c, fam, base)
    notes = [mtp_note] if mtp_note else []
    if quant is not None:
        qmods, qglob, kv = _read_quant_config(quant, base)
        if qglob is not None:
            weight = qglob
            qmods = {**{"embedding": base, "lm_head": base}, **qmods}
        modules.update(qmods)
        if kv:
            d["kv_cache_dtype"] = kv
        d.setdefault("sources", {})["quantization"] = quant.name
    d["weight_dtype"] = weight
    present = {"attention", "embedding", "lm_head", "mtp"}
    present |= {"linear_attention"} if "linear" in mixer_kinds else set()
    present |= {"mamba"} if "mamba" in mixer_kinds else set()
    present |= {"moe"} if moe is not None else set()
    present |= {"ffn"} if has_dense else set()
    mods = {k: v for k, v in modules.items() if k in present and v != weight}
    if mods:
        d["module_dtypes"] = dict(sorted(mods.items()))
    d["architecture"] = mt
    if notes:
        d["notes"] = " ".join(notes)
    return d


def import_hf_config(
    path: str | Path,
    id: str | None = None,
    quant_config: str | Path | None = None,
    **overrides: Any,
) -> ModelProfile:
    """A ModelProfile from a Hugging Face config.json (nested `text_config` included).

    `hf_quant_config.json` beside the file (or `<prefix>_hf_quant_config.json` beside `<prefix>_config.json`) is read
    for per-module weight formats unless `quant_config` names another file. `overrides` set profile fields
    (name, hf_repo, sources, notes, ...). Raises SpecplanError (one line) for anything it cannot handle.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    raw = _read_json(p)
    where = str(p)
    quant = Path(quant_config) if quant_config is not None else _quant_file_for(p)
    try:
        d = hf_config_to_dict(raw, where, quant)
    except SpecplanError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError) as exc:
        raise SpecplanError(f"{where}: cannot import ({type(exc).__name__}: {exc})") from None
    repo = _repo_from_path(p, raw)
    d = {"id": id or _slug(repo), "name": repo.split("/")[-1], "hf_repo": repo, **d}
    src = {"architecture": p.name, **d.get("sources", {})}
    d["sources"] = src
    d.update(overrides)
    return build(ModelProfile, d, where)


# Fields written even when they hold their default: they say what a reader would otherwise have to look up.
_ALWAYS = ("tie_embeddings", "weight_dtype")
_FULL_SUBMODELS = ("mla", "linear_attention", "mamba", "mtp")


def profile_to_yaml(profile: ModelProfile, path: str | Path | None = None) -> str:
    """YAML text of a profile as the built-in profiles are written (and to `path` when given).

    Unset defaults are dropped (registry.write_profile_yaml), except tie_embeddings, weight_dtype and the full
    contents of mla / linear_attention / mamba / mtp.
    """
    import yaml

    short = yaml.safe_load(write_profile_yaml(profile))
    full = profile.model_dump(mode="json")
    out = {}
    for k, v in full.items():
        if k in _FULL_SUBMODELS and v is not None:
            out[k] = v
        elif k in short or k in _ALWAYS:
            out[k] = short.get(k, v)
    text = yaml.safe_dump(out, sort_keys=False, width=4096, allow_unicode=True)
    if path is not None:
        from specplan.io import atomic_write_text

        atomic_write_text(Path(path), text)
    return text

"""Weight and KV-cache formats of a Hugging Face checkpoint: embedded quantization_config and modelopt hf_quant_config.json."""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from pathlib import Path
from typing import Any

from specplan.dtypes import canonical_dtype, dtype_bytes
from specplan.errors import SpecplanError
from specplan.profiles.hf_fields import HfFields, read_json

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
    "mxfp4": "mxfp4",
    "w4a16_mxfp4": "mxfp4",
    "w4a8_mxfp4_fp8": "mxfp4",
    "w4a8_mxfp4_mxfp8": "mxfp4",
    "w4a16_awq": "int4",
    "w4a8_awq": "int4",
    "int4_awq": "int4",
    "w4a16_gptq": "int4",
    "w8a8_sq_per_channel": "int8",
    "int8": "int8",
    "int8_sq": "int8",
    "w8a16": "int8",
}


def quant_file_for(path: Path) -> Path | None:
    """hf_quant_config.json beside config.json, or `<prefix>_hf_quant_config.json` beside `<prefix>_config.json`."""
    cands = [path.parent / "hf_quant_config.json"]
    if path.name.endswith("_config.json") and path.name != "hf_quant_config.json":
        cands.insert(0, path.parent / (path.name[: -len("_config.json")] + "_hf_quant_config.json"))
    for c in cands:
        if c.is_file() and c.resolve() != path.resolve():
            return c
    return None


def module_of(name: str) -> str | None:
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
    if "shared_expert" in n:
        return "shared_experts"
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


def algo_dtype(algo: Any, where: str, field: str) -> str:
    key = str(algo).strip().lower()
    if key in _QUANT_ALGOS:
        return _QUANT_ALGOS[key]
    raise SpecplanError(f"{where}: {field}: unsupported quant_algo {algo!r} (known: {', '.join(sorted(_QUANT_ALGOS))})")


# Checkpoint module names of one layer's modules under the naming conventions of the supported families
# (DeepSeek / Llama / Qwen `mlp`, Llama 4 `feed_forward`, Nemotron-H `mixer`, Mixtral / MiniMax `block_sparse_moe`).
_ATTN = ("q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj")
_FFN = ("gate_proj", "up_proj", "down_proj", "gate_up_proj")
_BLOCK_NAMES = {
    "attention": [f"{b}.{p}" for b in ("self_attn", "mixer", "attn") for p in _ATTN],
    "linear_attention": ["linear_attn.in_proj_qkvz", "linear_attn.out_proj"],
    "mamba": ["mixer.in_proj", "mixer.out_proj"],
    "ffn": [f"{b}.{p}" for b in ("mlp", "feed_forward", "mixer") for p in _FFN],
    "moe": [f"{b}.experts.0.{p}" for b in ("mlp", "feed_forward", "mixer", "block_sparse_moe") for p in _FFN + ("w1",)]
    + [f"{b}.experts" for b in ("mlp", "feed_forward", "mixer", "block_sparse_moe")],
    "shared_experts": [f"{b}.{s}.{p}" for b in ("mlp", "feed_forward", "mixer") for s in ("shared_experts", "shared_expert")
                       for p in _FFN],
}
_PREFIXES = ("language_model.", "model.", "backbone.", "transformer.")


def _strip(name: str) -> str:
    """A module name without the wrapper prefixes (language_model., model., backbone.)."""
    changed = True
    while changed:
        changed = False
        for p in _PREFIXES:
            if name.startswith(p):
                name, changed = name[len(p):], True
    return name


def module_instances(layers: list[tuple], n_mtp: int) -> list[tuple[str, list[str]]]:
    """(module key, candidate checkpoint names) of every weight module of the model, layer by layer."""
    out = [("embedding", ["embed_tokens", "embeddings", "wte"]), ("lm_head", ["lm_head"])]
    for i, (mixer, ffn, *_) in enumerate(layers):
        keys = []
        if mixer in ("full", "sliding", "chunked", "csa", "hca", "attn_linear"):
            keys.append("attention")
        elif mixer in ("linear", "mamba"):
            keys.append("linear_attention" if mixer == "linear" else "mamba")
        if ffn in ("dense", "linear"):
            keys.append("ffn")
        elif ffn == "moe":
            keys += ["moe", "shared_experts"]
        out += [(k, [f"layers.{i}.{n}" for n in _BLOCK_NAMES[k]]) for k in keys]
    L = len(layers)
    for j in range(n_mtp):  # DeepSeek numbers its MTP layers after the decoder layers; Qwen / Nemotron use mtp.*
        out.append(("mtp", [f"layers.{L + j}.eh_proj", f"layers.{L + j}.mlp.experts.0.up_proj", f"mtp.layers.{j}.x",
                            f"mtp.{j}.x", "mtp.fc"]))
    return out


def _excluded(names: list[str], patterns: list[str]) -> bool:
    """True when an exclude_modules pattern (fnmatch wildcards, or a parent module name) covers one of the names."""
    for pat in patterns:
        p = _strip(pat)
        for n in names:
            if fnmatch.fnmatchcase(n, p) or n.startswith(p + ".") or fnmatch.fnmatchcase(n, "*." + p):
                return True
    return False


def read_quant_config(
    qpath: Path, base: str, layers: list[tuple] | None = None, n_mtp: int = 0
) -> tuple[dict[str, str], str | None, str | None]:
    """(module dtypes, global weight dtype or None, kv-cache dtype or None) from a modelopt hf_quant_config.json.

    With one quant_algo for the checkpoint, every module of the model (`layers`: (mixer, ffn, ...) per layer) is
    in that format unless an exclude_modules pattern covers it; each module class takes the format most of its
    layers carry. MIXED_PRECISION: each listed module votes for its own algorithm, exclude_modules for the base."""
    data = read_json(qpath)
    q = data.get("quantization", data)
    if not isinstance(q, dict):
        raise SpecplanError(f"{qpath}: quantization: expected an object")
    where = str(qpath)
    kv = q.get("kv_cache_quant_algo")
    kv_dtype = algo_dtype(kv, where, "quantization.kv_cache_quant_algo") if kv else None
    algo = q.get("quant_algo")
    excluded = q.get("exclude_modules") or []
    if not isinstance(excluded, list):
        raise SpecplanError(f"{where}: quantization.exclude_modules: expected a list")
    votes: dict[str, Counter] = {}
    glob_dtype = None
    listed = q.get("quantized_layers")
    if algo is None:
        raise SpecplanError(f"{where}: quantization.quant_algo: missing field")
    if str(algo).upper() == "MIXED_PRECISION":
        if not isinstance(listed, dict) or not listed:
            raise SpecplanError(f"{where}: quantization.quantized_layers: missing for quant_algo MIXED_PRECISION")
        for name, spec in listed.items():
            mod = module_of(name)
            if mod is None:
                continue
            a = spec.get("quant_algo") if isinstance(spec, dict) else None
            if a is None:
                raise SpecplanError(f"{where}: quantization.quantized_layers.{name}.quant_algo: missing field")
            votes.setdefault(mod, Counter())[algo_dtype(a, where, f"quantized_layers.{name}.quant_algo")] += 1
        for name in excluded:
            mod = module_of(str(name).rstrip("*.") or str(name))
            if mod is not None:
                votes.setdefault(mod, Counter())[base] += 1
    else:
        glob_dtype = algo_dtype(algo, where, "quantization.quant_algo")
        patterns = [str(p) for p in excluded]
        for mod, names in module_instances(layers or [], n_mtp):
            votes.setdefault(mod, Counter())[base if _excluded(names, patterns) else glob_dtype] += 1
    modules = {"embedding": base} if glob_dtype else {}  # modelopt does not quantize the embedding table
    for mod, c in votes.items():
        if mod == "embedding" and glob_dtype:
            continue
        # majority by count; ties go to the wider format (a conservative byte count)
        modules[mod] = max(c.items(), key=lambda kv_: (kv_[1], dtype_bytes(kv_[0])))[0]
    return modules, glob_dtype, kv_dtype


def embedded_quantization(c: HfFields, family: str, base: str) -> tuple[str, dict[str, str]]:
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
        return base, {"moe": "mxfp4"}
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
        return algo_dtype(algo, c.where, "quantization_config.quant_algo"), {"embedding": base, "lm_head": base}
    raise c.fail("quantization_config.quant_method", f"unsupported quant_method {qc.get('quant_method')!r}")


def base_dtype(c: HfFields) -> str:
    raw = c.get("torch_dtype", "dtype", default="bfloat16")
    try:
        return canonical_dtype(raw, where="torch_dtype")
    except SpecplanError as exc:
        raise SpecplanError(f"{c.where}: {exc}") from None



def weight_fields(
    c: HfFields, fam: str, quant: Path | None, present: set[str], layers: list[tuple] | None = None, n_mtp: int = 0
) -> dict[str, Any]:
    """kv_cache_dtype, sources, weight_dtype and module_dtypes (only the modules in `present` that differ)."""
    base = base_dtype(c)
    weight, modules = embedded_quantization(c, fam, base)
    d: dict[str, Any] = {}
    if quant is not None:
        qmods, qglob, kv = read_quant_config(quant, base, layers, n_mtp)
        if qglob is not None:
            weight = qglob
            qmods = {**{"embedding": base}, **qmods}  # modelopt never quantizes the embedding
        modules.update(qmods)
        if kv:
            d["kv_cache_dtype"] = kv
        d["sources"] = {"quantization": quant.name}
    d["weight_dtype"] = weight
    if modules.get("shared_experts", modules.get("moe", weight)) == modules.get("moe", weight):
        modules.pop("shared_experts", None)  # same format as the routed experts: dtype_of falls back to moe
    mods = {k: v for k, v in modules.items() if k in present and v != weight}
    if mods:
        d["module_dtypes"] = dict(sorted(mods.items()))
    return d

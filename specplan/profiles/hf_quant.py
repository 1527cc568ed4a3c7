"""Weight and KV-cache formats of a Hugging Face checkpoint: embedded quantization_config and modelopt hf_quant_config.json."""

from __future__ import annotations

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


def read_quant_config(qpath: Path, base: str) -> tuple[dict[str, str], str | None, str | None]:
    """(module dtypes, global weight dtype or None, kv-cache dtype or None) from a modelopt hf_quant_config.json."""
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
    layers = q.get("quantized_layers")
    if algo is None:
        raise SpecplanError(f"{where}: quantization.quant_algo: missing field")
    if str(algo).upper() == "MIXED_PRECISION":
        if not isinstance(layers, dict) or not layers:
            raise SpecplanError(f"{where}: quantization.quantized_layers: missing for quant_algo MIXED_PRECISION")
        for name, spec in layers.items():
            mod = module_of(name)
            if mod is None:
                continue
            a = spec.get("quant_algo") if isinstance(spec, dict) else None
            if a is None:
                raise SpecplanError(f"{where}: quantization.quantized_layers.{name}.quant_algo: missing field")
            votes.setdefault(mod, Counter())[algo_dtype(a, where, f"quantized_layers.{name}.quant_algo")] += 1
    else:
        glob_dtype = algo_dtype(algo, where, "quantization.quant_algo")
    for name in excluded:
        mod = module_of(str(name).rstrip("*.") or str(name))
        if mod is not None:
            votes.setdefault(mod, Counter())[base] += 1
    modules = {}
    for mod, c in votes.items():
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



def weight_fields(c: HfFields, fam: str, quant: Path | None, present: set[str]) -> dict[str, Any]:
    """kv_cache_dtype, sources, weight_dtype and module_dtypes (only the modules in `present` that differ)."""
    base = base_dtype(c)
    weight, modules = embedded_quantization(c, fam, base)
    d: dict[str, Any] = {}
    if quant is not None:
        qmods, qglob, kv = read_quant_config(quant, base)
        if qglob is not None:
            weight = qglob
            qmods = {**{"embedding": base, "lm_head": base}, **qmods}
        modules.update(qmods)
        if kv:
            d["kv_cache_dtype"] = kv
        d["sources"] = {"quantization": quant.name}
    d["weight_dtype"] = weight
    mods = {k: v for k, v in modules.items() if k in present and v != weight}
    if mods:
        d["module_dtypes"] = dict(sorted(mods.items()))
    return d

"""Weight and KV-cache formats of a Hugging Face checkpoint: embedded quantization_config and modelopt hf_quant_config.json."""

from __future__ import annotations

import fnmatch
import re
from collections import Counter
from pathlib import Path
from typing import Any

from specplan.core.dtypes import INT4_GROUP_SIZES, canonical_dtype, dtype_bytes
from specplan.core.errors import SpecplanError
from specplan.core.records import Record, record
from specplan.profiles.file_record import FileRecord
from specplan.profiles.hf_fields import HfFields, checked, read_json

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


@record
class ModeloptQuantization(FileRecord):
    """The `quantization` block of a modelopt hf_quant_config.json (or one embedded in a quantization_config)."""

    quant_algo: Any = None
    group_size: Any = None
    kv_cache_scheme: Any = None
    kv_cache_quant_algo: Any = None
    exclude_modules: Any = None
    quantized_layers: Any = None


@record
class QuantizedLayer(FileRecord):
    """One entry of a MIXED_PRECISION checkpoint's quantized_layers."""

    quant_algo: Any = None
    group_size: Any = None


@record
class QuantizationConfig(FileRecord):
    """The embedded `quantization_config` of a config.json (AWQ / GPTQ bits and group size go by two names)."""

    quant_method: Any = None
    awq_bits: Any = None
    awq_group_size: Any = None
    group_size: Any = None
    quant_algo: Any = None
    exclude_modules: Any = None
    modules_to_not_convert: Any = None
    ignored_layers: Any = None
    ignore: Any = None
    config_groups: Any = None
    kv_cache_scheme: Any = None
    kv_cache_quant_algo: Any = None
    quantization: Any = None
    ALIASES = {"awq_bits": ("bits", "w_bit"), "awq_group_size": ("group_size", "q_group_size")}


@record
class ConfigGroup(FileRecord):
    """One compressed-tensors config group (its weight scheme)."""

    weights: Any = None


@record
class WeightScheme(FileRecord):
    """A compressed-tensors weight scheme."""

    num_bits: Any = None
    type: Any = "int"
    group_size: Any = None
    symmetric: Any = True


@record
class KvCacheScheme(FileRecord):
    """A compressed-tensors / modelopt kv_cache_scheme object."""

    num_bits: Any = None
    type: Any = "float"


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


def algo_dtype(algo: Any, where: str, field: str, group_size: Any = None) -> str:
    """The weight dtype of a modelopt quant_algo (int4 AWQ with its group size: int4_g<g>)."""
    key = str(algo).strip().lower()
    if key in _QUANT_ALGOS:
        fmt = _QUANT_ALGOS[key]
        if fmt == "int4" and group_size is not None:
            return int4_dtype(group_size, False, where, field.rsplit(".", 1)[0] + ".group_size")
        return fmt
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


def exclusion_matcher(patterns: list[str], where: str = "", field: str = "exclude_modules"):
    """One compiled regex for exclude_modules / ignore patterns: fnmatch wildcards or parent module names (with or
    without the wrapper prefixes), and compressed-tensors 're:<regex>' patterns; None when there are none."""
    parts = []
    for pat in patterns:
        if pat.startswith("re:"):
            parts.append(f"(?:{pat[3:]})")
            continue
        t = fnmatch.translate(_strip(pat))
        m = re.fullmatch(r"\(\?s:(.*)\)\\[Zz]", t, re.S)  # fnmatch wraps its regex as (?s:...)\Z
        parts.append(f"(?:(?:.*\\.)?(?:{m.group(1) if m else t})(?:\\..*)?)")
    try:
        return re.compile("|".join(parts), re.S) if parts else None
    except re.error as exc:
        raise SpecplanError(f"{where}: {field}: bad module pattern ({exc})") from None


def _excluded(names: list[str], matcher) -> bool:
    """True when the matcher (exclusion_matcher) covers one of a module's checkpoint names."""
    return matcher is not None and any(matcher.fullmatch(n) or matcher.fullmatch("model." + n) for n in names)


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
    checked(q, where, "quantization" if "quantization" in data else "")  # the part read; `producer` etc. carried
    mq = ModeloptQuantization.read(q)
    if mq.kv_cache_scheme is not None:
        kv_dtype = kv_scheme_dtype(mq.kv_cache_scheme, where, "quantization.kv_cache_scheme")
    else:
        kv_dtype = kv_scheme_dtype(mq.kv_cache_quant_algo, where, "quantization.kv_cache_quant_algo")
    algo = mq.quant_algo
    excluded = mq.exclude_modules or []
    if not isinstance(excluded, list):
        raise SpecplanError(f"{where}: quantization.exclude_modules: expected a list")
    votes: dict[str, Counter] = {}
    glob_dtype = None
    listed = mq.quantized_layers
    if algo is None:
        raise SpecplanError(f"{where}: quantization.quant_algo: missing field")
    if str(algo).upper() == "MIXED_PRECISION":
        if not isinstance(listed, dict) or not listed:
            raise SpecplanError(f"{where}: quantization.quantized_layers: missing for quant_algo MIXED_PRECISION")
        for name, spec in listed.items():
            mod = module_of(name)
            if mod is None:
                continue
            layer = QuantizedLayer.read(spec) if isinstance(spec, dict) else QuantizedLayer()
            if layer.quant_algo is None:
                raise SpecplanError(f"{where}: quantization.quantized_layers.{name}.quant_algo: missing field")
            fmt = algo_dtype(layer.quant_algo, where, f"quantized_layers.{name}.quant_algo", layer.group_size)
            votes.setdefault(mod, Counter())[fmt] += 1
        for name in excluded:
            mod = module_of(str(name).rstrip("*.") or str(name))
            if mod is not None:
                votes.setdefault(mod, Counter())[base] += 1
    else:
        glob_dtype = algo_dtype(algo, where, "quantization.quant_algo", mq.group_size)
        matcher = exclusion_matcher([str(p) for p in excluded], where, "quantization.exclude_modules")
        for mod, names in module_instances(layers or [], n_mtp):
            votes.setdefault(mod, Counter())[base if _excluded(names, matcher) else glob_dtype] += 1
    modules = {"embedding": base} if glob_dtype else {}  # modelopt does not quantize the embedding table
    for mod, c in votes.items():
        if mod == "embedding" and glob_dtype:
            continue
        # majority by count; ties go to the wider format (a conservative byte count)
        modules[mod] = max(c.items(), key=lambda kv_: (kv_[1], dtype_bytes(kv_[0])))[0]
    return modules, glob_dtype, kv_dtype


def int4_dtype(group, symmetric: bool, where: str, field: str) -> str:
    """The int4 dtype of a group size (int4_g<g> with zero points, int4_sym_g<g> without); -1 / None: plain int4."""
    if group in (None, -1, 0):
        return "int4"
    if group not in INT4_GROUP_SIZES:
        raise SpecplanError(f"{where}: {field}: unsupported int4 group size {group!r} "
                            f"(supported: {', '.join(map(str, INT4_GROUP_SIZES))})")
    return f"int4_sym_g{group}" if symmetric else f"int4_g{group}"


def _per_instance(fmt: str, base: str, ignore: list[str], layers, n_mtp: int, only: set[str] | None = None,
                  where: str = "") -> dict:
    """Module dtypes when every linear module (of the classes in `only`, if given) is `fmt` unless `ignore` covers
    it; the embedding is never quantized."""
    votes: dict[str, Counter] = {}
    matcher = exclusion_matcher(ignore, where, "quantization_config")
    for mod, names in module_instances(layers or [], n_mtp):
        quantized = mod != "embedding" and (only is None or mod in only) and not _excluded(names, matcher)
        votes.setdefault(mod, Counter())[fmt if quantized else base] += 1
    return {mod: max(c.items(), key=lambda kv_: (kv_[1], dtype_bytes(kv_[0])))[0] for mod, c in votes.items()}


def _ignore_list(qc: QuantizationConfig, c: HfFields) -> list[str]:
    """The module patterns of the config's exclusion lists (modules_to_not_convert, ignored_layers, ignore)."""
    out = []
    for f, v in (("modules_to_not_convert", qc.modules_to_not_convert), ("ignored_layers", qc.ignored_layers),
                 ("ignore", qc.ignore)):
        if v is None:
            continue
        if not isinstance(v, list):
            raise c.fail(f"quantization_config.{f}", f"expected a list, got {type(v).__name__}")
        out += [str(x) for x in v]
    for x in out:
        if x.startswith("re:"):
            try:
                re.compile(x[3:])
            except re.error as exc:
                raise c.fail("quantization_config.ignore", f"bad regular expression {x!r}: {exc}") from None
    return out


def _compressed_tensors_format(qc: QuantizationConfig, c: HfFields) -> str:
    """Weight format of a compressed-tensors config: its (one) config group's weight scheme."""
    groups = qc.config_groups
    if not isinstance(groups, dict) or not groups:
        raise c.fail("quantization_config.config_groups", "missing field")
    fmts = set()
    for name, grp in groups.items():
        field = f"quantization_config.config_groups.{name}.weights"
        raw_w = ConfigGroup.read(grp).weights if isinstance(grp, dict) else None
        if not isinstance(raw_w, dict):
            raise c.fail(field, "missing field")
        w = WeightScheme.read(raw_w)
        bits, kind, gs = w.num_bits, str(w.type), w.group_size
        if bits == 4 and kind == "int":
            fmts.add(int4_dtype(gs, bool(w.symmetric), c.where, f"{field}.group_size"))
        elif bits == 4 and kind == "float":
            fmts.add("fp4")  # nvfp4-pack-quantized (fp8 scale per 16)
        elif bits == 8:
            fmts.add("fp8" if kind == "float" else "int8")
        else:
            raise c.fail(f"{field}.num_bits", f"unsupported {bits!r}-bit {kind} weights")
    if len(fmts) > 1:
        raise c.fail("quantization_config.config_groups", f"several weight formats {sorted(fmts)}: not supported")
    return fmts.pop()


def quantization_config(c: HfFields) -> QuantizationConfig | None:
    """The embedded `quantization_config`, read once (None when the config has none)."""
    qc = c.get("quantization_config")
    if qc is None:
        return None
    if not isinstance(qc, dict):
        raise c.fail("quantization_config", "expected an object")
    return QuantizationConfig.read(qc)


def embedded_quantization(
    qc: QuantizationConfig | None, c: HfFields, base: str, layers: list[tuple] | None = None, n_mtp: int = 0
) -> tuple[str, dict[str, str]]:
    """(weight dtype, module dtypes) from an embedded `quantization_config`.

    Every linear module of the model is in the method's format unless the config's exclusion list
    (`modules_to_not_convert`, `ignored_layers`, compressed-tensors `ignore`) covers it; the embedding never is, and
    the LM head is not unless the method says so (fp8 / awq / gptq keep it 16-bit, as transformers does)."""
    if qc is None:
        return base, {}
    method = str(qc.quant_method if qc.quant_method is not None else "").lower()
    ignore = _ignore_list(qc, c)
    if method == "mxfp4":
        # gpt-oss: MXFP4 experts; attention, router, embedding and LM head are not converted
        return base, _per_instance("mxfp4", base, ignore, layers, n_mtp, {"moe"}, c.where) if layers else {"moe": "mxfp4"}
    if method == "fp8":  # block-wise (DeepSeek) or per-channel FP8: every linear layer but the LM head
        fmt = "fp8"
        ignore = ignore + ["lm_head"]
    elif method in ("awq", "gptq"):
        bits = qc.awq_bits
        if bits == 4:
            sym = False  # AWQ and GPTQ both store zero points per group (GPTQ its qzeros even when symmetric)
            fmt = int4_dtype(qc.awq_group_size, sym, c.where, "quantization_config.group_size")
        elif bits == 8:
            fmt = "int8"
        else:
            raise c.fail("quantization_config.bits", f"unsupported {method} bit width {bits!r}")
        ignore = ignore + ["lm_head"]
    elif method == "compressed-tensors":
        fmt = _compressed_tensors_format(qc, c)
    elif method == "modelopt":
        algo = qc.quant_algo
        if algo is None or str(algo).upper() == "MIXED_PRECISION":
            raise c.fail("quantization_config.quant_algo", "mixed precision needs hf_quant_config.json beside config.json")
        fmt = algo_dtype(algo, c.where, "quantization_config.quant_algo", qc.group_size)
        ignore = ignore + [str(x) for x in (qc.exclude_modules or [])] + ["lm_head"]
    else:
        raise c.fail("quantization_config.quant_method", f"unsupported quant_method {qc.quant_method!r}")
    if not layers:
        return fmt, {"embedding": base, "lm_head": base}
    return fmt, _per_instance(fmt, base, ignore, layers, n_mtp, None, c.where)


def kv_scheme_dtype(scheme: Any, where: str, field: str) -> str | None:
    """The KV-cache dtype a checkpoint declares: a modelopt `kv_cache_quant_algo` string (FP8, NVFP4) or a
    compressed-tensors / modelopt `kv_cache_scheme` object ({num_bits: 8, type: float} -> fp8; 4-bit float -> fp4),
    as vLLM 0.34 (utils/torch_utils.get_kv_cache_quant_algo_string) and SGLang 0.5.23 (compressed_tensors
    kv_cache_quant_algo) read them; None when it declares none."""
    if scheme is None or scheme == "":
        return None
    if isinstance(scheme, dict):
        s = KvCacheScheme.read(scheme)
        bits, kind = s.num_bits, str(s.type).lower()
        if bits == 8 and kind == "float":
            return "fp8"
        if bits == 4 and kind == "float":
            return "fp4"
        if bits == 8 and kind == "int":
            return "int8"
        raise SpecplanError(f"{where}: {field}: unsupported KV-cache scheme of {bits!r}-bit {kind} "
                            f"(supported: 8-bit float, 4-bit float, 8-bit int)")
    return algo_dtype(scheme, where, field)


def embedded_kv_dtype(qc: QuantizationConfig | None, c: HfFields) -> str | None:
    """The KV-cache dtype an embedded quantization_config declares (`kv_cache_quant_algo`, `kv_cache_scheme`)."""
    if qc is None:
        return None
    inner = ModeloptQuantization.read(qc.quantization) if isinstance(qc.quantization, dict) else ModeloptQuantization()
    for value, field in ((inner.kv_cache_scheme, "quantization.kv_cache_scheme"), (qc.kv_cache_scheme, "kv_cache_scheme"),
                         (inner.kv_cache_quant_algo, "quantization.kv_cache_quant_algo"),
                         (qc.kv_cache_quant_algo, "kv_cache_quant_algo")):
        if value is not None:
            return kv_scheme_dtype(value, c.where, f"quantization_config.{field}")
    return None


def base_dtype(c: HfFields) -> str:
    raw = c.get("torch_dtype", "dtype", default="bfloat16")
    try:
        return canonical_dtype(raw, where="torch_dtype")
    except SpecplanError as exc:
        raise SpecplanError(f"{c.where}: {exc}") from None


@record(kw_only=True)
class WeightFields(Record):
    """The profile fields a checkpoint's formats set (module_dtypes: only the modules present that differ)."""

    kv_cache_dtype: str | None = None
    sources: dict | None = None
    weight_dtype: str
    module_dtypes: dict | None = None
    OPTIONAL = ("kv_cache_dtype", "sources", "module_dtypes")


def weight_fields(
    c: HfFields, quant: Path | None, present: set[str], layers: list[tuple] | None = None, n_mtp: int = 0
) -> WeightFields:
    """kv_cache_dtype, sources, weight_dtype and module_dtypes (only the modules in `present` that differ)."""
    base = base_dtype(c)
    qc = quantization_config(c)
    weight, modules = embedded_quantization(qc, c, base, layers, n_mtp)
    kv = embedded_kv_dtype(qc, c) or None
    sources = None
    if quant is not None:
        qmods, qglob, quant_kv = read_quant_config(quant, base, layers, n_mtp)
        if qglob is not None:
            weight = qglob
            qmods = {**{"embedding": base}, **qmods}  # modelopt never quantizes the embedding
        modules.update(qmods)
        kv = quant_kv or kv
        sources = {"quantization": quant.name}
    moe_fmt = modules.get("moe", weight)
    if modules.get("shared_experts", moe_fmt) == moe_fmt:
        modules.pop("shared_experts", None)  # same format as the routed experts: dtype_of falls back to moe
    mods = {k: v for k, v in modules.items() if k in present and v != weight}
    return WeightFields(kv_cache_dtype=kv, sources=sources, weight_dtype=weight,
                        module_dtypes=dict(sorted(mods.items())) if mods else None)

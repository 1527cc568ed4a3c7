"""Import a Hugging Face config.json (and hf_quant_config.json beside it) into a ModelProfile.

Supported model_type values: llama, mistral, mixtral, qwen3, qwen3_moe, qwen3_next, qwen3_5 / qwen3_5_text,
qwen3_5_moe / qwen3_5_moe_text, deepseek_v2, deepseek_v3, deepseek_v32, deepseek_v4, gpt_oss, nemotron_h,
nemotron-nas, llama4 / llama4_text, gemma3 / gemma4 (and _text), minimax_m2, the EAGLE-3 draft head
(LlamaForCausalLMEagle3), and any other model_type that transformers maps to one of these (kimi_k2) or whose
`architectures` names one. A config this module cannot handle raises SpecplanError with one line naming the file and
the missing or unsupported field.

This module reads the file and assembles the profile; the parts live beside it: hf_fields (typed field access),
hf_layers (family and per-layer layout), hf_blocks (MLA, MoE, MTP, linear attention / Mamba, flags) and hf_quant
(weight and KV-cache formats).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specplan.core.errors import SpecplanError
from specplan.core.limits import MAX_CONTEXT
from specplan.core.records import Record, record
from specplan.profiles.hf_blocks import arch_flags, attention_dims, mixer_blocks, moe_block, mtp_block
from specplan.profiles.hf_fields import HfFields, flatten_text_config, read_json
from specplan.profiles.hf_layers import (
    SUPPORTED,
    family_of,
    is_default_layout,
    layer_groups,
    layer_kinds,
    leading_dense_layers,
)
from specplan.profiles.hf_quant import quant_file_for, weight_fields
from specplan.profiles.model import ModelProfile
from specplan.profiles.registry import build, write_profile_yaml

MAX_IMPORT_LAYERS = 4096  # decoder (and MTP) layers of an imported config (real models have a few hundred at most)

__all__ = ["SUPPORTED", "hf_config_to_dict", "import_hf_config", "profile_to_yaml"]


def _repo_from_path(path: Path, raw: dict) -> str:
    """org/repo from `_name_or_path`, else from the file name (`org--repo_config.json`) or its folder."""
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
    """Profile id from a repo name: lower case, runs of other characters -> '-'."""
    name = repo.split("/")[-1].lower()
    return re.sub(r"[^a-z0-9.]+", "-", name).strip("-") or "imported-model"



@record(kw_only=True)
class LayoutFields(Record):
    """The profile's layer-layout fields: MTP, dense FFN width, MoE and per-layer groups (left out while None)."""

    mtp: dict | None = None
    ffn_size: int | None = None
    moe: dict | None = None
    layer_groups: list | None = None
    OPTIONAL = ("mtp", "ffn_size", "moe", "layer_groups")


@record(kw_only=True)
class NamingFields(Record):
    """The profile's architecture name, context limit and notes (left out while None)."""

    architecture: str
    max_context_len: int | None = None
    notes: str | None = None
    OPTIONAL = ("max_context_len", "notes")


def hf_config_to_dict(raw: dict, where: str, quant: Path | None = None) -> dict:
    """The ModelProfile fields (a plain dict, not yet validated) for one Hugging Face config mapping."""
    c = HfFields(flatten_text_config(raw, where), where)
    fam, mt, eagle, fam_note = family_of(c, raw)
    L = c.int("num_hidden_layers", "n_layer", "num_layers")
    if L > MAX_IMPORT_LAYERS:  # the importer lays out every layer: refuse before building the lists
        raise c.fail("num_hidden_layers", f"must be <= {MAX_IMPORT_LAYERS:,}, got {L:,}")
    h = c.int("hidden_size", "d_model", "n_embd")
    nq = c.int("num_attention_heads", "n_head")
    nkv = c.int("num_key_value_heads", default=nq)
    if nq % nkv:  # named as the config names them (the profile calls them num_q_heads / num_kv_heads)
        raise c.fail("num_key_value_heads", f"must divide num_attention_heads ({nq}), got {nkv}")
    V = c.int("vocab_size")

    attention = attention_dims(c, fam, h, nq)
    moe = moe_block(c, fam, mt)
    layers = layer_kinds(c, fam, mt, L, moe, h, nq)
    mtp, mtp_note = mtp_block(c, mt, moe)
    has_dense = any(x[1] == "dense" for x in layers) or (mtp is not None and mtp.ffn == "dense")

    ffn_size = None
    if fam == "nemotron-nas":  # the most common block's KV heads and FFN width become the model's
        nkv, ffn_size, layers = _common_overrides(layers, nkv)
    elif has_dense:
        ffn_size = c.int("intermediate_size_mlp" if fam == "llama4" else "intermediate_size")
    if moe is not None:
        moe = replace(moe, dense_layers=leading_dense_layers(layers) or None)
    groups = None if is_default_layout(layers, moe) else layer_groups(layers)

    mixer_kinds = {x[0] for x in layers} | ({mtp.mixer} if mtp is not None else set())
    mixers = mixer_blocks(c, mixer_kinds)
    flags = arch_flags(c, fam, mt, eagle)

    present = {"attention", "embedding", "lm_head", "mtp"}
    present |= {"linear_attention"} if "linear" in mixer_kinds else set()
    present |= {"mamba"} if "mamba" in mixer_kinds else set()
    present |= {"moe"} if moe is not None else set()
    present |= {"shared_experts"} if moe is not None and moe.shared_expert_ffn_size else set()
    present |= {"ffn"} if has_dense or any(x[1] == "linear" for x in layers) or flags.per_layer_input_size else set()
    weights = weight_fields(c, quant, present, layers, mtp.num_layers if mtp else 0)
    architecture = str(c.get("model_type") or HfFields(raw, where).get("model_type") or mt)
    ctx = c.int("max_position_embeddings", "n_positions", default=None)
    if ctx is not None and (eagle or ctx > MAX_CONTEXT):  # the serving model refuses longer requests
        ctx = None
    naming = NamingFields(architecture=architecture, max_context_len=ctx,
                          notes=" ".join(n for n in (fam_note, mtp_note) if n) or None)
    d: dict[str, Any] = {"kind": "eagle3_head" if eagle else "model", "num_layers": L, "hidden_size": h,
                         "num_q_heads": nq, "num_kv_heads": nkv, "vocab_size": V}
    d.update(attention)
    d.update(LayoutFields(mtp=mtp.as_dict() if mtp else None, ffn_size=ffn_size, moe=moe.as_dict() if moe else None,
                          layer_groups=groups))
    for part in (mixers, flags, weights, naming):
        d.update(part)
    return d


def _common_overrides(layers: list[tuple], nkv: int) -> tuple[int, int | None, list[tuple]]:
    """(num_kv_heads, ffn_size, layers): each the most common per-layer value, overrides equal to it dropped."""
    from collections import Counter

    names, common = ("num_kv_heads", "ffn_size"), []
    for key, fallback in zip(names, (nkv, None)):
        values = Counter(dict(x[2]).get(key) for x in layers if key in dict(x[2]))
        common.append(values.most_common(1)[0][0] if values else fallback)
    model = dict(zip(names, common))
    out = [(m, f, tuple((k, v) for k, v in extra if model.get(k) != v)) for m, f, extra in layers]
    return common[0], common[1], out


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
    raw = read_json(p)
    where = str(p)
    quant = Path(quant_config) if quant_config is not None else quant_file_for(p)
    try:
        d = hf_config_to_dict(raw, where, quant)
    except SpecplanError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, ArithmeticError) as exc:
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
        from specplan.core.io import atomic_write_text

        atomic_write_text(Path(path), text)
    return text


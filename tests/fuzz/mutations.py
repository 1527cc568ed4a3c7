"""File mutations for the fuzz suite: valid seed texts (a shipped hardware / model / engine profile, a study, a
Hugging Face config, a measured table) with one thing broken, and `materialize`, which writes a drawn one.

Broken: a number made inf, NaN, huge, denormal, negative, a boolean or a string; a key deleted, duplicated or
unknown; the text truncated, made binary or latin-1, nested thousands deep, an alias bomb, a python-object tag that
would run code (a canary file tells), or emptied. One draw in several stays valid.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from hypothesis import strategies as st

from cases import HF, HW, MEAS, MODELS, ROOT, alias_bomb, gemm_rows, small_study

CANARY = "specplan_fuzz_canary"

# YAML scalars a numeric field may be replaced with
YAML_BAD = [".inf", "-.inf", ".nan", "true", "false", "null", "~", "-1", "0", "1e-310", "1e400", "9" * 400,
            "2e63", str(2**63), str(2**70), "'x'", "[]", "{}", "[1, [2, [3]]]", "0x7fffffffffffffff", "1_000",
            "12:30:00", "2001-12-14", "!!binary aGVsbG8=", "!!float 1e400", "*nope", "&a 1", "!!str 1",
            f"!!python/object/apply:os.system ['touch {CANARY}']",
            f"!!python/object/apply:builtins.open ['{CANARY}', 'w']", "!!set {a, b}", "? complex", "|\n  text",
            "\"\\x00\"", "1.0e+12", "5e-324"]
JSON_BAD = ["Infinity", "-Infinity", "NaN", "1e400", "9" * 400, "-1", "0", "1.5", "true", "null", '"x"', "[]", "{}",
            str(2**64), "1e-310", '"1e3"', "[[[[1]]]]"]
# What a Hugging Face config may carry in a field specplan never reads (Nemotron-H: "time_step_limit": [0.0,
# Infinity]): the importer must carry it, not refuse it (issue 22).
FOREIGN_VALUES = ["Infinity", "-Infinity", "NaN", "[0.0, Infinity]", "1e400", "9" * 400, str(2**64),
                  '{"a": 1, "a": 2}', "[[[[1]]]]", '"x"', "null"]
CSV_BAD = ["", " ", "inf", "-inf", "nan", "-1", "0", "abc", "1e400", "9" * 400, '"', "1,2", "\x00", "é", "NULL"]


# ---------------------------------------------------------------- file mutations

def _numeric_lines(text: str) -> list[int]:
    return [i for i, ln in enumerate(text.splitlines()) if re.match(r"^\s*[\w.]+:\s*[-+.\d]", ln)]


@st.composite
def yaml_mutation(draw, seed: str) -> str:
    """A seed YAML text with one thing broken (or, one time in eight, left valid)."""
    lines = seed.splitlines()
    kind = draw(st.sampled_from(["value", "value", "value", "delete", "duplicate", "unknown", "truncate", "binary",
                                 "latin1", "deep", "bomb", "python", "empty", "valid", "flow_value", "tab"]))
    if kind == "value":
        nums = _numeric_lines(seed) or [0]
        i = draw(st.sampled_from(nums))
        key = lines[i].split(":", 1)[0]
        lines[i] = f"{key}: {draw(st.sampled_from(YAML_BAD))}"
        return "\n".join(lines) + "\n"
    if kind == "flow_value":  # inside flow mappings like {mem_bw_fraction: 0.8, ...}
        return re.sub(r"(\w+: )([-+.\d][\w.+-]*)", lambda m: m.group(1) + draw(st.sampled_from(YAML_BAD[:20])),
                      seed, count=1 + draw(st.integers(0, 3)))
    if kind == "delete" and lines:
        del lines[draw(st.integers(0, len(lines) - 1))]
        return "\n".join(lines) + "\n"
    if kind == "duplicate" and lines:
        i = draw(st.integers(0, len(lines) - 1))
        lines.append(lines[i])
        return "\n".join(lines) + "\n"
    if kind == "unknown":
        return seed + f"\n{draw(st.sampled_from(['mem_bandwith', 'colour', 'id2', 'num_layer', 'x' * 300]))}: 1\n"
    if kind == "truncate":
        return seed[: draw(st.integers(0, max(0, len(seed) - 1)))]
    if kind == "binary":
        return "\x00\x89PNG\x01" + seed  # a NUL byte: YAML refuses it
    if kind == "latin1":
        return "LATIN1:" + seed  # the body encodes it as latin-1 with an é
    if kind == "deep":
        n = draw(st.sampled_from([70, 500, 3000]))
        return seed + "\nnotes: " + "[" * n + "]" * n + "\n"
    if kind == "bomb":
        return seed + "\n" + alias_bomb(draw(st.integers(5, 12)), 9).replace("id:", "notes:")
    if kind == "python":
        return f"!!python/object/apply:os.system ['touch {CANARY}']\n"
    if kind == "empty":
        return draw(st.sampled_from(["", "\n", "---\n", "[]\n", "42\n", "just text\n", "- a\n- b\n"]))
    if kind == "tab":
        return seed.replace("  ", "\t", 1)
    return seed


@st.composite
def json_mutation(draw, seed: str) -> str:
    """A seed JSON text with one thing broken (or left valid)."""
    kind = draw(st.sampled_from(["value", "value", "value", "delete", "duplicate", "truncate", "deep", "empty",
                                 "valid", "moe"]))
    data = json.loads(seed)
    keys = [k for k, v in data.items() if isinstance(v, (int, float)) and not isinstance(v, bool)] or list(data)
    if kind == "value":
        k = draw(st.sampled_from(keys))
        data[k] = "__BAD__"
        return json.dumps(data).replace('"__BAD__"', draw(st.sampled_from(JSON_BAD)))
    if kind == "moe":
        for k in ("num_local_experts", "num_experts", "n_routed_experts"):
            if k in data:
                data[k] = draw(st.sampled_from([0, None, -1, 1, 10**6]))
        return json.dumps(data)
    if kind == "delete":
        data.pop(draw(st.sampled_from(list(data))), None)
        return json.dumps(data)
    if kind == "duplicate":
        k = draw(st.sampled_from(list(data)))
        return json.dumps(data)[:-1] + f', {json.dumps(k)}: 1}}'
    if kind == "truncate":
        return seed[: draw(st.integers(0, max(0, len(seed) - 1)))]
    if kind == "deep":
        n = draw(st.sampled_from([70, 1000, 100000]))
        return json.dumps(data)[:-1] + ', "extra": ' + "[" * n + "]" * n + "}"
    if kind == "empty":
        return draw(st.sampled_from(["", "[]", "null", "42", '"x"', "{"]))
    return seed


@st.composite
def foreign_extra(draw, seed: str) -> str:
    """A valid seed config with one more field, one specplan does not read, holding a value a strict loader refuses."""
    data = json.loads(seed)
    name = draw(st.sampled_from(["time_step_limit", "unused_limit", "producer_extra"]))
    data.pop(name, None)
    data[name] = "__FOREIGN__"
    return json.dumps(data).replace('"__FOREIGN__"', draw(st.sampled_from(FOREIGN_VALUES)))


@st.composite
def csv_mutation(draw, seed: str) -> str:
    """A seed CSV with one cell, column or byte range broken (or left valid)."""
    rows = [r.split(",") for r in seed.splitlines()]
    kind = draw(st.sampled_from(["cell", "cell", "cell", "drop_column", "truncate", "header_only", "empty",
                                 "valid", "bom", "extra_column"]))
    if kind == "cell" and len(rows) > 1:
        i = draw(st.integers(1, len(rows) - 1))
        j = draw(st.integers(0, len(rows[0]) - 1))
        rows[i][j] = draw(st.sampled_from(CSV_BAD))
    elif kind == "drop_column":
        j = draw(st.integers(0, len(rows[0]) - 1))
        rows = [r[:j] + r[j + 1:] for r in rows]
    elif kind == "truncate":
        return seed[: draw(st.integers(0, len(seed)))]
    elif kind == "header_only":
        rows = rows[:1]
    elif kind == "empty":
        return ""
    elif kind == "bom":
        return "\ufeff" + seed
    elif kind == "extra_column":
        rows = [r + ["x"] for r in rows]
    return "\n".join(",".join(r) for r in rows) + "\n"


_SEEDS: dict[str, str] = {}


def seeds() -> dict[str, str]:
    """Valid seed texts, read once."""
    if not _SEEDS:
        _SEEDS.update({
            "hardware": (HW / "h100-sxm.yaml").read_text(),
            "lpu": (HW / "groq-3-lpu.yaml").read_text(),
            "model": (MODELS / "llama-3.2-1b.yaml").read_text(),
            "moe_model": (MODELS / "mixtral-8x7b.yaml").read_text(),
            "study": small_study(),
            "hf": (HF / "meta-llama--Llama-3.2-1B-Instruct_config.json").read_text(),
            "hf_moe": (HF / "mistralai--Mixtral-8x7B-v0.1_config.json").read_text(),
            "hf_mla": (HF / "deepseek-ai--DeepSeek-V3_config.json").read_text(),
            "gemm_csv": gemm_rows(30),
        })
        for name in ("engine", "kernel"):
            folder = ROOT / "engine_profiles" / ("kernels" if name == "kernel" else "")
            files = sorted(folder.glob("*.yaml")) if folder.is_dir() else []
            if files:
                _SEEDS[name] = files[0].read_text()
        wl = ROOT / "examples" / "adaptive" / "workload.csv"
        if wl.is_file():  # the adaptive simulator's request workload (arrival_s, isl, osl, alpha): 40 rows
            _SEEDS["workload_csv"] = "\n".join(wl.read_text().splitlines()[:41]) + "\n"
        att = MEAS / "attention_decode_h100_a100.csv.gz"
        import pandas as pd

        a = pd.read_csv(att)
        _SEEDS["attention_csv"] = a[a["device"] == "h100-sxm"].head(30).drop(columns=["source"]).to_csv(index=False)
    return _SEEDS


def file_spec(kind: str, valid_share: float = 0.0):
    """A strategy of ('FILE', kind, suffix, text) placeholders: a mutated seed of that kind (the seed itself with
    probability `valid_share`, so that commands fed files also run through to their results)."""
    s = seeds()
    text = s[kind]
    if kind.startswith("hf"):
        spec = json_mutation(text).map(lambda t: ("FILE", kind, "_config.json", t))
        seed = ("FILE", kind, "_config.json", text)
    elif kind.endswith("_csv"):
        spec = st.tuples(csv_mutation(text), st.sampled_from([".csv", ".csv", ".csv.gz", ".csv.gz.trunc"])).map(
            lambda x: ("FILE", kind, x[1], x[0]))
        seed = ("FILE", kind, ".csv", text)
    else:
        spec = yaml_mutation(text).map(lambda t: ("FILE", kind, ".yaml", t))
        seed = ("FILE", kind, ".yaml", text)
    if not valid_share:
        return spec
    return st.integers(0, 99).flatmap(lambda u: st.just(seed) if u < 100 * valid_share else spec)


def materialize(item, folder: Path, n: list) -> str:
    """Write a ('FILE', kind, suffix, text) placeholder to a file and return its path (other items unchanged)."""
    if not (isinstance(item, tuple) and item and item[0] == "FILE"):
        return item
    _, kind, suffix, text = item
    n[0] += 1
    trunc = suffix.endswith(".trunc")
    suffix = suffix.removesuffix(".trunc")
    p = folder / f"f{n[0]}{suffix}"
    if text.startswith("LATIN1:"):
        data = text[7:].replace("name: ", "name: Caf\u00e9 ", 1).encode("latin-1", "replace") + b"\xe9\n"
    else:
        data = text.encode("utf-8", "surrogatepass")
    if suffix.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
        if trunc:
            data = data[: len(data) // 2]
    p.write_bytes(data)
    return str(p)

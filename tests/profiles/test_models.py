"""Built-in model profiles: ids, parameter counts against reference/model_configs.csv, GQA group sizes, dtypes."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest
import yaml

from specplan.core.errors import SpecplanError
from specplan.profiles.hf_import import profile_to_yaml
from specplan.profiles.model import ModelProfile
from specplan.profiles.params import param_counts, weight_bytes
from specplan.profiles.registry import load_model, model_ids

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "reference" / "model_configs.csv"

# Built-in id -> reference/model_configs.csv row id. Totals are compared WITHOUT MTP modules, vision towers or an
# embedding shared with the target (the EAGLE-3 head's), which is what params_total_computed counts.
BUILTIN_TO_CSV = {
    "llama-3.2-1b": "llama-3.2-1b",
    "llama-3.2-3b": "llama-3.2-3b",
    "llama-3.1-8b": "llama-3.1-8b",
    "llama-3.3-70b": "llama-3.3-70b",
    "llama-3.1-405b": "llama-3.1-405b",
    "qwen3-4b": "qwen3-4b",
    "qwen3-8b": "qwen3-8b",
    "qwen3-32b": "qwen3-32b",
    "qwen3-30b-a3b": "qwen3-30b-a3b",
    "qwen3-235b-a22b": "qwen3-235b-a22b",
    "qwen3-next-80b-a3b": "qwen3-next-80b-a3b",
    "qwen3.5-35b-a3b": "qwen3.5-35b-a3b",
    "qwen3.5-122b-a10b": "qwen3.5-122b-a10b",
    "deepseek-v3": "deepseek-v3",
    "deepseek-r1": "deepseek-v3",  # the same architecture (R1's config.json equals V3's)
    "gpt-oss-20b": "gpt-oss-20b",
    "gpt-oss-120b": "gpt-oss-120b",
    "mistral-7b": "mistral-7b-v0.3",
    "mixtral-8x7b": "mixtral-8x7b",
    "nemotron-3.5-lightning-30b-a3b": "nemotron-3.5-lightning-30b-a3b",
    "eagle3-llama-3.1-8b": "eagle3-llama3.1-8b-draft",
}

# Built-in ids without a reference/model_configs.csv row, checked against their published parameter counts
# (sources in their model_profiles/*.yaml `parameters` entry).
PUBLISHED_PARAMS = {"llama-2-7b-32k": 6_738_415_616, "tinyllama-1.1b": 1_100_048_384,
                    "qwen2.5-7b": 7_610_000_000}  # Qwen2.5-7B model card: 7.61B (rounded; its q/k/v biases unpriced)

# Built-in id -> csv row of its MTP module (params_total_computed excludes the shared embedding and LM head).
MTP_ROWS = {
    "qwen3-next-80b-a3b": "qwen3-next-80b-a3b-mtp",
    "qwen3.5-35b-a3b": "qwen3.5-35b-a3b-mtp",
    "qwen3.5-122b-a10b": "qwen3.5-122b-a10b-mtp",
}

REQUIRED_IDS = [
    "llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "llama-3.3-70b", "llama-3.1-405b", "qwen3-8b", "qwen3-32b",
    "qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-next-80b-a3b", "qwen3.5-35b-a3b", "qwen3.5-122b-a10b", "deepseek-v3",
    "deepseek-r1",
    "gpt-oss-20b", "gpt-oss-120b", "mixtral-8x7b", "nemotron-3.5-lightning-30b-a3b", "eagle3-llama-3.1-8b",
    "qwen3-4b", "mistral-7b",
]  # fmt: skip


@pytest.fixture(scope="module")
def rows() -> dict[str, dict]:
    with CSV.open() as fh:
        return {r["id"]: r for r in csv.DictReader(fh)}


def test_required_ids_present():
    ids = set(model_ids())
    missing = [i for i in REQUIRED_IDS if i not in ids]
    assert not missing, missing
    assert set(BUILTIN_TO_CSV) == set(REQUIRED_IDS)


def test_every_builtin_is_mapped_to_a_csv_row():
    assert set(model_ids()) <= set(BUILTIN_TO_CSV) | set(PUBLISHED_PARAMS), "add new built-in models to BUILTIN_TO_CSV"


@pytest.mark.parametrize("mid", sorted(PUBLISHED_PARAMS))
def test_total_params_match_published(mid):
    got = param_counts(load_model(mid))["total"]
    assert abs(got - PUBLISHED_PARAMS[mid]) / PUBLISHED_PARAMS[mid] < 0.001, (mid, got)


@pytest.mark.parametrize("mid", sorted(BUILTIN_TO_CSV))
def test_total_params_match_csv(mid, rows):
    row = rows[BUILTIN_TO_CSV[mid]]
    pc = param_counts(load_model(mid))
    ref = int(row["params_total_computed"])
    assert abs(pc["total"] - ref) / ref < 0.01, (mid, pc["total"], ref)


@pytest.mark.parametrize("mid", sorted(BUILTIN_TO_CSV))
def test_active_params_match_csv(mid, rows):
    row = rows[BUILTIN_TO_CSV[mid]]
    ref = int(row["params_active_computed"])
    got = param_counts(load_model(mid))["active"]
    assert abs(got - ref) / ref < 0.01, (mid, got, ref)


@pytest.mark.parametrize("mid", sorted(BUILTIN_TO_CSV))
def test_non_embedding_params_match_csv(mid, rows):
    row = rows[BUILTIN_TO_CSV[mid]]
    if not row["params_nonembedding_total_computed"] or mid.startswith("eagle3"):
        pytest.skip(f"{mid}: the table's non-embedding count is the head's total (its 32,000-token output layer "
                    "included) while ours leaves the output layer out; test_eagle3_head_params_exclude_shared_embedding "
                    "checks the total" if mid.startswith("eagle3") else
                    f"{mid}: reference/model_configs.csv has no non-embedding parameter count to compare with")
    ref = int(row["params_nonembedding_total_computed"])
    got = param_counts(load_model(mid))["non_embedding"]
    assert abs(got - ref) / ref < 0.01, (mid, got, ref)


@pytest.mark.parametrize("mid", sorted(MTP_ROWS))
def test_mtp_params_match_csv(mid, rows):
    pc = param_counts(load_model(mid))
    ref = int(rows[MTP_ROWS[mid]]["params_total_computed"])
    assert abs(pc["mtp"] - ref) / ref < 0.01
    ref_active = int(rows[MTP_ROWS[mid]]["params_active_computed"])
    assert abs(pc["mtp_active"] - ref_active) / ref_active < 0.01


def test_deepseek_mtp_params_match_csv_notes(rows):
    # "MTP module computed 11,610,068,224 params excl. shared emb/head" (notes column of the deepseek-v3 row)
    m = re.search(r"MTP module computed ([\d,]+)", rows["deepseek-v3"]["notes"])
    ref = int(m.group(1).replace(",", ""))
    pc = param_counts(load_model("deepseek-v3"))
    assert abs(pc["mtp"] - ref) / ref < 0.01
    assert pc["total_with_mtp"] == pc["total"] + pc["mtp"]


def test_published_totals_where_comparable():
    # Published headline figures (model_configs.csv params_total_published); a name rounds, so 3%.
    published = {"llama-3.1-405b": 405e9, "gpt-oss-20b": 21e9, "gpt-oss-120b": 117e9, "deepseek-v3": 671e9,
                  "qwen3-235b-a22b": 235e9, "qwen3-30b-a3b": 30.5e9, "qwen3-4b": 4.0e9}  # fmt: skip
    for mid, ref in published.items():
        got = param_counts(load_model(mid))["total"]
        assert abs(got - ref) / ref < 0.03, (mid, got, ref)


def test_llama_8b_params_by_hand():
    h, f, v, layers = 4096, 14336, 128256, 32
    attn = h * h * 2 + h * 1024 * 2  # q, o; k, v (8 KV heads x 128)
    layer = attn + 3 * h * f + 2 * h
    total = layers * layer + h + 2 * v * h
    pc = param_counts(load_model("llama-3.1-8b"))
    assert pc["total"] == total == 8_030_261_248
    assert pc["embedding"] == pc["lm_head"] == v * h


def test_tied_embedding_counted_once():
    pc = param_counts(load_model("llama-3.2-1b"))
    assert pc["total"] == 1_235_814_400
    assert pc["non_embedding"] == pc["total"] - 128256 * 2048


def test_eagle3_head_params_exclude_shared_embedding():
    m = load_model("eagle3-llama-3.1-8b")
    pc = param_counts(m)
    assert m.kind == "eagle3_head" and m.num_layers == 1 and m.draft_vocab_size == 32000
    assert pc["embedding"] == 0 and pc["embedding_shared"] == 128256 * 4096
    assert pc["lm_head"] == 32000 * 4096
    assert pc["by_module"]["fc"] == 3 * 4096 * 4096
    assert pc["total"] == 424_689_664


# --- (d) GQA group size per device --------------------------------------------------------------------------


def test_g_dev_llama_8b():
    m = load_model("llama-3.1-8b")
    assert m.group_size == 4
    assert m.heads_per_device(1) == (32, 8) and m.g_dev(1) == 4
    assert m.heads_per_device(8) == (4, 1) and m.g_dev(8) == 4


def test_g_dev_kv_heads_replicated_beyond_tp():
    # 8 KV heads, TP 16: each device holds one (replicated) KV head and 128/16 = 8 query heads.
    m = load_model("llama-3.1-405b")
    assert m.heads_per_device(16) == (8, 1) and m.g_dev(16) == 8
    m70 = load_model("llama-3.3-70b")
    assert m70.heads_per_device(16) == (4, 1) and m70.g_dev(16) == 4
    q35 = load_model("qwen3.5-122b-a10b")  # 32 q / 2 KV
    assert q35.g_dev(1) == 16 and q35.g_dev(8) == 4


def test_g_dev_mla_is_query_heads_per_device():
    m = load_model("deepseek-v3")
    assert m.mla is not None
    assert m.g_dev(1) == 128 and m.g_dev(8) == 128 // 8 == 16


def test_tp_not_dividing_heads_is_one_line_error():
    with pytest.raises(SpecplanError, match="does not divide"):
        load_model("llama-3.1-8b").g_dev(3)


# --- architectures and weight formats -------------------------------------------------------------------------


def test_mtp_modules_are_part_of_profiles():
    for mid in ("deepseek-v3", "qwen3.5-35b-a3b", "qwen3.5-122b-a10b", "qwen3-next-80b-a3b"):
        m = load_model(mid)
        assert m.mtp is not None and m.mtp.num_layers == 1 and m.mtp.ffn == "moe", mid
    assert load_model("nemotron-3.5-lightning-30b-a3b").mtp.num_layers == 1
    assert load_model("llama-3.1-8b").mtp is None


def test_module_dtypes():
    ds = load_model("deepseek-v3")
    assert ds.weight_dtype == "fp8" and ds.dtype_of("moe") == "fp8" and ds.dtype_of("attention") == "fp8"
    assert ds.dtype_of("embedding") == "bf16" and ds.dtype_of("lm_head") == "bf16" and ds.dtype_of("mtp") == "fp8"
    for mid in ("gpt-oss-20b", "gpt-oss-120b"):
        g = load_model(mid)
        assert g.dtype_of("moe") == "mxfp4" and g.dtype_of("attention") == "bf16" and g.dtype_of("lm_head") == "bf16"
    n = load_model("nemotron-3.5-lightning-30b-a3b")
    assert n.dtype_of("moe") == "fp4" and n.dtype_of("lm_head") == "fp4" and n.dtype_of("mamba") == "fp8"
    assert n.dtype_of("attention") == "bf16" and n.dtype_of("embedding") == "bf16" and n.dtype_of("mtp") == "bf16"
    assert n.kv_cache_dtype == "fp8"
    assert load_model("eagle3-llama-3.1-8b").weight_dtype == "fp16"
    for mid in ("llama-3.1-8b", "qwen3-32b", "qwen3.5-122b-a10b", "mixtral-8x7b", "qwen3-next-80b-a3b"):
        m = load_model(mid)
        assert m.weight_dtype == "bf16" and not m.module_dtypes, mid


def test_hybrid_layouts():
    q = load_model("qwen3.5-122b-a10b")
    assert {(g.mixer, g.ffn): g.count for g in q.groups()} == {("linear", "moe"): 36, ("full", "moe"): 12}
    assert q.attn_output_gate and q.linear_attention.num_v_heads == 64
    n = load_model("nemotron-3.5-lightning-30b-a3b")
    kinds = {(g.mixer, g.ffn): g.count for g in n.groups()}
    assert kinds == {("mamba", "none"): 23, ("none", "moe"): 23, ("full", "none"): 6}
    assert not n.gated_ffn
    g = load_model("gpt-oss-120b")
    assert {(x.mixer, x.ffn): x.count for x in g.groups()} == {("sliding", "moe"): 18, ("full", "moe"): 18}
    assert g.sliding_window == 128
    d = load_model("deepseek-v3")
    assert {(x.mixer, x.ffn): x.count for x in d.groups()} == {("full", "dense"): 3, ("full", "moe"): 58}


def test_weight_bytes_use_module_dtypes():
    wb = weight_bytes(load_model("llama-3.1-8b"))
    assert wb["total"] == pytest.approx(2 * 8_030_261_248)
    g = load_model("gpt-oss-120b")
    pc = param_counts(g)
    wb = weight_bytes(g)
    assert wb["moe"] == pytest.approx(pc["by_module"]["moe"] * (0.5 + 1 / 32))  # MXFP4: one E8M0 scale per 32
    assert wb["attention"] == pytest.approx(pc["by_module"]["attention"] * 2)


@pytest.mark.parametrize("mid", sorted(BUILTIN_TO_CSV))
def test_sources_name_the_reference_files(mid, rows):
    m = load_model(mid)
    arch = m.sources["architecture"]
    cfg = arch.split(";")[0].strip()
    assert (ROOT / cfg).is_file(), cfg
    assert f"row {BUILTIN_TO_CSV[mid]}" in arch
    assert m.name and m.hf_repo


@pytest.mark.parametrize("mid", sorted(BUILTIN_TO_CSV))
def test_yaml_round_trip(mid):
    m = load_model(mid)
    text = profile_to_yaml(m)
    assert ModelProfile.model_validate(yaml.safe_load(text)) == m

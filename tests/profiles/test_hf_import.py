"""Hugging Face config import: every reference config imports, matches the built-in profile, and bad input is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specplan.core.errors import SpecplanError
from specplan.profiles.hf_import import import_hf_config, profile_to_yaml
from specplan.profiles.params import param_counts
from specplan.profiles.registry import load_model

ROOT = Path(__file__).resolve().parents[2]
HF = ROOT / "reference" / "hf_configs"
MODEL_CONFIGS = sorted(p for p in HF.glob("*_config.json") if not p.name.endswith("hf_quant_config.json"))

# config file -> built-in profile it must reproduce (R1 shares DeepSeek-V3's architecture and profile)
CONFIG_TO_BUILTIN = {
    "meta-llama--Llama-3.2-1B-Instruct_config.json": "llama-3.2-1b",
    "meta-llama--Llama-3.2-3B-Instruct_config.json": "llama-3.2-3b",
    "meta-llama--Meta-Llama-3.1-8B_config.json": "llama-3.1-8b",
    "meta-llama--Llama-3.3-70B-Instruct_config.json": "llama-3.3-70b",
    "meta-llama--Meta-Llama-3.1-405B_config.json": "llama-3.1-405b",
    "Qwen--Qwen3-4B_config.json": "qwen3-4b",
    "Qwen--Qwen3-8B_config.json": "qwen3-8b",
    "Qwen--Qwen3-32B_config.json": "qwen3-32b",
    "Qwen--Qwen3-30B-A3B_config.json": "qwen3-30b-a3b",
    "Qwen--Qwen3-235B-A22B_config.json": "qwen3-235b-a22b",
    "Qwen--Qwen3-Next-80B-A3B-Thinking_config.json": "qwen3-next-80b-a3b",
    "Qwen--Qwen3.5-35B-A3B_config.json": "qwen3.5-35b-a3b",
    "Qwen--Qwen3.5-122B-A10B_config.json": "qwen3.5-122b-a10b",
    "deepseek-ai--DeepSeek-V3_config.json": "deepseek-v3",
    "deepseek-ai--DeepSeek-R1_config.json": "deepseek-v3",
    "openai--gpt-oss-20b_config.json": "gpt-oss-20b",
    "openai--gpt-oss-120b_config.json": "gpt-oss-120b",
    "mistralai--Mistral-7B-v0.3_config.json": "mistral-7b",
    "mistralai--Mixtral-8x7B-v0.1_config.json": "mixtral-8x7b",
    "nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4_config.json": "nemotron-3.5-lightning-30b-a3b",
    "yuhuili--EAGLE3-LLaMA3.1-Instruct-8B_config.json": "eagle3-llama-3.1-8b",
}

DESCRIPTIVE = {"id", "name", "hf_repo", "sources", "notes"}


def test_reference_configs_found():
    assert len(MODEL_CONFIGS) >= 21
    assert {p.name for p in MODEL_CONFIGS} == set(CONFIG_TO_BUILTIN)


@pytest.mark.parametrize("path", MODEL_CONFIGS, ids=lambda p: p.name)
def test_every_reference_config_imports(path):
    prof = import_hf_config(path)
    assert prof.num_layers > 0 and param_counts(prof)["total"] > 0
    assert prof.sources["architecture"] == path.name


@pytest.mark.parametrize("name", sorted(CONFIG_TO_BUILTIN))
def test_import_matches_builtin(name):
    imported = import_hf_config(HF / name).model_dump(exclude=DESCRIPTIVE)
    builtin = load_model(CONFIG_TO_BUILTIN[name]).model_dump(exclude=DESCRIPTIVE)
    assert imported == builtin


def test_nested_text_config_and_top_level_fallback(tmp_path):
    cfg = {
        "model_type": "qwen3_5_moe",
        "tie_word_embeddings": True,  # top level, as in Qwen3.5
        "text_config": {
            "model_type": "qwen3_5_text", "hidden_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 8,
            "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 3072, "vocab_size": 1000,
            "linear_num_key_heads": 4, "linear_num_value_heads": 8, "linear_key_head_dim": 64,
            "linear_value_head_dim": 64, "full_attention_interval": 4, "mtp_num_hidden_layers": 1,
        },
        "vision_config": {"hidden_size": 1152},
    }  # fmt: skip
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    prof = import_hf_config(p)
    assert prof.hidden_size == 1024 and prof.tie_embeddings and prof.attn_output_gate
    assert {(g.mixer, g.ffn): g.count for g in prof.groups()} == {("linear", "dense"): 6, ("full", "dense"): 2}
    assert prof.mtp.num_layers == 1 and prof.mtp.ffn == "dense" and prof.ffn_size == 3072


def test_nemotron_pattern_string(tmp_path):
    src = json.loads((HF / "nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4_config.json").read_text())
    letters = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}
    src["hybrid_override_pattern"] = "".join(letters[t] for t in src.pop("layers_block_type"))
    p = tmp_path / "config.json"
    p.write_text(json.dumps(src))
    prof = import_hf_config(p)  # no hf_quant_config beside it: bf16
    assert prof.layer_groups == load_model("nemotron-3.5-lightning-30b-a3b").layer_groups
    assert prof.weight_dtype == "bf16" and not prof.module_dtypes


def test_hf_quant_config_beside_config(tmp_path):
    src = (HF / "meta-llama--Meta-Llama-3.1-8B_config.json").read_text()
    (tmp_path / "config.json").write_text(src)
    (tmp_path / "hf_quant_config.json").write_text(
        json.dumps({"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}})
    )
    prof = import_hf_config(tmp_path)  # a folder: its config.json
    assert prof.weight_dtype == "fp8" and prof.dtype_of("lm_head") == "bf16" and prof.kv_cache_dtype == "fp8"
    assert prof.dtype_of("ffn") == "fp8"


def test_profile_to_yaml_round_trip(tmp_path):
    prof = import_hf_config(HF / "deepseek-ai--DeepSeek-V3_config.json", id="ds")
    out = tmp_path / "ds.yaml"
    text = profile_to_yaml(prof, out)
    assert out.read_text() == text and "mla:" in text and "mtp:" in text
    assert load_model(str(out)) == prof


# --- (e) broken configs: one line naming the file and the field ----------------------------------------------------


def _write(tmp_path: Path, data, name="config.json") -> Path:
    p = tmp_path / name
    p.write_text(data if isinstance(data, str) else json.dumps(data))
    return p


def _llama(**changes) -> dict:
    d = json.loads((HF / "meta-llama--Meta-Llama-3.1-8B_config.json").read_text())
    for k, v in changes.items():
        if v is None:
            d.pop(k, None)
        else:
            d[k] = v
    return d


def _one_line_error(path: Path, *fragments: str, where: Path | None = None) -> str:
    with pytest.raises(SpecplanError) as exc:
        import_hf_config(path)
    msg = str(exc.value)
    assert "\n" not in msg and "Traceback" not in msg
    assert msg.startswith(f"{where or path}: "), msg
    for f in fragments:
        assert f in msg, msg
    return msg


def test_missing_hidden_size(tmp_path):
    _one_line_error(_write(tmp_path, _llama(hidden_size=None)), "hidden_size", "missing")


def test_unsupported_model_type(tmp_path):
    _one_line_error(_write(tmp_path, _llama(model_type="gpt2", architectures=["GPT2LMHeadModel"])), "model_type",
                    "gpt2", "unsupported")


def test_unknown_model_type_imports_as_its_architectures_family(tmp_path):
    prof = import_hf_config(_write(tmp_path, _llama(model_type="my_llama")))  # architectures: LlamaForCausalLM
    assert prof.architecture == "my_llama" and "read as llama" in prof.notes and "LlamaForCausalLM" in prof.notes
    assert param_counts(prof)["total"] == 8_030_261_248


def test_missing_model_type(tmp_path):
    _one_line_error(_write(tmp_path, _llama(model_type=None)), "model_type", "missing")


def test_malformed_json(tmp_path):
    _one_line_error(_write(tmp_path, '{"model_type": "llama", "hidden_size": 4096,'), "malformed JSON", "line 1")


def test_not_an_object(tmp_path):
    _one_line_error(_write(tmp_path, "[1, 2]"), "expected a JSON object")


def test_missing_file(tmp_path):
    _one_line_error(tmp_path / "nope.json", "file not found")


def test_bad_values(tmp_path):
    _one_line_error(_write(tmp_path, _llama(hidden_size="4096x")), "hidden_size", "expected an integer")
    _one_line_error(_write(tmp_path, _llama(num_hidden_layers=0)), "num_hidden_layers", ">= 1")
    _one_line_error(_write(tmp_path, _llama(num_key_value_heads=5)),
                    "num_key_value_heads: must divide num_attention_heads (32), got 5")
    _one_line_error(_write(tmp_path, _llama(torch_dtype="float7")), "torch_dtype", "float7")


def test_bad_layer_patterns(tmp_path):
    g = json.loads((HF / "openai--gpt-oss-20b_config.json").read_text())
    g["layer_types"] = g["layer_types"][:-1]
    _one_line_error(_write(tmp_path, g), "layer_types", "num_hidden_layers")
    g["layer_types"] = ["dilated_attention"] * g["num_hidden_layers"]
    _one_line_error(_write(tmp_path, g), "layer_types", "dilated_attention")
    n = json.loads((HF / "nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4_config.json").read_text())
    n.pop("layers_block_type")
    _one_line_error(_write(tmp_path, n), "hybrid_override_pattern", "missing")
    n["hybrid_override_pattern"] = "M" * 51 + "X"
    _one_line_error(_write(tmp_path, n), "hybrid_override_pattern", "'X'")


def test_missing_moe_and_mla_fields(tmp_path):
    d = json.loads((HF / "deepseek-ai--DeepSeek-V3_config.json").read_text())
    d.pop("kv_lora_rank")
    _one_line_error(_write(tmp_path, d), "kv_lora_rank", "missing")
    q = json.loads((HF / "Qwen--Qwen3-30B-A3B_config.json").read_text())
    q.pop("moe_intermediate_size")
    _one_line_error(_write(tmp_path, q), "moe_intermediate_size", "missing")


def test_unsupported_quantization(tmp_path):
    _one_line_error(_write(tmp_path, _llama(quantization_config={"quant_method": "bitnet"})), "quant_method", "bitnet")
    q = tmp_path / "hf_quant_config.json"
    q.write_text(json.dumps({"quantization": {"quant_algo": "W3A3"}}))
    _one_line_error(_write(tmp_path, _llama()), "quant_algo", "W3A3", where=q)


# --- (f) a Hugging Face config is a foreign document (issue 22): what the importer reads is checked, the rest carried


TEST_CONFIGS = ROOT / "tests" / "profiles" / "hf_configs"
EVERY_REAL_CONFIG = MODEL_CONFIGS + sorted(p for p in TEST_CONFIGS.rglob("*.json") if "hf_quant" not in p.name)


@pytest.mark.parametrize("path", EVERY_REAL_CONFIG, ids=lambda p: p.name if p.parent.name == "hf_configs" else
                         f"{p.parent.name}/{p.name}")
def test_every_real_config_in_the_repository_imports(path):
    assert param_counts(import_hf_config(path))["total"] > 0


def test_nemotron_h_time_step_limit_infinity_imports():
    path = TEST_CONFIGS / "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B_config.json"
    assert '"time_step_limit"' in path.read_text() and "Infinity" in path.read_text()  # as the checkpoint ships it
    prof = import_hf_config(path)
    assert 120.6e9 < param_counts(prof)["total"] < 120.7e9  # Nemotron 3 Super: 120.6 B (NVIDIA's card)


def test_unread_fields_are_carried_whatever_they_hold(tmp_path):
    text = json.dumps(_llama(unused_limit="__A__", unused_big="__B__", unused_nested={"x": "__C__"}))
    text = text.replace('"__A__"', "[0.0, Infinity, -Infinity, NaN]").replace('"__B__"', "9" * 5000)
    text = text.replace('"__C__"', '1e400, "x": 2')  # a value out of range and a key given twice, never read
    prof = import_hf_config(_write(tmp_path, text))
    assert param_counts(prof)["total"] == 8_030_261_248  # Llama-3.1-8B, as without the extra fields


@pytest.mark.parametrize("value, fragment", [
    ("Infinity", "hidden_size: must be a finite number, got inf"),
    ("NaN", "hidden_size: must be a finite number, got nan"),
    ("1e400", "hidden_size: must be a finite number, got inf"),
    ("9" * 400, "hidden_size: integer out of range"),
    ('4096, "hidden_size": 4096', "hidden_size: duplicate key (given twice in one object)"),
])
def test_a_field_the_importer_reads_is_still_strict(tmp_path, value, fragment):
    text = json.dumps(_llama(hidden_size="__V__")).replace('"__V__"', value)
    _one_line_error(_write(tmp_path, text), fragment)


def test_nested_read_field_is_strict(tmp_path):
    # quantization_config is read as a whole: a bad value anywhere under it names its dotted path
    text = json.dumps(_llama(quantization_config={"quant_method": "fp8", "weight_block_size": "__V__"}))
    _one_line_error(_write(tmp_path, text.replace('"__V__"', "[128, Infinity]")),
                    "quantization_config.weight_block_size[1]: must be a finite number")


def test_profiles_written_for_specplan_stay_strict(tmp_path):
    from specplan.core.loader import read_json, read_yaml

    (tmp_path / "p.yaml").write_text("id: x\nunused: .inf\n")
    with pytest.raises(SpecplanError, match="unused: must be a finite number"):
        read_yaml(tmp_path / "p.yaml")
    (tmp_path / "p.json").write_text('{"a": 1, "a": 2}')
    with pytest.raises(SpecplanError, match="duplicate key 'a'"):
        read_json(tmp_path / "p.json")


def test_import_errors_name_the_config_field(tmp_path):
    """Errors a config's own values cause name the config's field and value, not the profile's internal names
    ('count: got 0' for first_k_dense_replace beyond the layers, 'moe.top_k' for num_experts_per_tok)."""
    import json

    ds = json.loads((Path(__file__).resolve().parents[2] / "reference" / "hf_configs" /
                     "deepseek-ai--DeepSeek-V3_config.json").read_text())
    p = tmp_path / "ds" / "config.json"
    p.parent.mkdir()
    p.write_text(json.dumps({**ds, "first_k_dense_replace": 100}))
    _one_line_error(p, "first_k_dense_replace: must be below num_hidden_layers (61) in an MoE model, got 100")
    p.write_text(json.dumps({**ds, "num_experts_per_tok": 300}))
    _one_line_error(p, "num_experts_per_tok: must be <= the 256 routed experts, got 300")

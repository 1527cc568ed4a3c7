"""Checkpoint weight formats read per module: NVFP4 / FP8 / int4 from hf_quant_config.json and embedded
quantization_config (fp8 block and per-channel, mxfp4, AWQ / GPTQ group sizes, compressed-tensors), bytes by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specplan.core.errors import SpecplanError
from specplan.model.memory import weight_bytes
from specplan.costs.precision import resolve_precision
from specplan.profiles.hf_import import import_hf_config
from specplan.profiles.params import param_counts
from specplan.profiles.params import weight_bytes as module_weight_bytes
from specplan.profiles.registry import load_hardware

ROOT = Path(__file__).resolve().parents[2]
LLAMA = ROOT / "reference" / "hf_configs" / "meta-llama--Meta-Llama-3.1-8B_config.json"
KIMI = Path(__file__).resolve().parent / "hf_configs" / "moonshotai--Kimi-K2-Instruct_config.json"


def _with_quant(tmp_path, src: Path, qc: dict | None, hf_quant: dict | None = None) -> Path:
    d = json.loads(src.read_text())
    d.pop("quantization_config", None)
    if qc is not None:
        d["quantization_config"] = qc
    (tmp_path / "config.json").write_text(json.dumps(d))
    if hf_quant is not None:
        (tmp_path / "hf_quant_config.json").write_text(json.dumps(hf_quant))
    return tmp_path / "config.json"


def test_awq_int4_group_128_bytes(tmp_path):
    qc = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
    p = import_hf_config(_with_quant(tmp_path, LLAMA, qc))
    assert p.weight_dtype == "int4_g128" and p.dtype_of("lm_head") == "bf16" and p.dtype_of("embedding") == "bf16"
    wb, pc = module_weight_bytes(p), param_counts(p)
    # 4-bit weights + one fp16 scale and one 4-bit zero point per 128 weights
    assert wb["ffn"] == pytest.approx(pc["by_module"]["ffn"] * (0.5 + (2 + 0.5) / 128))
    assert wb["lm_head"] == pc["by_module"]["lm_head"] * 2


def test_gptq_group_sizes_and_an_unsupported_one(tmp_path):
    qc = {"quant_method": "gptq", "bits": 4, "group_size": 32, "sym": True, "desc_act": False}
    p = import_hf_config(_with_quant(tmp_path, LLAMA, qc))
    assert p.weight_dtype == "int4_g32"
    qc["group_size"] = 100
    with pytest.raises(SpecplanError) as exc:
        import_hf_config(_with_quant(tmp_path, LLAMA, qc))
    assert "quantization_config.group_size" in str(exc.value) and "100" in str(exc.value)


def test_fp8_per_channel_compressed_tensors(tmp_path):
    qc = {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
          "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
              "num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}}}}
    p = import_hf_config(_with_quant(tmp_path, LLAMA, qc))
    assert p.weight_dtype == "fp8" and p.module_dtypes == {"embedding": "bf16", "lm_head": "bf16"}


def test_fp8_block_modules_to_not_convert(tmp_path):
    qc = {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128], "activation_scheme": "dynamic",
          "modules_to_not_convert": ["model.layers.*.self_attn"]}
    p = import_hf_config(_with_quant(tmp_path, LLAMA, qc))
    assert p.weight_dtype == "fp8" and p.dtype_of("attention") == "bf16" and p.dtype_of("ffn") == "fp8"


def test_kimi_k2_thinking_int4_compressed_tensors_at_tp8(tmp_path):
    # Kimi-K2-Thinking ships int4 routed experts (symmetric, group 32, bf16 scales); attention, shared experts,
    # the dense layer and the LM head stay bf16 through the `ignore` list
    qc = {"quant_method": "compressed-tensors", "format": "pack-quantized",
          "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", r"re:.*mlp\.(gate|up|gate_up|down)_proj.*"],
          "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
              "num_bits": 4, "type": "int", "symmetric": True, "group_size": 32, "strategy": "group"}}}}
    p = import_hf_config(_with_quant(tmp_path, KIMI, qc))
    assert p.weight_dtype == "int4_sym_g32"
    for mod in ("attention", "shared_experts", "ffn", "lm_head", "embedding"):
        assert p.dtype_of(mod) == "bf16", mod
    got = weight_bytes(p, 8, resolve_precision(p, load_hardware("h100-sxm")))
    h, V = 7168, 163840
    experts = 60 * 384 * 3 * h * 2048
    split = 61 * (1536 * 64 * 192 + 512 * 64 * 256 + 64 * 128 * h) + 3 * h * 18432 + 60 * 3 * h * 2048 + 2 * V * h
    replicated = 61 * (1536 * h + 576 * h) + 60 * 384 * h
    assert got == pytest.approx(experts * (0.5 + 2 / 32) / 8 + split * 2 / 8 + replicated * 2, rel=1e-9)


def test_modelopt_int4_awq_group_size(tmp_path):
    hq = {"quantization": {"quant_algo": "W4A16_AWQ", "group_size": 128, "exclude_modules": ["lm_head"]}}
    p = import_hf_config(_with_quant(tmp_path, LLAMA, None, hq))
    assert p.weight_dtype == "int4_g128" and p.dtype_of("lm_head") == "bf16" and p.dtype_of("attention") == "int4_g128"


def test_mxfp4_only_the_experts():
    p = import_hf_config(ROOT / "reference" / "hf_configs" / "openai--gpt-oss-20b_config.json")
    assert p.weight_dtype == "bf16" and p.module_dtypes == {"moe": "mxfp4"}


# --- KV-cache dtype as deployments set it (issue 22): a checkpoint declaring FP8 KV gets it by default


def _kv_bytes_per_token_llama8b(kv_bytes: float) -> float:
    return 32 * 2 * 8 * 128 * kv_bytes  # 32 layers x (K and V) x 8 KV heads x 128 dims


@pytest.mark.parametrize("qc", [
    # llm-compressor FP8 weights + FP8 KV (compressed-tensors kv_cache_scheme)
    {"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
     "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float",
                                                                      "strategy": "channel", "symmetric": True}}},
     "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}},
    # a modelopt checkpoint whose quantization_config carries the hf_quant_config fields
    {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"},
    {"quant_method": "modelopt", "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"},
     "quant_algo": "FP8"},
], ids=["compressed-tensors-kv_cache_scheme", "modelopt-kv_cache_quant_algo", "modelopt-nested"])
def test_embedded_fp8_kv_declaration_is_the_default(tmp_path, qc):
    from specplan.model.memory import kv_bytes_per_token

    p = import_hf_config(_with_quant(tmp_path, LLAMA, qc))
    assert p.kv_cache_dtype == "fp8"
    h100 = load_hardware("h100-sxm")
    assert resolve_precision(p, h100).kv == "fp8"  # no --kv-dtype: the checkpoint's
    assert resolve_precision(p, h100, kv_dtype="auto").kv == "fp8"  # --kv-dtype auto: the engines' rule, the same
    assert resolve_precision(p, h100, kv_dtype="bf16").kv == "bf16"  # an explicit choice wins
    assert kv_bytes_per_token(p, 1, resolve_precision(p, h100).kv) == _kv_bytes_per_token_llama8b(1) == 65536


def test_hf_quant_config_kv_cache_scheme_and_none(tmp_path):
    hq = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "group_size": 16,
                                                             "kv_cache_scheme": {"num_bits": 8, "type": "float"}}}
    assert import_hf_config(_with_quant(tmp_path, LLAMA, None, hq)).kv_cache_dtype == "fp8"
    hq["quantization"] = {"quant_algo": "FP8", "kv_cache_quant_algo": None}
    p = import_hf_config(_with_quant(tmp_path, LLAMA, None, hq))
    assert p.kv_cache_dtype is None
    h100 = load_hardware("h100-sxm")
    assert resolve_precision(p, h100, kv_dtype="auto").kv == "bf16"  # declares none: the model's 16-bit dtype


def test_unsupported_kv_scheme_names_the_field(tmp_path):
    qc = {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_scheme": {"num_bits": 3, "type": "float"}}
    with pytest.raises(SpecplanError, match=r"quantization_config\.kv_cache_scheme: unsupported KV-cache scheme"):
        import_hf_config(_with_quant(tmp_path, LLAMA, qc))


def test_cli_kv_dtype_auto(tmp_path):
    from typer.testing import CliRunner

    from specplan.cli import app

    qc = {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}
    cfg = _with_quant(tmp_path, LLAMA, qc)
    r = CliRunner().invoke(app, ["model", "import", str(cfg), "-o", str(tmp_path / "m.yaml")])
    assert r.exit_code == 0, r.output
    args = ["step", "--model", str(tmp_path / "m.yaml"), "--hardware", "h100-sxm", "--batch", "1",
            "--context", "1024", "--json"]
    auto = json.loads(CliRunner().invoke(app, args + ["--kv-dtype", "auto"]).output)
    default = json.loads(CliRunner().invoke(app, args).output)
    bf16 = json.loads(CliRunner().invoke(app, args + ["--kv-dtype", "bf16"]).output)
    assert auto == default and auto != bf16

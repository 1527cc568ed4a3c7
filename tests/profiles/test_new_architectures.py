"""Recent architectures imported from configs built from the transformers 5.23.0 configuration-class defaults of a
named checkpoint (tests/profiles/hf_configs/SOURCES.md): parameter counts within 3 % of the published figure, the
layer pattern checked by hand, and the NVFP4 Kimi-K2 weights per GPU against a hand total."""

from __future__ import annotations

from pathlib import Path

import pytest

from specplan.memory import weight_bytes
from specplan.precision import resolve_precision
from specplan.profiles.hf_import import import_hf_config
from specplan.profiles.params import param_counts
from specplan.profiles.registry import load_hardware

CFG = Path(__file__).resolve().parent / "hf_configs"


def _imp(name: str):
    p = import_hf_config(CFG / name)
    return p, param_counts(p)


def _pattern(p) -> dict:
    return {(g.mixer, g.ffn): g.count for g in p.groups()}


def _close(got: float, published: float, tol: float = 0.03) -> None:
    assert abs(got - published) / published < tol, (got, published)


def test_llama4_scout():
    # Meta's card: 109B total, 17B active; text model counted (vision tower ignored), embedding and LM head in both
    p, pc = _imp("meta-llama--Llama-4-Scout-17B-16E_config.json")
    # 48 layers, every one MoE (interleave_moe_layer_step 1); NoPE global layer every 4th (no_rope_layer_interval 4)
    assert _pattern(p) == {("chunked", "moe"): 36, ("full", "moe"): 12}
    assert p.chunk_size == 8192 and p.moe.num_experts == 16 and p.moe.top_k == 1
    assert p.moe.shared_expert_ffn_size == 8192 and not p.qk_norm  # L2 qk norm has no weights
    _close(pc["total"], 109e9)
    _close(pc["active"], 17e9)
    # one MoE layer by hand: q 5120x5120, k/v 5120x1024 each, o 5120x5120; 16 + 1 experts 3x5120x8192; router; 2 norms
    attn = 2 * 5120 * 40 * 128 + 2 * 5120 * 8 * 128
    layer = attn + 17 * 3 * 5120 * 8192 + 5120 * 16 + 2 * 5120
    assert pc["total"] == 48 * layer + 5120 + 2 * 202048 * 5120


def test_llama4_maverick():
    # Meta's card: 400B total, 17B active (same convention as Scout)
    p, pc = _imp("meta-llama--Llama-4-Maverick-17B-128E_config.json")
    # MoE on odd layers (interleave 2); the NoPE layers (3, 7, ..., 47) are all odd, so all MoE
    assert _pattern(p) == {("chunked", "dense"): 24, ("chunked", "moe"): 12, ("full", "moe"): 12}
    assert p.ffn_size == 16384 and p.moe.expert_ffn_size == 8192
    _close(pc["total"], 400e9)
    _close(pc["active"], 17e9)


def test_minimax_m2():
    # MiniMax's card: 230B total, 10B activated; the activated count excludes the embedding and the LM head
    p, pc = _imp("MiniMaxAI--MiniMax-M2_config.json")
    assert _pattern(p) == {("full", "moe"): 62}
    assert p.moe.num_experts == 256 and p.moe.top_k == 8 and p.moe.router_bias
    _close(pc["total"], 230e9)
    _close(pc["active"] - pc["embedding"] - pc["lm_head"], 10e9)


def test_kimi_k2_imports_as_deepseek_v3():
    # Moonshot's card: "1T total, 32B activated" (1.04T with the embedding); activated incl. embedding and LM head
    p, pc = _imp("moonshotai--Kimi-K2-Instruct_config.json")
    assert p.architecture == "kimi_k2" and "read as deepseek_v3" in p.notes
    assert p.mla is not None and p.num_q_heads == 64 and p.moe.num_experts == 384
    assert _pattern(p) == {("full", "dense"): 1, ("full", "moe"): 60}  # first_k_dense_replace 1
    _close(pc["total"], 1.04e12)
    _close(pc["active"], 32e9)


def test_deepseek_v32_indexer():
    # DeepSeek-V3.2-Exp card: 671B / 37B as DeepSeek-V3, MTP excluded. The indexer adds 0.85B, all active; the
    # active figure is compared without the embedding table (a lookup), LM head included (V3's csv row: 36.6B).
    p, pc = _imp("deepseek-ai--DeepSeek-V3.2-Exp_config.json")
    assert _pattern(p) == {("full", "dense"): 3, ("full", "moe"): 58}
    assert (p.indexer.num_heads, p.indexer.head_dim, p.indexer.topk) == (64, 128, 2048)
    v3 = param_counts(import_hf_config(CFG.parents[2] / "reference" / "hf_configs" / "deepseek-ai--DeepSeek-V3_config.json"))
    indexer = 1536 * 64 * 128 + 7168 * 128 + 7168 * 64 + 2 * 128  # wq_b, wk, weights_proj, k LayerNorm
    assert pc["total"] - v3["total"] == 61 * indexer
    _close(pc["total"], 671e9)
    _close(pc["active"] - pc["embedding"], 37e9)


def test_nvfp4_kimi_k2_weights_per_gpu_at_tp8():
    """Routed experts NVFP4 (0.5 + 1/16 B), everything hf_quant_config.json excludes bf16; one H100 at TP 8."""
    p = import_hf_config(CFG / "kimi-k2-nvfp4")
    assert p.weight_dtype == "fp4" and p.dtype_of("moe") == "fp4"
    for mod in ("attention", "shared_experts", "ffn", "lm_head", "embedding"):
        assert p.dtype_of(mod) == "bf16", mod
    hw = load_hardware("h100-sxm")
    got = weight_bytes(p, 8, resolve_precision(p, hw))
    h, V = 7168, 163840
    experts = 60 * 384 * 3 * h * 2048  # ~1.015e12 routed expert weights
    assert experts == pytest.approx(1.015e12, rel=1e-3)
    split = (61 * (1536 * 64 * 192 + 512 * 64 * 256 + 64 * 128 * h)  # q_b, kv_b, o
             + 3 * h * 18432 + 60 * 3 * h * 2048 + 2 * V * h)  # dense layer 0, shared experts, embedding + LM head
    replicated = 61 * (1536 * h + 576 * h) + 60 * 384 * h  # q_a, kv_a (MLA latents) and the router on every GPU
    hand = experts * (0.5 + 1 / 16) / 8 + split * 2 / 8 + replicated * 2
    assert got == pytest.approx(hand, rel=1e-9)
    assert got == pytest.approx((experts * (0.5 + 1 / 16) + (split + replicated) * 2) / 8, rel=0.03)
    assert 70e9 < got < 80e9  # ~75 GB: fits an 80 GB H100 only just, unlike the FP8 sibling (~130 GB)


# --- must-show 3: every import that cannot be done is one line naming the field --------------------------------------

REF = CFG.parents[2] / "reference" / "hf_configs"
EVERY_JSON = sorted(REF.glob("*.json")) + sorted(CFG.rglob("*.json"))


@pytest.mark.parametrize("path", EVERY_JSON, ids=lambda p: p.name if p.parent.name == "hf_configs" else str(p.parent.name))
def test_every_config_file_imports_or_fails_in_one_line(path):
    from specplan.errors import SpecplanError

    try:
        prof = import_hf_config(path)
    except SpecplanError as exc:
        msg = str(exc)
        assert "\n" not in msg and msg.startswith(f"{path}: "), msg
        assert path.name.endswith("hf_quant_config.json"), msg  # only the quant configs are not model configs
        assert "model_type: missing field: this is a quantization config" in msg
    else:
        assert param_counts(prof)["total"] > 0


def _broken(tmp_path, name: str, **changes):
    import json

    d = json.loads((CFG / name).read_text())
    target = d.get("text_config", d)
    for k, v in changes.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = v
    p = tmp_path / "config.json"
    p.write_text(json.dumps(d))
    return p


@pytest.mark.parametrize("name, changes, fragments", [
    ("meta-llama--Llama-4-Scout-17B-16E_config.json", {"attention_chunk_size": None, "layer_types": ["chunked_attention"] * 48},
     ("attention_chunk_size", "missing field")),
    ("meta-llama--Llama-4-Scout-17B-16E_config.json", {"no_rope_layers": [1, 0]}, ("no_rope_layers", "2 entries")),
    ("deepseek-ai--DeepSeek-V3.2-Exp_config.json", {"index_head_dim": None}, ("index_head_dim", "missing field")),
    ("deepseek-ai--DeepSeek-V3.2-Exp_config.json", {"mlp_layer_types": ["dense"]}, ("mlp_layer_types", "61 entries")),
    ("MiniMaxAI--MiniMax-M2_config.json", {"num_local_experts": None, "intermediate_size": None},
     ("intermediate_size", "missing field")),
])  # fmt: skip
def test_new_architectures_broken_fields_are_one_line(tmp_path, name, changes, fragments):
    from specplan.errors import SpecplanError

    p = _broken(tmp_path, name, **changes)
    with pytest.raises(SpecplanError) as exc:
        import_hf_config(p)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith(f"{p}: "), msg
    for f in fragments:
        assert f in msg, msg


def test_cli_model_import_prints_counts_and_refuses_a_quant_config():
    import subprocess
    import sys

    root = CFG.parents[2]
    r = subprocess.run([sys.executable, "-m", "specplan", "model", "import", str(CFG / "kimi-k2-nvfp4")],
                       capture_output=True, text=True, cwd=root)
    assert r.returncode == 0, r.stderr
    total = param_counts(import_hf_config(CFG / "kimi-k2-nvfp4"))["total"]
    assert f"# parameters: total {total:,}" in r.stdout and "fp4 " in r.stdout and "(moe" in r.stdout
    q = REF / "nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4_hf_quant_config.json"
    r = subprocess.run([sys.executable, "-m", "specplan", "model", "import", str(q)], capture_output=True, text=True,
                       cwd=root)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "quantization config" in r.stderr

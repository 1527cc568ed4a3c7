"""Recent architectures imported from configs built from the transformers 5.23.0 configuration-class defaults of a
named checkpoint (tests/profiles/hf_configs/SOURCES.md): parameter counts within 3 % of the published figure, the
layer pattern checked by hand, and the NVFP4 Kimi-K2 weights per GPU against a hand total."""

from __future__ import annotations

from pathlib import Path

import pytest

from specplan.model.memory import weight_bytes
from specplan.costs.precision import resolve_precision
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
    fp8 = import_hf_config(CFG / "moonshotai--Kimi-K2-Instruct_config.json")  # block-FP8 sibling
    fp8_bytes = weight_bytes(fp8, 8, resolve_precision(fp8, hw))
    assert 70e9 < got < 80e9 and fp8_bytes > 125e9  # ~75 GB per GPU against ~130 GB for the FP8 checkpoint


# --- must-show 3: every import that cannot be done is one line naming the field --------------------------------------

REF = CFG.parents[2] / "reference" / "hf_configs"
EVERY_JSON = sorted(REF.glob("*.json")) + sorted(CFG.rglob("*.json"))


@pytest.mark.parametrize("path", EVERY_JSON, ids=lambda p: p.name if p.parent.name == "hf_configs" else str(p.parent.name))
def test_every_config_file_imports_or_fails_in_one_line(path):
    from specplan.core.errors import SpecplanError

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
     ("num_experts", "an MoE config (num_experts_per_tok is 8) needs >= 1 experts")),  # not imported as dense (issue 13)
    ("gemma-4-moe_config.json", {"use_double_wide_mlp": True}, ("use_double_wide_mlp", "enable_moe_block")),
    ("nvidia--Llama-3_3-Nemotron-Super-49B-v1_config.json", {"block_configs": [{"attention": {}, "ffn": {}}] * 80},
     ("block_configs[0].attention.n_heads_in_group", "None")),
    ("nvidia--Llama-3_3-Nemotron-Super-49B-v1_config.json",
     {"block_configs": [{"attention": {"no_op": True}, "ffn": {"ffn_mult": 1e308}}] * 80},
     ("block_configs[0].ffn.ffn_mult", "1e+308")),
    ("deepseek-ai--DeepSeek-V4-Flash-Base_config.json", {"compress_ratios": [0, 4, 64] * 15},
     ("compress_ratios", "0, 4 or 128")),
    ("nvidia--NVIDIA-Nemotron-3-Super-120B-A12B_config.json", {"mtp_hybrid_override_pattern": "*X"},
     ("mtp_hybrid_override_pattern", "'*X'")),
    ("moonshotai--Kimi-K2-Instruct_config.json", {"num_nextn_predict_layers": 2**24}, ("num_nextn_predict_layers", "64")),
    ("moonshotai--Kimi-K2-Instruct_config.json", {"num_hidden_layers": 10**6}, ("num_hidden_layers", "4,096")),
    ("moonshotai--Kimi-K2-Instruct_config.json", {"quantization_config": {
        "quant_method": "compressed-tensors", "ignore": ["re:(("],
        "config_groups": {"g": {"weights": {"num_bits": 4, "group_size": 32}}}}},
     ("quantization_config.ignore", "bad regular expression")),
])  # fmt: skip
def test_new_architectures_broken_fields_are_one_line(tmp_path, name, changes, fragments):
    from specplan.core.errors import SpecplanError

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
    r = subprocess.run([sys.executable, "-m", "specplan", "profiles", "show", "deepseek-v3"], capture_output=True,
                       text=True, cwd=root)
    assert r.returncode == 0 and "# parameters: total 671,026,419,200" in r.stdout  # csv params_total_computed
    assert "# draft / MTP heads: 11,610,068,224" in r.stdout


# --- Gemma, DeepSeek-V4, Nemotron NAS and LatentMoE ------------------------------------------------------------------


def test_gemma3_27b_matches_csv():
    # csv params_total_computed 27,009,346,304 (text tower; published "27B", the name); tied embedding
    p, pc = _imp("google--gemma-3-27b-it_config.json")
    assert _pattern(p) == {("sliding", "dense"): 52, ("full", "dense"): 10}  # 5 local : 1 global
    assert p.sliding_window == 1024 and p.tie_embeddings and p.norms_per_layer == 4
    assert pc["total"] == 27_009_346_304
    _close(pc["total"], 27e9)


def test_gemma4_dense_defaults_hand_count():
    # Gemma4TextConfig defaults (google/gemma-4-e2b-it): 25 sliding + 5 global layers, global head dim 512, PLE 256
    p, pc = _imp("google--gemma-4-e2b-it_config.json")
    assert _pattern(p) == {("sliding", "dense"): 25, ("full", "dense"): 5}
    h, f, V, d, L = 2304, 9216, 262144, 256, 30
    mlp_norms_ple = 3 * h * f + 4 * h + 2 * h * d + h  # gated MLP, 4 sandwich norms, PLE gate + projection + norm
    sliding = 2 * h * 8 * 256 + 2 * h * 4 * 256 + 2 * 256 + mlp_norms_ple  # q, o; k, v; q_norm, k_norm
    full = 2 * h * 8 * 512 + 2 * h * 4 * 512 + 2 * 512 + mlp_norms_ple
    model = V * h + V * L * d + h * L * d + d + h  # tied embedding, PLE table, PLE model projection + norm, final norm
    assert pc["total"] == 25 * sliding + 5 * full + model == 5_077_177_856


def test_gemma4_moe_hand_count():
    # Gemma 4 with the MoE block (128 experts top-8 of 704 beside the dense MLP), k = v global layers with 2 KV heads
    # of 512, the last 10 layers reusing earlier K/V; no published figure: pattern and layers by hand
    p, pc = _imp("gemma-4-moe_config.json")
    groups = {(g.mixer, g.kv_shared): (g.count, g.num_kv_heads, g.head_dim, g.k_eq_v) for g in p.groups()}
    assert groups == {("sliding", False): (17, None, None, False), ("full", False): (3, 2, 512, True),
                      ("sliding", True): (8, None, None, False), ("full", True): (2, 2, 512, True)}
    h = 2304
    ffn = 3 * h * 9216 + 128 * 3 * h * 704 + h * 128 + 128 + 8 * h  # MLP, experts, router, expert scale, 7 norms + scale
    sliding = 2 * h * 8 * 256 + 2 * h * 4 * 256 + 2 * 256 + ffn
    full = 2 * h * 8 * 512 + h * 2 * 512 + 2 * 512 + ffn  # k only (values = keys' projection)
    sliding_shared = 2 * h * 8 * 256 + 256 + ffn  # q, o and q_norm only
    full_shared = 2 * h * 8 * 512 + 512 + ffn
    assert pc["total"] == 17 * sliding + 3 * full + 8 * sliding_shared + 2 * full_shared + 262144 * h + h
    assert pc["total"] - pc["active"] == 30 * 120 * 3 * h * 704


def test_deepseek_v4_flash_hand_count():
    # DeepseekV4Config defaults (DeepSeek-V4-Flash-Base): 2 hca, then hca / csa alternating; 3 hash-routed layers
    p, pc = _imp("deepseek-ai--DeepSeek-V4-Flash-Base_config.json")
    assert _pattern(p) == {("hca", "moe"): 23, ("csa", "moe"): 20}
    assert p.moe.hash_layers == 3 and p.sliding_window == 128 and p.num_kv_heads == 1 and p.head_dim == 512
    ca = p.compressed_attention
    assert (ca.csa_rate, ca.hca_rate, ca.o_groups, ca.o_lora_rank, ca.hc_mult) == (4, 128, 8, 1024, 4)
    h, hd, qr = 4096, 512, 1024
    attn = h * qr + qr + qr * 64 * hd + h * hd + hd + (64 * hd // 8) * 8 * 1024 + 8 * 1024 * h + 64  # .. o_b, sinks
    hca = 2 * h * hd + 128 * hd + hd  # compressor kv / gate, position bias, norm
    indexer = 2 * h * 2 * 128 + 4 * 2 * 128 + 128 + qr * 64 * 128 + h * 64
    csa = 2 * h * 2 * hd + 4 * 2 * hd + hd + indexer
    moe = 256 * 3 * h * 2048 + 3 * h * 2048 + 256 * h + 256  # routed, shared, router + correction bias
    rest = 2 * h + 2 * ((2 + 4) * 4 * 4 * h + (2 + 4) * 4 + 3)  # 2 norms, 2 hyper-connections
    model = 2 * 129280 * h + h + 4 * 4 * h + 4 + 1  # embedding, LM head, final norm, hyper-connection head
    assert pc["total"] == 23 * (attn + hca + moe + rest) + 20 * (attn + csa + moe + rest) + model
    assert pc["total"] - pc["active"] == 43 * 250 * 3 * h * 2048


def test_nemotron_nas_block_configs():
    # csv row llama-3.3-nemotron-super-49b-v1: 49 GQA blocks (8 KV heads) + 31 attention no-op; ffn_mult counts
    # 5.25:49, 1.3125:10, 1.0:8, 2.625:6, 0.5:6, 3.28125:1 (the block order is not in the csv; counts do not need it)
    p, pc = _imp("nvidia--Llama-3_3-Nemotron-Super-49B-v1_config.json")
    sizes = {}
    for g in p.groups():
        sizes[(g.mixer, p.ffn_size_of(g))] = sizes.get((g.mixer, p.ffn_size_of(g)), 0) + g.count
    # ffn_mult -> int(2 * mult * 8192 / 3) rounded up to 256: 5.25 -> 28672, 0.5 -> 2731 -> 2816, 1.0 -> 5632
    assert sizes == {("full", 28672): 49, ("none", 7168): 10, ("none", 5632): 8, ("none", 14336): 6,
                     ("none", 2816): 6, ("none", 17920): 1}
    assert p.num_kv_heads == 8
    assert pc["total"] == 49_867_145_216  # params_total_computed
    _close(pc["total"], 49e9)


def test_nemotron_nas_linear_and_skipped_blocks(tmp_path):
    import json

    d = json.loads((CFG / "nvidia--Llama-3_3-Nemotron-Super-49B-v1_config.json").read_text())
    d["block_configs"][0] = {"attention": {"replace_with_linear": True}, "ffn": {"replace_with_linear": True}}
    d["block_configs"][1] = {"attention": {"n_heads_in_group": 16}, "ffn": {"no_op": True}}
    (tmp_path / "config.json").write_text(json.dumps(d))
    p = import_hf_config(tmp_path)
    base = param_counts(import_hf_config(CFG / "nvidia--Llama-3_3-Nemotron-Super-49B-v1_config.json"))["total"]
    h = 8192
    gqa8 = 2 * h * h + 2 * h * 8 * 128
    block0 = h * h + h * h  # two h x h linears (+ their 2 norms, as before)
    block1 = 2 * h * h + 2 * h * 4 * 128  # 64 / 16 = 4 KV heads, no FFN, no FFN norm
    assert param_counts(p)["total"] == base - 2 * (gqa8 + 3 * h * 28672) + block0 + block1 - h
    assert ("attn_linear", "linear") in _pattern(p) and ("full", "none") in _pattern(p)


def test_nemotron_super_latent_moe():
    # published 120.6B total / 12.7B active (csv row nemotron-3-super-120b-a12b: besthub.dev, arXiv 2604.12374),
    # embedding and LM head counted; experts in the 1024-wide latent (fc1/fc2_latent_proj h <-> 1024)
    p, pc = _imp("nvidia--NVIDIA-Nemotron-3-Super-120B-A12B_config.json")
    assert _pattern(p) == {("mamba", "none"): 40, ("none", "moe"): 40, ("full", "none"): 8}
    assert p.moe.latent_size == 1024 and p.mtp.mixer == "full" and p.mtp.ffn == "moe"
    _close(pc["total"], 120.6e9)
    _close(pc["active"], 12.7e9)
    h = 4096
    moe_layer = 512 * 2 * 1024 * 2688 + 2 * h * 5376 + 2 * h * 1024 + h * 512 + 512 + h  # + router bias, norm
    moe_active = 22 * 2 * 1024 * 2688 + 2 * h * 5376 + 2 * h * 1024 + h * 512 + 512 + h
    assert pc["total"] - pc["active"] == 40 * (moe_layer - moe_active)


MODEL_FILES = sorted(CFG.glob("*_config.json")) + [CFG / "kimi-k2-nvfp4"]


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: p.name)
def test_new_profiles_round_trip_and_price_a_verify_step(path, tmp_path):
    import numpy as np

    from specplan.profiles.hf_import import profile_to_yaml
    from specplan.profiles.registry import load_model
    from specplan.model.step import step_time

    prof = import_hf_config(path, id="m")
    out = tmp_path / "m.yaml"
    profile_to_yaml(prof, out)
    assert load_model(str(out)) == prof
    t = step_time(prof, "h100-sxm", 8, np.array([1, 64]), np.array([[1], [5]]), 32768)
    assert np.all(np.isfinite(t.total_s)) and np.all(t.total_s > 0)
    assert np.all(t.total_s[1] >= t.total_s[0])  # a verify step of 5 tokens costs at least a decode step

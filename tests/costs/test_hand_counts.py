"""Independent hand counts of the step and memory model (issue 10, items 5-7): numbers written out here from the
architecture, never taken from the code under test, so that a mutation of a count or a split is caught."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from specplan.costs.attention import AttentionHeads, attention_cost
from specplan.costs import comm
from specplan.costs.comm import allreduce_time_s
from specplan.model.memory import kv_bytes_per_token, memory_usage, state_bytes_per_seq, weight_bytes
from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_hardware, load_model
from specplan.model import step as step_module
from specplan.model.step import step_time

ROOT = Path(__file__).resolve().parents[2]


def _busy(cost) -> float:
    """Kernel busy time (the step books launch overheads under class 'overhead')."""
    return float(np.maximum(cost.compute_s, cost.memory_s))


def test_llama8b_tp2_weight_bytes_by_hand():
    """Llama-3.1-8B (h 4096, 32 layers, 32 q / 8 KV heads of 128, FFN 14336, vocab 128256), TP 2, bf16: every
    projection, the LM head and the embedding split in two. Catches an unsplit LM head or output projection."""
    qkv = (16 * 128 + 2 * 4 * 128) * 4096  # 16 q heads + 4 KV heads (K and V) per device
    o = 4096 * (16 * 128)  # the attention output projection: input split over TP
    gate_up = 2 * 7168 * 4096
    down = 4096 * 7168
    lm_head = 128256 // 2 * 4096
    embedding = 128256 * 4096 / 2
    params = 32 * (qkv + o + gate_up + down) + lm_head + embedding
    assert params == 4_014_997_504  # half of Llama-3.1-8B's 8.03 B parameters (norms excluded)
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    assert weight_bytes(m, 2, resolve_precision(m, hw)) == pytest.approx(2.0 * params, rel=1e-12)


def test_llama70b_tp8_weight_bytes_by_hand():
    """Llama-3.3-70B (h 8192, 80 layers, 64 q / 8 KV heads, FFN 28672, vocab 128256) at TP 8: one KV head each."""
    qkv = (8 * 128 + 2 * 1 * 128) * 8192
    o = 8192 * (8 * 128)
    ffn = 3 * 8192 * (28672 // 8)
    lm_head = 128256 // 8 * 8192
    params = 80 * (qkv + o + ffn) + lm_head + 128256 * 8192 / 8
    m, hw = load_model("llama-3.3-70b"), load_hardware("h100-sxm")
    assert weight_bytes(m, 8, resolve_precision(m, hw)) == pytest.approx(2.0 * params, rel=1e-12)


def test_two_allreduces_per_layer_and_one_logits_allgather():
    """Under TP a dense layer all-reduces twice (after attention, after the FFN): 2 x 32 for Llama-3.1-8B, each
    of B·q·h 16-bit values; the vocabulary-parallel LM head adds one all-gather of B·q·vocab/TP logits."""
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    b, q = 4, 3
    r = step_time(m, hw, 2, b, q, 1024)
    ar = float(allreduce_time_s(hw, b * q * 4096 * 2.0, 2))
    gather = float(comm.allgather_cost(hw, b * q * (128256 // 2) * 2.0, 2).time_s)
    assert float(r.breakdown_s["communication"]) == pytest.approx(2 * 32 * ar + gather, rel=1e-9)
    assert float(step_time(m, hw, 1, b, q, 1024).breakdown_s["communication"]) == 0.0


def test_logits_allgather_bytes_by_hand():
    """Each rank receives the other TP - 1 shards of B·q·vocab/TP bf16 logits over its NVLink share: 7 x 256,512 B
    = 1.8 MB, which NCCL sends with LL (its cost model's pick: LL 15.56 + 12.7 us against LL128 46.8 and Simple
    61.8 us), at Hopper's LL cap of 141 GB/s (below half of Simple's 450 x 0.771 = 347 GB/s) and the LL floor."""
    hw = load_hardware("h100-sxm")
    shard = 8 * 1 * (128256 // 8) * 2.0
    c = comm.allgather_cost(hw, shard, 8)
    assert float(c.memory_s) == pytest.approx(7 * shard / 141e9, rel=1e-12)
    assert float(c.overhead_s) == pytest.approx(4.36e-6 + 7 * 1.60e-6, rel=1e-9)


def test_mla_kv_cache_counts_its_rope_dims():
    """DeepSeek-V3 caches the 512-wide latent plus the 64 rope dims per token and layer (576), 61 layers,
    replicated on every TP rank: 61 x 576 x 2 B = 70,272 B per token in bf16."""
    m = load_model("deepseek-v3")
    assert kv_bytes_per_token(m, 8, "bf16") == 61 * 576 * 2 == 70_272
    hw = load_hardware("h200-sxm")
    mem = memory_usage(m, hw, 8, 16, 32768, resolve_precision(m, hw, kv_dtype="bf16"), q_len=1)
    assert float(mem.kv_bytes) == pytest.approx(16 * (32768 + 1) * 70_272, rel=1e-12)


def test_sliding_window_reads_window_plus_q_minus_one_keys():
    # query i of q sees the W keys ending at its own position: together W + q - 1 keys
    attended_kv_len = step_module.attended_kv_len
    assert float(attended_kv_len(10_000, 8, 128)) == 128 + 8 - 1
    assert float(attended_kv_len(50, 8, 128)) == 58  # short context: all of it
    assert float(attended_kv_len(10_000, 1, 128)) == 128
    assert float(attended_kv_len(10_000, 8)) == 10_008  # full attention


def test_gpt_oss_step_attention_with_sliding_layers_by_hand():
    """gpt-oss-20b: 12 full + 12 sliding (W = 128) layers; at q_len 16 the sliding layers read 128 + 15 keys."""
    m, hw = load_model("gpt-oss-20b"), load_hardware("h100-sxm")
    assert m.sliding_window == 128
    counts = {g.mixer: g.count for g in m.groups()}
    r = step_time(m, hw, 1, 2, 16, 65536)
    prec = r.precision
    qh, kvh = m.heads_per_device(1)
    full = _busy(attention_cost(hw, 2, 16, 65536 + 16, AttentionHeads(qh, kvh, m.head_dim), prec.kv, prec.compute))
    slide = _busy(attention_cost(hw, 2, 16, 128 + 15, AttentionHeads(qh, kvh, m.head_dim), prec.kv, prec.compute))
    expected = counts["full"] * full + counts["sliding"] * slide
    assert float(r.breakdown_s["attention"]) == pytest.approx(float(expected), rel=1e-9)


def test_recurrent_state_is_its_own_kernel_class():
    """Qwen3.5's Gated-DeltaNet kernels (and their checkpoint writes) are class 'state'; 'attention' holds only
    the 12 full-attention layers."""
    m, hw = load_model("qwen3.5-122b-a10b"), load_hardware("h100-sxm")
    r = step_time(m, hw, 4, 8, 5, 32768)
    prec = r.precision
    qh, kvh = m.heads_per_device(4)
    one = _busy(attention_cost(hw, 8, 5, 32768 + 5, AttentionHeads(qh, kvh, m.head_dim), prec.kv, prec.compute))
    assert float(r.breakdown_s["attention"]) == pytest.approx(12 * float(one), rel=1e-9)
    assert float(r.breakdown_s["state"]) > 0
    assert float(step_time("llama-3.1-8b", hw, 1, 8, 5, 32768).breakdown_s["state"]) == 0.0


QWEN35_STATE_TP1 = {  # 36 linear layers x (64 v-heads x 128 x 128 state + 3 x (2·16·128 + 64·128) bf16 conv)
    "bf16": 36 * (64 * 128 * 128 * 2 + 3 * (2 * 16 * 128 + 64 * 128) * 2),
    "fp32": 36 * (64 * 128 * 128 * 4 + 3 * (2 * 16 * 128 + 64 * 128) * 2),
}


def test_recurrent_state_dtype_comes_from_the_config(tmp_path):
    """mamba_ssm_dtype (Qwen3.5) sets the state dtype: a bf16 config halves the state of the shipped fp32 one."""
    from specplan.profiles.hf_import import import_hf_config

    src = ROOT / "reference" / "hf_configs" / "Qwen--Qwen3.5-122B-A10B_config.json"
    cfg = json.loads(src.read_text())
    text = cfg.get("text_config", cfg)
    assert text["mamba_ssm_dtype"] == "float32"
    fp32 = import_hf_config(src, id="q35-fp32")
    text["mamba_ssm_dtype"] = "bfloat16"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    bf16 = import_hf_config(path, id="q35-bf16")
    assert (fp32.state_dtype, bf16.state_dtype) == ("fp32", "bf16")
    assert state_bytes_per_seq(fp32, 1) == QWEN35_STATE_TP1["fp32"]
    assert state_bytes_per_seq(bf16, 1) == QWEN35_STATE_TP1["bf16"]
    hw = load_hardware("h100-sxm")
    # the step's state kernels read and write half the bytes too (memory-bound at B = 64)
    t32 = float(step_time(fp32, hw, 1, 64, 1, 4096).breakdown_s["state"])
    t16 = float(step_time(bf16, hw, 1, 64, 1, 4096).breakdown_s["state"])
    assert t16 < 0.6 * t32
    # an engine override (e.g. vLLM --mamba-ssm-cache-dtype) wins over the config
    assert resolve_precision(fp32, hw, state_dtype="bf16").state == "bf16"


def test_nemotron_state_dtype_is_read_from_mamba_ssm_cache_dtype(tmp_path):
    from specplan.profiles.hf_import import import_hf_config

    name = "nvidia--NVIDIA-Nemotron-3.5-Lightning-30B-A3B-NVFP4"
    src = ROOT / "reference" / "hf_configs" / f"{name}_config.json"
    cfg = json.loads(src.read_text())
    cfg["mamba_ssm_cache_dtype"] = "bfloat16"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    shutil.copy(ROOT / "reference" / "hf_configs" / f"{name}_hf_quant_config.json", tmp_path / "hf_quant_config.json")
    m = import_hf_config(tmp_path / "config.json", id="nemo-bf16")
    assert m.state_dtype == "bf16"


def test_state_bytes_hand_count_scales_with_tp():
    m = load_model("qwen3.5-122b-a10b")
    assert m.state_dtype == "fp32"
    assert state_bytes_per_seq(m, 4) == pytest.approx(QWEN35_STATE_TP1["fp32"] / 4)
    assert np.isfinite(state_bytes_per_seq(m, 1))

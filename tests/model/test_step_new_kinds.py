"""What a decode step reads for the recent layer kinds: chunked local attention, DSA (indexer + top-k), DeepSeek-V4
compressed attention, KV-sharing layers and LatentMoE experts (KV bytes by hand; attention times as compositions)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specplan.costs.attention import AttentionHeads, attention_cost
from specplan.model.memory import kv_bytes_per_seq, weight_bytes
from specplan.costs.precision import resolve_precision
from specplan.profiles.hf_import import import_hf_config
from specplan.profiles.params import param_counts
from specplan.profiles.registry import load_hardware, load_kernel_family
from specplan.costs.shapes import ffn_gemms
from specplan.model.step import step_time

CFG = Path(__file__).resolve().parents[1] / "profiles" / "hf_configs"
REF = Path(__file__).resolve().parents[2] / "reference" / "hf_configs"
HW = "h100-sxm"


def _busy(c) -> float:
    """Busy seconds of one kernel (what the step's attention class adds; launch overheads go to `overhead`)."""
    return float(np.maximum(c.compute_s, c.memory_s))


def test_chunked_layers_cache_and_read_one_chunk():
    scout = import_hf_config(CFG / "meta-llama--Llama-4-Scout-17B-16E_config.json")
    per_layer_token = 2 * 8 * 128 * 2  # K and V, 8 KV heads of 128, bf16
    for ctx in (4096, 100_000):
        hand = 36 * per_layer_token * min(ctx, 8192) + 12 * per_layer_token * ctx
        assert kv_bytes_per_seq(scout, 1, "bf16", ctx) == hand
    # attention: beyond the chunk, only the 12 global (NoPE) layers grow with the context
    hw = load_hardware(HW)
    a = [float(step_time(scout, hw, 1, 8, 1, c).breakdown_s["attention"]) for c in (50_000, 100_000)]
    full = [float(attention_cost(hw, 8, 1, c + 1, AttentionHeads(40, 8, 128)).time_s) for c in (50_000, 100_000)]
    assert a[1] - a[0] == pytest.approx(12 * (full[1] - full[0]), rel=1e-9)
    # a verify step of 5 tokens reads at most chunk + 4 tokens in a chunked layer (it may cross a chunk boundary)
    v = [float(step_time(scout, hw, 1, 8, 5, c).breakdown_s["attention"]) for c in (50_000, 100_000)]
    full5 = [float(attention_cost(hw, 8, 5, c + 5, AttentionHeads(40, 8, 128)).time_s) for c in (50_000, 100_000)]
    assert v[1] - v[0] == pytest.approx(12 * (full5[1] - full5[0]), rel=1e-9)
    chunked = v[0] - 12 * _busy(attention_cost(hw, 8, 5, 50_005, AttentionHeads(40, 8, 128)))
    assert chunked == pytest.approx(36 * _busy(attention_cost(hw, 8, 5, 8192 + 4, AttentionHeads(40, 8, 128))), rel=1e-9)


def test_dsa_reads_top_k_and_scans_the_indexer_keys():
    v32 = import_hf_config(CFG / "deepseek-ai--DeepSeek-V3.2-Exp_config.json")
    v3 = import_hf_config(REF / "deepseek-ai--DeepSeek-V3_config.json")
    # cache: the 576-wide latent (bf16) plus the indexer's 128-dim fp8 key with one fp32 scale per 128
    assert kv_bytes_per_seq(v32, 8, "bf16", 1000) == pytest.approx(61 * (576 * 2 + 128 * (1 + 4 / 128)) * 1000)
    hw = load_hardware(HW)
    ctx = 131_072
    t32 = float(step_time(v32, hw, 8, 32, 1, ctx).breakdown_s["attention"])
    t3 = float(step_time(v3, hw, 8, 32, 1, ctx).breakdown_s["attention"])
    # per layer: MLA over the 2048 selected tokens (16 heads per GPU at TP 8) + the indexer's 64 heads over all keys
    mla = load_kernel_family("mla-latent")
    sel = attention_cost(hw, 32, 1, 2048, AttentionHeads(16, 1, 576, head_dim_v=512, latent=True), "bf16", "bf16",
                         family=mla)
    scan = attention_cost(hw, 32, 1, ctx + 1, AttentionHeads(64, 1, 128, head_dim_v=0, latent=True), "fp8", "bf16",
                          family=mla)
    assert t32 == pytest.approx(61 * (_busy(sel) + _busy(scan)), rel=1e-9)
    assert t32 < 0.2 * t3
    # a verify step of q_len tokens reads the union of up to q_len top-k sets: below ctx, grows with q_len
    t_q = [float(step_time(v32, hw, 8, 32, q, ctx).breakdown_s["attention"]) for q in (1, 4)]
    assert t_q[0] < t_q[1] < t3
    union = attention_cost(hw, 32, 4, 4 * 2048, AttentionHeads(16, 1, 576, head_dim_v=512, latent=True), "bf16",
                           "bf16", family=mla)
    scan4 = attention_cost(hw, 32, 4, ctx + 4, AttentionHeads(64, 1, 128, head_dim_v=0, latent=True), "fp8", "bf16",
                           family=mla)
    assert t_q[1] == pytest.approx(61 * (_busy(union) + _busy(scan4)), rel=1e-9)


def test_deepseek_v4_kv_cache_by_hand():
    v4 = import_hf_config(CFG / "deepseek-ai--DeepSeek-V4-Flash-Base_config.json")
    ctx = 131_072
    hca = 23 * (128 + ctx // 128) * 512 * 2  # window + compressed entries, one 512-wide K=V head, bf16
    csa = 20 * ((128 + ctx // 4) * 512 * 2 + (ctx // 4) * 128 * (1 + 4 / 128))  # + the indexer's keys per entry
    assert kv_bytes_per_seq(v4, 1, "bf16", ctx) == pytest.approx(hca + csa)
    t = step_time(v4, HW, 1, 4, np.array([1, 2]), ctx)
    assert np.all(np.isfinite(t.total_s)) and t.total_s[1] > t.total_s[0]


def test_kv_shared_layers_hold_no_cache():
    g4 = import_hf_config(CFG / "gemma-4-moe_config.json")
    ctx = 8192  # 17 sliding (window 512) and 3 global (2 KV heads of 512) layers keep their K/V; 10 reuse them
    hand = 17 * 2 * 4 * 256 * 2 * 512 + 3 * 2 * 2 * 512 * 2 * ctx
    assert kv_bytes_per_seq(g4, 1, "bf16", ctx) == hand


def test_latent_moe_shapes_and_weights():
    sup = import_hf_config(CFG / "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B_config.json")
    g = next(g for g in sup.groups() if g.ffn == "moe")
    shapes = {s.name: (s.n, s.k) for s in ffn_gemms(sup, g, 1)}
    assert shapes["latent_in"] == (1024, 4096) and shapes["latent_out"] == (4096, 1024)
    assert shapes["shared_gate_up"] == (5376, 4096)  # non-gated shared expert: up only
    prec = resolve_precision(sup, load_hardware(HW))
    pc = param_counts(sup)
    # every weight matrix in bf16 at TP 1: about 2 bytes per parameter (norms, biases, convolutions not held here)
    assert weight_bytes(sup, 1, prec) == pytest.approx(2 * pc["total"], rel=2e-3)


def test_guideline_attention_share_sees_sparse_and_chunked_reads():
    from specplan.speculation.guidelines import attention_share

    hw = load_hardware(HW)
    ctx = 131_072

    def share(m, tp):
        # the guideline's share is the D = 0 step's attention class (issue 10: one pricing, state excluded)
        r = step_time(m, hw, tp, 32, 1, ctx)
        att = float(r.breakdown_s["attention"])
        return float(attention_share(r)), att / float(r.total_s)

    v32 = import_hf_config(CFG / "deepseek-ai--DeepSeek-V3.2-Exp_config.json")
    v3 = import_hf_config(REF / "deepseek-ai--DeepSeek-V3_config.json")
    scout = import_hf_config(CFG / "meta-llama--Llama-4-Scout-17B-16E_config.json")
    s32, s3, s4 = share(v32, 8), share(v3, 8), share(scout, 8)
    assert s32[0] < 0.5 * s3[0]  # DSA: top-k reads, not the whole context
    for busy_share, step_share in (s32, s3, s4):  # the guideline prices the same kernels as the step (+ launches)
        assert busy_share == pytest.approx(step_share, rel=0.1)

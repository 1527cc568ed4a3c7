"""MLA verify through SGLang's Triton extend kernel (issue 19): the kernel's closed form, the engine role that
selects it, and that a verify step prices it where decode keeps the MLA decode family."""

import math

import numpy as np
import pytest

from specplan.costs.attention import AttentionHeads, attention_cost
from specplan.profiles.registry import load_engine, load_hardware, load_kernel_family
from specplan.speculation.acceptance import Acceptance
from specplan.speculation.speedup import evaluate, evaluate_kw


def test_triton_extend_family_is_per_head_64_row_tiles():
    fam = load_kernel_family("sglang-triton-extend")
    assert fam.packing == "per_head" and fam.tile_rows == 64  # extend_attention.py on HIP: BLOCK_M = 64


def test_triton_extend_cost_by_hand():
    """2 sequences x 3 verify tokens x 1000 cached keys, 16 query heads on one latent head (576 / 512): each of
    the 16 heads runs one 64-row tile over the whole prefix; compute = 2 x 16 x 2 x 64 x 1000 x (576 + 512) FLOPs."""
    hw = load_hardware("mi300x")
    fam = load_kernel_family("sglang-triton-extend")
    c = attention_cost(hw, 2, 3, 1000, AttentionHeads(16, 1, 576, head_dim_v=512, latent=True), kv_dtype="bf16",
                       family=fam)
    flops = 2 * 16 * 2.0 * 64 * 1000 * (576 + 512)
    assert float(c.compute_s) == pytest.approx(flops / (1307.4e12 * hw.attention.compute_fraction), rel=1e-9)
    # K/V (the 576-wide latent, bf16) read once per head tile; re-reads half served by L2 (hw l2_hit_fraction)
    kv = 2 * 1000 * 576 * 2.0 * (1 + 15 * (1 - hw.attention.l2_hit_fraction))
    qo = 2 * 16 * 3 * (576 + 512) * 2.0
    att = hw.attention
    mem = (kv + qo) / (hw.mem_bandwidth_bytes_s * att.bw_fraction("bf16"))
    waves = math.ceil(2 * 16 / hw.sm_count) * att.cta_overhead_s
    assert float(c.memory_s) == pytest.approx(mem + waves, rel=1e-9)
    latent = attention_cost(hw, 2, 3, 1000, AttentionHeads(16, 1, 576, head_dim_v=512, latent=True), kv_dtype="bf16",
                            family=load_kernel_family("mla-latent"))
    # 16 tiles of 64 rows against one packed 64-row tile (the latent family's compute_fraction is 0.408, not 0.45)
    assert float(c.compute_s) == pytest.approx(16 * 0.408 / hw.attention.compute_fraction * float(latent.compute_s))


def test_mla_verify_role_falls_back_to_the_mla_decode_family():
    eng = load_engine("sglang")
    hw = load_hardware("mi300x")
    assert eng.family_id("mla_verify_attention", hw) == eng.family_id("mla_attention", hw) == "mla-latent"
    eng2 = eng.model_copy(update={"mla_verify_attention": "sglang-triton-extend"})
    assert eng2.family_id("mla_verify_attention", hw) == "sglang-triton-extend"
    assert eng2.family_id("mla_attention", hw) == "mla-latent"


def test_verify_step_prices_the_verify_family_on_every_mla_layer():
    """DeepSeek-V3 (61 MLA layers), TP 8 on MI300X, batch 64, D = 2: the verify step with the Triton extend family
    costs 61 x (extend kernel - latent kernel) more than with the MLA decode family; the decode step is unchanged."""
    base = load_engine("sglang")
    tri = base.model_copy(update={"mla_verify_attention": "sglang-triton-extend"})
    kw = dict(tp=8, batch=64.0, context_len=1536.0, draft_len=2.0, mechanism="mtp",
              acceptance=Acceptance.from_length(2.5, 2), dtype="fp8")
    r0 = evaluate_kw("deepseek-v3", "mi300x", engine=base, **kw)
    r1 = evaluate_kw("deepseek-v3", "mi300x", engine=tri, **kw)
    hw = load_hardware("mi300x")
    prec = r0["precision"]
    # keys: the cached context + the 3 verified tokens
    args = (hw, 64.0, 3.0, 1536.0 + 3.0, AttentionHeads(128 // 8, 1, 576, head_dim_v=512, latent=True))
    kx = dict(kv_dtype=prec.kv, compute_dtype=prec.compute)
    one = (attention_cost(*args, family=load_kernel_family("sglang-triton-extend"), **kx).time_s
           - attention_cost(*args, family=load_kernel_family("mla-latent"), **kx).time_s)
    assert float(np.asarray(r1["baseline_step_s"])) == pytest.approx(float(np.asarray(r0["baseline_step_s"])))
    assert float(np.asarray(r1["verify_s"]) - np.asarray(r0["verify_s"])) == pytest.approx(61 * float(one), rel=1e-6)

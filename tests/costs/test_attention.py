"""Attention tile rule and MLA/sliding/linear costs checked by hand."""

import numpy as np
import pytest

from specplan.costs.attention import AttentionHeads, attention_cost, attention_flops, attention_time_s, row_tiles
from specplan.profiles.registry import load_hardware


@pytest.fixture(scope="module")
def h100():
    return load_hardware("h100-sxm")


def test_flops_independent_of_g():
    assert attention_flops(2, 1, 1000, 32, 128) == 4 * 2 * 32 * 1000 * 128


def test_row_tiles():
    assert list(row_tiles(8, np.array([1, 16, 17, 32, 33]))) == [1, 1, 2, 2, 3]
    assert list(row_tiles(16, np.array([7, 8, 9]))) == [1, 1, 2]


@pytest.mark.parametrize("style", ["shared", "reread"])
def test_g8_flat_to_16_then_steps_at_17(h100, style):
    q = np.arange(1, 18)
    # 8 query heads per KV head on the device (G_dev = 8); long KV so Q/O traffic is negligible.
    t = attention_time_s(h100, 32, q, 32768, 64, 8, 128, style=style)
    assert np.max(t[:16]) / t[0] - 1 < 0.01
    assert t[16] > t[15] * 1.05


def test_memory_bound_single_token_equals_kv_read(h100):
    c = attention_cost(h100, 16, 1, 8192, AttentionHeads(32, 8, 128))
    kv = 16 * 8 * 8192 * 256 * 2
    qo = 16 * 32 * 1 * 256 * 2
    ctas = 16 * 8  # one CTA per (sequence, KV head): 128 <= 132 SMs, one wave of per-CTA fixed work
    by_hand = (kv + qo) / (3.35e12 * h100.attention.mem_bw_fraction) + 1 * h100.attention.cta_overhead_s
    assert ctas <= h100.sm_count
    assert c.regime == 0
    assert c.time_s == pytest.approx(by_hand + h100.kernel_overhead_s, rel=1e-9)


def test_compute_term_counts_padded_tiles(h100):
    c = attention_cost(h100, 4, 9, 4096, AttentionHeads(128, 8, 128))  # G=16, 144 rows -> 2 tiles
    att = h100.attention
    flops = 4 * 8 * 2 * (2 * 128 * 4096 * 256)
    assert float(c.compute_s) == pytest.approx(flops / (989.4e12 * att.compute_fraction), rel=1e-9)


def test_reread_reads_more_than_shared(h100):
    s = attention_cost(h100, 8, 33, 8192, AttentionHeads(64, 8, 128), style="shared")
    r = attention_cost(h100, 8, 33, 8192, AttentionHeads(64, 8, 128), style="reread")
    assert float(r.memory_s) > float(s.memory_s)


def test_mla_latent_reads_one_vector_per_token(h100):
    c = attention_cost(h100, 1, 1, 10000, AttentionHeads(16, 1, 576, head_dim_v=512, latent=True))
    one_wave = h100.attention.cta_overhead_s  # batch 1: one CTA, one wave of per-CTA fixed work
    assert (float(c.memory_s) - one_wave) * 3.35e12 * h100.attention.mem_bw_fraction == pytest.approx(
        10000 * 576 * 2 + 16 * (576 + 512) * 2, rel=1e-9
    )


def test_cta_work_sets_short_kv_large_batch(h100):
    """Per-CTA fixed work: ceil(B * n_kv / sm_count) waves x cta_overhead_s, independent of kv_len."""
    c = attention_cost(h100, 2048, 1, 16, AttentionHeads(32, 8, 128))
    waves = np.ceil(2048 * 8 / h100.sm_count)
    kv = 2048 * 8 * 16 * 256 * 2
    qo = 2048 * 32 * 256 * 2
    by_hand = (kv + qo) / (3.35e12 * h100.attention.mem_bw_fraction) + waves * h100.attention.cta_overhead_s
    assert float(c.memory_s) == pytest.approx(by_hand, rel=1e-9)
    assert waves * h100.attention.cta_overhead_s > 0.5 * float(c.memory_s)  # the CTA term dominates at kv_len 16


def test_cta_term_keeps_the_128_row_rule(h100):
    q = np.arange(1, 18)
    t = attention_time_s(h100, 512, q, 32768, 64, 8, 128)  # G = 8: 1 tile up to q_len 16, 32 waves of CTAs
    assert np.max(t[:16]) / t[0] - 1 < 0.01
    assert t[16] > t[15] * 1.05


def test_no_sm_count_no_cta_term(h100):
    hw = h100.model_copy(update={"sm_count": None})
    assert float(attention_cost(hw, 2048, 1, 16, AttentionHeads(32, 8, 128)).memory_s) < float(
        attention_cost(h100, 2048, 1, 16, AttentionHeads(32, 8, 128)).memory_s)


def test_mla_counts_attention_and_combine_kernels(h100):
    from specplan.costs.attention import MLA_ATTENTION_KERNELS

    c = attention_cost(h100, 1, 1, 1000, AttentionHeads(16, 1, 576, head_dim_v=512, latent=True))
    assert float(c.overhead_s) == pytest.approx(MLA_ATTENTION_KERNELS * h100.kernel_overhead_s)

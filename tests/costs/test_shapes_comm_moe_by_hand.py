"""Hand counts of GEMM shapes, collective transfers and MoE routing terms (issue 44, survivors of the seed-44
mutation sample in costs/shapes.py, costs/comm.py and costs/moe.py): every expected number is written out here
from the architecture or the closed form, never read back from the code under test."""

from __future__ import annotations

import numpy as np
import pytest

from specplan.costs import comm
from specplan.costs.moe import (ExpertLayer, distinct_tokens, moe_experts_cost, rank_routing, rank_touched_experts,
                                verify_expert_reuse)
from specplan.costs.shapes import ffn_gemms, mixer_gemms
from specplan.profiles.hf_import import import_hf_config
from specplan.profiles.model import LayerGroup
from specplan.profiles.registry import load_hardware, load_model
from pathlib import Path

HF = Path(__file__).resolve().parents[1] / "profiles" / "hf_configs"


def _shape(gemms, name):
    return next((g.n, g.k) for g in gemms if g.name == name)


def test_mla_absorbed_value_projection_by_hand():
    """DeepSeek-V3 (128 heads, v_head_dim 128, kv_lora_rank 512) at TP 8: 16 heads per device, so the absorbed
    value projection maps 512 latent columns to 16 x 128 = 2048 outputs."""
    m = load_model("deepseek-v3")
    assert _shape(mixer_gemms(m, "full", 8), "v_absorb") == (2048, 512)


def test_deepseek_v4_query_up_projection_by_hand():
    """DeepSeek-V4-Flash (64 heads of 512, q_lora_rank 1024; tests/profiles/hf_configs) at TP 8: 8 heads per device,
    q_b maps the 1024-wide query latent to 8 x 512 = 4096 columns."""
    m = import_hf_config(HF / "deepseek-ai--DeepSeek-V4-Flash-Base_config.json")
    g = m.groups()[0]
    assert _shape(mixer_gemms(m, g, 8), "q_b") == (4096, 1024)


def test_a_layer_that_shares_kv_projects_only_queries():
    """A KV-shared layer (Gemma 4's last layers reuse an earlier layer's K/V) projects queries only: Llama-3.1-8B's
    32 heads of 128 give a 4096-column qkv (against 4096 + 2 x 8 x 128 = 6144 with its own K and V)."""
    m = load_model("llama-3.1-8b")
    own = LayerGroup(mixer="full", ffn="dense", count=1)
    shared = LayerGroup(mixer="full", ffn="dense", count=1, kv_shared=True)
    assert _shape(mixer_gemms(m, own, 1), "qkv") == (6144, 4096)
    assert _shape(mixer_gemms(m, shared, 1), "qkv") == (4096, 4096)


def test_shared_expert_gate_up_split_over_tp_by_hand():
    """DeepSeek-V3's shared expert (FFN 2048, gated) at TP 8: gate and up are 2 x 2048 / 8 = 512 columns each
    device, down reads 256."""
    m = load_model("deepseek-v3")
    g = ffn_gemms(m, "moe", 8)
    assert _shape(g, "shared_gate_up") == (512, 7168)
    assert _shape(g, "shared_down") == (7168, 256)


def test_mesh_link_bandwidth_is_exact_share_of_the_peers():
    """MI300X's full mesh: a TP-2 group uses 1 of the 7 peer links, exactly bw x 1 / 7 (no rounding)."""
    hw = load_hardware("mi300x")
    assert hw.scaleup_topology == "mesh" and hw.scaleup_domain == 8
    bw = hw.scaleup_bandwidth_bytes_s
    assert comm.link_bandwidth_bytes_s(hw, 2) == pytest.approx(bw / 7.0, rel=1e-14)
    assert comm.link_bandwidth_bytes_s(hw, 4) == pytest.approx(3.0 * bw / 7.0, rel=1e-14)
    # a custom mesh whose bandwidth is no multiple of 7 B/s: 100 GB/s x 1 / 7 = 14,285,714,285.714... B/s
    odd = hw.model_copy(update={"scaleup_bandwidth_bytes_s": 100e9})
    assert comm.link_bandwidth_bytes_s(odd, 2) == pytest.approx(100e9 / 7.0, rel=1e-14)


def test_alltoall_over_two_nodes_sends_eight_fifteenths_over_the_nic():
    """H100 (8 GPUs a node), an all-to-all over 16 GPUs: 8 of each GPU's 15 peers are on the other node, so 8/15 of
    its bytes go over the NIC and 7/15 over NVLink; the transfer is the slower of the two."""
    hw = load_hardware("h100-sxm")
    p = hw.alltoall
    nbytes = 64e6
    nv = 7.0 / 15.0 * nbytes / (comm.link_bandwidth_bytes_s(hw, 8) * p.scaleup_bw_fraction)
    nic = 8.0 / 15.0 * nbytes / (hw.scaleout_bandwidth_bytes_s * p.scaleout_bw_fraction)
    lat, xfer = comm.alltoall_terms(hw, nbytes, 16)
    assert float(xfer) == pytest.approx(max(nv, nic), rel=1e-12)
    assert nic > nv > 0.0 and float(lat) == p.scaleout_latency_s


def test_ring_allgather_moves_tp_minus_one_shards():
    """A ring all-gather on 8 H100s receives the 7 other shards: 7 x 32 MB at NCCL's Simple protocol (the one its
    cost model picks at 224 MB: link x NCCL fraction), at Simple's latency: the LL floor (4.36 + 7 x 1.60 us) plus
    NCCL's Simple - LL difference (8.4 - 6.6) + 2 x 7 x (3.4 - 0.6) = 41.0 us."""
    hw = load_hardware("h100-sxm")
    shard = 32e6
    c = comm.allgather_cost(hw, shard, 8)
    want = 7.0 * shard / (comm.link_bandwidth_bytes_s(hw, 8) * hw.allreduce.nccl_bw_fraction)
    assert float(c.memory_s) == pytest.approx(want, rel=1e-12)
    assert float(c.overhead_s) == pytest.approx(4.36e-6 + 7 * 1.60e-6 + 41.0e-6, rel=1e-9)


def test_distinct_tokens_of_a_verify_step_by_hand():
    """4 sequences x 3 verify tokens with a reuse of 0.25: the first token of each sequence picks freely, the other
    two count 0.75 each: 4 x (1 + 2 x 0.75) = 10 tokens."""
    with verify_expert_reuse(0.25):
        assert float(distinct_tokens(4, 3)) == pytest.approx(10.0)
        assert float(distinct_tokens(4, 1)) == pytest.approx(4.0)


def test_rank_expert_pairs_by_hand():
    """DeepSeek routing (256 experts, top 8 of 4 of 8 groups). EP 16 > 8 groups: a rank holds 16 experts of one
    group, all 16 x 15 = 240 ordered pairs within it. EP 4: a rank holds 2 whole groups of 32: 2 x 32 x 31 = 1984
    pairs within a group and 64 x 63 - 1984 = 2048 across."""
    r16 = rank_routing(256, 8, 16, 8, 4)
    assert (r16.same_pairs, r16.diff_pairs) == (240, 0.0)
    r4 = rank_routing(256, 8, 4, 8, 4)
    assert (r4.same_pairs, r4.diff_pairs) == (1984, 2048)


def test_balanced_routing_touches_top_k_over_ep_experts_a_rank():
    """Balanced routing: 4 tokens x top 8 over EP 16 touch 4 x 8 / 16 = 2 experts a rank, never more than the 16 it
    holds."""
    assert float(rank_touched_experts(4.0, 256, 8, 16, "balanced")) == pytest.approx(2.0)
    assert float(rank_touched_experts(1e6, 256, 8, 16, "balanced")) == pytest.approx(16.0)


def test_moe_layer_overhead_is_launches_plus_k_latency():
    """The MoE block's fixed term: 3 launches x kernel_overhead_s plus the two GEMM kernels' serial K loops,
    k_latency_s x (hidden + expert FFN): H100 bf16, h 2880, FFN 2880."""
    hw = load_hardware("h100-sxm")
    c = moe_experts_cost(hw, 16.0, ExpertLayer(2880, 2880, 128, 4))
    want = 3 * hw.kernel_overhead_s + hw.kernel_eff("bf16").k_latency_s * (2880 + 2880)
    assert float(np.asarray(c.overhead_s)) == pytest.approx(want, rel=1e-12)


def test_deepseek_v4_csa_compressor_width_by_hand():
    """DeepSeek-V4-Flash's CSA layers compress keys and values (4 x head_dim 512) and the indexer's keys and weights
    (4 x its head_dim 128, plus one weight per indexer head: 64): 2048 + 512 + 64 = 2624 columns of h 4096."""
    m = import_hf_config(HF / "deepseek-ai--DeepSeek-V4-Flash-Base_config.json")
    csa = next(g for g in m.groups() if g.mixer == "csa")
    assert _shape(mixer_gemms(m, csa, 8), "compressor") == (2624, 4096)


def test_nas_linear_attention_replacement_splits_its_columns_over_tp():
    """Nemotron NAS replaces attention by one h x h linear: at h 4096 and TP 8 each device holds 512 columns."""
    assert _shape(mixer_gemms(load_model("llama-3.1-8b"), "attn_linear", 8), "attn_linear") == (512, 4096)


def test_gated_deltanet_input_projection_by_hand():
    """Qwen3-Next's linear attention (16 key heads and 32 value heads of 128): q and k 2 x 16 x 128, v and z
    2 x 32 x 128, and the two per-value-head gates 2 x 32: 4096 + 8192 + 64 = 12352 columns of h 2048 at TP 1."""
    assert _shape(mixer_gemms(load_model("qwen3-next-80b-a3b"), "linear", 1), "la_in") == (12352, 2048)


def test_alltoall_between_two_gpus_crosses_one_nvlink_share():
    """An all-to-all over 2 H100s of one node: every byte goes to the one peer over NVLink (none over the NIC)."""
    hw = load_hardware("h100-sxm")
    p = hw.alltoall
    lat, xfer = comm.alltoall_terms(hw, 8e6, 2)
    assert float(xfer) == pytest.approx(8e6 / (comm.link_bandwidth_bytes_s(hw, 2) * p.scaleup_bw_fraction), rel=1e-12)
    assert float(lat) == p.latency_s


def test_routing_skew_factor_range_is_inclusive():
    from specplan.costs.moe import parse_routing

    assert parse_routing("skew:64") == ("skew", 64.0) and parse_routing("skew:1") == ("skew", 1.0)
    with pytest.raises(Exception, match=r"skew factor must be a number in \[1, 64\]"):
        parse_routing("skew:64.5")


def test_custom_allreduce_picks_one_shot_while_it_is_faster():
    """Custom all-reduce on 8 H100s, x = bytes / (link x custom fraction): one-shot costs L + 7x, two-shot
    2L + 1.75x, so one-shot is the faster up to x = L / 5.25; at x = L / 5.6 it is chosen: (L, 7x)."""
    hw = load_hardware("h100-sxm")
    p = hw.allreduce
    lat_1 = p.custom_latency_s
    bw = comm.link_bandwidth_bytes_s(hw, 8) * p.custom_bw_fraction
    nbytes = bw * lat_1 / 5.6
    assert nbytes <= p.custom_max_bytes
    lat, xfer = comm.custom_terms(hw, nbytes, 8)
    assert float(lat) == lat_1 and float(xfer) == pytest.approx(7.0 * lat_1 / 5.6, rel=1e-12)


def test_pair_miss_of_experts_in_two_groups_by_hand():
    """DeepSeek routing, top 8 of 4 of 8 groups (32 experts each), EP 4: P(a token picks neither of two experts in
    different groups) = P(neither group) + P(one group) x P(miss its expert) + P(both) x P(miss both), with
    P(both groups) = 4·3 / (8·7), P(a group) = 1/2, miss1 = 120/128, miss2 = 120·119 / (128·127)."""
    both, a = 12 / 56, 0.5
    miss1, miss2 = 120 / 128, 120 * 119 / (128 * 127)
    want = (1 - 2 * a + both) + 2 * (a - both) * miss1 + both * miss2
    assert rank_routing(256, 8, 4, 8, 4).pair_miss_diff == pytest.approx(want, rel=1e-12)

"""Parallel layouts (TP, DP attention, EP, PP): DeepSeek-V3 on 8 H200s at --dp 8 --tp 1 --ep 8, checked by hand.

Every expected number below is counted from DeepSeek-V3's config.json (reference/hf_configs): hidden 7168,
61 layers (3 dense, 58 MoE), 128 heads, q_lora 1536, kv_lora 512, rope 64, nope 128, v 128, 256 experts top-8 in
8 groups (top 4 groups), expert FFN 2048, one shared expert, dense FFN 18432, vocab 129280; fp8 weights, bf16
router, embedding and LM head; bf16 KV.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from specplan.core.errors import SpecplanError
from specplan.model.memory import memory_usage, weight_bytes
from specplan.model.parallel import Layout, as_layout, moe_alltoall_bytes, parse_layout
from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_hardware, load_model
from specplan.model.step import StepKernels, step_time
from specplan.speculation.spec import DraftSearch
from specplan.planning.sweep import SweepAxes

H = 7168
MLA_LAYER = 1536 * H + 128 * 192 * 1536 + 576 * H + 128 * 512 * 128 + 128 * 128 * 512 + H * 128 * 128
EXPERT = 3 * H * 2048  # gate, up, down of one expert (fp8: one byte per weight)
DENSE_FFN = 3 * H * 18432
ROUTER = 256 * H * 2  # bf16
VOCAB = 129280 * H * 2  # LM head or embedding, bf16
DP8 = Layout(tp=1, dp=8, ep=8)


@pytest.fixture(scope="module")
def ds():
    m = load_model("deepseek-v3")
    hw = load_hardware("h200-sxm")
    return m, hw, resolve_precision(m, hw, None, None)


def test_weights_per_gpu_dp8_ep8_by_hand(ds):
    m, hw, prec = ds
    # every GPU: all attention weights (tp 1), the 3 dense FFNs, router + shared expert of 58 MoE layers,
    # 256 / 8 = 32 routed experts per MoE layer, the whole LM head and embedding
    hand = 61 * MLA_LAYER + 3 * DENSE_FFN + 58 * (ROUTER + EXPERT + 32 * EXPERT) + 2 * VOCAB
    assert hand == 100_815_011_840
    assert weight_bytes(m, 1, prec, DP8) == pytest.approx(hand, rel=1e-12)
    # --tp 8: attention, dense FFNs, shared expert, LM head, embedding / 8; each expert's FFN / 8 (all 256 on a GPU)
    tp8 = (61 * MLA_LAYER_TP8 + 3 * DENSE_FFN / 8 + 58 * (ROUTER + EXPERT / 8 + 256 * EXPERT / 8) + 2 * VOCAB / 8)
    assert weight_bytes(m, 8, prec) == pytest.approx(tp8, rel=1e-12)


# q_a (1536 x h) and kv_a (576 x h) are replicated over TP; the other MLA projections split their heads over 8
MLA_LAYER_TP8 = 1536 * H + 576 * H + (128 * 192 * 1536 + 128 * 512 * 128 + 128 * 128 * 512 + H * 128 * 128) / 8


def test_kv_per_gpu_is_an_eighth_of_tp8(ds):
    m, hw, prec = ds
    b, ctx = 64, 4096
    # MLA latent: (512 + 64) bf16 per token and layer, for the 4096 + 1 tokens of each sequence
    per_seq = 61 * 576 * 2 * (ctx + 1)
    tp8 = memory_usage(m, hw, 8, b, ctx, prec)
    dp8 = memory_usage(m, hw, 1, b, ctx, prec, layout=DP8)
    assert float(tp8.kv_bytes) == pytest.approx(b * per_seq)  # every TP rank holds every sequence's latent
    assert float(dp8.kv_bytes) == pytest.approx(b / 8 * per_seq)  # a DP rank holds its 8 sequences
    assert float(dp8.kv_bytes) == pytest.approx(float(tp8.kv_bytes) / 8)
    # largest batch of the instance: 8 ranks x the sequences one GPU's spare memory holds
    cap = hw.mem_capacity_bytes * 0.9
    one_rank = math.floor((cap - weight_bytes(m, 1, prec, DP8)) / (per_seq + dp8.activation_bytes / (b / 8)))
    assert int(dp8.max_batch) == 8 * one_rank


def _hyper_miss(pool, marked, k):
    return math.prod((pool - marked - i) / (pool - i) for i in range(k))


def test_destination_ranks_group_limited_and_unrestricted():
    from specplan.costs.moe import destination_ranks

    # DeepSeek-V3 at EP 8, one group of 32 experts per rank: a token reaches its 4 chosen groups' ranks unless
    # none of its 8 experts (drawn from those 4 x 32 = 128) lands on one of them
    assert destination_ranks(256, 8, 8, 8, 4) == pytest.approx(4 * (1 - _hyper_miss(128, 32, 8)), rel=1e-12)
    assert destination_ranks(256, 8, 8, 8, 4) == pytest.approx(3.629, abs=1e-3)
    # unrestricted top-8 of 256 (Kimi-K2-like, one group): about 5.3 ranks
    assert destination_ranks(256, 8, 8) == pytest.approx(8 * (1 - _hyper_miss(256, 32, 8)), rel=1e-12)
    assert destination_ranks(256, 8, 8) == pytest.approx(5.29, abs=0.01)
    assert destination_ranks(256, 8, 1) == 1.0


def _simulate(n_tokens, ep, groups, trials, seed=0):
    """Monte Carlo of DeepSeek-style routing: (mean over trials of the max touched experts, max rows) per rank."""
    rng = np.random.default_rng(seed)
    e, k = 256, 8
    ng, tg = groups
    size = e // ng
    touched, rows = [], []
    for _ in range(trials):
        g = np.argsort(rng.random((n_tokens, ng)), axis=1)[:, :tg]
        cand = (g[:, :, None] * size + np.arange(size)).reshape(n_tokens, -1)
        ex = np.take_along_axis(cand, np.argsort(rng.random(cand.shape), axis=1)[:, :k], 1)
        rank = ex // (e // ep)
        rows.append(np.bincount(rank.ravel(), minlength=ep).max())
        touched.append(max(np.unique(ex[rank == r]).size for r in range(ep)))
    return float(np.mean(touched)), float(np.mean(rows))


@pytest.mark.parametrize("batch,d", [(1, 3), (4, 3), (16, 3), (64, 3)])
def test_touched_experts_per_rank_at_verify_tokens(batch, d):
    from specplan.costs.moe import rank_rows, rank_touched_experts

    n = batch * (1 + d)  # B (1 + D) tokens over all DP ranks
    # mean: each of a rank's 32 experts is missed by a token with probability 1 - 8/256
    mean = 32 * (1 - (1 - 8 / 256) ** n)
    assert rank_touched_experts(n, 256, 8, 8, n_group=8, topk_group=4, stat="mean") == pytest.approx(mean)
    # the slowest rank: expected maximum over the 8 ranks, against a Monte Carlo of the routing
    sim_t, sim_r = _simulate(n, 8, (8, 4), trials=300 if n >= 64 else 1500)
    got_t = float(rank_touched_experts(n, 256, 8, 8, n_group=8, topk_group=4))
    got_r = float(rank_rows(n, 256, 8, 8, n_group=8, topk_group=4))
    assert got_t == pytest.approx(sim_t, rel=0.07)
    assert got_r == pytest.approx(sim_r, rel=0.07)
    assert mean <= got_t <= 32


def test_dispatch_and_combine_bytes_by_hand(ds):
    m, _, _ = ds
    b, d = 64, 3
    tokens_per_gpu = b / 8 * (1 + d)  # 8 sequences per DP rank, 4 verified tokens each, tp 1
    ranks = 4 * (1 - _hyper_miss(128, 32, 8))
    remote = ranks * 7 / 8  # the token's own rank is one of the 8 with probability 1/8
    disp, comb = moe_alltoall_bytes(m, DP8, tokens_per_gpu)
    assert disp == pytest.approx(tokens_per_gpu * remote * H * (1 + 4 / 128))  # fp8 + an fp32 scale per 128
    assert comb == pytest.approx(tokens_per_gpu * remote * H * 2)  # bf16
    assert disp == pytest.approx(32 * 3.1757 * 7168 * 1.03125, rel=1e-4)


def test_step_charges_alltoall_only_under_dp(ds):
    m, hw, prec = ds
    dp = step_time(m, hw, batch=64, q_len=4, context_len=4096, layout=DP8)
    tp = step_time(m, hw, 8, batch=64, q_len=4, context_len=4096)
    # dp 8 tp 1: no all-reduce; 58 MoE layers x (dispatch + combine), each at least the a2a latency
    assert float(dp.breakdown_s["communication"]) >= 2 * 58 * hw.alltoall.latency_s
    assert dp.devices == tp.devices == 8
    # decode attention reads the latent KV: under TP 8 every GPU reads all 64 sequences' latent (16 heads each),
    # under DP 8 only its own 8 sequences' (128 heads): 1/8 of the bytes. In 64-row MLA tiles (FlashMLA, issue 10)
    # both are compute-bound at this context: TP 8 pads 16 heads into one tile per sequence (64 tiles), DP 8 fills
    # two tiles per sequence (16 tiles): 1/4 of the padded tile work
    dp1 = step_time(m, hw, batch=64, q_len=1, context_len=4096, layout=DP8)
    tp1 = step_time(m, hw, 8, batch=64, q_len=1, context_len=4096)
    assert str(tp1.regime("attention")) == str(dp1.regime("attention")) == "compute"
    assert float(dp1.breakdown_s["attention"]) == pytest.approx(float(tp1.breakdown_s["attention"]) * 16 / 64, rel=0.1)


def test_layout_errors_are_one_line():
    with pytest.raises(SpecplanError, match=r"--ep 8 does not divide TP x DP = 1 x 3 = 3"):
        Layout(tp=1, dp=3, ep=8)
    with pytest.raises(SpecplanError, match="needs an MoE model"):
        Layout(tp=1, dp=8, ep=8).check(load_model("llama-3.1-8b"))
    with pytest.raises(SpecplanError, match="cannot read"):
        parse_layout("tp8xx")
    assert parse_layout("dp8ep8") == Layout(dp=8, ep=8) and as_layout("tp2dp4ep8pp2").gpus == 16
    r = subprocess.run([sys.executable, "-m", "specplan", "step", "--model", "deepseek-v3", "--hardware", "h200-sxm",
                        "--dp", "3", "--tp", "1", "--ep", "8", "--batch", "8", "--context", "1024"],
                       capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and "--ep 8 does not divide" in err[0], r.stderr


def test_pipeline_stages_bubble(ds):
    m, hw, _ = ds
    one = step_time(m, hw, 8, batch=[1, 64], context_len=2048)
    pp2 = step_time(m, hw, 8, batch=[1, 64], context_len=2048, layout=Layout(tp=8, pp=2))
    half = step_time(m, hw, 8, batch=32, context_len=2048)
    # batch 1: one micro-batch, both stages in turn = the whole model's step (plus hops): PP buys no latency
    assert pp2.total_s[0] == pytest.approx(one.total_s[0], rel=0.03) and pp2.total_s[0] > one.total_s[0]
    # batch 64: two micro-batches of 32 keep both stages busy; a sequence sees one step at batch 32
    assert pp2.total_s[1] == pytest.approx(float(half.total_s), rel=0.03)
    assert pp2.devices == 16


def test_sweep_and_frontier_carry_the_layout_columns():
    from specplan.planning.frontier import frontier
    from specplan.planning.sweep import sweep

    df = sweep("deepseek-v3", "h200-sxm",
               axes=SweepAxes(batch=[8, 64], draft_lens=[0, 2], layouts=["tp8", "dp8ep8", "tp8pp2"], contexts=[2048]),
               drafts=DraftSearch(mechanisms=["mtp"], acceptance={"mtp": 0.8}, max_draft_len=32), progress=False)
    assert {"tp", "dp", "ep", "pp", "layout"} <= set(df.columns)
    assert set(df["layout"].astype(str)) == {"tp8", "dp8ep8", "tp8pp2"}
    assert (df["target_devices"] == df["tp"] * df["dp"] * df["pp"]).all()
    d = df[df["layout"].astype(str) == "dp8ep8"]
    assert set(d["tp"]) == {1} and set(d["dp"]) == {8} and set(d["ep"]) == {8}
    # one row per point: the same (batch, D) under dp8ep8 equals a direct step evaluation
    row = d[(d["batch"] == 64) & (d["draft_len"] == 0)].iloc[0]
    direct = step_time("deepseek-v3", "h200-sxm", batch=64, context_len=2048, layout=DP8)
    assert row["step_ms"] == pytest.approx(1e3 * float(direct.total_s), rel=1e-5)
    assert "layout" in frontier(df).columns
    with pytest.raises(SpecplanError, match="either tp or layouts"):
        sweep("deepseek-v3", "h200-sxm", axes=SweepAxes(batch=[8], draft_lens=[0], tp=[8], layouts=["dp8ep8"]),
              progress=False)
    with pytest.raises(SpecplanError, match="does not divide"):
        sweep("deepseek-v3", "h200-sxm", axes=SweepAxes(batch=[8], draft_lens=[0], layouts=["dp3ep8"]),
              progress=False)


def test_study_grid_takes_layouts():
    from specplan.study.spec import Grid, sweep_kwargs

    assert Grid(layouts=["dp8ep8", "tp8"]).layouts == ["dp8ep8", "tp8"]
    kw = sweep_kwargs({"grid": {"layouts": ["dp8ep8"]}, "draft_model": None, "draft_hardware": None})
    assert kw["axes"].layouts == ["dp8ep8"]


def test_pipeline_weights_per_gpu_by_hand(ds):
    m, _, prec = ds
    tp8 = 61 * MLA_LAYER_TP8 + 3 * DENSE_FFN / 8 + 58 * (ROUTER + EXPERT / 8 + 256 * EXPERT / 8)
    # two stages: half the layers each, and the heavier of embedding and LM head (equal here: one of them)
    assert weight_bytes(m, 8, prec, Layout(tp=8, pp=2)) == pytest.approx(tp8 / 2 + VOCAB / 8, rel=1e-12)


def test_alltoall_spanning_nodes_uses_the_nic():
    from specplan.costs.comm import alltoall_terms
    from specplan.profiles.registry import load_hardware

    hw = load_hardware("h200-sxm")
    a = hw.alltoall
    nbytes = 1.0e6
    lat, xfer = alltoall_terms(hw, nbytes, 8)  # one node: NVLink only
    assert float(lat) == a.latency_s
    assert float(xfer) == pytest.approx(nbytes / (450e9 * a.scaleup_bw_fraction))
    lat, xfer = alltoall_terms(hw, nbytes, 16)  # two nodes: 8 of the 15 peers over the 50 GB/s NIC
    nic = 8 / 15 * nbytes / (hw.scaleout_bandwidth_bytes_s * a.scaleout_bw_fraction)
    nv = 7 / 15 * nbytes / (450e9 * a.scaleup_bw_fraction)
    assert float(lat) == a.scaleout_latency_s and float(xfer) == pytest.approx(max(nic, nv))


# --- DeepEP all-to-all as the engines run it (issue 22) -----------------------------------------------------------


def test_deepep_low_latency_decode_meets_the_readme_at_ep16_128_tokens():
    # DeepEP docs/legacy.md (H800 + ConnectX-7 400 Gb/s, DeepSeek-V3's hidden 7168, top-8, 128 tokens per rank):
    # EP 16 dispatch 118 us, combine 195 us. H100 nodes carry the same 50 GB/s NIC per GPU: the same figures.
    from specplan.model.parallel import moe_alltoall_costs

    m = load_model("deepseek-v3")
    hw = load_hardware("h100-sxm")
    assert hw.scaleout_bandwidth_bytes_s == 50e9
    disp, comb = moe_alltoall_costs(m, hw, Layout(tp=1, dp=16, ep=16), 128.0)
    # one copy per (token, expert), local ones included: 128 x 8 x 7168 x (1 + 4/128) B at the README's 63 GB/s
    assert float(disp.time_s) == pytest.approx(128 * 8 * H * (1 + 4 / 128) / 63e9, rel=1e-9)
    assert float(disp.time_s) == pytest.approx(118e-6, rel=0.05)
    assert float(comb.time_s) == pytest.approx(195e-6, rel=0.05)  # 128 x 8 x 7168 x 2 B at 74 GB/s
    # a third fewer tokens: a third less time (bandwidth-bound), never below the fabric latency
    small, _ = moe_alltoall_costs(m, hw, Layout(tp=1, dp=16, ep=16), 1.0)
    assert float(small.time_s) == pytest.approx(hw.alltoall.scaleout_latency_s)


def test_deepseek_group_selection_reaches_more_ranks_than_uniform_draws():
    from specplan.costs.moe import destination_ranks, grouped_destinations

    uniform = destination_ranks(256, 8, 8, 8, 4)  # 3.629: 8 uniform draws from the 4 chosen groups' 128 experts
    ranks, nodes = grouped_destinations(256, 8, 8, 8, 4, 8)
    # EP 8 = one group per rank: a token reaches at most its 4 chosen groups; with i.i.d. scores each chosen group
    # (picked for its top-2 sum) nearly always keeps an expert among the top 8: ~9 % more ranks than uniform
    assert ranks <= 4.0 and nodes == 1.0
    assert 1.07 * uniform < ranks < 1.11 * uniform


def test_deepep_normal_kernels_send_one_copy_per_remote_node_in_prefill():
    from specplan.model.parallel import destinations, moe_alltoall_costs

    m = load_model("deepseek-v3")
    hw = load_hardware("h100-sxm")
    lay = Layout(tp=1, dp=16, ep=16)
    a = hw.alltoall
    ranks, nodes = destinations(m, lay, 8)
    assert 1.0 < nodes <= 2.0 and ranks > 2 * nodes
    t = 4096.0  # prefill: normal kernels (more than 128 tokens per GPU)
    disp, _ = moe_alltoall_costs(m, hw, lay, t)
    nv = t * ranks * 15 / 16 * H * (1 + 4 / 128) / (450e9 * a.scaleup_bw_fraction)
    nic = t * nodes * 1 / 2 * H * (1 + 4 / 128) / (50e9 * a.scaleout_bw_fraction)  # 1 of 2 nodes is remote
    assert float(disp.time_s) == pytest.approx(a.scaleout_latency_s + max(nv, nic), rel=1e-9)


def test_expert_load_imbalance_input():
    from specplan.costs.moe import ExpertLayer, moe_experts_cost

    hw = load_hardware("h100-sxm")
    args = (hw, 4096.0, ExpertLayer(H, 2048, 256, 8, n_group=8, topk_group=4), "fp8", "fp8")
    eplb = moe_experts_cost(*args, routing="eplb", ep=16)
    skew = moe_experts_cost(*args, routing="skew:1.5", ep=16)
    rand = moe_experts_cost(*args, routing="random", ep=16)
    # compute-bound at 4096 x 8 / 16 = 2048 rows: skew 1.5 = 1.5 x the mean rows' FLOPs; random (the default,
    # EPLB off) lands between the mean and 1.5x
    assert float(skew.compute_s) == pytest.approx(1.5 * float(eplb.compute_s), rel=0.02)
    assert float(eplb.compute_s) < float(rand.compute_s) < float(skew.compute_s)
    for bad in ("skew:0.5", "skew:x", "zipf"):
        with pytest.raises(SpecplanError, match="routing"):
            step_time("deepseek-v3", "h100-sxm", 8, 1, 1, 1024, kernels=StepKernels(routing=bad))

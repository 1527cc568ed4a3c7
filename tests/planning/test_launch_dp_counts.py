"""Launch counts under attention data parallelism (issue 44, two mutants that survived), by hand: a running-request
cap per DP rank holds the answer's batch when every rank takes its share rounded up, and TensorRT-LLM's MoE layer
spans all TP x DP GPUs, split as moe_expert_parallel_size x moe_tensor_parallel_size."""

import pytest

from specplan.planning.launch.emit import build, plan_from_answer, trtllm_options


def _answer(batch, tp, dp, ep):
    return {"model": "deepseek-v3", "layout": {"tp": tp, "dp": dp, "ep": ep},
            "best": {"mechanism": "mtp", "draft_len": 2, "batch": batch}}


def test_a_per_rank_cap_rounds_the_share_up():
    # 100 requests over 8 DP ranks: 8 x 12 = 96 < 100 <= 104 = 8 x 13, so each rank must admit 13
    p = plan_from_answer(_answer(100, 1, 8, 8))
    argv = build("vllm", p).argv
    assert argv[argv.index("--max-num-seqs") + 1] == "13"
    assert trtllm_options(p)[0]["max_batch_size"] == 13


@pytest.mark.parametrize("tp, dp, ep, expert_tp", [(1, 8, 8, 1), (8, 1, 8, 1), (2, 4, 4, 2), (8, 1, 4, 2)])
def test_trtllm_moe_split_covers_every_gpu(tp, dp, ep, expert_tp):
    # the MoE layer runs on tp x dp GPUs: EP groups of expert_tp GPUs each (DP 8 x TP 1, EP 8: 8 = 8 x 1)
    o = trtllm_options(plan_from_answer(_answer(64, tp, dp, ep)))[0]
    assert o["moe_expert_parallel_size"] == ep and o["moe_tensor_parallel_size"] == expert_tp
    assert o["moe_expert_parallel_size"] * o["moe_tensor_parallel_size"] == tp * dp


def test_the_per_rank_note_only_where_there_are_ranks():
    # DP 8: vLLM's --max-num-seqs is per rank and says so; DP 1: one rank, the cap is the answer's batch, no note
    dp8 = build("vllm", plan_from_answer(_answer(100, 1, 8, 8))).notes
    dp1 = build("vllm", plan_from_answer(_answer(100, 8, 1, 8))).notes
    assert any("per data-parallel rank" in n and "over 8 ranks" in n for n in dp8)
    assert not any("per data-parallel rank" in n for n in dp1)

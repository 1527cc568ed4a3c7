"""Hand counts and documented rules of the planning layer (issue 44, survivors of the seed-44 mutation sample in
planning/cost.py, launch/emit.py, recommend.py, recommend_serving.py and sweep.py)."""

from __future__ import annotations

import numpy as np
import pytest

from specplan.core.errors import SpecplanError
from specplan.costs.precision import resolve_precision
from specplan.model.parallel import Layout
from specplan.planning.cost import step_work
from specplan.planning.launch.emit import build, plan_from_answer, trtllm_options
from specplan.planning.recommend import batch_candidates
from specplan.planning.recommend_serving import refined_concurrency
from specplan.planning.sweep import layout_choices, sweep
from specplan.profiles.registry import load_hardware, load_model
from specplan.speculation import evaluate
from specplan.speculation.spec import DraftSearch
from specplan.planning.sweep import SweepAxes
from specplan.planning.options import DeploymentSpace, Sla
from specplan.model.deployment import Deployment


def test_moe_step_flops_by_hand():
    """Mixtral-8x7B (32 MoE layers; 32 q / 8 KV heads of 128, h 4096; 8 experts of FFN 14336, top 2, gated; vocab
    32000), 2 sequences x 4 verify tokens at 1024 cached (1025 keys with the new one), TP 1: 2 FLOPs per weight of
    the dense GEMMs and the LM head per token, 4 x 128 x keys per head of attention, and the 2 routed experts'
    3 GEMMs in every MoE layer, for the 8 tokens."""
    m, hw = load_model("mixtral-8x7b"), load_hardware("h100-sxm")
    h, tokens = 4096, 8
    dense = 32 * ((32 * 128 + 2 * 8 * 128) * h + h * 32 * 128 + 8 * h) + 32000 * h
    want = 2 * dense * tokens + 4 * 32 * 128 * 1025 * 32 * tokens + 2 * 3 * h * 14336 * 2 * 32 * tokens
    flops, _ = step_work(m, hw, resolve_precision(m, hw), None, 2.0, 4.0, 1024.0)
    assert float(flops) == want


def test_mla_attention_flops_per_key_by_hand():
    """DeepSeek-V3's absorbed MLA attention: QK over 512 + 64 and PV over 512 dims, 2 x (2 x 512 + 64) = 4 x 544
    FLOPs per key and head; 1024 more cached keys cost 4 x 544 x 1024 x 128 heads x 61 layers for one token."""
    m, hw = load_model("deepseek-v3"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw)
    more, _ = step_work(m, hw, prec, None, 1.0, 1.0, 2048.0)
    less, _ = step_work(m, hw, prec, None, 1.0, 1.0, 1024.0)
    assert float(more - less) == 4 * 544 * 1024 * 128 * 61


def test_a_disaggregated_answer_without_node_size_launches_eight_gpu_prefill_groups():
    """A GPUs-for-a-load answer that does not say its node size: the prefill pool comes in TP-8 groups (the
    default node of 8 GPUs): 16 prefill GPUs are 2 replicas of TP 8."""
    a = {"model": "deepseek-v3", "hardware": "h200-sxm", "isl": 2048, "osl": 2048, "counts": [],
         "best": {"gpus": 32, "prefill_gpus": 16, "decode_gpus": 16, "layout": "dp16ep16", "instances": 1,
                  "mechanism": "mtp", "draft_len": 2, "batch": 736},
         "answer": {"mode": "disagg", "gpus": 32}}
    assert plan_from_answer(a)["pools"]["prefill"] == {"replicas": 2, "tp": 8}


@pytest.mark.parametrize("pp", [1, 2])
def test_pipeline_parallel_flags_only_with_stages(pp):
    """Llama-3.3-70B at TP 4 x PP 2: vLLM --pipeline-parallel-size 2, SGLang --pp-size 2, TensorRT-LLM
    pipeline_parallel_size 2; at PP 1 none of them."""
    p = plan_from_answer({"model": "llama-3.3-70b", "layout": {"tp": 4, "dp": 1, "ep": 1, "pp": pp},
                          "best": {"mechanism": "none", "draft_len": 0, "batch": 32}})
    v, s = build("vllm", p).argv, build("sglang", p).argv
    o = trtllm_options(p)[0]
    if pp == 2:
        assert v[v.index("--pipeline-parallel-size") + 1] == "2" and s[s.index("--pp-size") + 1] == "2"
        assert o["pipeline_parallel_size"] == 2
    else:
        assert "--pipeline-parallel-size" not in v and "--pp-size" not in s and "pipeline_parallel_size" not in o


def test_batch_candidates_stop_at_the_largest_batch_that_fits():
    """On a GPU the batch search runs 1 ... the largest batch that fits at D = 0: it fits, one more does not."""
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    cands = batch_candidates(m, hw, 1, 8192, {})
    top = cands[-1]
    assert np.array_equal(cands, np.arange(1.0, top + 1.0))
    fits = evaluate(Deployment(m, hw, tp=1), batch=np.array([top, top + 1]), context_len=8192)["fits"]
    assert list(np.asarray(fits).reshape(-1)) == [True, False]


def test_refinement_spans_the_picks_grid_neighbours():
    """Grid 1, 2, 4, 8, 16 (x scale 1): a pick of 4 is refined over 2 ... 8, the last (16) over 8 ... 16 (its own
    value as the upper end) and the first (1) over 1 ... 2."""
    conc = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    r = refined_concurrency(conc, np.array([4.0, 16.0, 1.0]))
    assert (r[0].tolist(), r[-1].tolist()) == ([2.0, 8.0, 1.0], [8.0, 16.0, 2.0])


def test_sweep_layouts_or_tp_but_not_both():
    """layout_choices: given layouts are swept as given; tp and layouts together are refused in one line."""
    assert layout_choices("llama-3.1-8b", "h100-sxm", layouts=["tp2"]) == [Layout(tp=2)]
    with pytest.raises(SpecplanError, match="give either tp or layouts, not both"):
        layout_choices("llama-3.1-8b", "h100-sxm", tps=[2], layouts=["tp2"])


def test_sweep_memory_column_is_in_gigabytes():
    """memory_gb = memory_total_bytes / 10^9 of the same point (evaluate's), to the table's float32."""
    t = sweep("llama-3.1-8b", "h100-sxm", axes=SweepAxes(batch=[4], draft_lens=[0], tp=[1]),
              drafts=DraftSearch(mechanisms=["none"], max_draft_len=32))
    r = evaluate(Deployment("llama-3.1-8b", "h100-sxm", tp=1), batch=4, context_len=1024)
    assert float(t["memory_gb"].iloc[0]) == pytest.approx(float(r["memory_total_bytes"]) / 1e9, rel=1e-6)


def test_the_deployment_search_stays_within_the_acceptance_data_by_default():
    """Per-position acceptance for D <= 3 (0.95 each): by default the search tries no D beyond the data and says so,
    at a TPOT target of 5 ms that would otherwise favour a deeper draft."""
    import json

    from specplan.planning.recommend_serving import search_deployment

    r = search_deployment("llama-3.1-8b", "h100-sxm", 1024, 256, space=DeploymentSpace(gpus=1, modes=("agg",)),
                          drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": "0.95,0.95,0.95"}, max_draft_len=8),
                          sla=Sla(max_tpot_ms=5))
    assert r["best"]["best"]["draft_len"] <= 3
    from specplan.core.jsonable import to_jsonable

    assert "acceptance data cover D <= 3; larger D not searched" in json.dumps(to_jsonable(r))


def test_batch_candidates_reach_the_search_cap_when_everything_fits():
    """Llama-3.2-1B at 128 tokens of context fits far more than recommend's cap of 2048 on an H100: every batch
    1 ... 2048 is a candidate."""
    cands = batch_candidates(load_model("llama-3.2-1b"), load_hardware("h100-sxm"), 1, 128, {})
    assert cands[0] == 1.0 and cands[-1] == 2048.0 and cands.size == 2048

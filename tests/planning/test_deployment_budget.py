"""recommend --gpus (search_deployment) uses its budget (issue 44): replicas of the best unit fill the GPUs, and the
bounded unit search (every xPyD of at most UNIT_INSTANCES instances, refinement pruned by an upper bound) finds
what a brute force over every split of a small budget finds."""

import pytest

from specplan.planning.recommend_serving import UNIT_INSTANCES, disagg_units, recommend_serving, search_deployment
from specplan.serving.workload import Workload
from specplan.planning.options import DeploymentSpace, GridOptions, Sla
from specplan.speculation.spec import DraftSearch

SLA = dict(sla=Sla(max_ttft_ms=1000.0, max_tpot_ms=30.0))


def _unit_gpus(layout: dict) -> int:
    """GPUs of one unit, read from the layout's own fields by hand: TP, or (x + y) x TP of its xPyD."""
    pools = layout["best"]["pools"]
    if pools is None:
        return layout["tp"]
    x, y = pools[:-1].split("P")
    return (int(x) + int(y)) * layout["tp"]


def test_the_units_are_every_split_up_to_eight_instances_whatever_the_budget():
    # hand count: splits x + y = s (x, y >= 1) number s - 1, so x + y <= 8 gives 1 + 2 + ... + 7 = 28
    assert disagg_units(2) == [(1, 1)]
    assert sorted(disagg_units(3)) == [(1, 1), (1, 2), (2, 1)]
    assert UNIT_INSTANCES == 8 and len(disagg_units(8)) == 28 and disagg_units(4096) == disagg_units(8)


def test_replicas_of_the_best_unit_fill_the_budget():
    # 16 GPUs: each layout runs floor(16 / unit GPUs) replicas of its unit; no further unit fits in the idle GPUs;
    # the output tokens/s are the unit's tokens/s/GPU over the GPUs used, and the answer has the most of them
    g = 16
    r = search_deployment("llama-3.1-8b", "h100-sxm", 1024, 256, engine="vllm", space=DeploymentSpace(gpus=g),
                          drafts=DraftSearch(mechanisms=["none"], max_draft_len=16), **SLA)
    ok = [x for x in r["layouts"] if x["best"] is not None]
    assert {x["mode"] for x in ok} == {"agg", "disagg"}
    for x in ok:
        unit = _unit_gpus(x)
        assert x["replicas"] == g // unit and x["gpus_used"] == x["replicas"] * unit
        assert x["idle_gpus"] == g - x["gpus_used"] and 0 <= x["idle_gpus"] < unit
        assert x["tokens_per_s"] == pytest.approx(x["best"]["tokens_per_s_per_gpu"] * x["gpus_used"], rel=1e-12)
        assert x["total_concurrency"] == x["best"]["concurrency"] * x["replicas"]
        assert ("fit:" in x["verdict"]) == (x["idle_gpus"] > 0)
    assert r["best"]["tokens_per_s"] == max(x["tokens_per_s"] for x in ok)
    disagg = r["best_by_mode"]["disagg"]
    assert disagg["gpus_used"] > g // 2  # the old search ran one pool of at most 5 of 16 GPUs


def test_the_disaggregated_search_equals_a_brute_force_over_every_split():
    # 6 GPUs: every xPyD with (x + y) TP <= 6 priced alone (its pools fixed), replicated floor(6 / ((x + y) TP))
    # times by hand; the most output tokens/s of all must be what the bounded search answers (its pruned
    # refinement prices fewer points, so the decode table it interpolates can differ in the 4th digit)
    g = 6
    r = search_deployment("llama-3.1-8b", "h100-sxm", 4096, 256, engine="vllm",
                          space=DeploymentSpace(gpus=g, gpus_per_node=4, modes=("disagg",)),
                          drafts=DraftSearch(mechanisms=["none"], max_draft_len=16), **SLA)
    brute = []
    for tp in (1, 2):
        n = g // tp
        for x in range(1, n):
            for y in range(1, n - x + 1):
                b = recommend_serving("llama-3.1-8b", "h100-sxm",
                                      Workload(4096, 256, concurrency=1.0, mode="disagg",
                                                                           pools=(x, y)),
                                      tp=tp, engine="vllm", drafts=DraftSearch(mechanisms=["none"], max_draft_len=16),
                                      grid=GridOptions(search_concurrency=True), **SLA)["best"]
                if b is not None:
                    used = g // ((x + y) * tp) * (x + y) * tp
                    brute.append((b["tokens_per_s_per_gpu"] * used, tp, b["pools"]))
    assert len(brute) > 10
    total, tp, pools = max(brute)
    best = r["best"]
    assert best["tokens_per_s"] == pytest.approx(total, rel=1e-3)
    assert (best["tp"], best["best"]["pools"]) == (tp, pools)


def test_the_launch_of_replicated_units_says_how_many():
    # recommend --gpus 16 answering 2 x 3P5D x TP 1: the command is one decode instance of one unit, at the unit's
    # concurrency over its 5 decode instances (1024 / 5 -> 205), and the note names the 2 units on 16 GPUs
    from specplan.planning.launch.emit import build, plan_from_answer

    answer = {"model": "llama-3.1-8b", "hardware": "h100-sxm", "engine": "vllm", "isl": 1024, "osl": 256, "gpus": 16,
              "best": {"mode": "disagg", "dtype": "bf16", "tp": 1, "fits": True, "replicas": 2, "unit_gpus": 8,
                       "gpus_used": 16, "total_concurrency": 2048.0, "layout": "2 x 3P5D x TP 1",
                       "best": {"mechanism": "none", "draft_len": 0, "concurrency": 1024.0, "pools": "3P5D"}}}
    p = plan_from_answer(answer)
    assert (p["units"], p["max_batch"]) == (2, 205)
    assert any("3P5D, 8 x 1 GPUs; 2 such units side by side, 16 GPUs" in n for n in build("vllm", p).notes)


def test_refinement_is_pruned_by_the_upper_neighbours_throughput_by_hand():
    # a 4-point grid of concurrency per decode instance; column 0 is 1P1D (its grid 1, 2, 4, 8), column 1 is 1P2D
    # (2, 4, 8, 16 in all). On 6 GPUs both units fill the budget (3 x 2 and 2 x 3 GPUs).
    import numpy as np

    from specplan.planning.recommend_serving import _worth_refining
    from specplan.serving.grid import ServingGrid

    conc = np.array([1.0, 2.0, 4.0, 8.0])
    tps = np.array([[10.0, 5.0], [20.0, 15.0], [30.0, 18.0], [40.0, 35.0]])  # tokens/s/GPU per grid point, column
    from types import SimpleNamespace as row

    found = [row(concurrency=2.0, feasible=True, tokens_per_s_per_gpu=20.0),   # picked at grid point 1
             row(concurrency=4.0, feasible=True, tokens_per_s_per_gpu=15.0)]   # 4 in all = 2 per instance
    keep, floor = _worth_refining(found, [(1, 1), (1, 2)], ServingGrid(tokens_per_s_per_gpu=tps), conc,
                                  np.array([1.0, 2.0]), 1, 6, 0.0)
    # best feasible pick: 20 x 6 = 120 tokens/s; column 0 can reach 30 x 6 = 180 (its upper neighbour), column 1
    # only 18 x 6 = 108 < 120 between its neighbours: not refined
    assert floor == 120.0 and keep == [0]
    # an infeasible pick is never refined (a refined row replaces only a feasible one); a floor from before counts
    keep, floor = _worth_refining([row(**dict(vars(found[0]), feasible=False)), found[1]], [(1, 1), (1, 2)],
                                  ServingGrid(tokens_per_s_per_gpu=tps), conc, np.array([1.0, 2.0]), 1, 6, 100.0)
    assert floor == 100.0 and keep == [1]

"""recommend --gpus (search_deployment): an aggregated layout's counts by hand (issue 26): on G GPUs at TP t,
replicas = floor(G / t), GPUs used = replicas x t, and the deployment's concurrency = replicas x one replica's."""

from specplan.planning.recommend_serving import search_deployment
from specplan.planning.options import DeploymentSpace, Sla
from specplan.speculation.spec import DraftSearch


def test_aggregated_replicas_and_total_concurrency_by_hand():
    r = search_deployment("llama-3.1-8b", "h100-sxm", 1024, 128, engine="vllm",
                          space=DeploymentSpace(gpus=2, gpus_per_node=2),
                          drafts=DraftSearch(mechanisms=["none"], max_draft_len=16),
                          sla=Sla(max_tpot_ms=50.0, max_ttft_ms=2000.0))
    agg = [x for x in r["layouts"] if x["mode"] == "agg" and x["best"] is not None]
    assert {x["tp"] for x in agg} == {1, 2}
    for x in agg:
        replicas = 2 // x["tp"]
        assert x["replicas"] == replicas and x["gpus_used"] == replicas * x["tp"]
        assert x["total_concurrency"] == x["best"]["concurrency"] * replicas
    assert next(x for x in agg if x["tp"] == 1)["replicas"] == 2

"""Serving answers a hand audit found wrong (session 13), checked against closed forms: one client decodes alone
(TPOT = the decode step; no wait for a step when the engine is idle), the open loop has no steady state above its
capacity, and a disaggregated point does not depend on the other loads of the same sweep."""

import numpy as np
import pytest

from specplan.model.step import step_time
from specplan.serving.aggregated import aggregated
from specplan.serving.disaggregated import disaggregated_pools
from specplan.serving.workload import Workload
from specplan.speculation.acceptance import Acceptance
from specplan.model.deployment import Deployment
from specplan.speculation.spec import Speculation


def test_one_client_with_a_long_prompt_decodes_at_the_decode_step():
    """ISL 32,000 / OSL 128, one client, ideal engine: its TPOT is the decode step at batch 1 and context
    ISL + OSL/2 = 32,064 (it was 68 % above: its own next prompt was priced into its decode steps)."""
    r = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="ideal"), Speculation(),
                   Workload(32000, 128, concurrency=1.0))
    dec = float(step_time("llama-3.1-8b", "h100-sxm", 1, 1.0, 1, 32000 + 64).total_s)
    assert float(r["tpot_s"]) == pytest.approx(dec, rel=1e-9)
    two = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="ideal"), Speculation(),
                     Workload(32000, 128, concurrency=2.0))
    assert float(two["tpot_s"]) > 1.2 * dec  # a second client's prompts do land in its decode steps


def test_the_open_loop_has_no_steady_state_above_its_capacity():
    """At 1.02 x the saturation rate it reported stable with a throughput above its own capacity (the fixed-point
    iteration from below had not converged); at 0.99 x a steady state exists and holds B = λ·N_d·τ."""
    acc = Acceptance.from_rate(0.7)
    dep, spec = Deployment("llama-3.1-8b", "h100-sxm", engine="ideal"), Speculation("eagle3", 3, acc)
    sat = float(aggregated(dep, spec, Workload(2048, 128, request_rate=1.0))["saturation_requests_per_s"])
    lam = np.array([0.99, 1.02, 1.1]) * sat
    r = aggregated(dep, spec, Workload(2048, 128, request_rate=lam))
    assert list(np.asarray(r["stable"])) == [True, False, False]
    n_d = 127 / float(np.asarray(r["acceptance_length"]).ravel()[0])
    b, tau = float(r["decode_batch"][0]), float(r["iteration_s"][0])
    assert b == pytest.approx(lam[0] * n_d * tau, rel=1e-6)


def test_a_disaggregated_point_does_not_depend_on_the_other_loads_asked():
    """TensorRT-LLM 1P1D at concurrency 126: the decode table's interval around 126 depended on the largest load
    of the sweep, and the graph's end at 128 (an eager step beyond) was interpolated across it (TPOT 11.5 ms
    alone, 15.1 ms beside 1024)."""
    one = disaggregated_pools(Deployment("llama-3.1-8b", "h100-sxm", engine="trtllm"), Speculation(),
                              Workload(128, 1024, concurrency=126.0, mode="disagg"), [(1, 1)])[0]
    many = disaggregated_pools(Deployment("llama-3.1-8b", "h100-sxm", engine="trtllm"), Speculation(),
                               Workload(128, 1024, concurrency=np.array([126.0, 1024.0]), mode="disagg"), [(1, 1)])[0]
    assert float(np.asarray(many["tpot_s"])[0]) == pytest.approx(float(np.asarray(one["tpot_s"]).ravel()[0]),
                                                                rel=1e-3)


def test_each_draft_length_is_priced_as_if_alone():
    """Pricing D = 1 beside D = 8 and 32 (recommend's and pareto's D search) sized vLLM's prefill chunk for the
    largest D (chunk = budget - B(1 + D_max)) and took the KV running cap at D = 32 (304 requests, 346 at D = 1):
    at concurrency 347 the D = 1 point read TTFT 1.88 s where it alone reads 0.27 s."""
    acc = Acceptance.from_rate(0.8)
    dep = Deployment("llama-3.1-8b", "h100-sxm", engine="vllm")
    one = aggregated(dep, Speculation("eagle3", 1, acc), Workload(1024, 256, concurrency=347.0))
    many = aggregated(dep, Speculation("eagle3", np.array([1, 8, 32]), acc),
                      Workload(1024, 256, concurrency=np.full(3, 347.0)))
    for k in ("ttft_s", "tpot_s", "decode_batch", "kv_cap_requests"):
        assert float(np.asarray(many[k])[0]) == pytest.approx(float(np.asarray(one[k]).ravel()[0]), rel=1e-9), k
    assert float(np.asarray(many["kv_cap_requests"])[2]) < float(np.asarray(many["kv_cap_requests"])[0])


def test_predict_step_rows_use_the_engine_steps_they_report():
    """At batch 1482 on vLLM (past its graphs) the baseline row printed the GPU step (23.9 ms, 7,757 tok/s/GPU)
    while the speedup used the engine's (70 ms): each row's tokens/s is now batch x AL over its printed step."""
    from specplan.planning.predict import predict_step

    r = predict_step("llama-3.1-8b", "h100-sxm", tp=8, batch=1482, context_len=1152, mechanism="eagle3",
                     draft_len=2, acceptance=Acceptance.from_rate(0.8), engine="vllm")
    b, s = r["baseline"], r["speculative"]
    assert b["tokens_per_s_per_user"] == pytest.approx(1e3 / b["step_ms"], rel=1e-9)
    assert r["tokens_per_s_per_user"] == pytest.approx(1e3 * r["acceptance_length"] / s["step_ms"], rel=1e-9)
    assert r["speedup"] == pytest.approx(b["step_ms"] * r["acceptance_length"] / s["step_ms"], rel=1e-9)
    assert any(n.startswith("iter ms is the engine's step") for n in r["notes"])

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


def test_one_client_with_a_long_prompt_decodes_at_the_decode_step():
    """ISL 32,000 / OSL 128, one client, ideal engine: its TPOT is the decode step at batch 1 and context
    ISL + OSL/2 = 32,064 (it was 68 % above: its own next prompt was priced into its decode steps)."""
    r = aggregated("llama-3.1-8b", "h100-sxm", Workload(32000, 128, concurrency=1.0), engine="ideal")
    dec = float(step_time("llama-3.1-8b", "h100-sxm", 1, 1.0, 1, 32000 + 64).total_s)
    assert float(r["tpot_s"]) == pytest.approx(dec, rel=1e-9)
    two = aggregated("llama-3.1-8b", "h100-sxm", Workload(32000, 128, concurrency=2.0), engine="ideal")
    assert float(two["tpot_s"]) > 1.2 * dec  # a second client's prompts do land in its decode steps


def test_the_open_loop_has_no_steady_state_above_its_capacity():
    """At 1.02 x the saturation rate it reported stable with a throughput above its own capacity (the fixed-point
    iteration from below had not converged); at 0.99 x a steady state exists and holds B = λ·N_d·τ."""
    acc = Acceptance.from_rate(0.7)
    kw = dict(engine="ideal", mechanism="eagle3", draft_len=3, acceptance=acc)
    sat = float(aggregated("llama-3.1-8b", "h100-sxm", Workload(2048, 128, request_rate=1.0),
                           **kw)["saturation_requests_per_s"])
    lam = np.array([0.99, 1.02, 1.1]) * sat
    r = aggregated("llama-3.1-8b", "h100-sxm", Workload(2048, 128, request_rate=lam), **kw)
    assert list(np.asarray(r["stable"])) == [True, False, False]
    n_d = 127 / float(np.asarray(r["acceptance_length"]).ravel()[0])
    b, tau = float(r["decode_batch"][0]), float(r["iteration_s"][0])
    assert b == pytest.approx(lam[0] * n_d * tau, rel=1e-6)


def test_a_disaggregated_point_does_not_depend_on_the_other_loads_asked():
    """TensorRT-LLM 1P1D at concurrency 126: the decode table's interval around 126 depended on the largest load
    of the sweep, and the graph's end at 128 (an eager step beyond) was interpolated across it (TPOT 11.5 ms
    alone, 15.1 ms beside 1024)."""
    one = disaggregated_pools("llama-3.1-8b", "h100-sxm", Workload(128, 1024, concurrency=126.0, mode="disagg"),
                              [(1, 1)], engine="trtllm")[0]
    many = disaggregated_pools("llama-3.1-8b", "h100-sxm",
                               Workload(128, 1024, concurrency=np.array([126.0, 1024.0]), mode="disagg"),
                               [(1, 1)], engine="trtllm")[0]
    assert float(np.asarray(many["tpot_s"])[0]) == pytest.approx(float(np.asarray(one["tpot_s"]).ravel()[0]),
                                                                rel=1e-3)

"""Hand-worked numbers of the adaptive layer (issue 44, survivors of the seed-44 mutation sample in adaptive/bounds.py,
costs.py, metrics.py, policies.py, simulator.py, trace.py and workload.py). Step costs are the synthetic linear ones
of test_simulator_closed_forms (step = BASE + PER_CTX · context + PER_D · D), so every time is a hand sum."""

from __future__ import annotations

import numpy as np
import pytest

from specplan.adaptive.bounds import clairvoyant_dp, clairvoyant_row, reach_batch
from specplan.adaptive.costs import GraphSet, StepCosts, sglang_graph_batch_sizes
from specplan.adaptive.metrics import summarize, window_medians
from specplan.adaptive.policies import ModelBased, StepView, make_policy
from specplan.adaptive.simulator import Engine, simulate, thresholds
from specplan.adaptive.trace import runs
from specplan.adaptive.workload import Segment, build_workload, read_workload_csv, synthetic
from specplan.core.errors import SpecplanError
from specplan.model.deployment import Deployment

BASE_S, PER_CTX_S, PER_D_S = 1e-3, 1e-5, 2e-4
NO_GRAPHS = GraphSet((), frozenset())
ENGINE = Engine("ideal", prefill_budget=100_000, max_running=512, graph_max_bs=0)


def _costs(b_max=64, d_max=4, seq_bytes=0.0, fixed_bytes=0.0, capacity_bytes=1e15) -> StepCosts:
    ctx = np.array([0.0, 1e6])
    d = np.arange(d_max + 1)
    it = BASE_S + PER_CTX_S * ctx[None, :, None] + PER_D_S * d[None, None, :] + np.zeros((b_max, 1, 1))
    return StepCosts(iter_s=it, draft1_s=np.full((b_max, 2), 5e-4), ctx_grid=ctx, prefill_tokens=np.array([0.0, 1e6]),
                     prefill_s_grid=np.zeros(2), per_seq_bytes=np.full(2, seq_bytes), fixed_bytes=fixed_bytes,
                     capacity_bytes=capacity_bytes, devices=1.0, kernels=100, rho=0.5, model_id="",
                     eager_per_kernel_s=0.0)


def test_reach_batch_is_the_kv_room_left_by_the_fixed_bytes():
    """1 GB a request, 10 GB of weights on 50 GB: 40 requests fit (below the table's 64 and the 100 requests)."""
    wl = build_workload(np.zeros(100), np.full(100, 8), np.full(100, 8), alpha=np.full(100, 0.5))
    assert reach_batch(wl, _costs(seq_bytes=1e9, fixed_bytes=10e9, capacity_bytes=50e9)) == 40


def test_clairvoyant_bound_of_a_request_that_ends_early_by_hand():
    """α = 1 (every draft accepted), D up to 4. The OSL-3 request needs positions 1 -> 3: one step of D = 1 (2
    positions), κ(1) = BASE + PER_D = 1.2 ms; beside it an OSL-11 request that is still decoding while the first is
    done (10 positions: two steps of D = 4, 2 x 1.8 ms)."""
    wl = build_workload(np.zeros(2), [100, 100], [11, 3], alpha=[1.0, 1.0])
    f, _ = clairvoyant_dp(wl, _costs(), seed=0)
    assert f[1] == pytest.approx(BASE_S + PER_D_S, rel=1e-12)
    assert f[0] == pytest.approx(2 * (BASE_S + 4 * PER_D_S), rel=1e-12)


def test_clairvoyant_run_lasts_until_the_last_arrival_has_decoded():
    """Two requests (α = 0, OSL 11, free prefill) arriving 10 s apart: the run cannot end before the second one's own
    10 decode steps of at least BASE after its arrival, 10 s + 10 ms, so the bound is 22 tokens / 10.01 s."""
    wl = build_workload(np.array([0.0, 10.0]), [100, 100], [11, 11], alpha=[0.0, 0.0])
    r = clairvoyant_row(wl, _costs(), seed=0)
    assert r["tokens_per_s_per_gpu"] == pytest.approx(22 / (10.0 + 10 * BASE_S), rel=1e-12)


def test_sglang_decode_graph_batch_sizes_by_hand():
    """SGLang 0.5.23 (cuda_graph_hook.py): 1-8, 10-32 step 2, 40-64 step 4, 72-256 step 8: 51 sizes up to 256."""
    want = (list(range(1, 9)) + [10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32] + [40, 44, 48, 52, 56, 60, 64]
            + list(range(72, 257, 8)))
    assert sglang_graph_batch_sizes(256) == want and len(want) == 51


def test_graph_matrix_is_has_at_every_batch():
    """Buckets 1, 2, 4, 8 with graphs for D = 0 at buckets 1 and 2 and D = 2 at bucket 4: batch 3 pads to 4 (D = 2
    only), batches above 8 run eagerly."""
    g = GraphSet((1, 2, 4, 8), frozenset({(0, 1), (0, 2), (2, 4)}))
    m = g.matrix(9, 2)
    want = np.zeros((9, 3), dtype=bool)
    want[0:2, 0] = True  # batches 1, 2
    want[2:4, 2] = True  # batches 3, 4 -> bucket 4
    np.testing.assert_array_equal(m, want)
    assert all(m[b - 1, d] == g.has(d, b) for b in range(1, 10) for d in range(3))


def test_window_medians_by_hand():
    """Windows [0, 1) and [1, 2]: medians of (3, 1, 2) and (10, 20): 2 and 15; an empty window is NaN."""
    t = np.array([0.1, 0.2, 0.3, 1.1, 1.2])
    x = np.array([3.0, 1.0, 2.0, 10.0, 20.0])
    got = window_medians(t, x, np.array([0.0, 1.0, 2.0, 3.0]))
    np.testing.assert_array_equal(got[:2], [2.0, 15.0])
    assert np.isnan(got[2])


def test_relaxed_token_share_only_for_lossy_policies():
    """A lossless policy's row has no relaxed-token share; AdaSD relaxing α = 0.5 to 0.75 accepts tokens the strict
    test would reject: a share strictly between 0 and 1."""
    wl = build_workload(np.zeros(8), np.full(8, 64), np.full(8, 200), alpha=np.full(8, 0.5))
    rows = {}
    for text in ("fixed:3", "adasd:max=3/relax=0.5"):
        res = simulate(wl, _costs(), make_policy(text, 4), NO_GRAPHS, engine=ENGINE, seed=1)
        rows[text] = summarize(res, wl.osl, 1.0)
    assert "relaxed_token_fraction" not in rows["fixed:3"]
    assert 0.0 < rows["adasd:max=3/relax=0.5"]["relaxed_token_fraction"] < 1.0
    # the same with per-position acceptance (0.5 at every draft position), drawn token by token
    pos = build_workload(np.zeros(8), np.full(8, 64), np.full(8, 200), dist="pos:0.5/0.5/0.5/0.5")
    res = simulate(pos, _costs(), make_policy("adasd:max=3/relax=0.5", 4), NO_GRAPHS, engine=ENGINE, seed=1)
    assert 0.0 < summarize(res, pos.osl, 1.0)["relaxed_token_fraction"] < 1.0


def test_model_policy_with_per_position_acceptance_at_batch_four():
    """Per-position acceptance (0.9, 0.8): AL = 1, 1.9, 2.62 for D = 0, 1, 2; steps of 1.0, 1.3, 1.6 s give
    1, 1.46, 1.64 tokens/s a sequence, so D = 2 at any batch (here 4)."""
    view = StepView(batch=4, step_s=np.array([1.0, 1.3, 1.6]), alpha=None, per_position=(0.9, 0.8),
                    allowed=np.ones(3, dtype=bool), slo_tpot_s=None, rng=np.random.default_rng(0))
    assert ModelBased("model").choose(view) == 2


def test_drifting_acceptance_reaches_its_end_value_at_the_last_token():
    """α drifts from 0.6 by -0.6 over the output: at the last position (OSL - 1 = 120) it is 0, halfway 0.3."""
    wl = build_workload(np.zeros(1), [8], [121], alpha=[0.6], drift="-0.6")
    got = thresholds(wl, np.array([0, 0]), np.array([120, 60]), np.array([0, 0]))
    np.testing.assert_allclose(got, [0.0, 0.3], atol=1e-12)


def test_closed_loop_client_sends_its_next_request_when_one_finishes():
    """One client (concurrency 1), three requests: each arrives when the one before finishes."""
    a, i, o = synthetic(3, 16, 8, concurrency=1)
    wl = build_workload(a, i, o, alpha=np.full(3, 0.5), concurrency=1)
    res = simulate(wl, _costs(), make_policy("fixed:2", 4), NO_GRAPHS, engine=ENGINE, seed=0)
    np.testing.assert_allclose(res["arrival_s"][1:], res["finish_s"][:-1], rtol=1e-12)
    assert res["finish_s"][0] > 0


def test_synthetic_takes_its_sizes_by_name():
    a, i, o = synthetic(n=4, isl=8, osl=3, rate_per_s=2.0)
    assert (a.size, int(i[0]), int(o[0])) == (4, 8, 3) and np.all(np.diff(a) >= 0)


@pytest.mark.parametrize("rows, column", [("0.0,16,0\n1.0,16,7\n", "osl"), ("0.0,0,8\n", "isl")])
def test_a_bad_trace_row_quotes_its_own_value(tmp_path, rows, column):
    """An empty output or an empty prompt is refused in one line naming the row, the column and its own value."""
    p = tmp_path / "w.csv"
    p.write_text("arrival_s,isl,osl\n" + rows)
    with pytest.raises(SpecplanError, match=rf"row 1, column '{column}': must be >= 1 token, got 0$"):
        read_workload_csv(str(p))


def test_trace_runs_relax_the_acceptance():
    """AdaSD's relaxation on a trace: α = 0.5 relaxed by 0.5 accepts at 0.75, so the mean leading run capped at 4 is
    0.75 + 0.75² + 0.75³ + 0.75⁴ = 2.051 (strict: 0.5 + ... + 0.0625 = 0.9375), over 20,000 draws."""
    seg = [Segment(alpha=0.5, batch=100, iterations=200)]
    assert float(runs(seg, 4, seed=0, relax=0.5)[0].mean()) == pytest.approx(2.0508, abs=0.03)
    assert float(runs(seg, 4, seed=0)[0].mean()) == pytest.approx(0.9375, abs=0.03)


def test_trace_step_costs_add_the_engines_host_time_and_graph_launches():
    """A trace step at D = 0 is the plain decode step plus vLLM's host_step_s and one graph launch per kernel of the
    target (step_time's kernel count)."""
    from specplan.adaptive.trace import trace_costs
    from specplan.model.step import step_time
    from specplan.profiles.registry import load_engine
    from specplan.speculation import evaluate

    seg = [Segment(alpha=0.7, batch=8, iterations=10)]
    table = trace_costs("llama-3.1-8b", "h100-sxm", seg, 2, 1024, "eagle3", engine="vllm")[0]
    eng = load_engine("vllm")
    base = float(np.asarray(evaluate(Deployment("llama-3.1-8b", "h100-sxm"), batch=8, context_len=1024)["baseline_step_s"]))
    kern = step_time("llama-3.1-8b", "h100-sxm", 1, 1, 1, 1024).kernels
    want = base + eng.host_step_s + kern * eng.graph_launch_s
    assert eng.host_step_s > 0 and float(table[8][0]) == pytest.approx(want, rel=1e-9)


def test_trace_tpot_percentiles_are_milliseconds_within_a_step():
    """Every TPOT of a trace is a step's seconds over the 1 ... D + 1 tokens it emits: the p50 <= p90 <= p99 in ms
    are at most the longest step of the table in ms."""
    from specplan.adaptive.trace import TraceCosts, simulate_trace

    seg = [Segment(alpha=0.7, batch=8, iterations=400)]
    table = {8: np.array([0.010, 0.012, 0.014])}
    r = simulate_trace(seg, TraceCosts(table, {8: 0.001}, np.zeros(3)), make_policy("fixed:2", 2), NO_GRAPHS, 2,
                       seed=0)
    assert 0 < r["tpot_p50_ms"] <= r["tpot_p90_ms"] <= r["tpot_p99_ms"] <= 14.0 + 1e-9


def test_the_prefill_share_a_policy_sees_is_an_exponential_mean():
    """The TPOT test's step (StepView.slo_step_s) is the decode step plus an exponential mean (weight 0.95 on the
    past) of the prefill seconds per step. A second prompt arrives while the first request decodes and is prefilled
    in one step (64 tokens x 10 us); no prompt comes after it, so from the next step on the mean the policy sees is
    0.05 x 0.64 ms and decays by exactly 0.95 a step."""
    wl = build_workload(np.array([0.0, 0.003]), np.full(2, 64), np.full(2, 30), alpha=np.full(2, 0.5))
    costs = _costs()
    costs = StepCosts(**{**costs.__dict__, "prefill_s_grid": np.array([0.0, 1e6 * 1e-5])})
    base = make_policy("fixed:2", 4)
    seen = []

    class Recording:
        def __getattr__(self, name):
            return getattr(base, name)

        def choose(self, view):
            seen.append(float(view.slo_step_s[0] - view.step_s[0]))
            return base.choose(view)

    simulate(wl, costs, Recording(), NO_GRAPHS, engine=ENGINE, seed=0)
    seen = np.array(seen)
    after = seen[int(np.argmax(seen > 0)):]
    assert after.size > 5 and after[0] == pytest.approx(0.05 * 64 * 1e-5, rel=1e-9)
    np.testing.assert_allclose(after[1:] / after[:-1], 0.95, rtol=1e-9)


def test_model_policy_under_a_tpot_target_every_d_meets():
    """With a TPOT target of 1 s every D meets it (1.0, 1.3 / 1.9, 1.6 / 2.62 s a token), so the policy picks the
    most tokens/s: D = 2, as without a target."""
    view = StepView(batch=1, step_s=np.array([1.0, 1.3, 1.6]), alpha=None, per_position=(0.9, 0.8),
                    allowed=np.ones(3, dtype=bool), slo_tpot_s=1.0, rng=np.random.default_rng(0))
    assert ModelBased("model").choose(view) == 2


def test_relaxed_token_runs_are_geometric_at_the_relaxed_rate():
    """AdaSD relaxing α = 0.5 by 0.5 accepts each draft with 0.75: the accepted run from a position is geometric,
    mean 0.75 / 0.25 = 3 (one long request, so its end truncates little)."""
    from specplan.adaptive.simulator import token_runs, token_uniforms

    wl = build_workload(np.zeros(1), [8], [200_000], alpha=[0.5])
    off, u = token_uniforms(wl, 0)
    assert float(token_runs(wl, off, u, 0.5)[:-100].mean()) == pytest.approx(3.0, abs=0.05)
    assert float(token_runs(wl, off, u)[:-100].mean()) == pytest.approx(1.0, abs=0.03)


def test_acceptance_drift_range_is_inclusive():
    from specplan.adaptive.workload import parse_drift

    assert parse_drift("1") == 1.0 and parse_drift("-1") == -1.0
    with pytest.raises(SpecplanError, match=r"must be in \[-1, 1\]"):
        parse_drift("1.01")


def test_a_run_that_takes_no_time_has_no_goodput_rate():
    """OSL-1 requests with free prefill finish at their arrival: the run lasts 0 s and its rates are None/NaN, not a
    division by zero."""
    wl = build_workload(np.zeros(2), [8, 8], [1, 1], alpha=[0.5, 0.5])
    res = simulate(wl, _costs(), make_policy("fixed:2", 4), NO_GRAPHS, engine=ENGINE, seed=0)
    row = summarize(res, wl.osl, 1.0, max_tpot_s=0.1)
    assert row["duration_s"] == 0.0 and row["goodput_requests_per_s"] is None

"""Per-step D policies on the request-level serving simulator (issue 39: the adaptive policies run on it): a fixed D
given as a policy is `predict --simulate` at that D, a policy that switches D is hand-counted on drawn tokens, steps
without a captured graph are priced eager, and `adaptive --simulator serving` keeps adaptive's JSON."""

import json
from dataclasses import replace

import numpy as np
import pytest

from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_engine, load_hardware, load_model
from specplan.serving.arrivals import closed_loop, lengths
from specplan.serving.sim_serving import (SimSetup, request_alpha, request_alpha_al, sim_config, simulate_serving,
                                          summarize)
from specplan.serving.simulator import SimConfig, SimRequests, TokenDraws, simulate
from specplan.serving.step_table import StepTable, build_step_table
from specplan.speculation.round import round_s

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "fuzz"))
from harness import run_cli  # noqa: E402
from specplan.serving.aggregated import StepOptions
from specplan.speculation.spec import Speculation


class ByBatch:
    """D per decode batch (a dict), recording what it was shown and what it observed."""

    def __init__(self, d_of_batch: dict):
        self.d_of_batch, self.seen, self.observed = d_of_batch, [], []

    def index(self, view) -> int:
        self.seen.append((view.batch, tuple(int(x) for x in view.position)))
        return self.d_of_batch[view.batch]

    def observe(self, accepted, index, batch):
        self.observed.append((index, batch, tuple(int(x) for x in accepted)))


class Constant:
    """One D for every step; per_step False: the simulator may jump over identical steps (predict --simulate)."""

    per_step = False

    def __init__(self, j: int):
        self.j = j

    def index(self, view) -> int:
        return self.j

    def observe(self, accepted, index, batch):
        pass


def _flat_table(d: int, kernels: float = 0.0) -> StepTable:
    """A step table whose decode step costs (D + 1) ms at any batch and context and whose prefill step costs 2 ms
    (`kernels` target launches, a fifth of them for the draft)."""
    b, c, t = np.array([1.0, 2.0]), np.array([0.0, 100.0]), np.array([1.0, 100.0])
    return StepTable(b, c, t, np.full((2, 2), (d + 1) * 1e-3), np.full((3, 2), 2e-3), np.zeros((2, 2)),
                     1.0 + d, 1.0, float(d), kernels, kernels / 5)


def test_a_policy_that_switches_d_is_counted_by_hand():
    """Requests A (OSL 4) and B (OSL 6), 10-token prompts, both at t = 0, ideal engine (no host time), SGLang-style
    prefill apart. The policy runs D = 2 at batch 2 and D = 1 at batch 1; a draft at output position p of request i is
    accepted iff u[off_i + p] < α = 0.5 (off = 0, 4). By hand: prefill 2 ms (first tokens at 2 ms); step 1 (batch 2,
    D = 2, 3 ms): A accepts u1, u2 = 0.1 → 2 drafts, emits its 3 tokens left (finish 5 ms); B rejects u5 = 0.9 → 1
    token. Then B alone at D = 1 (2 ms each): p = 2, u6 = 0.2 → 2 tokens (7 ms); p = 4, u8 = 0.7 → 1 (9 ms); p = 5,
    u9 = 0.1 → accepted but 1 token left (11 ms)."""
    u = np.full(11, 0.9)
    u[[1, 2, 6, 9]] = [0.1, 0.1, 0.2, 0.1]
    u[8] = 0.7
    draws = TokenDraws(np.array([0, 4, 10]), u.astype(np.float32), np.array([0.5, 0.5]), (0, 1, 2))
    pol = ByBatch({2: 2, 1: 1, 0: 0})
    req = SimRequests(np.array([10, 10]), np.array([4, 6]), np.zeros(2), np.ones((2, 3)), np.array([0.0, 0.0]))
    cfg = SimConfig(8, 100, 1e6, "pack", policy=pol, draws=draws)
    run = simulate(tuple(_flat_table(d) for d in range(3)), load_engine("ideal"), req, cfg)
    assert run.first_token_s == pytest.approx([2e-3, 2e-3])
    assert run.finish_s == pytest.approx([5e-3, 11e-3])
    assert pol.observed == [(2, 2, (2, 0)), (1, 1, (1,)), (1, 1, (0,)), (1, 1, (1,))]
    assert [s for s in pol.seen if s[0] > 0] == [(2, (1, 1)), (1, (2,)), (1, (4,)), (1, (5,))]
    assert list(run.series.draft_len) == [0.0, 2.0, 1.0, 1.0, 1.0]
    assert run.eager_steps == 0


@pytest.mark.parametrize("drift, per_position, finish_ms", [(0.0, (), 11.0), (0.4, (), 8.0), (0.0, (0.9, 0.1), 8.0)])
def test_drift_and_per_position_draws_are_counted_by_hand(drift, per_position, finish_ms):
    """One request, OSL 5 (4 decode tokens), fixed D = 2 (3 ms a step after a 2 ms prefill), u1..u5 = 0.55, 0.65,
    0.3, 0.85, 0.95. α = 0.5: positions 1, 2 reject at once, 3 accepts u3 and rejects u4 (2 tokens), so 1 + 1 + 2:
    3 steps, 11 ms. Drift 0.4 (span 4): thresholds 0.5 + 0.1 (p + k): at p = 1, 0.6 > u1 and 0.7 > u2 (3 tokens),
    then 1 token left: 2 steps, 8 ms. Per position (0.9, 0.1): p = 1 accepts u1 < 0.9, rejects u2 (2 tokens); p = 3
    accepts u3 < 0.9, rejects u4 (2 tokens): 2 steps, 8 ms."""
    u = np.array([0.0, 0.55, 0.65, 0.3, 0.85, 0.95], dtype=np.float32)
    draws = TokenDraws(np.array([0, 5]), u, np.array([0.5]), (2,), drift, per_position, np.array([5]))
    req = SimRequests(np.array([10]), np.array([5]), np.zeros(1), np.full((1, 1), 3.0), np.array([0.0]))
    run = simulate(_flat_table(2), load_engine("ideal"), req, SimConfig(8, 100, 1e6, "pack", draws=draws))
    assert run.finish_s[0] == pytest.approx(finish_ms * 1e-3)


def test_steps_without_a_captured_graph_run_eager():
    """One request, OSL 7, α = 1 (every draft accepted), fixed D = 2: (7 - 1) / 3 = 2 decode steps. With no graph
    captured at (batch 1, D = 2) both are priced as vLLM's eager round (round_s eager=True: 600 target and 120
    draft launches at the profile's eager launch cost) and counted; an extra eager cost per table adds itself."""
    eng = load_engine("vllm")
    tab = _flat_table(2, 600.0)
    draws = TokenDraws(np.array([0, 7]), np.zeros(8, dtype=np.float32), np.array([1.0]), (2,))
    req = SimRequests(np.array([10]), np.array([7]), np.zeros(1), np.full((1, 1), 3.0), np.array([0.0]))
    base = SimConfig(8, 100, 1e6, "pack", draws=draws)
    graphs = simulate(tab, eng, req, replace(base, graphs=np.ones((9, 1), dtype=bool)))
    eager = simulate(tab, eng, req, replace(base, graphs=np.zeros((9, 1), dtype=bool)))
    assert eager.eager_steps == 2 and graphs.eager_steps == 0
    rnd = (tab.draft_len, tab.tokens_per_seq, tab.target_kernels, tab.draft_kernels)
    extra = 2 * (float(round_s(eng, 3e-3, 1.0, *rnd, eager=True)) - float(round_s(eng, 3e-3, 1.0, *rnd)))
    assert eager.finish_s[0] - graphs.finish_s[0] == pytest.approx(extra, rel=1e-9)
    assert extra > 1e-3  # vLLM states 7.46 us per eager launch: hundreds of launches are milliseconds
    more = simulate(tab, eng, req, replace(base, graphs=np.zeros((9, 1), dtype=bool), eager_extra_s=(1e-3,)))
    assert more.finish_s[0] - eager.finish_s[0] == pytest.approx(2e-3, rel=1e-9)


def test_a_fixed_d_policy_reproduces_predict_simulate_at_that_d():
    """Llama-3.1-8B, H100, SGLang, EAGLE-3, 16 clients 1024/256: the tables of D = 0..4 with a policy that always picks
    D = 3 (and each request's accepted tokens at every D, from the same drawn α) give exactly simulate_serving's run at
    D = 3 (the `predict --simulate` path), seed 5."""
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    eng = load_engine("sglang").for_mechanism("eagle3")
    req = closed_loop(lengths(1024, None, 64, 0), lengths(256, None, 64, 0), 16, start="together")
    setup = SimSetup(1, eng, prec, mechanism="eagle3", draft_len=3, seed=5)
    want = simulate_serving(m, hw, req, setup)
    spec = StepOptions(Speculation("eagle3", 3.0))
    cfg = sim_config(m, hw, req, setup, eng, spec)
    from specplan.serving.aggregated import draft_prefill_model

    dpm = draft_prefill_model(m, "eagle3", None)
    draft = None if dpm is None else (dpm, resolve_precision(dpm, hw, prec.compute, prec.kv))
    tabs = [build_step_table(m, hw, 1, eng, prec, spec.with_draft_len(float(d)), b_max=16, ctx_max=1280.0,
                             tok_max=float(cfg.budget_tokens), draft=draft if d else None) for d in range(5)]
    drawn = request_alpha(tabs[3].acceptance_length, 3.0, req.n, 5)
    acc = np.column_stack([request_alpha_al(t.acceptance_length, d, req.n, 5, None, drawn) for d, t in enumerate(tabs)])
    run = simulate(tuple(tabs), eng, SimRequests(req.isl, req.osl, req.cached_tokens, acc), replace(cfg, policy=Constant(3)))
    got = summarize(run, setup, cfg.devices, 1, tabs[3].acceptance_length)
    assert got.tpot_p50_s == want.tpot_p50_s and got.ttft_p99_s == want.ttft_p99_s
    assert got.tokens_per_s_per_gpu == want.tokens_per_s_per_gpu


def test_adaptive_cli_runs_policies_on_the_serving_simulator():
    """`adaptive --simulator serving` keeps adaptive's JSON rows; at one client fixed:0 is one decode step per token,
    so its TPOT is within 10 % of the adaptive simulator's (both price the step from the analytical model); and the
    two simulators draw the same tokens: at one client the iterations depend on the draws alone, so fixed:3 takes the
    same number of steps (3 prompts + their iterations) at the same mean acceptance length on both."""
    args = ["adaptive", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--concurrency", "1", "--requests", "3", "--isl",
            "512", "--osl", "64", "--acceptance-rate", "0.7", "--policies", "fixed:0,fixed:3,sglang", "--json"]
    serv = run_cli(args + ["--simulator", "serving"])
    old = run_cli(args)
    assert serv.rc == 0, serv.err
    a, b = json.loads(serv.out), json.loads(old.out)
    assert [r["policy"] for r in a["policies"]] == ["fixed:0", "fixed:3", "sglang"]
    assert set(a["policies"][0]) == set(b["policies"][0])
    assert a["policies"][0]["tpot_p50_ms"] == pytest.approx(b["policies"][0]["tpot_p50_ms"], rel=0.10)
    assert a["policies"][1]["mean_draft_len"] == 3.0
    assert a["policies"][1]["steps"] == b["policies"][1]["steps"] < 3 * 63
    assert a["policies"][1]["mean_acceptance_length"] == b["policies"][1]["mean_acceptance_length"]


@pytest.mark.parametrize("extra, says", [(["--policies", "adasd"], "lossy"),
                                         (["--simulator", "other"], "--simulator"),
                                         (["--policies", "fixed:3,oracle", "--engine", "vllm"], "apart")])
def test_adaptive_serving_refuses_what_it_does_not_model_in_one_line(extra, says):
    args = ["adaptive", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--concurrency", "1", "--requests", "2", "--isl",
            "128", "--osl", "16", "--acceptance-rate", "0.7", "--simulator", "serving"] + extra
    r = run_cli(args)
    assert r.rc != 0 and says in r.err and not r.exc
    assert len(r.err.strip().splitlines()) == 1


@pytest.mark.parametrize("seed, load", [(0, dict(concurrency=6)), (3, dict(rate_per_s=40.0))])
def test_the_oracle_bound_on_the_serving_path_beats_every_fixed_d_on_the_same_draws(seed, load):
    """On the serving simulator (SGLang's scheduler), the oracle bound is no worse than any fixed D = 0..5 run on the
    same draws (α_i from Beta(4, 2), so no one D is right for every request): TPOT and TTFT percentiles at most the
    policy's, tokens/s/GPU and tokens/s/user at least; a closed loop and a Poisson stream."""
    from specplan.adaptive import build_workload, run_requests
    from specplan.adaptive.run import PolicyOptions
    from specplan.adaptive.workload import synthetic

    arr, i, o = synthetic(24, 384, 48, seed=seed, **load)
    wl = build_workload(arr, i, o, dist="beta:4,2", seed=seed, concurrency=load.get("concurrency"))
    names = [f"fixed:{d}" for d in range(6)] + ["oracle"]
    res = run_requests("llama-3.1-8b", "h100-sxm", wl, names,
                       opts=PolicyOptions(d_max=5, seed=seed, simulator="serving"))
    rows = {r["policy"]: r for r in res["policies"]}
    bound = rows.pop("oracle")
    for r in rows.values():
        for k in ("tpot_p50_ms", "tpot_p90_ms", "tpot_p99_ms", "ttft_p50_ms", "ttft_p99_ms"):
            assert bound[k] <= r[k] + 1e-9, (r["policy"], k)
        for k in ("tokens_per_s_per_gpu", "tokens_per_s_per_user"):
            assert bound[k] >= r[k] - 1e-9, (r["policy"], k)

"""The request-level simulator against closed forms computed in the test (issue 26).

Step costs are synthetic and linear (`_costs`): a step of batch B at mean context c and draft length D costs
BASE_S + PER_CTX_S * c + PER_D_S * D, so every time below is a hand sum. Nothing here reads the roofline.
"""

import numpy as np
import pytest

from specplan.adaptive.costs import GraphSet, StepCosts, graphs_for
from specplan.adaptive.policies import make_policy
from specplan.adaptive.simulator import Engine, simulate, token_uniforms
from specplan.adaptive.sglang_policy import AdaptiveSpeculativeParams
from specplan.adaptive.workload import build_workload

BASE_S, PER_CTX_S, PER_D_S, DRAFT1_S = 1e-3, 1e-5, 2e-4, 5e-4
KERNELS, EAGER_PER_KERNEL_S, RHO = 100, 1e-5, 0.5
NO_GRAPHS = GraphSet((), frozenset())
ENGINE = Engine("ideal", prefill_budget=100_000, max_running=512, graph_max_bs=0)


def _costs(b_max=64, d_max=4, prefill_per_tok_s=0.0, eager=0.0, model_id="") -> StepCosts:
    """Linear synthetic costs: step = BASE + PER_CTX · context + PER_D · D (exact under linear interpolation)."""
    ctx = np.array([0.0, 1e6])
    d = np.arange(d_max + 1)
    it = BASE_S + PER_CTX_S * ctx[None, :, None] + PER_D_S * d[None, None, :] + np.zeros((b_max, 1, 1))
    return StepCosts(iter_s=it, draft1_s=np.full((b_max, 2), DRAFT1_S), ctx_grid=ctx,
                     prefill_tokens=np.array([0.0, 1e6]), prefill_s_grid=np.array([0.0, 1e6 * prefill_per_tok_s]),
                     per_seq_bytes=np.zeros(2), fixed_bytes=0.0, capacity_bytes=1e15, devices=1.0,
                     kernels=KERNELS, rho=RHO, model_id=model_id, eager_per_kernel_s=eager)


def _step(ctx, d):
    return BASE_S + PER_CTX_S * ctx + PER_D_S * d


def _decode_rows(res):
    s = res["series"]
    keep = s["batch"] > 0
    return {k: v[keep] for k, v in s.items()}


def test_fixed_d_mean_al_is_the_truncated_geometric_sum():
    """64 requests, α = 0.7, fixed D = 3: tokens per request-step → (1 − α^(D+1)) / (1 − α) = 2.533 (an
    off-by-one in the accepted run moves it by ~1; the cap at each request's end by < 0.2 %)."""
    alpha, d, n, osl = 0.7, 3, 64, 1500
    wl = build_workload(np.zeros(n), np.full(n, 8), np.full(n, osl), alpha=np.full(n, alpha))
    res = simulate(wl, _costs(), make_policy(f"fixed:{d}", 4), NO_GRAPHS, engine=ENGINE, seed=2)
    rows = _decode_rows(res)
    al = (rows["al"] * rows["batch"]).sum() / rows["batch"].sum()
    closed = (1 - alpha ** (d + 1)) / (1 - alpha)
    assert closed == pytest.approx(2.5330, abs=1e-4)
    # one request-step's tokens have sd ≈ 1.1; 64 × ~590 request-steps: standard error ≈ 0.006
    assert al == pytest.approx(closed, abs=0.03)
    # every output token is emitted: Σ tokens of decode steps = Σ (OSL − 1) (the first comes from prefill)
    assert (rows["al"] * rows["batch"]).sum() == pytest.approx(n * (osl - 1))


def test_accepted_run_hand_walk_one_request():
    """One request, α = 0.6, fixed D = 2: walk its tokens by hand with the same uniforms u_j (a draft at output
    position p + k is accepted iff u[p + k] < α; a step accepts the leading run, at most D, and emits it + 1,
    capped by what is left). Steps, tokens per step and the finish time must match exactly."""
    alpha, d, isl, osl = 0.6, 2, 50, 400
    wl = build_workload(np.zeros(1), [isl], [osl], alpha=[alpha])
    res = simulate(wl, _costs(), make_policy(f"fixed:{d}", 4), NO_GRAPHS, engine=ENGINE, seed=7)
    off, u = token_uniforms(wl, 7)
    pos, emitted, times = 1, [], []
    while pos < osl:
        acc = 0
        while acc < d and u[pos + acc] < alpha:
            acc += 1
        e = min(acc + 1, osl - pos)
        times.append(_step(isl + pos, d))  # one sequence: its context is ISL + tokens generated so far
        emitted.append(e)
        pos += e
    rows = _decode_rows(res)
    assert rows["al"].tolist() == emitted
    np.testing.assert_allclose(rows["step_s"], times, rtol=1e-12)
    assert res["finish_s"][0] == pytest.approx(sum(times), rel=1e-12)  # prefill free in these costs


def test_mean_context_of_the_batch_by_hand():
    """Two requests (ISL 100 and 300, OSL 10 and 50), α = 0 so each step emits one token per request, D = 0:
    decode step k (k = 1, 2, …) sees mean context (100 + k + 300 + k) / 2 = 200 + k while both run (k ≤ 9),
    then 300 + k for the second alone (k = 10 … 49): 49 decode steps in all."""
    wl = build_workload(np.zeros(2), [100, 300], [10, 50], alpha=[0.0, 0.0])
    res = simulate(wl, _costs(prefill_per_tok_s=1e-6), make_policy("fixed:0", 4), NO_GRAPHS, engine=ENGINE)
    rows = _decode_rows(res)
    k = np.arange(1, 50)
    ctx = np.where(k <= 9, 200.0 + k, 300.0 + k)
    np.testing.assert_allclose(rows["step_s"], _step(ctx, 0), rtol=1e-12)
    assert rows["batch"].tolist() == [2] * 9 + [1] * 40
    # the one prefill step (400 tokens at 1 µs each) comes first; TTFT = 0.4 ms for both
    np.testing.assert_allclose(res["first_token_s"], [4e-4, 4e-4], rtol=1e-12)
    assert res["finish_s"][0] == pytest.approx(4e-4 + _step(200.0 + k[:9], 0).sum(), rel=1e-12)
    assert res["finish_s"][1] == pytest.approx(4e-4 + _step(ctx, 0).sum(), rel=1e-12)


def test_eager_steps_cost_kernels_times_launch():
    """Graphs captured only for batch 1 at D = 2: the nine steps at batch 2 run eagerly and each pays
    kernels × (1 + ρ·D) × eager launch = 100 × 2 × 10 µs = 2 ms; the batch-1 steps replay the graph (no extra)."""
    wl = build_workload(np.zeros(2), [100, 300], [10, 50], alpha=[0.0, 0.0])
    costs = _costs(eager=EAGER_PER_KERNEL_S, model_id="llama-3.1-8b")
    g = graphs_for([2], 1)
    assert g.buckets == (1,) and g.captured == frozenset({(2, 1)})
    res = simulate(wl, costs, make_policy("fixed:2", 4), g, engine=ENGINE)
    rows = _decode_rows(res)
    k = np.arange(1, 50)
    ctx = np.where(k <= 9, 200.0 + k, 300.0 + k)
    extra = KERNELS * (1 + RHO * 2) * EAGER_PER_KERNEL_S
    assert extra == pytest.approx(2e-3)
    np.testing.assert_allclose(rows["step_s"], _step(ctx, 2) + np.where(k <= 9, extra, 0.0), rtol=1e-12)
    assert res["eager_steps"] == 9


def test_sglang_pays_draft_extend_at_zero_steps():
    """SGLang's default config routes a batch of 64 to candidate_steps [0]: D = 0 every step, and the draft's
    draft-extend still runs, so each step costs the plain decode step + one draft forward (DRAFT1_S)."""
    n = 64
    wl = build_workload(np.zeros(n), np.full(n, 100), np.full(n, 5), alpha=np.full(n, 0.9))
    res = simulate(wl, _costs(), make_policy("sglang", 4), NO_GRAPHS, engine=ENGINE)
    rows = _decode_rows(res)
    assert rows["draft_len"].tolist() == [0, 0, 0, 0]
    k = np.arange(1, 5)
    np.testing.assert_allclose(rows["step_s"], _step(100.0 + k, 0) + DRAFT1_S, rtol=1e-12)


def test_sglang_starting_ema_and_drop_to_zero_steps():
    """SGLang's default config at batch 8 (slot [0, 1, 3], ema_alpha 0.2, warm-up 10, interval 5, no hysteresis):
    it starts at candidate_steps[len // 2] of the union [0, 1, 3, 5, 7] = 3 with EMA = steps − 1 = 2.0. One verify
    at mean 1.0 accepted gives 0.8 · 2 + 0.2 · 1 = 1.8; then zeros: after the 15th verify EMA = 1.8 · 0.8^14 =
    0.0792 ≤ 0.5 (the drop threshold to 1 and to 0), so the 15th (the first after warm-up + interval) drops 3 → 0
    in one recompute. At 0 steps the EMA is frozen; the 20th verify probes the next step, 1."""
    p = AdaptiveSpeculativeParams()
    slot = p._route(8)
    assert p.get_steps_for_batch(8) == 3 and slot.ema_accept_len == 2.0
    p.on_verify_complete(np.array([1, 1, 0, 2, 1, 1, 1, 1]), 8)
    assert slot.ema_accept_len == pytest.approx(1.8)
    for i in range(2, 15):
        assert p.on_verify_complete(np.zeros(8), 8) is None
        assert p.get_steps_for_batch(8) == 3
    assert slot.ema_accept_len == pytest.approx(1.8 * 0.8 ** 13)
    assert p.on_verify_complete(np.zeros(8), 8) == 0  # the 15th
    ema = 1.8 * 0.8 ** 14
    assert slot.ema_accept_len == pytest.approx(ema)
    for _ in range(4):  # 16th..19th: steps 0, EMA unchanged
        assert p.on_verify_complete(np.zeros(8), 8) is None
    assert slot.ema_accept_len == pytest.approx(ema)
    assert p.on_verify_complete(np.zeros(8), 8) == 1  # the 20th probes


def test_sglang_holds_steps_when_ema_is_above_the_drop_threshold():
    """Same slot; verifies at mean 0.6 hold the EMA above 0.5 − 0 (… → 0.6 from 2.0): at the 15th verify EMA =
    0.6 + 1.4 · 0.8^15 = 0.649 > 0.5, so the steps stay 3 (the threshold to drop 3 → 1 is 1 − 0.5)."""
    p = AdaptiveSpeculativeParams()
    x = np.array([1, 1, 1, 0, 0, 1, 1, 1, 0, 0], dtype=float)
    assert x.mean() == 0.6
    for _ in range(15):
        p.on_verify_complete(x, 10)  # batch 10 routes to slot 8
    assert p._route(10).ema_accept_len == pytest.approx(0.6 + 1.4 * 0.8 ** 15)
    assert p.get_steps_for_batch(10) == 3


def test_sglang_slot_with_only_zero_steps_stays_at_zero():
    """SGLang's default slot for batch >= 64 lists candidate_steps [0]: at every recompute (the 15th, 20th, …
    verify) the zero-step probe finds no larger step (index min(0 + 1, len − 1) = 0) and stays at 0."""
    p = AdaptiveSpeculativeParams()
    for _ in range(30):
        assert p.on_verify_complete(np.zeros(64), 64) is None
    assert p.get_steps_for_batch(64) == 0


def test_draft_len_series_windows_by_hand():
    """draft_len_series: step-time-weighted means per time window, windows without a decode step left out.
    Steps at t = 1, 2, 3, 4 s in 3 windows of 4/3 s: window 0 holds step 1 (B 2, D 3, AL 2, 10 ms: TPOT 5 ms),
    window 1 only the prefill step (left out), window 2 steps 3 and 4 (20 ms at AL 1, 40 ms at AL 4):
    D = (0.02·1 + 0.04·3) / 0.06 = 2.333, AL = (0.02·1 + 0.04·4) / 0.06 = 3, per-token time
    (0.02·0.02 + 0.04·0.01) / 0.06 = 13.33 ms."""
    from types import SimpleNamespace

    from specplan.adaptive.metrics import draft_len_series
    from specplan.adaptive.records import StepSeries

    series = StepSeries(t_s=np.array([1.0, 2.0, 3.0, 4.0]), batch=np.array([2.0, 0.0, 1.0, 1.0]),
                        draft_len=np.array([3.0, 0.0, 1.0, 3.0]), al=np.array([2.0, np.nan, 1.0, 4.0]),
                        step_s=np.array([0.01, 0.005, 0.02, 0.04]), prefill_tokens=np.zeros(4))
    out = draft_len_series(SimpleNamespace(series=series), bins=3)
    np.testing.assert_allclose(out.t_s, [2 / 3, 10 / 3])
    np.testing.assert_allclose(out.draft_len, [3.0, 0.14 / 0.06])
    np.testing.assert_allclose(out.batch, [2.0, 1.0])
    np.testing.assert_allclose(out.al, [2.0, 3.0])
    np.testing.assert_allclose(out.tpot_ms, [5.0, 1e3 * 0.0008 / 0.06])


def test_admission_reserves_the_whole_output_kv():
    """KV reserved at admission = bytes of ISL + OSL tokens (here 1 byte per token of context: 100 + 50 = 150 per
    request). With 1000 bytes free, floor(1000 / 150) = 6 of 20 waiting requests run at once, whatever the cap."""
    costs = _costs()
    costs.per_seq_bytes = costs.ctx_grid.copy()  # 1 byte per token
    costs.capacity_bytes = 1000.0
    n = 20
    wl = build_workload(np.zeros(n), np.full(n, 100), np.full(n, 50), alpha=np.full(n, 0.0))
    res = simulate(wl, costs, make_policy("fixed:0", 4), NO_GRAPHS, engine=ENGINE)
    rows = _decode_rows(res)
    assert rows["batch"].max() == 6
    assert not res["over_capacity"]


def test_sglang_ema_ceiling_stops_at_the_smallest_candidate(tmp_path):
    """ceiling_coeff caps a downward move at ceil(EMA · coeff) steps (at least 1), but never below the smallest
    candidate: candidates [2, 4], start 4 (the union's middle), EMA → 0 after one verify at ema_alpha 1; the drop
    threshold to 2 is 2 − 0.5 − 0.25 = 1.25 ≥ 0, so the target is 2; the ceiling 1 is below every candidate, so 2."""
    import json

    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"1": {"candidate_steps": [2, 4], "ceiling_coeff": 1, "warmup_batches": 0,
                                     "update_interval": 1, "ema_alpha": 1.0}}))
    p = AdaptiveSpeculativeParams(None, str(cfg))
    assert p.get_steps_for_batch(1) == 4
    assert p.on_verify_complete(np.zeros(1), 1) == 2
    assert p.get_steps_for_batch(1) == 2


@pytest.mark.parametrize("closed", [None, 2])
def test_one_token_requests_finish_at_their_prefill(closed):
    """OSL 1: the first token is the whole output, so a request finishes when its prefill step ends. ISL 100 at
    1 µs per prompt token. Open loop (all at t = 0): one step of 400 tokens, every finish at 0.4 ms. Closed loop of
    2 clients: requests 0, 1 in one 200-token step (0.2 ms), their clients send 2, 3 at once: 0.4 ms."""
    wl = build_workload(np.zeros(4), np.full(4, 100), np.full(4, 1), alpha=np.zeros(4), concurrency=closed)
    res = simulate(wl, _costs(prefill_per_tok_s=1e-6), make_policy("fixed:0", 4), NO_GRAPHS, engine=ENGINE)
    expect = [4e-4] * 4 if closed is None else [2e-4, 2e-4, 4e-4, 4e-4]
    np.testing.assert_allclose(res["finish_s"], expect, rtol=1e-12)
    np.testing.assert_allclose(res["first_token_s"], expect, rtol=1e-12)
    # closed loop: requests 2 and 3 arrive when their clients' requests 0 and 1 finish (0.2 ms), not at 0
    arrive = [0.0] * 4 if closed is None else [0.0, 0.0, 2e-4, 2e-4]
    np.testing.assert_allclose(res["arrival_s"], arrive, rtol=1e-12, atol=1e-15)


def test_eager_cost_of_an_engine_with_one_graph_batch():
    """An engine that captures decode graphs up to batch 1 and states no eager cost pays the assumed EAGER_LAUNCH_S
    per kernel above it (the rule is graph_max_batch >= 1, not > 1); without decode graphs, nothing."""
    from specplan.adaptive.costs import EAGER_LAUNCH_S, eager_per_kernel_s
    from specplan.profiles.registry import load_engine

    eng = load_engine("sglang").model_copy(update={"eager_launch_s": 0.0, "graph_max_batch": 1,
                                                   "cuda_graphs_decode": True})
    assert eager_per_kernel_s(eng) == EAGER_LAUNCH_S
    assert eager_per_kernel_s(eng.model_copy(update={"cuda_graphs_decode": False})) == 0.0


def test_clairvoyant_least_decode_seconds_by_hand():
    """clairvoyant_dp on the linear costs, one request, α = 0 (every step advances one token, so D = 0 is best):
    f = (OSL − 1) · κ(0) with κ(0) = the least step over batch and context = BASE_S (context 0);
    g = Σ_{j=1}^{OSL−1} σ(ISL + j), σ(c) = (BASE_S + PER_CTX_S · c) / B_max, the per-sequence share of the largest
    batch at the request's own context ISL + j."""
    from specplan.adaptive.bounds import clairvoyant_dp

    isl, osl, b_max = 100, 11, 64
    wl = build_workload(np.zeros(1), [isl], [osl], alpha=[0.0])
    f, g = clairvoyant_dp(wl, _costs(b_max=b_max), seed=0)
    j = np.arange(1, osl)
    assert f[0] == pytest.approx((osl - 1) * BASE_S, rel=1e-12)
    assert g[0] == pytest.approx(np.sum((BASE_S + PER_CTX_S * (isl + j)) / b_max), rel=1e-12)


def test_a_policy_sees_the_drifting_acceptance_at_each_requests_position():
    # acceptance drifting linearly over the output: alpha(pos) = alpha0 + drift · pos / (OSL - 1), from alpha0 at
    # position 0 to alpha0 + drift at the last token (OSL - 1). A policy (the model and oracle ones use it) must see
    # that value at the position the request has reached; one request, fixed D = 2, positions from the series.
    osl = 120
    wl = build_workload(np.zeros(1), [512], [osl], dist="0.6", drift="-0.6")
    base = make_policy("fixed:2", 4)
    seen = []

    class Recording:
        def __getattr__(self, name):
            return getattr(base, name)

        def choose(self, view):
            seen.append(float(view.alpha[0]))
            return base.choose(view)

    res = simulate(wl, _costs(d_max=4), Recording(), NO_GRAPHS, seed=3, engine=ENGINE)
    emitted = _decode_rows(res)["al"]
    pos = 1 + np.concatenate([[0.0], np.cumsum(emitted)[:-1]])  # a new request decodes from position 1
    a0 = float(wl.alpha[0])
    np.testing.assert_allclose(seen, np.clip(a0 - 0.6 * pos / (osl - 1), 0.0, 1.0), rtol=1e-12)


def test_sglang_ema_ceiling_caps_a_downward_move_to_a_smaller_candidate(tmp_path):
    """A downward move that stops above the ceiling is capped further: candidates [1, 2, 6, 7], start 6 (the
    union's middle), one verify with 1 accepted draft at ema_alpha 1 -> EMA 1.0. Drop thresholds (hysteresis
    -0.25): to 2 at 2 - 0.5 - 0.25 = 1.25 (1.0 <= 1.25: drops), to 1 at 1 - 0.5 - 0.25 = 0.25 (1.0 > 0.25: stays),
    so the target is 2 < 6; the ceiling ceil(1.0 x 1) = 1 is below it, so the move goes on down to 1."""
    import json

    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"1": {"candidate_steps": [1, 2, 6, 7], "ceiling_coeff": 1, "warmup_batches": 0,
                                     "update_interval": 1, "ema_alpha": 1.0}}))
    p = AdaptiveSpeculativeParams(None, str(cfg))
    assert p.get_steps_for_batch(1) == 6
    assert p.on_verify_complete(np.ones(1), 1) == 1


def test_graph_capture_time_by_hand_at_the_middle_context():
    """Capture: each captured (D, bucket) graph runs GRAPH_RUNS times at the middle of the context grid plus
    GRAPH_HOST_S of host work. Linear costs on the grid [0, 1e6] tokens: the middle (index 1) is 1e6, so each run
    is BASE + PER_CTX · 1e6 + PER_D · D seconds."""
    from specplan.adaptive.costs import GRAPH_HOST_S, GRAPH_RUNS

    g = graphs_for([2], 4)
    assert g.captured  # buckets up to 4 at D = 2
    out = g.cost(_costs(d_max=4), "llama-3.1-8b")
    expect = sum(GRAPH_RUNS * (BASE_S + PER_CTX_S * 1e6 + PER_D_S * d) + GRAPH_HOST_S for d, _ in g.captured)
    assert out["graphs"] == len(g.captured)
    assert out["capture_s"] == pytest.approx(expect, rel=1e-12)


@pytest.mark.parametrize("text", ["2.5", "-2.5", "1e0.5", "nan"])
def test_workload_csv_integer_cells_refuse_fractions_either_side_of_zero(text):
    """A workload CSV's integer column (ISL, OSL) refuses a fraction, negative ones too (int(-2.5) is -2, which a
    one-sided check would take), naming the file, row and column."""
    from specplan.serving.traces import _cell  # the one trace reader (moved from adaptive/workload.py)
    from specplan.core.errors import SpecplanError

    with pytest.raises(SpecplanError, match=r"w\.csv: row 3, column 'isl'"):
        _cell("w.csv", 3, "isl", text, int)
    assert _cell("w.csv", 3, "isl", "7", int) == 7 and _cell("w.csv", 3, "isl", "7.0", int) == 7


def test_sglang_default_config_at_batch_one_spans_1_to_7_steps():
    """SGLang 0.5.23's default adaptive config (sglang_policy.SOURCE): batch 1 chooses among 1, 3, 5, 7 steps. It
    starts at the middle of the union of every slot's candidates {0, 1, 3, 5, 7}: 3. No draft ever accepted: the
    EMA falls and the steps settle at the smallest candidate, 1 (never 0 at batch 1); every draft accepted: 7."""
    p = AdaptiveSpeculativeParams()
    assert p.get_steps_for_batch(1) == 3
    for _ in range(200):
        p.on_verify_complete(np.zeros(1), 1)
    assert p.get_steps_for_batch(1) == 1
    q = AdaptiveSpeculativeParams()
    for _ in range(200):
        q.on_verify_complete(np.full(1, 7.0), 1)
    assert q.get_steps_for_batch(1) == 7


def test_adaptive_prefill_step_cost_by_hand():
    """The simulator's prefill step for T prompt tokens: the mixed step's GPU time with no decode rows as an eager
    engine step: vLLM (no overlap scheduler) adds its host time per step, per sequence and per token to the larger of the GPU time
    and every kernel launched eagerly; TensorRT-LLM (overlap) takes the larger of the GPU time and host + launches +
    its per-step eager work (it used to add the host time and drop eager_step_s)."""
    from specplan.adaptive.costs import CostGrid, build_costs
    from specplan.costs.precision import resolve_precision
    from specplan.model.step import step_time
    from specplan.profiles.registry import load_engine, load_hardware, load_model
    from specplan.serving.prefill import mixed_step_s, StepMix

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    eng = load_engine("vllm-0.10").model_copy(update={"host_step_s": 2e-3, "eager_launch_s": 1e-5,
                                                  "prefill_tokens_s": 1e-7,
                                                  "sources": {**load_engine("vllm-0.10").sources,
                                                              "prefill_tokens_s": "t"}})
    c = build_costs(m, hw, CostGrid(d_max=2, ctx_min=256, ctx_max=1024, b_max=4, mean_isl=512, prefill_budget=4096),
                    engine=eng)
    prec = resolve_precision(m, hw, None, None)
    toks = c.prefill_tokens
    gpu = mixed_step_s(m, hw, 1, StepMix(0, 0, toks, 0, prefill_seqs=np.maximum(1.0, toks / 512)), precision=prec,
                       engine=eng)
    kernels = step_time(m, hw, 1, 1, 1, 256, precision=prec).kernels
    host = 2e-3 + 1 * eng.host_per_seq_s + toks * 1e-7  # one running request: the prompt's
    np.testing.assert_allclose(c.prefill_s_grid, host + np.maximum(gpu, kernels * 1e-5), rtol=1e-12)
    t = load_engine("trtllm").model_copy(update={"host_step_s": 2e-3, "host_per_seq_s": 0.0, "eager_launch_s": 1e-5,
                                                 "eager_step_s": 0.02, "step_gap_s": 0.0,
                                                 "prefill_tokens_s": 1e-6})
    c = build_costs(m, hw, CostGrid(d_max=2, ctx_min=256, ctx_max=1024, b_max=4, mean_isl=512, prefill_budget=4096),
                    engine=t)
    gpu = mixed_step_s(m, hw, 1, StepMix(0, 0, toks, 0, prefill_seqs=np.maximum(1.0, toks / 512)), precision=prec,
                       engine=t)
    host = 2e-3 + toks * 1e-6 + kernels * 1e-5 + 0.02
    np.testing.assert_allclose(c.prefill_s_grid, np.maximum(gpu, host), rtol=1e-12)
    assert np.any(gpu > host) and np.any(gpu < host)  # both sides of the max are reached


def test_synthetic_arrivals_default_to_the_clis_seed():
    """The API's synthetic workload and `specplan adaptive` without --seed draw the same Poisson arrivals (seed 0)."""
    import inspect

    from specplan.adaptive.workload import synthetic
    from specplan.cli.adaptive_cmd import adaptive

    cli_seed = inspect.signature(adaptive).parameters["seed"].default.default
    a = synthetic(50, 64, 16, rate_per_s=5.0)
    b = synthetic(50, 64, 16, rate_per_s=5.0, seed=cli_seed)
    assert cli_seed == 0
    np.testing.assert_array_equal(a[0], b[0])


def test_uniform_acceptance_dist_spans_its_range():
    """--acceptance-dist uniform:0.5,0.9 is accepted (0 <= LO <= HI <= 1) and draws over [0.5, 0.9]: 20,000 draws
    have mean 0.7 (sd of the mean 0.4 / sqrt(12 x 20000) = 0.0008) and reach both ends."""
    from specplan.adaptive.workload import draw_alpha, parse_acceptance_dist

    kind, args = parse_acceptance_dist("uniform:0.5,0.9")
    a = draw_alpha(kind, args, 20000, 0)
    assert abs(a.mean() - 0.7) < 0.005 and a.min() < 0.51 and a.max() > 0.89 and a.min() >= 0.5 and a.max() <= 0.9
    assert parse_acceptance_dist("uniform:0,1")[1] == (0.0, 1.0)


def test_graphs_of_buckets_below_the_smallest_slot_key_use_that_slot():
    """With an SGLang adaptive config, a graph bucket is captured for D only if the slot routing it lists D; a
    bucket below every slot key (1 and 2 below key 4) routes to the smallest key, as SGLang's lookup clamps at 0."""
    g = graphs_for([1, 3], 8, slot_steps={4: [3], 8: [1]})
    assert {(d, b) for d, b in g.captured if b < 4} == {(3, b) for b in g.buckets if b < 4}
    assert {(d, b) for d, b in g.captured if b >= 8} == {(1, b) for b in g.buckets if b >= 8}


def test_sglang_graph_batch_sizes_follow_sglangs_list():
    """SGLang 0.5.23's decode graph batch sizes with speculation: 1..8, 10..32 step 2, 40..64 step 4, 72..256 step 8,
    then step 16 (272, 288, ...), the largest batch appended."""
    from specplan.adaptive.costs import sglang_graph_batch_sizes

    bs = sglang_graph_batch_sizes(320)
    assert bs[:10] == [1, 2, 3, 4, 5, 6, 7, 8, 10, 12]
    assert [x for x in bs if x > 256] == [272, 288, 304, 320]
    assert sglang_graph_batch_sizes(300)[-3:] == [272, 288, 300]


def test_ramp_workload_alpha_has_the_mix_mean():
    """Each request's alpha ~ Beta(mean c, (1 - mean) c), whose mean is `mean`: with alpha_start = alpha_end = 0.6
    the draws average 0.6 (sd of the mean sqrt(0.24 / 51 / 20000) = 0.0005)."""
    from specplan.adaptive.workload import ramp_workload

    w = ramp_workload(20000, 1.0, 2.0, 0.6, 0.6, 128, 64)
    assert abs(float(np.mean(w["alpha"])) - 0.6) < 0.003


def test_an_engine_without_decode_graphs_runs_every_step_eagerly(tmp_path):
    """An engine profile with cuda_graphs_decode false captures no graph: the simulator's engine resolves to graph
    batch 0 (every decode step eager), not to one graphed batch."""
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "engine_profiles" / "ideal.yaml"
    text = src.read_text().replace("cuda_graphs_decode: true", "cuda_graphs_decode: false")
    assert "cuda_graphs_decode: false" in text
    path = tmp_path / "nographs.yaml"
    path.write_text(text)
    assert Engine(str(path), prefill_budget=8192).resolved().graph_max_bs == 0


def test_sglang_zero_step_probe_keeps_a_non_negative_ema():
    """After an interval at 0 steps SGLang probes the smallest positive step; it resets the EMA to target - 1 only
    when the EMA is negative (the start value at 0 steps, -1): an EMA of 0.2 carried from before stays 0.2."""
    from specplan.adaptive.sglang_policy import AdaptiveStepSlot, SlotConfig

    s = AdaptiveStepSlot(0, SlotConfig(candidate_steps=[0, 1, 3], warmup_batches=0, update_interval=1))
    s.ema_accept_len = 0.2
    assert s.update(np.zeros(2)) and s.current_steps == 1
    assert s.ema_accept_len == 0.2
    t = AdaptiveStepSlot(0, SlotConfig(candidate_steps=[0, 1, 3], warmup_batches=0, update_interval=1))
    assert t.ema_accept_len == -1.0 and t.update(np.zeros(2)) and t.ema_accept_len == 0.0


def test_a_row_without_decode_has_no_tpot_bound():
    """OSL 1 requests decode nothing: the clairvoyant bound has no TPOT for them (not 0 ms)."""
    from specplan.adaptive.bounds import clairvoyant_row

    wl = build_workload(np.zeros(3), [100, 100, 100], [1, 1, 1], alpha=np.zeros(3))
    r = clairvoyant_row(wl, _costs(), seed=0)
    assert r["tpot_p50_ms"] is None and r["tokens_per_s_per_user"] is None  # none (NaN becomes None in a row)


@pytest.mark.parametrize("spec", ["beta:0,2", "beta:2,0", "beta:-1,2"])
def test_beta_acceptance_dist_needs_both_parameters_positive(spec):
    from specplan.adaptive.workload import parse_acceptance_dist
    from specplan.core.errors import SpecplanError

    with pytest.raises(SpecplanError, match="beta parameters must be > 0"):
        parse_acceptance_dist(spec)


def test_workload_csv_alpha_column_takes_zero_to_one_and_names_a_bad_row(tmp_path):
    from specplan.adaptive.workload import read_workload_csv
    from specplan.core.errors import SpecplanError

    ok = tmp_path / "w.csv"
    ok.write_text("arrival_s,isl,osl,alpha\n0,128,16,0\n0.5,128,16,0.5\n1,128,16,1\n")
    a = read_workload_csv(str(ok))[3]
    np.testing.assert_array_equal(a, [0.0, 0.5, 1.0])
    bad = tmp_path / "b.csv"
    bad.write_text("arrival_s,isl,osl,alpha\n0,128,16,0.5\n0.5,128,16,-0.1\n")
    with pytest.raises(SpecplanError, match=r"row 2, column 'alpha': must be in \[0, 1\]"):
        read_workload_csv(str(bad))


def test_affine_minorant_of_a_line_is_the_line_and_lies_below_a_convex_curve():
    from specplan.adaptive.bounds import affine_minorant

    grid = np.array([0.0, 1000.0, 4000.0])
    a, b = affine_minorant(np.array([[2.0, 3.0, 6.0]]), grid)  # t = 2 + c / 1000
    assert a[0] == pytest.approx(2.0) and b[0] == pytest.approx(1e-3)
    t = np.array([[1.0, 1.5, 5.0]])  # convex: slopes 5e-4 then 1.17e-3 -> the smallest slope, through the lowest
    a, b = affine_minorant(t, grid)
    assert b[0] == pytest.approx(5e-4) and a[0] == pytest.approx(1.0)
    assert np.all(a[0] + b[0] * grid <= t[0] + 1e-12)
    a1, b1 = affine_minorant(np.array([[7.0]]), np.array([0.0]))  # one point: a constant
    assert a1[0] == 7.0 and b1[0] == 0.0


def test_workload_csv_out_of_order_names_both_rows(tmp_path):
    from specplan.adaptive.workload import read_workload_csv
    from specplan.core.errors import SpecplanError

    bad = tmp_path / "w.csv"
    bad.write_text("arrival_s,isl,osl\n0,128,16\n1.5,128,16\n2.5,128,16\n2,128,16\n")
    with pytest.raises(SpecplanError, match=r"row 4, column 'arrival_s': 2 is before row 3's 2\.5 \(rows must"):
        read_workload_csv(str(bad))


def test_adasd_stops_drafting_after_the_first_rejection():
    """AdaSD's ideal entropy stop: a sequence drafts its accepted run + 1 tokens (the batch the longest), so with
    alpha = 0 every step drafts 1 token, not the policy's 4: step = BASE + PER_CTX · context + PER_D · 1, at the
    contexts 101 ... 105 of one request (ISL 100, OSL 6). Without relaxation nothing is lossy."""
    wl = build_workload(np.zeros(1), [100], [6], alpha=np.zeros(1))
    res = simulate(wl, _costs(), make_policy("adasd:max=4/relax=0", 4), NO_GRAPHS, engine=ENGINE)
    rows = _decode_rows(res)
    np.testing.assert_allclose(rows["step_s"], [_step(101 + i, 1) for i in range(5)], rtol=1e-12)
    # the D recorded is the one that ran: 1 at every step (it recorded the policy's 4, so mean_draft_len read 4)
    np.testing.assert_array_equal(rows["draft_len"], 1)
    wl6 = build_workload(np.zeros(4), np.full(4, 100), np.full(4, 40), alpha=np.full(4, 0.6))
    strict = simulate(wl6, _costs(), make_policy("adasd:max=4/relax=0", 4), NO_GRAPHS, engine=ENGINE, seed=5)
    assert strict["relaxed_token_fraction"] == 0.0


def test_a_request_larger_than_the_memory_still_runs_alone(tmp_path):
    """A request whose KV alone exceeds the capacity is admitted when nothing else runs (and counted over
    capacity), one at a time: two such requests finish one after the other."""
    import dataclasses

    costs = dataclasses.replace(_costs(), per_seq_bytes=np.array([2e15, 2e15]))
    wl = build_workload(np.zeros(2), [100, 100], [3, 3], alpha=np.zeros(2))
    res = simulate(wl, costs, make_policy("fixed:0", 4), NO_GRAPHS, engine=ENGINE)
    assert res["over_capacity"] >= 1
    f = np.sort(res["finish_s"])
    assert np.all(np.isfinite(f)) and f[1] > f[0]


def test_adasd_max_within_one_and_the_largest_d():
    from specplan.core.errors import SpecplanError

    assert make_policy("adasd:max=3/relax=0.2", 4).d == 3
    assert make_policy("adasd:max=1/relax=0", 4).d == 1
    for bad in ("adasd:max=0/relax=0.2", "adasd:max=5/relax=0.2", "adasd:max=2/relax=1.5"):
        with pytest.raises(SpecplanError):
            make_policy(bad, 4)


def test_a_speculating_policy_runs_under_the_engines_speculative_cap():
    """SGLang resets its running cap to 48 when it speculates and the launch gives no --max-running-requests
    (engine_profiles/sglang.yaml spec_max_num_seqs): a closed loop of 64 clients runs 64 at once without
    speculation (fixed:0) and 48 with fixed:3; --max-running 64 (the flag) lifts it for both; resolving twice keeps it."""
    eng = Engine("sglang", prefill_budget=100_000, graph_max_bs=0)
    res = eng.resolved()
    assert res.spec_max_running == 48 and res.resolved() == res
    assert res.running_cap(True) == 48 and res.running_cap(False) == res.max_running
    flag = Engine("sglang", prefill_budget=100_000, max_running=64, graph_max_bs=0).resolved()
    assert flag.spec_max_running is None and flag.running_cap(True) == 64
    n = 128
    wl = build_workload(np.zeros(n), np.full(n, 64), np.full(n, 32), alpha=np.full(n, 0.5), concurrency=64)
    costs = _costs(b_max=128)
    for engine, pol, top in ((eng, "fixed:0", 64), (eng, "fixed:3", 48), (flag, "fixed:3", 64)):
        r = simulate(wl, costs, make_policy(pol, 4), NO_GRAPHS, engine=engine)
        assert int(np.max(r["series"]["batch"])) == top, (pol, engine.max_running)


def test_an_engine_yaml_path_resolves_twice():
    """Engine.resolved() keeps a YAML path (simulate resolves again); it used to become the file's id and fail."""
    import shutil
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "my-sglang.yaml"
        shutil.copy(Path(__file__).resolve().parents[2] / "engine_profiles" / "sglang.yaml", p)
        p.write_text(p.read_text().replace("id: sglang", "id: my-sglang", 1))
        e = Engine(str(p)).resolved()
        assert e.profile == str(p) and e.resolved() == e and e.spec_max_running == 48


def test_the_oracle_bounds_the_plain_server_under_a_speculative_cap():
    """With SGLang's speculative cap of 48, fixed:0 (no speculation) runs all 128 clients at once; the oracle row
    must still bound it. Linear costs whose step time does not grow with the batch: 128 sequences per step beat 48,
    so the speculating bound alone (cap 48) falls below fixed:0 and the plain server's bound (D = 0, cap 128) is
    what holds it (bounds.lossless_bound_row)."""
    from specplan.adaptive.bounds import clairvoyant_row, lossless_bound_row
    from specplan.adaptive.metrics import summarize

    eng = Engine("sglang", prefill_budget=100_000, graph_max_bs=0).resolved()
    n = 256
    wl = build_workload(np.zeros(n), np.full(n, 64), np.full(n, 32), alpha=np.full(n, 0.1), concurrency=128)
    costs = _costs(b_max=128)
    plain = summarize(simulate(wl, costs, make_policy("fixed:0", 4), NO_GRAPHS, engine=eng), wl.osl, costs.devices)
    spec_only = clairvoyant_row(wl, costs, 0, max_running=48, prefill_budget=eng.prefill_budget)
    assert spec_only["tokens_per_s_per_gpu"] < plain["tokens_per_s_per_gpu"]  # what the bound used to be
    bound = lossless_bound_row(wl, costs, 0, eng)
    assert bound["tokens_per_s_per_gpu"] >= plain["tokens_per_s_per_gpu"]
    assert bound["tpot_p50_ms"] <= plain["tpot_p50_ms"] and bound["bound_batch"] == 128
    assert bound["tokens_per_s_per_gpu"] >= spec_only["tokens_per_s_per_gpu"]
    lifted = Engine("sglang", prefill_budget=100_000, max_running=128, graph_max_bs=0).resolved()
    assert lossless_bound_row(wl, costs, 0, lifted) == clairvoyant_row(wl, costs, 0, max_running=128,
                                                                      prefill_budget=lifted.prefill_budget)


def test_a_prompt_prefilled_apart_has_its_first_token_before_the_decode_step():
    """SGLang (mixed_prefill false) runs a prefill step of its own: a request arriving while another decodes gets
    its first token at that prefill step's end, not after the decode step that follows it. A decodes from t = 0
    (OSL 1000); B (ISL 512, 1 us per prompt token) arrives at 11 ms; steps are 2 ms + 1e-5 x context: B's prefill
    starts at the step boundary after 11 ms and its TTFT is that wait plus 0.512 ms. vLLM (mixed) samples it at
    the end of the step the chunk rides in: 1 decode step later."""
    n = 2
    wl = build_workload(np.array([0.0, 0.011]), np.array([64, 512]), np.array([1000, 8]), alpha=np.zeros(n))
    costs = _costs(b_max=8, prefill_per_tok_s=1e-6)
    ttft, series = {}, {}
    for prof in ("sglang", "vllm"):
        eng = Engine(prof, prefill_budget=100_000, graph_max_bs=0)
        r = simulate(wl, costs, make_policy("fixed:0", 4), NO_GRAPHS, engine=eng)
        ttft[prof] = float(r["first_token_s"][1] - r["arrival_s"][1])
        series[prof] = r["series"]
    ends = np.asarray(series["sglang"]["t_s"])  # the series records each step's end
    boundary = float(np.min(ends[ends >= 0.011]))  # B's prefill starts at the first step end after it arrives
    assert ttft["sglang"] == pytest.approx(boundary - 0.011 + 512 * 1e-6, rel=1e-9)
    assert ttft["vllm"] > ttft["sglang"] + 1e-3  # the decode step it rides in (about 2.6 ms) on top


def test_graph_memory_is_taken_per_gpu_at_the_runs_tp():
    """The KV budget subtracted the CUDA-graph memory of TP 1 at any TP (the reported row used the right TP)."""
    from specplan.adaptive.costs import CostGrid, GraphSet, build_costs

    c = build_costs("llama-3.3-70b", "h100-sxm",
                    CostGrid(d_max=3, ctx_min=1000, ctx_max=20000, b_max=32, mean_isl=1000, prefill_budget=8192),
                    engine="vllm", tp=4)
    assert c.tp == 4
    g = GraphSet(((3, 32),), frozenset({(3, 32)}))
    assert g.cost(c, c.model_id, c.tp)["memory_bytes"] < g.cost(c, c.model_id, 1)["memory_bytes"]


def test_adaptive_steps_are_the_engines_round():
    """The simulator's graphed step is speculation.round.round_s of the same GPU seconds: per-sequence host time
    counts (vLLM's host_per_seq_s was ignored) and TensorRT-LLM's overlap scheduler hides its host time (its
    1.6 ms per step was added on top of the GPU time)."""
    from specplan.adaptive.costs import CostGrid, build_costs
    from specplan.profiles.registry import load_engine

    kw = dict(grid=CostGrid(d_max=3, ctx_min=1000, ctx_max=2000, b_max=64, mean_isl=1000, prefill_budget=8192))
    trt = build_costs("llama-3.1-8b", "h100-sxm", engine="trtllm", **kw)
    ideal = build_costs("llama-3.1-8b", "h100-sxm", engine="ideal", **kw)
    e = load_engine("trtllm")
    launch = trt.kernels * e.graph_launch_s
    # batch 1, D 0: overlapped, max(GPU, host + launches) + the step gap; the GPU step is longer than 2 ms of host
    assert float(trt.iter_s[0, 0, 0]) == pytest.approx(max(float(ideal.iter_s[0, 0, 0]), e.host_step_s
                                                           + e.host_per_seq_s + launch) + e.step_gap_s, rel=1e-6)
    hidden = build_costs("llama-3.1-8b", "h100-sxm", engine=e.model_copy(update={"host_step_s": 0.0}), **kw)
    assert np.allclose(trt.iter_s[:8], hidden.iter_s[:8], rtol=1e-12)  # hidden under the GPU: 0, not +1.6 ms
    v = load_engine("vllm-0.10")  # the synchronous round (issue 40): no overlap: the per-sequence host time adds, 64 x 30.7 us at batch 64
    assert not v.overlap_scheduler
    vl = build_costs("llama-3.1-8b", "h100-sxm", engine="vllm-0.10", **kw)
    vl0 = build_costs("llama-3.1-8b", "h100-sxm", engine=v.model_copy(update={"host_per_seq_s": 0.0}), **kw)
    assert float(vl.iter_s[63, 0, 0] - vl0.iter_s[63, 0, 0]) == pytest.approx(64 * v.host_per_seq_s, rel=1e-9)


def test_graph_max_bs_on_an_engine_without_graphs_is_refused(tmp_path):
    """--graph-max-bs on an engine that captures no CUDA graphs turned graphs on (the resolved engine took the flag
    as its largest graph batch); it is refused in one line naming the flag, the engine and the value. Without the
    flag that engine resolves to no graphs, and resolving twice changes nothing."""
    import subprocess
    import sys
    from pathlib import Path

    from specplan.adaptive.simulator import Engine
    from specplan.core.errors import SpecplanError

    root = Path(__file__).resolve().parents[2]
    text = (root / "engine_profiles" / "sglang.yaml").read_text()
    assert "cuda_graphs_decode: true" in text
    y = tmp_path / "nographs.yaml"
    y.write_text(text.replace("cuda_graphs_decode: true", "cuda_graphs_decode: false").replace("id: sglang",
                                                                                                "id: nographs"))
    assert Engine(str(y)).resolved().graph_max_bs == 0
    assert Engine(str(y)).resolved().resolved() == Engine(str(y)).resolved()
    with pytest.raises(SpecplanError, match=r"--graph-max-bs: engine nographs captures no CUDA graphs .*got 64"):
        Engine(str(y), graph_max_bs=64).resolved()
    p = subprocess.run([sys.executable, "-m", "specplan", "adaptive", "--model", "llama-3.1-8b", "--hardware",
                        "h100-sxm", "--request-rate", "2", "--requests", "20", "--isl", "128", "--osl", "32",
                        "--acceptance-rate", "0.7", "--policies", "fixed:2", "--engine", str(y), "--graph-max-bs",
                        "64"], capture_output=True, text=True, cwd=root)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--graph-max-bs" in p.stderr, p.stderr

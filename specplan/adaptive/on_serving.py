"""The adaptive policies on the request-level serving simulator (serving/simulator.py; issue 39: one simulator).

`adaptive --simulator serving` runs each lossless policy (fixed:D, sglang, model) inside serving/simulator.py: one
StepTable per D = 0 .. d_max (serving/step_table.py, the analytical model's own step costs), the engine's own
admission, chunked prefill and KV rule (SimConfig from serving/sim_serving.py `sim_config`), the policy asked before
every step with decode rows (the StepView it sees here: batch, the decode step's seconds per D, the in-flight
requests' α, the D with a captured graph), the per-token acceptance draws of adaptive/simulator.py (token_uniforms,
the same seed: every policy sees the same tokens) and the policy's captured CUDA-graph set (steps without a graph
run eagerly: the engine profile's eager launch cost, or adaptive/costs.py's assumed EAGER_LAUNCH_S per kernel where
the profile states none, as the adaptive simulator prices it). The result has the shape adaptive/simulator.py
`simulate` returns, so metrics and reports are unchanged.

The oracle / clairvoyant bound is bounds.py's, priced on the serving step costs (`serving_bound_row`, SGLang's
scheduler only). Not here (they stay on adaptive/simulator.py): AdaSD (lossy: its batch drafts its longest accepted
run + 1), SGLang's draft-extend at D = 0, and `--trace` segments.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from specplan.core.records import record
from specplan.adaptive.costs import GraphSet
from specplan.adaptive.policies import Policy, StepView
from specplan.adaptive.records import PolicyRun, StepSeries
from specplan.adaptive.simulator import Engine, token_uniforms
from specplan.adaptive.workload import Workload
from specplan.core.errors import SpecplanError


class ServingPolicy:
    """An adaptive Policy as the serving simulator's per-step policy: the table index is the D."""

    def __init__(self, policy: Policy, wl: Workload, graphs: np.ndarray | None, slo_tpot_s: float | None, seed: int):
        self.policy, self.wl, self.graphs, self.slo_tpot_s = policy, wl, graphs, slo_tpot_s
        self.rng = np.random.default_rng([seed, 5])
        self.any_graph = None if graphs is None else graphs.any(axis=0)

    def index(self, view) -> int:
        """The policy's D for this step (only D with a captured graph at this batch, as SGLang allows)."""
        n = view.step_s.size
        if view.batch == 0:  # a step of prompts alone: D only decides whether the draft runs over them
            return n - 1 if self.policy.speculates else 0
        allowed = np.ones(n, dtype=bool)
        if self.graphs is not None:
            row = self.graphs[min(view.batch, self.graphs.shape[0] - 1)]
            allowed = row if row.any() else (self.any_graph if self.any_graph.any() else allowed)
        sv = StepView(view.batch, view.step_s, self._alpha(view), self.wl.per_position, allowed, self.slo_tpot_s,
                      self.rng, view.step_s + view.prefill_s)
        return int(self.policy.choose(sv))

    def _alpha(self, view) -> np.ndarray | None:
        """True current α of the decoding requests (drifted to their output position; None per position)."""
        wl, r = self.wl, view.running
        if wl.per_position:
            return None
        if not wl.drift:
            return wl.alpha[r]
        span = np.maximum(wl.osl[r] - 1, 1)
        return np.clip(wl.alpha[r] + wl.drift * view.position / span, 0.0, 1.0)

    def observe(self, accepted: np.ndarray, index: int, batch: int) -> None:
        """Accepted drafts of each decoding request in the last step."""
        self.policy.observe(np.asarray(accepted, dtype=np.int64), index, batch)


def check_serving_workload(wl: Workload, pols: list) -> None:
    """One line for what the serving simulator does not take: a lossy policy."""
    lossy = [p.name for p in pols if not isinstance(p, str) and p.lossy]
    if lossy:
        raise SpecplanError(f"--simulator serving: lossy policies run on the adaptive simulator only, got "
                            f"{', '.join(lossy)}")


def graph_rows(graphs: GraphSet, cap: int, d_max: int, captures: bool) -> np.ndarray | None:
    """(cap + 1, d_max + 1) captured decode graphs per running batch 0..cap and D (None: the engine captures no
    decode graphs, its steps are priced eager by the engine profile itself)."""
    if not captures:
        return None
    m = graphs.matrix(max(cap, 1), d_max)
    return np.vstack([m[:1], m])  # batch 0 (no decode rows) as batch 1


def eager_extra(eng, tabs) -> tuple:
    """Seconds an eager decode step adds per table where the engine profile states no eager launch cost (round_s
    then prices eager launches as graphed): adaptive/costs.py's assumed EAGER_LAUNCH_S per target and draft kernel,
    as the adaptive simulator adds it; () where the profile states one."""
    from specplan.adaptive.costs import eager_per_kernel_s

    if eng.eager_launch_s > 0:
        return ()
    return tuple(eager_per_kernel_s(eng) * (t.target_kernels + t.draft_kernels) for t in tabs)


def serving_setup(dep, wl: Workload, engine: Engine, mechanism: str):
    """(model, hardware, engine profile, precision, SimSetup, RequestSet) of the adaptive run on the serving path of
    `dep` (model/deployment.Deployment: its model, hardware, TP and dtypes)."""
    from specplan.costs.precision import resolve_precision
    from specplan.profiles.registry import load_engine, load_hardware, load_model
    from specplan.serving.arrivals import RequestSet
    from specplan.serving.sim_serving import SimSetup

    m, hw = load_model(dep.model), load_hardware(dep.hardware)
    prec = resolve_precision(m, hw, dep.dtypes.dtype, dep.dtypes.kv_dtype)
    eng = load_engine(engine.profile).for_mechanism(mechanism)
    tp = dep.tp
    setup = SimSetup(tp, eng, prec, mechanism=mechanism)
    closed = wl.closed_loop
    req = RequestSet(wl.isl.astype(float), wl.osl.astype(float), np.zeros(wl.n),
                     None if closed else wl.arrival_s.astype(float), closed, wl.alpha, source=wl.source or "adaptive",
                     start="together")
    return m, hw, eng, prec, setup, req


@record
class ServingBench:
    """What every policy of one run shares on the serving path: the engine profile, its limits, the step tables of
    D = 0 .. d_max, each request's mean accepted tokens per D, and the per-token draws."""

    eng: object
    cfg: object  # SimConfig (the plain server's running cap)
    tabs: tuple
    acc: np.ndarray
    draws: object  # TokenDraws
    req: object  # SimRequests


def serving_bench(dep, wl: Workload, engine: Engine, d_max: int, opts: tuple) -> ServingBench:
    """Price the step tables once (serving/step_table.py) for `dep` (model/deployment.Deployment) and draw the
    tokens (adaptive's token_uniforms, `seed`); `opts`: (mechanism, seed)."""
    from specplan.serving.aggregated import StepOptions
    from specplan.serving.sim_serving import request_alpha_al, sim_config
    from specplan.speculation.spec import Speculation
    from specplan.serving.simulator import SimRequests, TokenDraws
    from specplan.serving.step_table import build_step_table

    mechanism, seed = opts
    m, hw, eng, prec, setup, req = serving_setup(dep, wl, engine, mechanism)
    spec = StepOptions(Speculation(mechanism, 0.0))
    cfg = sim_config(m, hw, req, setup, eng, spec)
    cfg = replace(cfg, running_cap=min(engine.max_running or cfg.running_cap, cfg.running_cap),
                  budget_tokens=int(engine.prefill_budget))
    b_max = max(min(cfg.running_cap, wl.closed_loop or wl.n, wl.n), 1)
    tok_max = max(float(engine.prefill_budget), float(wl.isl.max()) if cfg.kind == "reserve" else 0.0)
    ds = tuple(range(d_max + 1))
    tabs = tuple(build_step_table(m, hw, setup.tp, eng, prec, spec.with_draft_len(float(d)), b_max=b_max,
                                  ctx_max=float((wl.isl + wl.osl).max()), tok_max=tok_max) for d in ds)
    acc = np.column_stack([request_alpha_al(1.0, d, wl.n, seed, alpha=wl.alpha) for d in ds])
    off, u = token_uniforms(wl, seed)
    return ServingBench(eng, cfg, tabs, acc, TokenDraws(off, u, wl.alpha, ds, wl.drift, wl.per_position, wl.osl),
                        SimRequests(req.isl, req.osl, req.cached_tokens, acc, req.arrival_s))


def simulate_on_serving(bench: ServingBench, wl: Workload, policy: Policy, graphs: GraphSet, *, engine: Engine,
                        opts: tuple) -> PolicyRun:
    """Run one policy on serving/simulator.py; the PolicyRun adaptive/simulator.py `simulate` returns. `opts`:
    (TPOT target seconds or None, seed)."""
    from specplan.serving.simulator import simulate

    slo_tpot_s, seed = opts
    eng, cfg = bench.eng, bench.cfg
    cap = min(engine.running_cap(policy.speculates) or cfg.running_cap, cfg.running_cap)
    g = graph_rows(graphs, cap, len(bench.tabs) - 1, bool(eng.cuda_graphs_decode))
    cfg = replace(cfg, running_cap=cap, draws=bench.draws, graphs=g,
                  policy=ServingPolicy(policy, wl, g, slo_tpot_s, seed), eager_extra_s=eager_extra(eng, bench.tabs))
    run = simulate(bench.tabs, eng, bench.req, cfg)
    s = run.series
    series = StepSeries(*(np.asarray(v, dtype=float) for v in (s.t_s, s.batch, s.draft_len, s.al, s.step_s,
                                                               s.prefill_tokens)))
    return PolicyRun(policy.name, False, run.arrival_s, run.first_token_s, run.finish_s, series, 0.0, run.eager_steps,
                  bool(float((wl.isl + wl.osl).max()) > cfg.kv_tokens))


def reach_pack(bench: ServingBench, wl: Workload) -> int:
    """Largest decode batch SGLang's scheduler can hold on the serving path: running cap, requests, closed loop, and
    the most requests whose admission KV (prompt + new_token_ratio x output) fits at once (at least one)."""
    cfg = bench.cfg
    need = np.sort(wl.isl + cfg.new_token_ratio * wl.osl)
    fit = int(np.searchsorted(np.cumsum(need), cfg.kv_tokens - cfg.shared_kv_tokens, side="right"))
    return int(min([cfg.running_cap, max(fit, 1), wl.n] + ([wl.closed_loop] if wl.closed_loop else [])))


def serving_step_costs(bench: ServingBench, top: int):
    """The serving path's step costs as adaptive/costs.py's StepCosts, for the bounds (bounds.py): T(B, c, D) of a
    graphed decode step at every batch 1..top and context-grid point, priced as serving/simulator.py prices it; and
    a prefill floor per step of p prompt tokens that no packed prefill step beats (its linear GPU seconds, no
    attention or draft prefill, one request's host time; the launch term left out, so its kinks are the grid's)."""
    from specplan.adaptive.costs import StepCosts
    from specplan.serving.simulator import StepOverheads

    eng, t0 = bench.eng, bench.tabs[0]
    b = np.arange(1, top + 1)
    iter_s = np.empty((top, t0.contexts.size, len(bench.tabs)))
    for j, tab in enumerate(bench.tabs):  # one pass per D (a handful): every batch and context at once
        over = StepOverheads(eng, (tab.draft_len, tab.tokens_per_seq, tab.target_kernels, tab.draft_kernels), top + 2)
        iw = [tab._b(float(x)) for x in b]
        i, w = np.array([x[0] for x in iw]), np.array([x[1] for x in iw])[:, None]
        gpu = (1.0 - w) * tab.decode_gpu_s[i] + w * tab.decode_gpu_s[i + 1]
        h, launch = (np.asarray(x)[b][:, None] for x in over.rows[False])
        iter_s[:, :, j] = h + np.maximum(gpu, launch) + over.gap
    p = t0.tokens
    host = 0.0 if eng.overlap_scheduler else eng.host_s(1.0, p)
    pf = host + t0.linear_gpu_s[0] + eng.step_gap_s
    return StepCosts(iter_s=iter_s, draft1_s=np.zeros(iter_s.shape[:2]), ctx_grid=t0.contexts.astype(float),
                     prefill_tokens=p.astype(float), prefill_s_grid=np.asarray(pf, dtype=float),
                     per_seq_bytes=np.zeros(t0.contexts.size), fixed_bytes=0.0, capacity_bytes=1.0,
                     devices=float(bench.cfg.devices), kernels=0, rho=0.0)


def serving_bound_row(bench: ServingBench, wl: Workload, engine: Engine, opts: tuple, name: str) -> dict:
    """bounds.py's bound of every lossless policy, on the serving path's step costs (SGLang's scheduler only: its
    prefill runs in steps of its own, as the bound's proof needs). A request at output position j has ISL + j - 1
    tokens cached there, so the bound runs on ISL - 1 (its TTFT floor π (ISL - 1) is still a floor). `opts`: (seed,
    TPOT target s, TTFT target s)."""
    from specplan.adaptive.bounds import lossless_bound_row

    if bench.cfg.kind != "pack":
        raise SpecplanError(f"--simulator serving: {name} bounds runs whose prefill runs apart (SGLang's scheduler); "
                            f"engine {bench.eng.id} mixes prompt chunks into decode steps; drop {name}")
    seed, max_tpot_s, max_ttft_s = opts
    costs = serving_step_costs(bench, reach_pack(bench, wl))
    shifted = replace(wl, isl=np.maximum(wl.isl - 1, 0))
    row = lossless_bound_row(shifted, costs, seed, engine, max_tpot_s=max_tpot_s, max_ttft_s=max_ttft_s, name=name)
    return row

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

Not here (they stay on adaptive/simulator.py): AdaSD (lossy: its batch drafts its longest accepted run + 1),
SGLang's draft-extend at D = 0, α drifting over the output and per-position acceptance (the draws here use one α per
request), and the oracle / clairvoyant bounds (bounds.py prices them from adaptive/costs.py's StepCosts).
"""

from __future__ import annotations

import numpy as np

from specplan.adaptive.costs import GraphSet
from specplan.adaptive.policies import Policy, StepView
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
        sv = StepView(view.batch, view.step_s, self.wl.alpha[view.running], (), allowed, self.slo_tpot_s, self.rng,
                      None)
        return int(self.policy.choose(sv))

    def observe(self, accepted: np.ndarray, index: int, batch: int) -> None:
        """Accepted drafts of each decoding request in the last step."""
        self.policy.observe(np.asarray(accepted, dtype=np.int64), index, batch)


def check_serving_workload(wl: Workload, pols: list) -> None:
    """One line for what the serving simulator does not take: α drift, per-position acceptance, a lossy policy."""
    if wl.per_position:
        raise SpecplanError("--simulator serving: per-position acceptance is not supported there (one α per "
                            "request); drop --simulator serving")
    if wl.drift:
        raise SpecplanError(f"--simulator serving: acceptance drift ({wl.drift:g}) is not supported there; drop "
                            f"--simulator serving or the drift")
    bounds = [p for p in pols if isinstance(p, str)]
    if bounds:
        raise SpecplanError(f"--simulator serving: {', '.join(bounds)} bound the adaptive simulator's step costs, not "
                            f"the serving simulator's; drop them from --policies or drop --simulator serving")
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


def serving_setup(model, hardware, wl: Workload, engine: Engine, mechanism: str, kw: dict):
    """(model, hardware, engine profile, precision, SimSetup, RequestSet) of the adaptive run on the serving path."""
    from specplan.costs.precision import resolve_precision
    from specplan.profiles.registry import load_engine, load_hardware, load_model
    from specplan.serving.arrivals import RequestSet
    from specplan.serving.sim_serving import SimSetup

    m, hw = load_model(model), load_hardware(hardware)
    prec = resolve_precision(m, hw, kw.get("dtype"), kw.get("kv_dtype"))
    eng = load_engine(engine.profile).for_mechanism(mechanism)
    tp = kw.get("tp", 1)
    setup = SimSetup(tp, eng, prec, mechanism=mechanism)
    closed = wl.closed_loop
    req = RequestSet(wl.isl.astype(float), wl.osl.astype(float), np.zeros(wl.n),
                     None if closed else wl.arrival_s.astype(float), closed, wl.alpha, source=wl.source or "adaptive",
                     start="together")
    return m, hw, eng, prec, setup, req


def simulate_on_serving(model, hardware, wl: Workload, policy: Policy, graphs: GraphSet, *, engine: Engine,
                        d_max: int, opts: tuple, kw: dict) -> dict:
    """Run one policy on serving/simulator.py; the dict adaptive/simulator.py `simulate` returns. `opts`:
    (mechanism, TPOT target seconds or None, seed)."""
    from dataclasses import replace

    from specplan.serving.sim_serving import request_alpha_al, sim_config
    from specplan.serving.simulator import TokenDraws, simulate
    from specplan.serving.step_table import build_step_table

    mechanism, slo_tpot_s, seed = opts
    m, hw, eng, prec, setup, req = serving_setup(model, hardware, wl, engine, mechanism, kw)
    spec = dict(mechanism=mechanism, draft_len=0.0, acceptance=None, draft_model=None)
    cfg = sim_config(m, hw, req, setup, eng, spec)
    cap = min(engine.running_cap(policy.speculates) or cfg.running_cap, cfg.running_cap)
    b_max = max(min(cap, wl.closed_loop or wl.n, wl.n), 1)
    tok_max = max(float(engine.prefill_budget), float(wl.isl.max()) if cfg.kind == "reserve" else 0.0)
    ds = tuple(range(d_max + 1))
    tabs = tuple(build_step_table(m, hw, setup.tp, eng, prec, {**spec, "draft_len": float(d)}, b_max=b_max,
                                  ctx_max=float((wl.isl + wl.osl).max()), tok_max=tok_max) for d in ds)
    acc = np.column_stack([request_alpha_al(1.0, d, wl.n, seed, alpha=wl.alpha) for d in ds])
    off, u = token_uniforms(wl, seed)
    g = graph_rows(graphs, cap, d_max, bool(eng.cuda_graphs_decode))
    cfg = replace(cfg, running_cap=cap, budget_tokens=int(engine.prefill_budget), draws=TokenDraws(off, u, wl.alpha, ds),
                  graphs=g, policy=ServingPolicy(policy, wl, g, slo_tpot_s, seed), eager_extra_s=eager_extra(eng, tabs))
    from specplan.serving.simulator import SimRequests

    run = simulate(tabs, eng, SimRequests(req.isl, req.osl, req.cached_tokens, acc, req.arrival_s), cfg)
    s = run.series
    series = {k: np.asarray(getattr(s, k), dtype=float) for k in ("t_s", "batch", "draft_len", "al", "step_s",
                                                                  "prefill_tokens")}
    return {"policy": policy.name, "lossy": False, "arrival_s": run.arrival_s, "first_token_s": run.first_token_s,
            "finish_s": run.finish_s, "series": series, "relaxed_token_fraction": 0.0,
            "eager_steps": run.eager_steps, "over_capacity": bool(float((wl.isl + wl.osl).max()) > cfg.kv_tokens),
            "devices": cfg.devices}

"""Entry points: compare policies over a request workload, or over `--trace` segments (the CLI calls these)."""

from __future__ import annotations

from dataclasses import field, replace

import numpy as np

from specplan.core.records import record
from specplan.adaptive.costs import CostGrid, build_costs, graphs_for, sglang_graph_batch_sizes
from specplan.adaptive.metrics import draft_len_series, summarize
from specplan.adaptive.policies import BOUNDS, SGLang, make_policy
from specplan.adaptive.records import RequestsRun, TraceRun
from specplan.adaptive.simulator import Engine, simulate
from specplan.adaptive.workload import Segment, Workload
from specplan.core.errors import SpecplanError
from specplan.costs.precision import Dtypes
from specplan.model.deployment import Deployment
from specplan.speculation.spec import DraftPlacement

BATCH_MAX = 2048  # largest running batch tabulated (as recommend.BATCH_MAX)
# model / oracle / clairvoyant capture graphs for D = 0..8 unless --captured-d says otherwise: SGLang's largest
# default candidate is 7, and every captured D costs graph memory (costs.GraphSet.cost)
CAPTURED_MAX = 8


def _policies(names: list[str], d_max: int, engine: Engine, sglang_config, sglang_initial, mechanism: str = "eagle3"):
    """The policies (and bound names) to run; with mechanism none only fixed:0 (there is no drafter)."""
    if not names:
        raise SpecplanError("--policies: give at least one policy")
    if mechanism == "none":
        bad = [n for n in names if n in BOUNDS or make_policy(n, d_max, sglang_config=sglang_config,
                                                                sglang_initial=sglang_initial).speculates]
        if bad:
            raise SpecplanError(f"--mechanism none: no drafter, so only fixed:0 runs; got {', '.join(bad)} (give the "
                                f"drafter, e.g. --mechanism eagle3)")
    bs = sglang_graph_batch_sizes(engine.graph_max_bs) if engine.graph_max_bs else None
    out = []
    for name in names:
        if name in BOUNDS:
            out.append(name)
            continue
        out.append(make_policy(name, d_max, sglang_config=sglang_config, sglang_initial=sglang_initial,
                               cuda_graph_bs=bs))
    return out


def table_d_max(pols, d_max: int) -> int:
    """Largest D to price: --max-draft-len, or an SGLang config's largest candidate step if above it (the
    config, not --max-draft-len, decides what SGLang runs)."""
    return max([d_max] + [max(p.graph_ds(d_max)) for p in pols if isinstance(p, SGLang)])


def _graphs(p, d_max: int, engine: Engine, captured_d):
    ds = p.graph_ds(d_max)
    if ds is None:
        ds = list(range(min(d_max, CAPTURED_MAX) + 1)) if captured_d is None else list(captured_d)
    slots = p.params.slot_steps if isinstance(p, SGLang) else None
    return graphs_for(ds, engine.graph_max_bs, slots)


def check_captured(captured_d, d_max: int):
    """--captured-d must be sorted, distinct, within 0..d_max."""
    if captured_d is None:
        return None
    c = list(captured_d)
    if not c or any(x < 0 for x in c) or any(b <= a for a, b in zip(c, c[1:])) or max(c) > d_max:
        raise SpecplanError(f"--captured-d: expected increasing draft lengths in 0..{d_max}, got "
                            f"{','.join(map(str, c))}")
    return c


def check_work(model, wl: Workload, engine: Engine) -> None:
    """Refuse, in one line, a workload the model cannot take (a request beyond its context) or whose prompts
    need more prefill steps than the simulator runs (--prefill-budget too small for the longest prompt)."""
    from specplan.core.limits import check_prefill_steps
    from specplan.profiles.registry import load_model

    cap = getattr(load_model(model), "max_context_len", None)
    longest = int(np.argmax(wl.isl + wl.osl))
    if cap is not None and wl.isl[longest] + wl.osl[longest] > cap:
        raise SpecplanError(f"isl + osl ({wl.source or 'workload'}): {wl.isl[longest]:,} + {wl.osl[longest]:,} = "
                            f"{wl.isl[longest] + wl.osl[longest]:,} tokens (request {longest + 1}) exceeds the "
                            f"model's context of {cap:,} tokens (max_context_len)")
    check_prefill_steps(wl.isl.max(), engine.prefill_budget, "--prefill-budget (engine max_num_batched_tokens)")


@record
class PolicyOptions:
    """How the policies are run: the largest D, the mechanism, the engine's scheduling (simulator.Engine), the SLO
    (seconds per output token, to first token), the seed of the draws, the D values with captured graphs (None:
    all), and SGLang's adaptive config file and initial D."""

    d_max: int = 8
    mechanism: str = "eagle3"
    engine: Engine = field(default_factory=Engine)
    max_tpot_s: float | None = None
    max_ttft_s: float | None = None
    seed: int = 0
    captured_d: object = None
    sglang_config: str | None = None
    sglang_initial: int | None = None
    simulator: str = "adaptive"  # or "serving": lossless policies on serving/simulator.py (adaptive/on_serving.py)


def run_requests(model, hardware, wl: Workload, policies: list[str], *, opts: PolicyOptions = PolicyOptions(),
                 progress: bool | None = None, costs=None, tp: int = 1, dtypes: Dtypes | None = None,
                 draft: DraftPlacement | None = None) -> RequestsRun:
    """Simulate each policy over the same workload and draws; rows (metrics), time series, and the costs; the target
    on `tp` devices at `dtypes` (None: the checkpoint's), the draft placed by `draft` (None: the mechanism's own)."""
    d_max, mechanism, engine, seed, captured_d = opts.d_max, opts.mechanism, opts.engine, opts.seed, opts.captured_d
    max_tpot_s, max_ttft_s = opts.max_tpot_s, opts.max_ttft_s
    sglang_config, sglang_initial = opts.sglang_config, opts.sglang_initial
    from specplan.adaptive.bounds import lossless_bound_row

    dep, draft = Deployment(model, hardware, tp, dtypes=dtypes or Dtypes()), draft or DraftPlacement()
    if d_max < 1:
        raise SpecplanError(f"--max-draft-len: must be >= 1, got {d_max}")
    captured_d = check_captured(captured_d, d_max)
    engine = engine.resolved()
    check_work(model, wl, engine)
    pols = _policies(policies, d_max, engine, sglang_config, sglang_initial, mechanism)
    if opts.simulator == "serving":
        from specplan.adaptive.on_serving import check_serving_workload

        check_serving_workload(wl, pols)
    elif opts.simulator != "adaptive":
        raise SpecplanError(f"--simulator: adaptive or serving, got '{opts.simulator}'")
    if costs is None:
        top = min(engine.max_running, BATCH_MAX, wl.n, wl.closed_loop or BATCH_MAX)
        grid = CostGrid(table_d_max(pols, d_max), float(wl.isl.min()), float((wl.isl + wl.osl).max()), int(top),
                        float(wl.isl.mean()), engine.prefill_budget)
        costs = build_costs(model, hardware, grid, mechanism=mechanism, engine=engine.profile, tp=dep.tp,
                            dtypes=dep.dtypes, draft=draft)
    rows, series = [], {}
    bench = None
    if opts.simulator == "serving":
        from specplan.adaptive.on_serving import serving_bench

        bench = serving_bench(dep, wl, engine, costs.d_max, (mechanism, seed))
    for p in pols:
        if p in BOUNDS and bench is not None:
            from specplan.adaptive.on_serving import serving_bound_row

            rows.append(serving_bound_row(bench, wl, engine, (seed, max_tpot_s, max_ttft_s), p))
            continue
        if p in BOUNDS:  # at request level the oracle must know the draws to be a bound: the same bound
            rows.append(lossless_bound_row(wl, costs, seed, engine, max_tpot_s=max_tpot_s, max_ttft_s=max_ttft_s,
                                           name=p))
            continue
        g = _graphs(p, d_max, engine, captured_d)
        if bench is not None:
            from specplan.adaptive.on_serving import simulate_on_serving

            res = simulate_on_serving(bench, wl, p, g, engine=engine, opts=(max_tpot_s, seed))
        else:
            res = simulate(wl, costs, p, g, engine=engine, slo_tpot_s=max_tpot_s if not p.lossy else None,
                           seed=seed, progress=progress)
        rows.append(summarize(res, wl.osl, costs.devices, max_tpot_s=max_tpot_s, max_ttft_s=max_ttft_s,
                              graphs=g.cost(costs, model, dep.tp)))
        series[p.name] = draft_len_series(res, osl=wl.osl)
    return RequestsRun("requests", costs.model_id, costs.hardware_id, _engine_id(engine.profile), wl.n, wl.source,
                       rows, series, costs)


def _engine_id(profile: str) -> str:
    """The engine profile's id (a YAML path given to --engine is shown by its id)."""
    from specplan.profiles.registry import load_engine

    return load_engine(profile).id


def run_trace(model, hardware, segs: list[Segment], policies: list[str], *, context_len: int,
              opts: PolicyOptions = PolicyOptions(), tp: int = 1, dtypes: Dtypes | None = None,
              draft: DraftPlacement | None = None) -> TraceRun:
    """Simulate each policy over trace segments (iterations at a given batch and α); speedup vs no speculation
    (`opts.max_ttft_s` does not apply: a trace has no arrivals); `tp`, `dtypes`, `draft` as run_requests takes them."""
    d_max, mechanism, engine, seed, captured_d = opts.d_max, opts.mechanism, opts.engine, opts.seed, opts.captured_d
    max_tpot_s, sglang_config, sglang_initial = opts.max_tpot_s, opts.sglang_config, opts.sglang_initial
    from specplan.adaptive.costs import eager_per_kernel_s
    from specplan.adaptive.policies import Fixed
    from specplan.adaptive.trace import TraceCosts, simulate_trace, trace_costs
    from specplan.profiles.registry import load_engine
    from specplan.model.step import step_time

    dtypes = dtypes or Dtypes()
    if d_max < 1:
        raise SpecplanError(f"--max-draft-len: must be >= 1, got {d_max}")
    captured_d = check_captured(captured_d, d_max)
    engine = engine.resolved()
    pols = _policies(policies, d_max, engine, sglang_config, sglang_initial, mechanism)
    dt = table_d_max(pols, d_max)  # D priced (an SGLang config may go above --max-draft-len)
    table, d1, dev, rho, fits = trace_costs(model, hardware, segs, dt, context_len, mechanism, engine.profile,
                                            tp=tp, dtypes=dtypes, draft=draft)
    base = step_time(model, hardware, tp, 1, 1, context_len, precision=dtypes)
    eng = load_engine(engine.profile)
    eager = eager_per_kernel_s(eng) * base.kernels * (1.0 + rho * np.arange(dt + 1))
    costs = TraceCosts(table, d1, eager, dev, fits)
    ref = simulate_trace(segs, costs, Fixed(0, "fixed:0"), graphs_for([0], engine.graph_max_bs), dt, seed)
    rows = []
    for p in pols:
        if isinstance(p, str):
            g = graphs_for(range(dt + 1) if captured_d is None else captured_d, engine.graph_max_bs)
        else:
            g = _graphs(p, d_max, engine, captured_d)
        r = simulate_trace(segs, costs, p, g, dt, seed, slo_tpot_s=None if getattr(p, "lossy", False) else max_tpot_s)
        rows.append(replace(r, speedup=r.tokens_per_s_per_user / ref.tokens_per_s_per_user))
    return TraceRun("trace", rows, context_len)

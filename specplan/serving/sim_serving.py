"""Serving by simulation: a request set through one engine, its TTFT / TPOT / E2E percentiles and throughput.

`simulate_serving(model, hw, requests, setup)` prices the engine's StepTable once (serving/step_table.py), draws
each request's accepted tokens per iteration (speculation: a per-request acceptance rate around the mechanism's,
seeded), sets the engine's limits (running cap, token budget, KV tokens: the analytical model's `running_cap` and
`kv_cap_requests`) and runs serving/simulator.py. An instance with data-parallel attention is simulated as one of
its DP ranks (the unit each engine schedules, EngineProfile.per_dp_rank), with its share of the clients (C / DP)
or of the arrivals (every DP-th request); requests/s and tokens/s come back for the instance.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from specplan.core.records import record
from specplan.costs.precision import Precision
from specplan.model.memory import memory_usage
from specplan.model.parallel import Layout, attention_tp, dp_ranks
from specplan.serving.aggregated import StepOptions, draft_prefill_model, kv_cap_requests, running_cap
from specplan.serving.arrivals import RequestSet
from specplan.serving.simulator import (SGLANG_NEW_TOKEN_RATIO, SimConfig, SimRequests, SimRun, admission_kind,
                                        simulate)
from specplan.serving.step_table import build_step_table
from specplan.serving.workload import Workload
from specplan.speculation.spec import Speculation

ACCEPTANCE_CONCENTRATION = 20.0  # Beta(α·k, (1 - α)·k) spread of per-request acceptance rates (assumption)


@record
class SimSetup:
    """How to serve: layout, engine profile, precision, speculation, seed, SLA, requests left out as warm-up."""

    tp: int | Layout
    engine: object  # EngineProfile
    precision: Precision
    mechanism: str = "none"
    draft_len: int = 0
    acceptance: object = None
    draft_model: object = None
    seed: int = 0
    max_ttft_s: float | None = None
    max_tpot_s: float | None = None
    warmup: int = 0  # first requests (in release order) left out of the percentiles
    running_cap: int | None = None  # the engine's max batch when the launch sets one below its default
    kv_offload: bool = False  # cached prefixes in host memory, loaded over the host link on a hit
    d_schedule: tuple = ()  # ((lo, hi, D), ...) by batch size, vLLM's form (serving/d_schedule.py); () = draft_len


@record
class SimSummary:
    """Percentiles (seconds) over the scored requests, throughput (per second), Little's-law integrals."""

    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    ttft_mean_s: float
    tpot_p50_s: float
    tpot_p90_s: float
    tpot_p99_s: float
    tpot_mean_s: float
    e2e_p50_s: float
    e2e_p90_s: float
    e2e_p99_s: float
    e2e_mean_s: float
    requests_per_s: float
    output_tokens_per_s: float
    tokens_per_s_per_gpu: float
    goodput_requests_per_s: float | None
    mean_in_system: float  # time-average of requests arrived and not finished (per engine rank)
    mean_decoding: float  # time-average of requests decoding (per engine rank)
    duration_s: float
    requests: int
    preemptions: int
    acceptance_length: float


def request_alpha(al: float, d: float, n: int, seed: int) -> np.ndarray:
    """n per-request acceptance rates drawn (seeded) from Beta around the α whose geometric AL at D is `al`."""
    lo, hi = 0.0, 1.0
    for _ in range(60):  # α whose geometric acceptance length at D is al
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if _geo(mid, d) < al else (lo, mid)
    a = np.clip((lo + hi) / 2.0, 1e-6, 1 - 1e-6)
    k = ACCEPTANCE_CONCENTRATION
    return np.random.default_rng([seed, 2]).beta(a * k, (1.0 - a) * k, n)


def request_alpha_al(al: float, d: float, n: int, seed: int, alpha=None, drawn=None) -> np.ndarray:
    """Accepted tokens per iteration of n requests: 1 without speculation; else (1 - α_i^(D+1)) / (1 - α_i) with
    α_i given, or drawn (`drawn`, else request_alpha around `al` at D) and rescaled so their mean is `al` (given
    α_i are kept as they are)."""
    if d <= 0:
        return np.ones(n)
    if alpha is None:
        out = _geo(request_alpha(al, d, n, seed) if drawn is None else drawn, d)
        return np.clip(out * al / max(float(out.mean()), 1e-9), 1.0, d + 1.0)
    return _geo(np.asarray(alpha, dtype=float), d)


def _geo(a, d):
    a = np.clip(np.asarray(a, dtype=float), 0.0, 1.0 - 1e-12)
    return (1.0 - a ** (d + 1.0)) / (1.0 - a)


def _pct(x: np.ndarray, q: float) -> float:
    x = x[np.isfinite(x)]
    return float(np.quantile(x, q)) if x.size else math.nan


def summarize(run: SimRun, setup: SimSetup, devices: float, ranks: int, al: float) -> SimSummary:
    """Percentiles over the requests after the warm-up; throughput over the run (first arrival to last finish),
    times the DP ranks; goodput: requests/s meeting both SLA bounds given."""
    keep = slice(min(setup.warmup, max(run.osl.size - 1, 0)), None)
    ttft = (run.first_token_s - run.arrival_s)[keep]
    e2e = (run.finish_s - run.arrival_s)[keep]
    osl = run.osl[keep]
    tpot = np.where(osl > 1, (run.finish_s[keep] - run.first_token_s[keep]) / np.maximum(osl - 1.0, 1.0), np.nan)
    t0 = float(np.nanmin(run.arrival_s[keep]))
    span = max(float(np.nanmax(run.finish_s[keep])) - t0, 1e-12)
    x = osl.size / span * ranks
    good = None
    if setup.max_ttft_s is not None or setup.max_tpot_s is not None:
        ok = np.ones(osl.size, dtype=bool)
        if setup.max_ttft_s is not None:
            ok &= ttft <= setup.max_ttft_s
        if setup.max_tpot_s is not None:
            ok &= ~(tpot > setup.max_tpot_s)
        good = float(ok.sum()) / span * ranks
    out_tok = float(osl.sum()) / span * ranks
    end = max(run.end_s, 1e-12)
    return SimSummary(_pct(ttft, .5), _pct(ttft, .9), _pct(ttft, .99), float(np.nanmean(ttft)),
                      _pct(tpot, .5), _pct(tpot, .9), _pct(tpot, .99),
                      float(np.nanmean(tpot)) if np.isfinite(tpot).any() else math.nan,
                      _pct(e2e, .5), _pct(e2e, .9), _pct(e2e, .99), float(np.mean(e2e)),
                      x, out_tok, out_tok / devices, good, run.in_system_s / end, run.decoding_s / end, end,
                      int(osl.size), run.preemptions, al)


def _rank_share(req: RequestSet, dp: int) -> RequestSet:
    """One DP rank's share: C / DP clients (rounded up), or every DP-th request of an open loop or trace."""
    if dp <= 1:
        return req
    if req.clients is not None:
        return replace(req, clients=max(1, math.ceil(req.clients / dp)))
    pick = slice(0, None, dp)
    return replace(req, isl=req.isl[pick], osl=req.osl[pick], cached_tokens=req.cached_tokens[pick],
                   arrival_s=req.arrival_s[pick], alpha=None if req.alpha is None else req.alpha[pick])


def sim_config(model, hw, req: RequestSet, setup: SimSetup, eng, spec: StepOptions) -> SimConfig:
    """The engine's limits for the simulation: running cap, token budget, KV tokens (the KV cache's requests of
    mean ISL + OSL beside the weights, the draft's included: kv_cap_requests, times those tokens)."""
    isl_m = max(int(round(float(req.isl.mean()))), 1)
    osl_m = max(int(round(float(req.osl.mean()))), 1)
    wl = Workload(isl_m, osl_m, concurrency=1.0)
    tp = setup.tp
    one = memory_usage(model, hw, attention_tp(tp), 1, isl_m + osl_m, setup.precision,
                       layout=tp if isinstance(tp, Layout) else None)
    kv_req = kv_cap_requests(model, hw, tp, wl, eng, spec, setup.precision, float(one.max_batch) / dp_ranks(tp))
    cap = int(np.max(running_cap(eng, wl, None, spec.draft_len)))
    cap = cap if setup.running_cap is None else min(cap, int(setup.running_cap))
    return SimConfig(cap, int(eng.max_num_batched_tokens), float(np.max(kv_req)) * (isl_m + osl_m),
                     admission_kind(eng), req.clients, req.shared_kv_tokens,
                     float(tp.gpus if isinstance(tp, Layout) else tp),
                     new_token_ratio=SGLANG_NEW_TOKEN_RATIO if req.source else 1.0,  # fixed lengths: ignore_eos
                     host_load_s_per_token=host_load_s_per_token(model, hw, tp, setup) if setup.kv_offload else None)


def host_load_s_per_token(model, hw, tp, setup: SimSetup) -> float:
    """KV offload: seconds to copy one cached token's KV (this device's share of the full-attention layers, which
    keep every token; a sliding window's few are left out) from host memory over the device's host link; one line
    naming the profile when the hardware has no host-link figure."""
    from specplan.core.errors import SpecplanError
    from specplan.model.memory import kv_bytes_per_token

    bw = hw.host_link_bandwidth_bytes_s
    if bw is None:
        raise SpecplanError(f"--kv-offload: hardware '{hw.id}' has no host_link_bandwidth_bytes_s in its profile")
    t = attention_tp(tp)
    return float(kv_bytes_per_token(model, t, setup.precision.kv)) / float(bw)


def simulate_serving(model, hw, req: RequestSet, setup: SimSetup) -> SimSummary:
    """Simulate `req` on `model` (a ModelProfile) on `hw` (a HardwareProfile) as `setup` says."""
    from specplan.costs.precision import resolve_precision

    dp = dp_ranks(setup.tp)
    eng = setup.engine.for_mechanism(setup.mechanism).per_dp_rank(dp)
    req = _rank_share(req, dp)
    d = float(setup.draft_len if setup.mechanism != "none" else 0)
    spec = StepOptions(Speculation.of(mechanism=setup.mechanism, draft_len=d, acceptance=setup.acceptance,
                                      draft_model=setup.draft_model))
    cfg = sim_config(model, hw, req, setup, eng, spec)
    dpm = draft_prefill_model(model, setup.mechanism, setup.draft_model)
    draft = None if dpm is None or d == 0 else (dpm, resolve_precision(dpm, hw, setup.precision.compute,
                                                                       setup.precision.kv))
    b_max = min(cfg.running_cap, req.clients or req.n)
    tok_max = max(float(cfg.budget_tokens), float(req.isl.max()) if cfg.kind == "reserve" else 0.0)
    ds, index = schedule_tables(setup, d, cfg.running_cap)
    tabs = [build_step_table(model, hw, setup.tp, eng, setup.precision, spec.with_draft_len(float(k)),
                             b_max=b_max, ctx_max=float((req.isl + req.osl).max()), tok_max=tok_max, draft=draft)
            for k in ds]
    tab = tabs[-1]
    drawn = None if req.alpha is not None or d <= 0 else request_alpha(tab.acceptance_length, d, req.n, setup.seed)
    acc = np.column_stack([request_alpha_al(t.acceptance_length, k, req.n, setup.seed, req.alpha, drawn)
                           for t, k in zip(tabs, ds)])
    cfg = replace(cfg, d_index=index)
    tab = tuple(tabs) if index else tab
    acc = acc if index else acc[:, 0]
    sreq = SimRequests(req.isl, req.osl, req.cached_tokens, acc, req.arrival_s)
    if req.clients is None or req.start == "together" or req.clients < 2:
        run = simulate(tab, eng, sreq, cfg)
    else:  # the first round started together; its mean latency spaces the settled loop's first sends
        k = min(cfg.clients, req.n)
        first = simulate(tab, eng, SimRequests(sreq.isl[:k], sreq.osl[:k], sreq.cached_tokens[:k],
                                               sreq.accepted_tokens[:k]), cfg)
        period = float(np.nanmean(first.finish_s - first.arrival_s))
        run = simulate(tab, eng, sreq, replace(cfg, client_start_s=tuple(np.arange(cfg.clients) * period
                                                                            / cfg.clients)))
        run = run if req.start == "steady" else benchmark_run(first, run, k)
    return summarize(run, setup, cfg.devices, dp, tabs[-1].acceptance_length)


def schedule_tables(setup: SimSetup, d: float, cap: int) -> tuple[list, tuple]:
    """The draft lengths to price ([D] without a schedule) and the table index per batch size 0..cap (() without
    a schedule): the schedule expanded as vLLM does (serving/d_schedule.py dense_schedule), each K capped at D."""
    if not setup.d_schedule or d <= 0:
        return [d], ()
    from specplan.serving.d_schedule import dense_schedule

    k = np.minimum(dense_schedule(setup.d_schedule, cap), int(d))
    ds = sorted(set(int(x) for x in k[1:]) | {int(d)})
    return [float(x) for x in ds], tuple(int(ds.index(int(x))) for x in k)


def benchmark_run(together: SimRun, steady: SimRun, clients: int) -> SimRun:
    """A benchmark's run: its first round (the first C requests) from the run whose clients start together, the
    later rounds from the settled loop. The real loops do not stay in lockstep (the measured H100 TTFT at C = 4 is
    one prompt's prefill, docs/validation/serving.md); the bunched first round is what a start-up term stood for.
    Throughput and the time integrals are the settled run's."""
    k = clients
    cat = lambda a, b: np.concatenate([a[:k], b[k:]])  # noqa: E731
    return replace(steady, arrival_s=cat(together.arrival_s, steady.arrival_s),
                   first_token_s=cat(together.first_token_s, steady.first_token_s),
                   finish_s=cat(together.finish_s, steady.finish_s))

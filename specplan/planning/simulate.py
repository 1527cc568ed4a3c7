"""predict's answer by simulation (`--simulate`, `--workload FILE`, `--prefix-hit F`, `--isl-dist/--osl-dist`,
`--startup-cohort` at one concurrency).

The analytical answer is computed as always (the step, memory, guidelines and the serving blocks' shape); where
the simulator is asked for, the serving blocks `serving.baseline` / `serving.speculative` take the simulated
values: `ttft_ms` (the median), `ttft_p90_ms`, `ttft_p99_ms`, `tpot_ms` (the mean over requests),
`request_latency_ms`, `tokens_per_s_per_user`, `tokens_per_s_per_gpu`, plus a `simulated` block with every
percentile, throughput, goodput and the request count (serving/sim_serving.py); `serving.method` says
"simulated". A closed loop's clients start together (as benchmarks run them), its later rounds taken from the
settled loop (`benchmark_run`: docs/validation/serving.md shows real loops do not stay in lockstep).
`--startup-cohort` (a benchmark whose clients start together) is that closed loop: at one concurrency the simulator
answers it, in place of the analytical start-up term (C - 1)·startup_prefill_frac·(one prompt's service) (which recommend, sweep and a
concurrency list still add).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from specplan.core.records import record
from specplan.core.errors import SpecplanError
from specplan.costs.precision import resolve_precision
from specplan.model.deployment import Deployment
from specplan.model.parallel import Layout
from specplan.profiles.registry import load_engine, load_hardware, load_model
from specplan.serving.arrivals import (RequestSet, closed_loop, from_trace, lengths, open_loop, parse_length_dist,
                                       with_prefix_hit)
from specplan.serving.sim_serving import SimSetup, SimSummary, simulate_serving
from specplan.serving.d_schedule import parse_schedule
from specplan.serving.traces import read_trace
from specplan.serving.workload import Workload
from specplan.speculation.spec import Speculation

DEFAULT_ROUNDS = 10  # closed loop: requests = rounds x clients (genai-perf's common --request-count C x 10)
MIN_REQUESTS = 200


@record
class SimRequest:
    """What the user asked the simulator for (None / False where not given)."""

    simulate: bool = False
    workload_file: str | None = None
    prefix_hit: float | None = None
    isl_dist: str | None = None
    osl_dist: str | None = None
    requests: int | None = None
    arrival_cv: float | None = None  # open loop: gamma gaps of this coefficient of variation (None: Poisson)
    seed: int = 0
    startup_cohort: bool = False  # --startup-cohort at one concurrency: the clients start together, simulated
    kv_offload: bool = False  # --kv-offload: cached prefixes in host memory, loaded over the host link
    d_schedule: str | None = None  # --d-schedule: draft length by batch size (LO-HI:K,...)

    @property
    def asked(self) -> bool:
        """True when any option asks for the simulator."""
        return bool(self.simulate or self.workload_file or self.prefix_hit is not None or self.isl_dist
                    or self.osl_dist or self.arrival_cv is not None or self.startup_cohort or self.d_schedule)


def sim_request(simulate=False, workload_file=None, prefix_hit=None, isl_dist=None, osl_dist=None,
                requests=None, arrival_cv=None, startup_cohort=False, kv_offload=False,
                d_schedule=None) -> SimRequest | None:
    """The SimRequest of predict's options, or None when none asks for the simulator (checked in one line each);
    `startup_cohort`: --startup-cohort with one --concurrency (a list keeps the analytical term)."""
    r = SimRequest(bool(simulate), workload_file, prefix_hit, isl_dist, osl_dist, requests, arrival_cv,
                   startup_cohort=bool(startup_cohort), kv_offload=bool(kv_offload), d_schedule=d_schedule)
    if d_schedule is not None:
        from specplan.serving.d_schedule import parse_schedule

        parse_schedule(d_schedule)
    if r.kv_offload and r.prefix_hit is None and r.workload_file is None:
        raise SpecplanError("--kv-offload: holds cached prefixes in host memory; give --prefix-hit F or a --workload "
                            "trace with shared prefixes")
    if arrival_cv is not None and not (math.isfinite(arrival_cv) and arrival_cv > 0):
        raise SpecplanError(f"--arrival-cv: must be a coefficient of variation > 0, got {arrival_cv:g}")
    if not r.asked:
        if requests is not None:
            raise SpecplanError("--requests: only with --simulate, --workload, --prefix-hit, --isl-dist/--osl-dist or "
                                "--startup-cohort")
        return None
    if requests is not None and not (1 <= requests <= 1_000_000):
        raise SpecplanError(f"--requests: must be 1 ... 1,000,000 requests, got {requests}")
    for flag, text in (("--isl-dist", isl_dist), ("--osl-dist", osl_dist)):
        if text is not None:
            parse_length_dist(text, flag)
    if prefix_hit is not None and not (math.isfinite(prefix_hit) and 0.0 <= prefix_hit < 1.0):
        raise SpecplanError(f"--prefix-hit: must be a fraction in [0, 1), got {prefix_hit:g}")
    return r


def trace_workload(req: SimRequest, wl: Workload | None) -> Workload:
    """The analytical Workload beside a trace: the given one, or the trace's mean ISL / OSL at its mean rate."""
    if req.workload_file is None:
        if wl is None:
            raise SpecplanError("--simulate / --prefix-hit / --isl-dist: give --isl and --osl with --concurrency "
                                "or --request-rate, or --workload FILE")
        if np.ndim(wl.concurrency) or np.ndim(wl.request_rate):
            raise SpecplanError("--simulate: give one --concurrency or --request-rate (not a list)")
        return wl
    if wl is not None:
        raise SpecplanError("--workload: the trace gives the lengths and arrivals; drop --isl/--osl/--concurrency/"
                            "--request-rate")
    t = read_trace(req.workload_file)
    span = float(t.arrival_s[-1] - t.arrival_s[0])
    rate = (t.isl.size - 1) / span if span > 0 and t.isl.size > 1 else 1.0
    return Workload(max(int(round(float(t.isl.mean()))), 1), max(int(round(float(t.osl.mean()))), 1),
                    request_rate=float(rate))


def request_set(req: SimRequest, wl: Workload) -> RequestSet:
    """The requests to simulate: the trace, or the workload's closed / open loop with its lengths."""
    if req.workload_file is not None:
        rs = from_trace(read_trace(req.workload_file))
    else:
        if np.ndim(wl.concurrency) or np.ndim(wl.request_rate):
            raise SpecplanError("--simulate: give one --concurrency or --request-rate (not a list)")
        c = None if wl.concurrency is None else int(round(float(wl.concurrency) * wl.ranks))
        n = req.requests or max(DEFAULT_ROUNDS * (c or 0), MIN_REQUESTS)
        isl_d = None if req.isl_dist is None else parse_length_dist(req.isl_dist, "--isl-dist")
        osl_d = None if req.osl_dist is None else parse_length_dist(req.osl_dist, "--osl-dist")
        isl = lengths(wl.isl, isl_d, n, req.seed)
        osl = lengths(wl.osl, osl_d, n, req.seed + 1)
        rs = (closed_loop(isl, osl, c) if c is not None
              else open_loop(isl, osl, float(wl.request_rate) * wl.ranks, req.seed, req.arrival_cv or 1.0))
    return rs if req.prefix_hit is None else with_prefix_hit(rs, req.prefix_hit)


def _simulated(point, s: SimSummary):
    """A serving point (serving/api.ServingPoint) with the values the simulator gives (milliseconds, tokens/s)."""
    ms = lambda v: None if v is None or not math.isfinite(v) else v * 1e3  # noqa: E731
    return dataclasses.replace(
        point, ttft_ms=ms(s.ttft_p50_s), ttft_p50_ms=ms(s.ttft_p50_s), ttft_p90_ms=ms(s.ttft_p90_s),
        ttft_p99_ms=ms(s.ttft_p99_s), tpot_ms=ms(s.tpot_mean_s), request_latency_ms=ms(s.e2e_mean_s),
        tokens_per_s_per_user=None if not s.tpot_mean_s > 0 else 1.0 / s.tpot_mean_s,
        tokens_per_s_per_gpu=s.tokens_per_s_per_gpu, decode_batch=s.mean_decoding, requests_per_s=s.requests_per_s,
        acceptance_length=s.acceptance_length, simulated=dataclasses.asdict(s))


def _arrivals(rs: RequestSet, req: SimRequest) -> str:
    """How the simulated requests arrive, in words."""
    return ("trace " + rs.source if rs.source else
            f"closed loop, {rs.clients} clients starting together (later rounds settled)" if rs.clients
            else "open loop, Poisson" if not req.arrival_cv or req.arrival_cv == 1.0
            else f"open loop, gamma gaps at cv {req.arrival_cv:g}")


def simulate_into(r, wl: Workload, req: SimRequest, dep: Deployment, spec: Speculation):
    """predict's serving answer `r` (planning/predict.PredictAnswer) with its baseline (and speculative) points
    answered by the simulator, for deployment `dep` (its instance's TP or layout, engine, dtypes) and speculation
    `spec`."""
    if wl.mode != "agg":
        raise SpecplanError("--simulate: the simulator serves aggregated deployments (--mode agg)")
    m, hw = load_model(dep.model), load_hardware(dep.hardware)
    prec = resolve_precision(m, hw, dep.dtypes.dtype, dep.dtypes.kv_dtype)
    tp = dep.layout if isinstance(dep.layout, Layout) else dep.tp
    eng = load_engine(dep.engine)
    rs = request_set(req, wl)
    srv = r.serving
    if req.d_schedule is not None and not srv.speculative:
        raise SpecplanError("--d-schedule: a draft-length schedule needs speculation (--mechanism and --draft-len)")
    base = SimSetup(tp, eng, prec, seed=req.seed, kv_offload=req.kv_offload)
    b, s = _simulated(srv.baseline, simulate_serving(m, hw, rs, base)), srv.speculative
    up_tpot, up_tput = srv.speedup_tpot, srv.speedup_throughput
    if s:
        sp = dataclasses.replace(base, mechanism=spec.mechanism, draft_len=int(spec.draft_len),
                                 acceptance=spec.acceptance, draft_model=spec.draft.model,
                                 d_schedule=() if req.d_schedule is None else parse_schedule(req.d_schedule))
        s = _simulated(s, simulate_serving(m, hw, rs, sp))
        if b.tpot_ms and s.tpot_ms:
            up_tpot = b.tpot_ms / s.tpot_ms
        if b.tokens_per_s_per_gpu and s.tokens_per_s_per_gpu:
            up_tput = s.tokens_per_s_per_gpu / b.tokens_per_s_per_gpu
    offload = (f"cached prefixes in host memory, loaded at {hw.host_link_bandwidth_bytes_s / 1e9:g} GB/s"
               if req.kv_offload else None)
    srv = dataclasses.replace(srv, baseline=b, speculative=s, speedup_tpot=up_tpot, speedup_throughput=up_tput,
                              method="simulated", requests_simulated=rs.n, kv_offload=offload,
                              arrivals=_arrivals(rs, req))
    return dataclasses.replace(r, serving=srv)

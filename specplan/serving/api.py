"""One serving configuration as typed records: baseline and speculative serving at the same load (CLI JSON)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from specplan.core.records import Record, record
from specplan.serving.aggregated import aggregated
from specplan.serving.disaggregated import disaggregated
from specplan.serving.workload import Workload
from specplan.speculation.speedup import options_objects

NOTE_WAIT_S = 1e-3  # an admission wait from 1 ms up is named in the point's note
PREFILL_NOTE_UTIL = 0.9  # a disaggregated prefill pool this busy is named in the point's note (its queue dominates TTFT)
KEYS = ("tpot_ms", "ttft_ms", "request_latency_ms", "tokens_per_s_per_user", "tokens_per_s_per_gpu")


def serve(model, hardware, workload: Workload, **kw) -> dict:
    """Aggregated or disaggregated steady state (by workload.mode) from the options by name (options_objects; what
    is left: admission), a ServingGrid."""
    dep, spec, rest = options_objects(model, hardware, **kw)
    if workload.mode == "disagg":
        return disaggregated(dep, spec, workload)
    if dep.prefill_layout is not None:  # one layout serves prefill and decode in an aggregated instance
        from specplan.core.errors import SpecplanError

        raise SpecplanError("prefill layout (--prefill-layout): only with --mode disagg")
    return aggregated(dep, spec, workload, **rest)


def _at(v, i: int):
    """Entry i of a result array over the loads (a single value serves every i)."""
    a = np.asarray(v).reshape(-1)
    return a[i if a.size > 1 else 0]


def admission_note(r, decode_batch: float, wait_ms: float, i: int = 0) -> str:
    """Why a closed loop's requests wait before their prefill (load i of ServingGrid `r`, at that decode batch):
    the running cap (the KV cache's room for ISL + OSL tokens per request beside the weights, max_num_seqs, or the
    engine's lower cap under speculation) or a saturated prefill; `wait_ms` of the TTFT."""
    cap = float(_at(r.running_cap, i))
    if decode_batch >= cap - 0.5:
        kv = float(_at(np.inf if r.kv_cap_requests is None else r.kv_cap_requests, i))
        beside = "beside the target's and the draft's weights, with the draft's KV" if r.kv_cap_draft else \
            "beside the weights"
        if bool(_at(False if r.spec_cap is None else r.spec_cap, i)):
            why = ("the engine's cap when speculating, spec_max_num_seqs: SGLang's default unless "
                   "--max-running-requests is set, as specplan's launch files do")
        elif kv <= cap:
            why = f"the KV cache holds {cap:g} requests of ISL + OSL tokens {beside}"
        else:
            why = f"the engine's max_num_seqs is {cap:g}"
        where = " per decode instance" if r.pools is not None else ""
        return (f"at most {cap:g} requests run at once{where} ({why}); the others wait for admission, "
                f"{wait_ms:.0f} ms of the TTFT")
    return f"the prefill is saturated: requests wait {wait_ms:.0f} ms for admission (part of the TTFT)"


@record
class ServingPoint(Record):
    """One configuration's serving numbers at one load (ms, tokens/s): TPOT None for OSL 1 (no decode), the
    latencies and throughputs None when unstable; the saturation rate (open loop), a note, the admission wait and
    the prefill pool's busy fraction where they apply, the pools (disaggregated); the simulator's TTFT p99 and
    summary where it answered.
    `note_after`: the key the note follows in the mapping (where the old dict answer wrote it), not a key itself."""

    tpot_ms: float | None
    ttft_ms: float | None
    ttft_p50_ms: float | None
    ttft_p90_ms: float | None
    request_latency_ms: float | None
    tokens_per_s_per_user: float | None
    tokens_per_s_per_gpu: float | None
    decode_batch: float | None
    requests_per_s: float | None
    acceptance_length: float | None
    fits: bool
    stable: bool
    saturation_requests_per_s: float | None = None
    admission_wait_ms: float | None = None
    prefill_utilization: float | None = None
    note: str | None = None
    pools: str | None = None
    ttft_p99_ms: float | None = None
    simulated: dict | None = None
    note_after: str = "stable"
    OPTIONAL = ("saturation_requests_per_s", "admission_wait_ms", "prefill_utilization", "note", "pools",
                "ttft_p99_ms", "simulated")

    def _names(self) -> list[str]:
        names = [k for k in super()._names() if k not in ("note", "note_after")]
        if self.note is not None:
            after = self.note_after
            if after == "stable" and self.saturation_requests_per_s is not None:
                after = "saturation_requests_per_s"
            names.insert(names.index(after) + 1, "note")
        return names


def _joined(*notes) -> str | None:
    """The notes given, joined by '; ' (None: none)."""
    return "; ".join(n for n in notes if n) or None


def _point(r, workload: Workload | None = None, i: int = 0) -> ServingPoint:
    """One configuration's numbers (ms, tokens/s) at load i of ServingGrid `r`; TPOT is None for OSL 1 (no decode),
    TTFT None when unstable, with `note` saying why (open loop: arrivals exceed the saturation rate)."""
    def f(v):
        v = None if v is None else float(_at(v, i))
        return None if v is None or not np.isfinite(v) else v

    ms = lambda v: None if f(v) is None else 1e3 * f(v)  # noqa: E731
    stable = bool(_at(r.stable, i))
    fits = bool(_at(r.fits, i))
    sat = f(r.saturation_requests_per_s)
    note, after = ("OSL 1: the prefill makes the only token, so there is no TPOT"
                   if workload is not None and workload.osl == 1 else None), "stable"
    batch = f(r.decode_batch)
    if not stable and r.running_cap is not None:  # an overloaded engine runs at its cap (the open loop's B bounds it)
        batch = min(batch, float(_at(r.running_cap, i)))
    wait = f(r.admission_wait_s) if r.admission_wait_s is not None else None
    wait_ms = None
    if stable and wait and r.running_cap is not None and fits:
        wait_ms = 1e3 * wait
        if wait >= NOTE_WAIT_S:
            after = after if note else "admission_wait_ms"
            note = _joined(note, admission_note(r, batch, wait_ms, i))
    rho = f(r.prefill_utilization) if stable and r.prefill_utilization is not None else None
    if rho is not None and rho >= PREFILL_NOTE_UTIL:  # disaggregated: the prefill pool's busy fraction
        after = after if note else "prefill_utilization"
        note = _joined(note, f"the prefill pool is {100 * rho:.0f} % busy: most of the TTFT is the wait for it "
                             f"(more prefill instances, --pools, would shorten it)")
    if not stable:
        after = after if note else "stable"
        note = (f"unstable: arrivals ({f(r.requests_per_s):.4g} req/s) exceed capacity "
                f"{sat:.4g} req/s" if sat is not None else "unstable: arrivals exceed capacity")
    return ServingPoint(
        ms(r.tpot_s) if stable else None, ms(r.ttft_s) if stable else None,
        ms(r.ttft_p50_s) if stable and r.ttft_p50_s is not None else None,
        ms(r.ttft_p90_s) if stable and r.ttft_p90_s is not None else None,
        ms(r.request_latency_s) if stable else None, f(r.tokens_per_s_per_user) if stable else None,
        f(r.tokens_per_s_per_gpu) if stable else None, batch, f(r.requests_per_s), f(r.acceptance_length),
        fits, stable, sat, wait_ms, rho, note, None if r.pools is None else f"{r.pools[0]}P{r.pools[1]}D",
        note_after=after)


def _speedup(num, den) -> float | None:
    """num / den, None when either is undefined (a TPOT or throughput speedup at the same load)."""
    return num / den if num is not None and den is not None else None


@record
class ServingAnswer(Record):
    """The serving model at one load: mode, engine, ISL, OSL, the load (concurrency or request rate), the baseline
    point, the pools (disaggregated), the speculative point and its speedups (TPOT, throughput; keys present
    whenever a speculative point is), the pools' layouts, energy (predict), and what the simulator adds."""

    mode: str
    engine: str
    isl: int
    osl: int
    concurrency: float | None = None
    request_rate: float | None = None
    baseline: ServingPoint | None = None
    pools: str | None = None
    speculative: ServingPoint | None = None
    speedup_tpot: float | None = None
    speedup_throughput: float | None = None
    decode_layout: str | None = None
    prefill_layout: str | None = None
    layout: str | None = None
    energy: dict | None = None
    method: str | None = None
    requests_simulated: int | None = None
    kv_offload: str | None = None
    arrivals: str | None = None
    OPTIONAL = ("concurrency", "request_rate", "pools", "speculative", "decode_layout", "prefill_layout", "layout",
                "energy", "method", "requests_simulated", "kv_offload", "arrivals")

    def _names(self) -> list[str]:
        return [k for k in super()._names() if self.speculative is not None or not k.startswith("speedup_")]


@record
class ServingSweep(Record):
    """The serving model at several loads: mode, engine, ISL, OSL, a ServingAnswer per load, the pools' layouts."""

    mode: str
    engine: str
    isl: int
    osl: int
    points: list
    decode_layout: str | None = None
    prefill_layout: str | None = None
    layout: str | None = None
    OPTIONAL = ("decode_layout", "prefill_layout", "layout")


def serving_summary(model, hardware, workload: Workload, *, mechanism="none", draft_len=0, acceptance=None,
                    **kw) -> ServingAnswer | ServingSweep:
    """A ServingAnswer (baseline and, with a mechanism, speculative serving at the workload's load; ms, tokens/s);
    with several loads (an array workload.concurrency or request_rate, priced in one vectorized pass) a
    ServingSweep of them."""
    from specplan.profiles.registry import load_engine

    rb = serve(model, hardware, workload, **kw)
    rs = None if mechanism == "none" else serve(model, hardware, workload, mechanism=mechanism, draft_len=draft_len,
                                                acceptance=acceptance, **kw)
    engine = load_engine(options_objects(model, hardware, **kw)[0].engine).id
    loads = np.asarray(workload.concurrency if workload.concurrency is not None else workload.request_rate,
                       dtype=float).reshape(-1)
    closed = workload.concurrency is not None
    points = []
    for i, load in enumerate(loads):  # one entry per load of the already priced arrays (formatting only)
        base = _point(rb, workload, i)  # its pools move up to the answer (the speculative point keeps its own)
        sp = None if rs is None else _point(rs, workload, i)
        points.append(ServingAnswer(
            workload.mode, engine, workload.isl, workload.osl, float(load) if closed else None,
            None if closed else float(load), dataclasses.replace(base, pools=None), base.pools, sp,
            None if sp is None else _speedup(base.tpot_ms, sp.tpot_ms),
            None if sp is None else _speedup(sp.tokens_per_s_per_gpu, base.tokens_per_s_per_gpu)))
    if len(points) == 1:
        return points[0]
    return ServingSweep(workload.mode, engine, workload.isl, workload.osl, points)

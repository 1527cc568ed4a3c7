"""Request-level simulation of one policy: arrivals, continuous batching within the KV capacity, chunked prefill,
draft + verify steps with one D per step, acceptance per request, until every request has finished.

A Python loop runs over steps; every step is numpy over all in-flight requests (never a loop over requests).

Acceptance uses common random numbers: each output token j of request i has one uniform u_ij (drawn once per
seed). A draft of token j is accepted iff u_ij < α_i(j) (α_i drifting linearly over the output, or p_k for the
k-th draft of an iteration with a per-position vector), and an iteration accepts the leading run of accepted
drafts. Every policy sees the same text, so differences between policies are not sampling noise, and the
realized acceptance of any D at any position is fixed in advance (what the clairvoyant bound uses).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specplan.core.records import record
from specplan.adaptive.costs import GraphSet, StepCosts
from specplan.adaptive.policies import Policy, StepView
from specplan.adaptive.records import PolicyRun, StepSeries
from specplan.adaptive.workload import Workload
from specplan.core.progress import Progress

UNLIMITED_GRAPH_BS = 2048  # an engine with decode graphs but no stated largest graph batch (ideal): all captured
PF_EMA = 0.95  # smoothing of the mean prefill seconds per step that the SLO test adds to a decode step


@record
class Engine:
    """Engine profile (specplan/profiles/engine.py) and scheduler limits; None takes the profile's value:
    chunked-prefill token budget per step (max_num_batched_tokens), largest running batch (max_num_seqs; the
    KV capacity limits it too), largest CUDA-graph decode batch (graph_max_batch; given as 0: no stated
    largest, as graph_max_batch: 0 in an engine YAML; once resolved, 0 = no decode graphs), and the running cap of a
    speculating policy (spec_max_num_seqs: SGLang's 48 when the launch gives no --max-running-requests; a given
    max_running is that flag, so it lifts the cap for every policy)."""

    profile: str = "sglang"
    prefill_budget: int | None = None
    max_running: int | None = None
    graph_max_bs: int | None = None
    spec_max_running: int | None = None

    def resolved(self) -> "Engine":
        """The same with every None replaced by the engine profile's value (spec_max_running only when max_running
        is not given); resolving twice changes nothing."""
        from specplan.profiles.registry import load_engine

        from specplan.core.errors import SpecplanError

        e = load_engine(self.profile)
        if self.graph_max_bs and not e.cuda_graphs_decode:  # it turned graphs on for an engine that has none
            raise SpecplanError(f"--graph-max-bs: engine {e.id} captures no CUDA graphs (cuda_graphs_decode: false), "
                                f"got {self.graph_max_bs}; drop the flag or use an engine YAML with graphs")
        # 0 means what graph_max_batch: 0 means in an engine YAML: no stated largest graph batch (all captured)
        given = e.graph_max_batch if self.graph_max_bs is None else self.graph_max_bs
        graphs = (given or UNLIMITED_GRAPH_BS) if e.cuda_graphs_decode else 0
        spec = self.spec_max_running if self.spec_max_running is not None else (
            None if self.max_running is not None else e.spec_max_num_seqs)
        return Engine(self.profile, self.prefill_budget or e.max_num_batched_tokens,
                      self.max_running or e.max_num_seqs, graphs, spec)  # a YAML path stays one

    def running_cap(self, speculates: bool) -> int | None:
        """Largest running batch on this (resolved) engine: max_running, or the speculative cap when the policy
        speculates and the cap is lower (the no-speculation reference, fixed:0, is a server launched without
        speculation)."""
        if speculates and self.spec_max_running is not None and self.max_running is not None:
            return min(self.max_running, self.spec_max_running)
        return self.max_running


def token_uniforms(wl: Workload, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, uniforms): one float32 uniform per output token of every request (common random numbers)."""
    off = np.concatenate([[0], np.cumsum(wl.osl)]).astype(np.int64)
    u = np.random.default_rng([seed, 4]).random(int(off[-1]) + 1, dtype=np.float32)
    return off, u


def thresholds(wl: Workload, req: np.ndarray, pos: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Acceptance probability of the k-th draft of requests `req` at output position `pos` (arrays broadcast)."""
    if wl.per_position:
        p = np.asarray(wl.per_position)
        return p[np.minimum(k, p.size - 1)] + 0.0 * pos
    j = pos + k
    span = np.maximum(wl.osl[req] - 1, 1)
    return np.clip(wl.alpha[req] + wl.drift * j / span, 0.0, 1.0)


def token_runs(wl: Workload, off: np.ndarray, u: np.ndarray, relax: float = 0.0) -> np.ndarray | None:
    """Leading run of accepted drafts starting at every output token (i.i.d. flags u_ij < α_i(j)); None for a
    per-position acceptance, whose test depends on the draft index. A run may cross into the next request's
    tokens: callers cap it by the tokens the request has left."""
    if wl.per_position:
        return None
    n_tok = u.size
    req = np.repeat(np.arange(wl.n), wl.osl)
    j = np.arange(n_tok - 1) - off[req]
    thr = thresholds(wl, req, j, 0)
    thr = np.concatenate([thr + relax * (1.0 - thr), [0.0]])
    idx = np.arange(n_tok, dtype=np.int64)
    nxt = np.minimum.accumulate(np.where(u < thr, n_tok, idx)[::-1])[::-1]
    return (nxt - idx).astype(np.int32)


def accepted_drafts(wl: Workload, off, u, runs, req, pos, d: int, relax: float = 0.0):
    """Accepted drafts of each request for draft length d (from the runs, or the per-position test)."""
    if d == 0:
        return np.zeros(req.size, dtype=np.int64)
    if runs is not None:
        return np.minimum(runs[off[req] + pos], d)
    k = np.arange(d)[None, :]
    idx = np.minimum(off[req, None] + pos[:, None] + k, u.size - 1)
    thr = thresholds(wl, req[:, None], pos[:, None], k)
    return np.cumprod(u[idx] < thr + relax * (1.0 - thr), axis=1).sum(axis=1)


@dataclass
class _Run:
    """The mutable state of one simulation: in-flight requests as aligned arrays, FCFS counters, records."""

    wl: Workload
    costs: StepCosts
    policy: Policy
    engine: Engine
    closed: int | None
    arrival: np.ndarray
    need: np.ndarray  # KV bytes reserved for a request's whole output at admission
    free: float
    max_run: int
    off: np.ndarray
    u: np.ndarray
    runs: np.ndarray | None
    loose: np.ndarray | None
    rng: np.random.Generator
    eager: np.ndarray
    graph_ds: np.ndarray
    has_graph: np.ndarray
    slo_tpot_s: float | None
    first: np.ndarray = None
    finish: np.ndarray = None
    # the in-flight (decoding) requests: id, tokens generated, tokens left; their summed context
    ids: np.ndarray = None
    pos: np.ndarray = None
    left: np.ndarray = None
    ctx_sum: float = 0.0
    adm: int = 0  # requests admitted (FCFS order)
    pf: int = 0  # requests fully prefilled
    pf_done: int = 0  # prompt tokens already prefilled of request `pf`
    reserved: float = 0.0
    n_fin: int = 0
    t: float = 0.0
    lossy_tokens: int = 0
    decode_tokens: int = 0
    eager_steps: int = 0
    pf_mean: float = 0.0  # exponential mean of prefill seconds per decode step (what a request's TPOT carries)
    rec: dict = None

    def __post_init__(self):
        n = self.wl.n
        self.first, self.finish = np.full(n, np.nan), np.full(n, np.nan)
        self.ids, self.pos, self.left = (np.zeros(0, dtype=np.int64) for _ in range(3))
        self.rec = {k: [] for k in ("t_s", "batch", "draft_len", "al", "step_s", "prefill_tokens")}


def _start(wl: Workload, costs: StepCosts, policy: Policy, graphs: GraphSet, engine: Engine,
           slo_tpot_s: float | None, seed: int) -> _Run:
    """The state before the first step: common random numbers, KV budget, graph coverage, eager costs."""
    d_max = costs.d_max
    off, u = token_uniforms(wl, seed)
    runs = token_runs(wl, off, u)
    loose = token_runs(wl, off, u, policy.relax) if policy.relax > 0 else runs
    graph_ds = np.zeros(d_max + 1, dtype=bool)
    graph_ds[[d for d in graphs.ds() if d <= d_max]] = True
    return _Run(
        wl=wl, costs=costs, policy=policy, engine=engine, closed=wl.closed_loop, arrival=wl.arrival_s.copy(),
        need=costs.seq_bytes(wl.isl + wl.osl),
        free=costs.capacity_bytes - costs.fixed_bytes - graphs.cost(costs, costs.model_id, costs.tp).memory_bytes,
        max_run=min(engine.running_cap(policy.speculates) or costs.b_max, costs.b_max), off=off, u=u, runs=runs,
        loose=loose,
        rng=np.random.default_rng([seed, 5]), eager=np.array([costs.eager_extra_s(d) for d in range(d_max + 1)]),
        graph_ds=graph_ds, has_graph=graphs.matrix(costs.b_max, d_max), slo_tpot_s=slo_tpot_s)


def _admit(s: _Run) -> None:
    """Admit arrived requests FCFS while their whole-output KV fits and the running cap allows."""
    n = s.wl.n
    released = n if s.closed is None else min(n, s.closed + s.n_fin)
    arrived = int(np.searchsorted(s.arrival, s.t, side="right")) if s.closed is None else released
    if arrived > s.adm:
        cum = s.reserved + np.cumsum(s.need[s.adm:arrived])
        k = int(np.searchsorted(cum, s.free, side="right"))
        k = min(k, s.max_run - (s.adm - s.n_fin))
        if k <= 0 and s.adm == s.n_fin:
            k = 1  # a request that alone exceeds the capacity still runs (reported as over capacity)
        if k > 0:
            s.reserved = float(cum[k - 1])
            s.adm += k


def _prefill_chunk(s: _Run) -> tuple[int, int]:
    """Chunked prefill, FCFS over admitted requests, at most `prefill_budget` prompt tokens this step:
    (prompt tokens this step, requests whose prompt completes)."""
    if s.pf >= s.adm:
        return 0, 0
    cum = np.cumsum(s.wl.isl[s.pf:s.adm]) - s.pf_done
    pf_tokens = int(min(s.engine.prefill_budget, cum[-1]))
    done = int(np.searchsorted(cum, pf_tokens, side="right"))
    s.pf_done = pf_tokens - int(cum[done - 1]) if done else s.pf_done + pf_tokens
    return pf_tokens, done


def _decode(s: _Run, step_s: float, pf_tokens: int, bar) -> tuple[float, int, int]:
    """One draft + verify step of the in-flight batch at the policy's D: (step s, D that ran, tokens emitted)."""
    wl, costs, policy = s.wl, s.costs, s.policy
    b = s.ids.size
    has = s.has_graph[b - 1]
    dec = costs.at(b, s.ctx_sum / b) + np.where(has, 0.0, s.eager)
    if policy.draft_extend_at_zero:
        dec[0] += costs.draft1(b, s.ctx_sum / b)
    alpha = None
    if not wl.per_position:
        span = np.maximum(wl.osl[s.ids] - 1, 1)
        alpha = wl.alpha[s.ids] + wl.drift * s.pos / span if wl.drift else wl.alpha[s.ids]
        if wl.drift:
            alpha = np.clip(alpha, 0.0, 1.0)
    allowed = has if has.any() else (s.graph_ds if s.graph_ds.any() else np.ones(costs.d_max + 1, bool))
    view = StepView(b, dec + step_s, alpha, wl.per_position, allowed, s.slo_tpot_s, s.rng, dec + s.pf_mean)
    d = int(policy.choose(view))
    acc = accepted_drafts(wl, s.off, s.u, s.loose, s.ids, s.pos, d, policy.relax)
    d_run = d
    if policy.lossy and d:  # ideal entropy stop: each sequence drafts acc + 1, the batch the max
        d_run = int(min(d, acc.max() + 1))
        strict = accepted_drafts(wl, s.off, s.u, s.runs, s.ids, s.pos, d)
        s.lossy_tokens += int(np.sum(np.minimum(acc, s.left) - np.minimum(strict, s.left)))
    step_s += float(dec[d_run])
    s.eager_steps += int(not has[d_run])
    emit = np.minimum(acc + 1, s.left)
    tot = int(emit.sum())
    s.decode_tokens += tot
    s.pos += emit
    s.left -= emit
    s.ctx_sum += tot
    bar.update(tot)
    policy.observe(acc, d, b)
    s.pf_mean = PF_EMA * s.pf_mean + (1.0 - PF_EMA) * costs.prefill_s(pf_tokens)
    return step_s, d_run, tot  # the D that ran (AdaSD's batch drafts its longest accepted run + 1, not its max)


def _retire(s: _Run) -> None:
    """Requests whose output is complete leave the batch, free their KV and (closed loop) release a client."""
    fin = s.left <= 0
    if not fin.any():
        return
    gone = s.ids[fin]
    s.finish[gone] = s.t
    s.reserved -= float(s.need[gone].sum())
    s.n_fin += gone.size
    keep = ~fin
    s.ctx_sum -= float(np.sum(s.wl.isl[gone] + s.pos[fin]))
    s.ids, s.pos, s.left = s.ids[keep], s.pos[keep], s.left[keep]
    if s.closed is not None:
        s.arrival[s.closed + s.n_fin - gone.size:s.closed + s.n_fin] = s.t


def _join(s: _Run, done: int, bar, t_first: float) -> None:
    """Requests whose prompt completed emit their first token at `t_first` and join the decode batch at output
    position 1."""
    new = np.arange(s.pf, s.pf + done)
    s.pf += done
    s.first[new] = t_first
    bar.update(done)
    one = s.wl.osl[new] <= 1
    if one.any():
        s.finish[new[one]] = t_first
        s.reserved -= float(s.need[new[one]].sum())
        s.n_fin += int(one.sum())
        if s.closed is not None:
            s.arrival[s.closed + s.n_fin - int(one.sum()):s.closed + s.n_fin] = t_first
        new = new[~one]
    s.ids = np.concatenate([s.ids, new])
    s.pos = np.concatenate([s.pos, np.ones(new.size, dtype=np.int64)])
    s.left = np.concatenate([s.left, s.wl.osl[new] - 1])
    s.ctx_sum += float(np.sum(s.wl.isl[new] + 1))


def _record(s: _Run, b: int, d: int, tot: int, step_s: float, pf_tokens: int) -> None:
    """Append one step to the time series."""
    for key, v in (("t_s", s.t), ("batch", b), ("draft_len", d), ("al", tot / b if b else np.nan),
                   ("step_s", step_s), ("prefill_tokens", pf_tokens)):
        s.rec[key].append(v)


def simulate(wl: Workload, costs: StepCosts, policy: Policy, graphs: GraphSet, *, engine: Engine = Engine(),
             slo_tpot_s: float | None = None, seed: int = 0, progress: bool | None = None) -> PolicyRun:
    """Run one policy over the workload; per-request times (s), the step time series, and counters."""
    from specplan.profiles.registry import load_engine

    s = _start(wl, costs, policy, graphs, engine.resolved(), slo_tpot_s, seed)
    # where a prompt's first token comes out: an engine that mixes prefill chunks into the decode step (vLLM,
    # TensorRT-LLM) samples it at that step's end; one that runs prefill as a step of its own (SGLang's default)
    # at the prefill's end, before the decode step that follows
    apart = not load_engine(engine.profile).mixed_prefill
    with Progress(int(wl.osl.sum()), f"simulate {policy.name}", enabled=progress) as bar:
        while s.n_fin < wl.n:
            _admit(s)
            b = s.ids.size
            if b == 0 and s.pf == s.adm:
                if s.closed is None and s.adm < wl.n:  # idle until the next arrival
                    s.t = max(s.t, float(s.arrival[s.adm]))
                    continue
                break
            pf_tokens, done = _prefill_chunk(s)
            t0, pf_s = s.t, costs.prefill_s(pf_tokens)
            step_s, d, tot = pf_s, 0, 0
            if b:
                step_s, d, tot = _decode(s, step_s, pf_tokens, bar)
            s.t += step_s
            _record(s, b, d, tot, step_s, pf_tokens)
            if b:
                _retire(s)
            if done:
                _join(s, done, bar, t0 + pf_s if apart else s.t)
    return PolicyRun(policy.name, policy.lossy, s.arrival, s.first, s.finish,
                  StepSeries(*(np.asarray(v, dtype=float) for v in s.rec.values())),
                  s.lossy_tokens / max(s.decode_tokens + wl.n, 1), s.eager_steps, bool(s.need.max() > s.free))

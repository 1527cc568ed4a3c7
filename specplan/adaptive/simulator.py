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

from specplan.adaptive.costs import GraphSet, StepCosts
from specplan.adaptive.policies import Policy, StepView
from specplan.adaptive.workload import Workload
from specplan.core.progress import Progress

UNLIMITED_GRAPH_BS = 2048  # an engine with decode graphs but no stated largest graph batch (ideal): all captured
PF_EMA = 0.95  # smoothing of the mean prefill seconds per step that the SLO test adds to a decode step


@dataclass(frozen=True)
class Engine:
    """Engine profile (specplan/profiles/engine.py) and scheduler limits; None takes the profile's value:
    chunked-prefill token budget per step (max_num_batched_tokens), largest running batch (max_num_seqs; the
    KV capacity limits it too), largest CUDA-graph decode batch (graph_max_batch; given as 0: no stated
    largest, as graph_max_batch: 0 in an engine YAML; once resolved, 0 = no decode graphs)."""

    profile: str = "sglang"
    prefill_budget: int | None = None
    max_running: int | None = None
    graph_max_bs: int | None = None

    def resolved(self) -> "Engine":
        """The same with every None replaced by the engine profile's value."""
        from specplan.profiles.registry import load_engine

        e = load_engine(self.profile)
        # 0 means what graph_max_batch: 0 means in an engine YAML: no stated largest graph batch (all captured)
        given = e.graph_max_batch if self.graph_max_bs is None else self.graph_max_bs
        graphs = (given or UNLIMITED_GRAPH_BS) if e.cuda_graphs_decode else 0
        return Engine(e.id, self.prefill_budget or e.max_num_batched_tokens, self.max_running or e.max_num_seqs,
                      self.graph_max_bs or graphs)


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


def simulate(wl: Workload, costs: StepCosts, policy: Policy, graphs: GraphSet, *, engine: Engine = Engine(),
             slo_tpot_s: float | None = None, seed: int = 0, progress: bool | None = None) -> dict:
    """Run one policy over the workload; per-request times (s), the step time series, and counters."""
    n, d_max = wl.n, costs.d_max
    engine = engine.resolved()
    off, u = token_uniforms(wl, seed)
    runs = token_runs(wl, off, u)
    loose = token_runs(wl, off, u, policy.relax) if policy.relax > 0 else runs
    rng = np.random.default_rng([seed, 5])
    need = costs.seq_bytes(wl.isl + wl.osl)  # KV reserved for a request's whole output at admission
    free = costs.capacity_bytes - costs.fixed_bytes - graphs.cost(costs, costs.model_id)["memory_bytes"]
    max_run = min(engine.max_running or costs.b_max, costs.b_max)
    arrival = wl.arrival_s.copy()
    closed = wl.closed_loop
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    # the in-flight (decoding) requests, as aligned arrays: id, tokens generated, tokens left, context, α now
    ids = np.zeros(0, dtype=np.int64)
    pos = np.zeros(0, dtype=np.int64)
    left = np.zeros(0, dtype=np.int64)
    ctx_sum = 0.0
    adm = pf = 0  # requests admitted / fully prefilled (FCFS order)
    pf_done = 0  # prompt tokens already prefilled of request `pf`
    reserved = 0.0
    n_fin = 0
    t = 0.0
    eager = np.array([costs.eager_extra_s(d) for d in range(d_max + 1)])
    graph_ds = np.zeros(d_max + 1, dtype=bool)
    graph_ds[[d for d in graphs.ds() if d <= d_max]] = True
    has_graph = graphs.matrix(costs.b_max, d_max)
    all_d = np.ones(d_max + 1, bool)
    rec_t, rec_b, rec_d, rec_al, rec_s, rec_pf = [], [], [], [], [], []
    lossy_tokens = decode_tokens = 0
    eager_steps = 0
    pf_mean = 0.0  # exponential mean of prefill seconds per decode step (what a request's TPOT carries)
    span = np.maximum(wl.osl - 1, 1)
    with Progress(int(wl.osl.sum()), f"simulate {policy.name}", enabled=progress) as bar:
        while n_fin < n:
            released = n if closed is None else min(n, closed + n_fin)
            arrived = int(np.searchsorted(arrival, t, side="right")) if closed is None else released
            if arrived > adm:
                cum = reserved + np.cumsum(need[adm:arrived])
                k = int(np.searchsorted(cum, free, side="right"))
                k = min(k, max_run - (adm - n_fin))
                if k <= 0 and adm == n_fin:
                    k = 1  # a request that alone exceeds the capacity still runs (reported as over capacity)
                if k > 0:
                    reserved = float(cum[k - 1])
                    adm += k
            b = ids.size
            if b == 0 and pf == adm:
                if closed is None and adm < n:  # idle until the next arrival
                    t = max(t, float(arrival[adm]))
                    continue
                break
            # chunked prefill: FCFS over admitted requests, at most `prefill_budget` prompt tokens this step
            pf_tokens, done = 0, 0
            if pf < adm:
                cum = np.cumsum(wl.isl[pf:adm]) - pf_done
                pf_tokens = int(min(engine.prefill_budget, cum[-1]))
                done = int(np.searchsorted(cum, pf_tokens, side="right"))
                pf_done = pf_tokens - int(cum[done - 1]) if done else pf_done + pf_tokens
            step_s = costs.prefill_s(pf_tokens)
            d = 0
            if b:
                has = has_graph[b - 1]
                dec = costs.at(b, ctx_sum / b) + np.where(has, 0.0, eager)
                if policy.draft_extend_at_zero:
                    dec[0] += costs.draft1(b, ctx_sum / b)
                alpha = None
                if not wl.per_position:
                    alpha = wl.alpha[ids] + wl.drift * pos / span[ids] if wl.drift else wl.alpha[ids]
                    if wl.drift:
                        alpha = np.clip(alpha, 0.0, 1.0)
                allowed = has if has.any() else (graph_ds if graph_ds.any() else all_d)
                view = StepView(b, dec + step_s, alpha, wl.per_position, allowed, slo_tpot_s, rng, dec + pf_mean)
                d = int(policy.choose(view))
                acc = accepted_drafts(wl, off, u, loose, ids, pos, d, policy.relax)
                d_run = d
                if policy.lossy and d:  # ideal entropy stop: each sequence drafts acc + 1, the batch the max
                    d_run = int(min(d, acc.max() + 1))
                    strict = accepted_drafts(wl, off, u, runs, ids, pos, d)
                    lossy_tokens += int(np.sum(np.minimum(acc, left) - np.minimum(strict, left)))
                step_s += float(dec[d_run])
                eager_steps += int(not has[d_run])
                emit = np.minimum(acc + 1, left)
                tot = int(emit.sum())
                decode_tokens += tot
                pos += emit
                left -= emit
                ctx_sum += tot
                bar.update(tot)
                policy.observe(acc, d, b)
                pf_mean = PF_EMA * pf_mean + (1.0 - PF_EMA) * costs.prefill_s(pf_tokens)
            t += step_s
            rec_t.append(t)
            rec_b.append(b)
            rec_d.append(d)
            rec_al.append(tot / b if b else np.nan)
            rec_s.append(step_s)
            rec_pf.append(pf_tokens)
            if b:
                fin = left <= 0
                if fin.any():
                    gone = ids[fin]
                    finish[gone] = t
                    reserved -= float(need[gone].sum())
                    n_fin += gone.size
                    keep = ~fin
                    ctx_sum -= float(np.sum(wl.isl[gone] + pos[fin]))
                    ids, pos, left = ids[keep], pos[keep], left[keep]
                    if closed is not None:
                        arrival[closed + n_fin - gone.size:closed + n_fin] = t
            if done:
                new = np.arange(pf, pf + done)
                pf += done
                first[new] = t
                bar.update(done)
                one = wl.osl[new] <= 1
                if one.any():
                    finish[new[one]] = t
                    reserved -= float(need[new[one]].sum())
                    n_fin += int(one.sum())
                    if closed is not None:
                        arrival[closed + n_fin - int(one.sum()):closed + n_fin] = t
                    new = new[~one]
                ids = np.concatenate([ids, new])
                pos = np.concatenate([pos, np.ones(new.size, dtype=np.int64)])
                left = np.concatenate([left, wl.osl[new] - 1])
                ctx_sum += float(np.sum(wl.isl[new] + 1))
    series = {"t_s": rec_t, "batch": rec_b, "draft_len": rec_d, "al": rec_al, "step_s": rec_s,
              "prefill_tokens": rec_pf}
    return {
        "policy": policy.name, "lossy": policy.lossy, "arrival_s": arrival, "first_token_s": first,
        "finish_s": finish, "series": {k: np.asarray(v, dtype=float) for k, v in series.items()},
        "relaxed_token_fraction": lossy_tokens / max(decode_tokens + n, 1),
        "eager_steps": eager_steps, "over_capacity": bool(need.max() > free),
    }

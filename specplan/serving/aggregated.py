"""Aggregated (in-flight batching) serving in steady state: TPOT, TTFT, request latency and tokens/s.

Model (docs/serving.md): C requests in flight (closed loop) or λ requests/s (open loop), each with ISL prompt
tokens and OSL output tokens. A request's first token comes from its prefill; the remaining OSL - 1 take
N_d = (OSL - 1) / AL engine iterations (AL = 1 without speculation). With B requests decoding and request
throughput X = B / (N_d τ) (Little's law), every iteration carries on average X·τ = B / N_d prompts, i.e.
B·ISL·AL/(OSL-1) prompt tokens (the issue's C·ISL·AL/OSL with B ≈ C), in chunks of at most the engine's
token budget. A prompt adds ΔP(B) seconds to the iterations that carry it (GPU: mixed-step GEMMs at
M = decode tokens + chunk, causal prefill attention, KV writes; engine: eager launches of those steps), so

    τ = T_iter(B) + (B / N_d)·ΔP(B),

with T_iter(B) the decode (or speculative) iteration at mean context ISL + OSL/2 plus the engine's host time
and launch cost. TTFT = queueing + prefill service: half an iteration to the next step boundary, an M/D/1
wait on the prefill (busy fraction u = X·(t_iter/k + ΔP) with k prompts per step: prefill_utilization), and, with the engine's
`admission: next_departure`, the wait for a request slot to free (1/X: the slot of a finishing request frees
only after its successor arrived, as in the TRT-LLM benchmark runs where max batch = concurrency), and in a
closed loop the prompts of the `prefill_cohort` fraction of the other C - 1 requests that arrive bunched with
it (requests of equal lengths released together stay in cohorts; fitted on TTFT, docs/validation/serving.md). Closed
loop: C = B + X·TTFT is solved for B by bisection (vectorized over the grid). TPOT = τ / AL.

Two stages: `gpu_tables` prices every GPU quantity once on a geometric grid of decode batches (one vectorized
pass through the roofline), `solve` adds the engine's host costs and solves the steady state by interpolating
the tables; calibration (specplan.validation.serving) refits engine numbers on the same tables.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specplan.core.limits import check_prefill_steps
from specplan.model.memory import memory_usage
from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_engine, load_hardware, load_kernel_family, load_model
from specplan.serving.prefill import mixed_step_s, prefill_s
from specplan.serving.workload import Workload
from specplan.speculation.speedup import evaluate
from specplan.model.step import step_time

BISECTION_STEPS = 30
GRID_POINTS = 40
MIN_CHUNK = 512  # tokens: prefill still advances when decode rows fill the step budget (assumption)


_KERNELS: dict = {}


def step_kernels(model, hw, tp) -> int:
    """Kernel launches of one decode step of `model` (the engine's launch cost multiplies it)."""
    key = (id(model), id(hw), tp)
    if key not in _KERNELS:
        _KERNELS[key] = (model, hw, step_time(model, hw, tp, 1, 1, 1).kernels)  # holds the objects: ids stay valid
    return _KERNELS[key][2]


def draft_prefill_model(model, mechanism, draft_model=None):
    """The model a mechanism runs over the prompt besides the target (external draft, EAGLE-3 head, MTP
    module), or None (n-gram, Medusa, DFlash/DSpark drafting from target states, self-speculation)."""
    from specplan.speculation.drafters import eagle3_head, mtp_module

    if mechanism == "external" and draft_model is not None:
        return load_model(draft_model)
    if mechanism == "eagle3":
        return eagle3_head(model, None if draft_model is None else load_model(draft_model))
    if mechanism == "mtp":
        return mtp_module(model)
    return None


def _decode_iteration_gpu(model, hw, tp, batch, context, eng, spec, prec):
    """evaluate() at `batch`: GPU seconds of one decode (or speculative) iteration, with the spec host costs."""
    return evaluate(model, hw, tp=tp, batch=batch, context_len=context, engine=eng, dtype=prec.compute,
                    kv_dtype=prec.kv, **spec)


def decode_graphed(eng, batch) -> np.ndarray:
    """True where a decode step of `batch` sequences replays a CUDA graph (captured up to graph_max_batch)."""
    cap = eng.graph_max_batch if eng.graph_max_batch else np.inf
    return eng.cuda_graphs_decode & (np.asarray(batch, dtype=float) <= cap)


@dataclass
class GpuTables:
    """GPU seconds of one serving configuration on a grid of decode batches (axis 0), grid points after it."""

    log_b: np.ndarray  # (G,) log of the decode batches of the grid
    iter_gpu_s: np.ndarray  # (G, *shape) decode / speculative iteration (GPU + speculative host costs)
    al: np.ndarray  # (*shape) acceptance length
    q: np.ndarray  # (*shape) tokens verified per sequence per iteration
    kernels: np.ndarray  # (*shape) kernel launches per iteration
    chunk_gpu_s: np.ndarray  # (chunks, G, *shape) GPU seconds each prefill chunk of a prompt adds to its step
    n_chunks: np.ndarray  # (G, *shape)
    draft_prefill_s: np.ndarray  # (G, *shape) the draft's own prefill of one prompt (0 without one)
    fits: np.ndarray  # (G, *shape) memory fits at that decode batch
    evaluate_at_b: object = None  # evaluate() result on the grid (for reporting)
    _stack: np.ndarray | None = None

    def at(self, b):
        """(iteration GPU s, chunk GPU s per chunk, chunks, draft prefill s) interpolated linearly in log batch
        at decode batches `b` (shape *shape)."""
        if self._stack is None:
            self._stack = np.concatenate([self.iter_gpu_s[None], self.n_chunks[None], self.draft_prefill_s[None],
                                          self.chunk_gpu_s], axis=0)
        lb = np.log(np.clip(np.asarray(b, dtype=float), np.exp(self.log_b[0]), np.exp(self.log_b[-1])))
        i = np.clip(np.searchsorted(self.log_b, lb) - 1, 0, len(self.log_b) - 2)
        w = (lb - self.log_b[i]) / (self.log_b[i + 1] - self.log_b[i])
        idx = np.indices(lb.shape)
        lo = self._stack[(slice(None), i, *idx)]
        hi = self._stack[(slice(None), i + 1, *idx)]
        v = lo + w * (hi - lo)
        return v[0], v[3:], v[1], v[2]


def gpu_tables(model, hw, tp, wl: Workload, eng, spec: dict, prec, b_max, draft=None) -> GpuTables:
    """Price every GPU quantity of aggregated serving once, on up to GRID_POINTS whole decode batches 1 ... b_max
    (geometric); `solve` interpolates linearly in log batch between them."""
    d = np.asarray(spec.get("draft_len", 0), dtype=float)
    top = max(float(np.ceil(b_max)), 2.0)  # step costs are priced at whole batches, interpolated between
    grid = np.unique(np.round(np.geomspace(1.0, top, GRID_POINTS)))
    b = grid.reshape((-1,) + (1,) * d.ndim) * np.ones((1,) + d.shape)
    r = _decode_iteration_gpu(model, hw, tp, b, wl.decode_context, eng, spec, prec)
    q = np.asarray(r["verify_tokens"], dtype=float)
    q_max = float(np.max(q))
    budget = float(eng.max_num_batched_tokens)
    # chunked prefill fills what the decode rows leave of the budget, at least MIN_CHUNK tokens (assumption)
    chunk = (np.minimum(float(wl.isl), np.maximum(budget - b * q_max, min(MIN_CHUNK, budget))) if eng.chunked_prefill
             else np.full(b.shape, float(wl.isl)))
    check_prefill_steps(wl.isl, min(MIN_CHUNK, budget) if eng.chunked_prefill else wl.isl,
                        f"engine {eng.id} max_num_batched_tokens")  # a bounded loop over the prompt's chunks
    n_chunks = np.ceil(wl.isl / chunk)
    fam = load_kernel_family(eng.decode_attention)
    dec = mixed_step_s(model, hw, tp, b, wl.decode_context, 0, 0, precision=prec, engine=eng, decode_family=fam)
    chunks = []
    for k in range(int(np.max(n_chunks))):
        live = k < n_chunks
        c = np.where(live, np.minimum(chunk, wl.isl - k * chunk), 0.0)
        t = mixed_step_s(model, hw, tp, b, wl.decode_context, c, k * chunk, precision=prec, engine=eng,
                         decode_family=fam)
        chunks.append(np.where(live, t - dec, 0.0))
    dp = np.zeros(b.shape)
    if draft is not None:
        dm, dprec = draft
        dp = dp + prefill_s(dm, hw, tp if dm.num_q_heads % tp == 0 else 1, wl.isl, precision=dprec, engine=eng)
        dp = np.where(d > 0, dp, 0.0)
    kernels = step_kernels(model, hw, tp) * (1.0 + np.asarray(r["rho_d"])[0])
    n_chunks = np.broadcast_to(n_chunks, b.shape)
    dp = np.broadcast_to(dp, b.shape)
    return GpuTables(np.log(grid), np.broadcast_to(np.asarray(r["iter_s"]), b.shape),
                     np.asarray(r["acceptance_length"])[0], q[0], kernels,
                     np.asarray(chunks).reshape((-1,) + b.shape), n_chunks, dp, np.asarray(r["fits"]), r)


def _queue_wait_s(tau, u, service_s):
    """Half an iteration to the next step boundary plus an M/D/1 wait at prefill busy fraction u (inf at u >= 1)."""
    u = np.asarray(u, dtype=float)
    mdl = np.where(u < 1.0, u / (2.0 * np.maximum(1.0 - u, 1e-12)) * service_s, np.inf)
    return tau / 2.0 + mdl


def prefill_utilization(eng, wl: Workload, decode_tokens, x, t_it, d_p):
    """Fraction of time the engine's prefill is busy: X · (t_it / k + ΔP), k prompts per step.

    A prompt is served by the step(s) that carry its chunks: ΔP, what it adds to them, plus its share 1/k of their
    base time t_it, where k is the number of prompts one step's leftover budget (max_num_batched_tokens - decode
    tokens) holds: budget / ISL with chunked prefill (k < 1: a prompt spans 1/k steps), else whole prompts,
    max(1, floor(budget / ISL)) of them (a 5000-token prompt under an 8192 budget is alone in its step)."""
    avail = np.maximum(eng.max_num_batched_tokens - np.asarray(decode_tokens, dtype=float), 1.0)
    k = avail / wl.isl if eng.chunked_prefill else np.maximum(np.floor(avail / wl.isl), 1.0)
    return x * (t_it / k + d_p)


def state(tab: GpuTables, eng, wl: Workload, b, admission: str = "immediate"):
    """Iteration seconds τ, request throughput X (1/s) and TTFT (s) at decode batch `b` (steady state)."""
    b = np.maximum(np.asarray(b, dtype=float), 1.0)  # a fraction of a sequence decodes at the cost of one
    it_gpu, chunks, n_chunks, dp_draft = tab.at(b)
    t_it = eng.step_s(it_gpu, b, tab.kernels, decode_graphed(eng, b))
    # a step that carries a prefill chunk runs eagerly, with one more running request
    d_p = sum((eng.step_s(it_gpu + c, b + 1.0, tab.kernels, False) - t_it) * (c > 0) for c in chunks) + dp_draft
    n_d = np.maximum((wl.osl - 1.0) / tab.al, 1e-9)
    tau = t_it + b * d_p / n_d  # B / N_d prompts enter per iteration
    x = b / (n_d * tau)
    u = prefill_utilization(eng, wl, b * tab.q, x, t_it, d_p)
    service = n_chunks * np.maximum(tau, t_it + d_p / n_chunks)  # the iterations that carry its chunks
    ttft = _queue_wait_s(tau, u, service) + service
    if eng.ttft_includes_first_decode:
        ttft = ttft + tau
    if wl.concurrency is not None and eng.prefill_cohort:  # bunched prompts of other requests ahead of it
        ttft = ttft + eng.prefill_cohort * np.maximum(np.asarray(wl.concurrency, dtype=float) - 1.0, 0.0) * d_p
    if admission == "next_departure" and wl.concurrency is not None:
        ttft = ttft + 1.0 / x  # the slot frees only at the next departure: one request always waits
    return tau, x, ttft


def solve(tab: GpuTables, eng, wl: Workload, admission: str = "immediate") -> dict:
    """Steady state from the tables: closed loop C = B + X·TTFT by bisection, or open loop B = λ·N_d·τ(B)."""
    shape = np.shape(tab.al)
    if wl.concurrency is not None:
        c = np.asarray(wl.concurrency, dtype=float) * np.ones(shape)
        lo, hi = np.full(c.shape, 1e-6), c.copy()
        for _ in range(BISECTION_STEPS):  # C = B + X·TTFT, increasing in B
            mid = (lo + hi) / 2.0
            _, x, ttft = state(tab, eng, wl, mid, admission)
            over = mid + x * np.nan_to_num(ttft, posinf=1e30) > c
            hi = np.where(over, mid, hi)
            lo = np.where(over, lo, mid)
        b = lo
        tau, x, ttft = state(tab, eng, wl, b, admission)
        stable = np.ones(c.shape, dtype=bool)
    else:
        lam = float(wl.request_rate)
        n_d = np.maximum((wl.osl - 1.0) / tab.al, 1e-9)
        b = np.ones(shape)
        for _ in range(BISECTION_STEPS * 2):  # B = λ · N_d · τ(B), an increasing map iterated from below
            tau, _, _ = state(tab, eng, wl, b, admission)
            b = np.minimum(lam * n_d * tau, np.exp(tab.log_b[-1]) * 2)
        tau, _, ttft = state(tab, eng, wl, b, admission)
        x = np.full(shape, lam)
        stable = np.isfinite(ttft) & (b <= np.exp(tab.log_b[-1]))
        c = b + x * np.where(np.isfinite(ttft), ttft, 0.0)
    return {"tpot_s": tau / tab.al, "ttft_s": ttft, "iteration_s": tau, "decode_batch": b, "requests_per_s": x,
            "concurrency": c, "stable": stable}


def aggregated(model, hardware, workload: Workload, *, tp=1, engine=None, mechanism="none", draft_len=0,
               acceptance=None, dtype=None, kv_dtype=None, draft_model=None, admission=None,
               **spec_kw) -> dict:
    """Steady-state aggregated serving (arrays over draft_len, and over concurrency when it is an array).

    Keys: tpot_s, ttft_s, request_latency_s, tokens_per_s_per_user, tokens_per_s_per_gpu, decode_batch,
    prefill_tokens_per_step, iteration_s, acceptance_length, requests_per_s, concurrency, fits, stable."""
    m = load_model(model)
    hw = load_hardware(hardware)
    eng = load_engine(engine)
    workload.check(m)
    prec = resolve_precision(m, hw, dtype, kv_dtype)
    conc = None if workload.concurrency is None else np.asarray(workload.concurrency, dtype=float)
    d = np.asarray(draft_len, dtype=float)
    if conc is not None:
        d = d * np.ones(np.broadcast(d, conc).shape)
    spec = dict(mechanism=mechanism, draft_len=d, acceptance=acceptance, draft_model=draft_model, **spec_kw)
    dpm = draft_prefill_model(m, mechanism, draft_model)
    draft = None if dpm is None or np.all(d == 0) else (dpm, resolve_precision(dpm, hw, dtype, kv_dtype))
    b_max = float(np.max(conc)) if conc is not None else float(eng.max_num_seqs)
    tab = gpu_tables(m, hw, tp, workload, eng, spec, prec, b_max, draft)
    out = solve(tab, eng, workload, admission or eng.admission)
    tpot = out["tpot_s"]
    x = out["requests_per_s"]
    mem = memory_usage(m, hw, tp, np.maximum(np.ceil(out["concurrency"]), 1), workload.isl + workload.osl, prec)
    devices = float(tp)
    return {
        **out, "request_latency_s": out["ttft_s"] + (workload.osl - 1.0) * tpot,
        "tokens_per_s_per_user": 1.0 / tpot, "tokens_per_s_per_gpu": x * workload.osl / devices,
        "prefill_tokens_per_step": x * workload.isl * out["iteration_s"], "acceptance_length": tab.al,
        "fits": np.asarray(mem.fits), "devices": devices,
    }

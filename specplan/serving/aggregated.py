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
closed loop, only where asked (Workload.startup_cohort), the start-up term (C - 1)·(startup_client_s +
startup_prefill_frac·(t_iter/k + ΔP)) of a benchmark whose clients all start at once (fitted on TTFT,
docs/validation/serving.md). Closed
loop: C = B + X·TTFT is solved for B by bisection (vectorized over the grid). TPOT = τ / AL.

Two stages: `gpu_tables` prices every GPU quantity once on a geometric grid of decode batches (one vectorized
pass through the roofline), `solve` adds the engine's host costs and solves the steady state by interpolating
the tables; calibration (specplan.validation.serving) refits engine numbers on the same tables.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np

from specplan.core.limits import check_prefill_steps
from specplan.core.records import Record, record
from specplan.model.memory import memory_usage
from specplan.costs.precision import Dtypes, resolve_precision
from specplan.profiles.engine import engine_hardware
from specplan.profiles.registry import load_engine, load_hardware, load_kernel_family, load_model
from specplan.serving.grid import ServingGrid
from specplan.serving.prefill import mixed_step_s, StepMix, prefill_s
from specplan.serving.workload import Workload
from specplan.speculation.round import RoundShape, round_gpu_extra_s, round_s
from specplan.speculation.speedup import evaluate
from specplan.model.parallel import Layout, attention_tp, dp_ranks, draft_parallelism, instance_call, serving_parallelism
from specplan.model.deployment import Deployment
from specplan.model.step import StepKernels, step_time
from specplan.speculation.spec import Speculation

BISECTION_STEPS = 30
GRID_POINTS = 40
MIN_CHUNK = 512  # tokens: prefill still advances when decode rows fill the step budget (assumption)


_KERNELS: dict = {}


def step_kernels(model, hw, tp, eng=None, prec=None) -> int:
    """Kernel launches of one decode step of `model` (the engine's launch cost multiplies it), on `eng`'s kernels
    (its MoE path's count, engine_hardware) at precision `prec` (default: the checkpoint's)."""
    hw = engine_hardware(hw, eng)
    key = (id(model), id(hw), tp, id(prec))
    if key not in _KERNELS:  # holds the objects: ids stay valid
        t, lay, b = instance_call(tp, 1)  # a Layout: its all-to-all kernels counted too
        _KERNELS[key] = (model, hw, prec, step_time(model, hw, t, b, 1, 1, precision=prec, **lay).kernels)
    return _KERNELS[key][3]


def draft_prefill_model(model, mechanism, draft_model=None):
    """The model a mechanism runs over the prompt besides the target (external draft, EAGLE-3 head, MTP
    module), or None (n-gram, Medusa, DFlash/DSpark drafting from target states, self-speculation): the same
    model whose extend pass the speculative round runs."""
    from specplan.speculation.round import round_draft_model

    return round_draft_model(model, mechanism, draft_model)


@record
class StepOptions:
    """What a serving call prices each step with beyond the engine, TP and precision it resolves itself: the
    Speculation (mechanism, D, acceptance, draft placement, tree, heads), the deployment's source of speculative
    host costs (None: the engine's) and its kernel choices (attention style, MoE routing)."""

    spec: Speculation = field(default_factory=Speculation)
    serving: object = None
    kernels: StepKernels = field(default_factory=StepKernels)

    @property
    def draft_len(self):
        return self.spec.draft_len

    @property
    def mechanism(self) -> str:
        return self.spec.mechanism

    def with_draft_len(self, d) -> "StepOptions":
        """The same options at draft length(s) `d`."""
        return replace(self, spec=replace(self.spec, draft_len=d))

    def evaluate(self, model, hw, tp, eng, prec, *, batch, context_len):
        """speculation/speedup.evaluate of these options for `model` on `hw` at `tp` (an int or a Layout, as
        parallel.instance_call takes it) under engine `eng` at the resolved precision `prec`."""
        t, lay, b = instance_call(tp, batch)  # a Layout's batch is one DP rank's: the instance holds DP x batch
        dep = Deployment(model, hw, t, dtypes=Dtypes(prec.compute, prec.kv), precision=prec, kernels=self.kernels,
                         engine=eng, serving=self.serving, **lay)
        return evaluate(dep, self.spec, batch=b, context_len=context_len)


def _decode_iteration_gpu(model, hw, tp, batch, context, eng, spec: StepOptions, prec):
    """evaluate() at `batch`: GPU seconds of one decode (or speculative) iteration, with the spec host costs, at
    the resolved precision `prec` (its per-module weight formats kept: MXFP4 experts stay MXFP4)."""
    return spec.evaluate(model, hw, tp, eng, prec, batch=batch, context_len=context)


def decode_graphed(eng, batch) -> np.ndarray:
    """True where a decode step of `batch` sequences replays a CUDA graph (captured up to graph_max_batch)."""
    return eng.graphed(batch)


@dataclass
class GpuTables:
    """GPU seconds of one serving configuration on a grid of decode batches (axis 0), grid points after it."""

    log_b: np.ndarray  # (G,) log of the decode batches of the grid
    iter_gpu_s: np.ndarray  # (G, *shape) decode / speculative iteration (GPU + speculative host costs)
    al: np.ndarray  # (*shape) acceptance length
    q: np.ndarray  # (*shape) tokens verified per sequence per iteration
    kernels: np.ndarray  # (*shape) kernel launches per iteration
    chunk_gpu_s: np.ndarray  # (chunks, G, *shape) GPU seconds each prefill chunk of a prompt adds to its step
    chunk_tokens: np.ndarray  # (chunks, G, *shape) prompt tokens of each chunk (0 past the prompt's last)
    n_chunks: np.ndarray  # (G, *shape)
    draft_prefill_s: np.ndarray  # (G, *shape) the draft's own prefill of one prompt (0 without one)
    fits: np.ndarray  # (G, *shape) memory fits at that decode batch
    evaluate_at_b: object = None  # evaluate() result on the grid (for reporting)
    prefill_alone_gpu_s: float = 0.0  # GPU seconds of one prompt's prefill steps without decode rows (OSL 1)
    draft_len: np.ndarray | float = 0.0  # (*shape) D of each grid point (0: no speculation)
    draft_kernels: np.ndarray | float = 0.0  # (*shape) of `kernels`, those of the draft (launched at its graph state)
    _stack: np.ndarray | None = None

    def at(self, b):
        """(iteration GPU s, chunk GPU s per chunk, chunks, draft prefill s, chunk tokens per chunk) interpolated
        linearly in log batch at decode batches `b` (shape *shape)."""
        if self._stack is None:
            self._stack = np.ascontiguousarray(np.concatenate(  # C order: _rows_at gathers from a flat view
                [self.iter_gpu_s[None], self.n_chunks[None], self.draft_prefill_s[None], self.chunk_gpu_s,
                 self.chunk_tokens], axis=0))
        lb = np.log(np.clip(np.asarray(b, dtype=float), np.exp(self.log_b[0]), np.exp(self.log_b[-1])))
        i = np.clip(np.searchsorted(self.log_b, lb) - 1, 0, len(self.log_b) - 2)
        w = (lb - self.log_b[i]) / (self.log_b[i + 1] - self.log_b[i])
        lo, hi = _rows_at(self._stack, i)
        v = lo + w * (hi - lo)
        n = len(self.chunk_gpu_s)
        return v[0], v[3:3 + n], v[1], v[2], v[3 + n:]


def _rows_at(stack: np.ndarray, i: np.ndarray):
    """(stack[:, i, *p], stack[:, i + 1, *p]) at every point p of the tables' own dims (the trailing dims of `i`;
    `i` may add leading ones: K engine variants, a fit): one gather on a flat axis when the table's dims are i's
    trailing ones, else by advanced indexing (the same numbers either way)."""
    nd = stack.ndim - 2
    tail = i.shape[i.ndim - nd:]
    if i.ndim >= nd and tuple(stack.shape[2:]) == tuple(tail):
        n = int(np.prod(tail, dtype=np.int64))
        flat = stack.reshape(stack.shape[0], -1)
        j = (i.reshape(i.shape[:i.ndim - nd] + (n,)) * n + np.arange(n)).reshape(-1)
        rows = np.take(flat, np.concatenate([j, j + n]), axis=1)
        shape = (stack.shape[0],) + i.shape
        return rows[:, :j.size].reshape(shape), rows[:, j.size:].reshape(shape)
    idx = np.indices(i.shape)[i.ndim - nd:]
    return stack[(slice(None), i, *idx)], stack[(slice(None), i + 1, *idx)]


# GpuTables fields whose last axis runs over the configurations (draft lengths); log_b and the scalars do not
_PER_CONFIG = ("iter_gpu_s", "al", "q", "kernels", "chunk_gpu_s", "chunk_tokens", "n_chunks", "draft_prefill_s",
               "fits", "draft_len",
               "draft_kernels")


def gpu_tables(model, hw, tp, wl: Workload, eng, spec: StepOptions, prec, b_max, draft=None) -> GpuTables:
    """Price every GPU quantity of aggregated serving once, on up to GRID_POINTS whole decode batches 1 ... b_max
    (geometric); `solve` interpolates linearly in log batch between them. The GPU costs depend on the draft length,
    not on the concurrency: a (concurrency x D) grid is priced once per distinct D and spread back
    (`evaluate_at_b` stays at the distinct D)."""
    d = np.asarray(spec.draft_len, dtype=float)
    if d.ndim >= 1 and d.size > 1 and only_draft_len_varies(spec):
        du, inv = np.unique(d, return_inverse=True)
        if du.size < d.size:
            t = _gpu_tables(model, hw, tp, wl, eng, spec.with_draft_len(du), prec, b_max, draft)
            idx = np.asarray(inv).reshape(d.shape)
            return dataclasses.replace(t, **{k: np.asarray(getattr(t, k))[..., idx] for k in _PER_CONFIG
                                 if np.ndim(getattr(t, k)) and np.shape(getattr(t, k))[-1] == du.size})
    return _gpu_tables(model, hw, tp, wl, eng, spec, prec, b_max, draft)


def only_draft_len_varies(spec: StepOptions) -> bool:
    """True when no option but the draft length is an array (a per-point tree size, say): then a grid's costs can
    be priced per distinct draft length."""
    s, dr = spec.spec, spec.spec.draft
    others = (s.mechanism, s.acceptance, dr.model, dr.hardware, dr.dtype, dr.kv_budget, s.tree_tokens, s.draft_heads,
              spec.serving, spec.kernels.attention_style, spec.kernels.routing)
    return not any(isinstance(v, np.ndarray) and v.size > 1 for v in others)


def _gpu_tables(model, hw, tp, wl: Workload, eng, spec: StepOptions, prec, b_max, draft=None) -> GpuTables:
    """gpu_tables at the draft lengths `spec` gives, every point priced."""
    d = np.asarray(spec.draft_len, dtype=float)
    top = max(float(np.ceil(b_max)), 2.0)  # step costs are priced at whole batches, interpolated between
    grid = np.unique(np.round(np.geomspace(1.0, top, GRID_POINTS)))
    b = grid.reshape((-1,) + (1,) * d.ndim) * np.ones((1,) + d.shape)
    r = _decode_iteration_gpu(model, hw, tp, b, wl.decode_context, eng, spec, prec)
    q = np.asarray(r.verify_tokens, dtype=float)
    qb = q * np.ones(b.shape)  # verify rows are q tokens each, in the budget and in the mixed steps (issue 19)
    budget = float(eng.max_num_batched_tokens)
    # chunked prefill fills what the decode rows leave of the budget, at least MIN_CHUNK tokens (assumption)
    if not eng.mixed_prefill:  # prefill steps of their own: the whole budget, no decode rows
        chunk = np.full(b.shape, min(float(wl.isl), budget) if eng.chunked_prefill else float(wl.isl))
    elif eng.chunked_prefill:  # chunked prefill fills what the decode rows leave, at least MIN_CHUNK (assumption)
        chunk = np.minimum(float(wl.isl), np.maximum(budget - b * qb, min(MIN_CHUNK, budget)))  # each D its own
    else:
        chunk = np.full(b.shape, float(wl.isl))
    check_prefill_steps(wl.isl, min(MIN_CHUNK, budget) if eng.chunked_prefill else wl.isl,
                        f"engine {eng.id} max_num_batched_tokens")  # a bounded loop over the prompt's chunks
    n_chunks = np.ceil(wl.isl / chunk)
    fam = load_kernel_family(eng.family_id("decode_attention", hw))
    rows = b if eng.mixed_prefill else 0.0 * b
    dec = mixed_step_s(model, hw, tp, StepMix(rows, wl.decode_context, 0, 0, q_len=qb), precision=prec, engine=eng,
                       decode_family=fam)
    chunks, tokens = [], []
    for k in range(int(np.max(n_chunks))):
        live = k < n_chunks
        c = np.where(live, np.minimum(chunk, wl.isl - k * chunk), 0.0)
        tokens.append(c * np.ones(b.shape))
        t = mixed_step_s(model, hw, tp, StepMix(rows, wl.decode_context, c, k * chunk, q_len=qb), precision=prec,
                         engine=eng, decode_family=fam)
        # mixed: what the chunk adds to a decode step; apart: the whole prefill step (GPU seconds)
        chunks.append(np.where(live, t - dec if eng.mixed_prefill else t, 0.0))
    dp = np.zeros(b.shape)
    if draft is not None:
        dm, dprec = draft
        dp = dp + prefill_s(dm, hw, draft_parallelism(dm, tp), wl.isl, precision=dprec, engine=eng)
        dp = np.where((d > 0) | eng.zero_draft_extend, dp, 0.0)
    kernels = step_kernels(model, hw, tp, eng, prec) * (1.0 + np.asarray(r.rho_d)[0])
    n_chunks = np.broadcast_to(n_chunks, b.shape)
    dp = np.broadcast_to(dp, b.shape)
    alone = float(prefill_s(model, hw, tp, wl.isl, precision=prec, engine=eng)) if wl.osl == 1 else 0.0
    it = np.asarray(r.iter_s) + round_gpu_extra_s(model, engine_hardware(hw, eng), tp,
                                                     RoundShape(b, d, q, wl.decode_context),
                                                     spec.mechanism, draft, eng=eng)
    return GpuTables(np.log(grid), np.broadcast_to(it, b.shape),
                     np.asarray(r.acceptance_length)[0], q[0], kernels,
                     np.asarray(chunks).reshape((-1,) + b.shape), np.asarray(tokens).reshape((-1,) + b.shape),
                     n_chunks, dp, np.asarray(r.fits), r, alone,
                     draft_len=d * np.ones(q[0].shape),
                     draft_kernels=step_kernels(model, hw, tp, eng, prec) * np.asarray(r.rho_d)[0])


def prompt_step_s(tab: GpuTables, eng, it_gpu, chunks, bc, t_it, rnd, tokens):
    """Seconds one prompt adds to the engine's time line: mixed prefill, what its chunks (GPU seconds `chunks`,
    prompt tokens `tokens`) add to the decode steps that carry them (those steps run eagerly, with one more running
    request and the chunk's per-token host work; `rnd`: the speculative round's (D, q, target kernels, draft
    kernels), priced by speculation.round.round_s, the decode step at D = 0); prefill apart (SGLang's default), its
    own eager prefill steps, during which decoding waits."""
    # one step per chunk (a handful: the prompt over the token budget), each priced over the whole grid; the
    # engine's host numbers may be arrays of their own (K variants of a fit), so the chunks are not stacked
    if eng.mixed_prefill:
        return sum((round_s(eng, it_gpu + c, bc + 1.0, *rnd, eager=True, prompt_tokens=n) - t_it) * (c > 0)
                   for c, n in zip(chunks, tokens))
    return sum(eng.step_s(c, 1.0, tab.kernels, False, n) * (c > 0) for c, n in zip(chunks, tokens))


def prefill_service_s(eng, tau, t_it, d_p, n_chunks):
    """Seconds from a prompt's first chunk to its first token: the iterations that carry its chunks (mixed), or
    its own prefill steps (apart: run first, as soon as the current step ends)."""
    if eng.mixed_prefill:
        return n_chunks * np.maximum(tau, t_it + d_p / n_chunks)
    return d_p + 0.0 * tau


def _queue_wait_s(tau, u, service_s, prompt_s=None, others=None, busy=1.0):
    """Half an iteration to the next step boundary when one is running (`busy`: the chance that another request is
    decoding when the prompt arrives, decoding_share) plus an M/D/1 wait at prefill busy fraction u (inf at
    u >= 1); in a closed loop of C clients at most the C - 1 other prompts can be ahead: the wait is capped at
    `others` x `prompt_s` (the prefill work of one prompt, u / X)."""
    u = np.asarray(u, dtype=float)
    mdl = np.where(u < 1.0, u / (2.0 * np.maximum(1.0 - u, 1e-12)) * service_s, np.inf)
    if others is not None:
        mdl = np.where(u < 1.0, np.minimum(mdl, others * prompt_s), np.inf)
    return busy * tau / 2.0 + mdl


def others_share(wl: Workload) -> np.ndarray | float:
    """Share of the prompts entering the engine that a decoding request shares its iterations with: none for a
    single client (its own next prompt comes only after it finishes, so it decodes alone: its TPOT is the decode
    step), all of them from two clients on (min(1, C - 1)), and in an open loop.

    With C independent clients the share would be (C - 1) / C. The measured closed loops do not bear that out:
    their clients start together and their prompts bunch, and on the 223 H100 serving rows the independent share
    fits vLLM better (TPOT p90 11.2 -> 9.3 %) but TensorRT-LLM worse (TPOT median 4.9 -> 5.9 %, C 1-8 bias
    0.960 -> 0.941), so only the single client, where no other prompt exists, is priced without them."""
    if wl.concurrency is None:
        return 1.0
    if wl.ranks > 1:  # one DP rank's share: the other ranks' prompts stall its steps too (one synchronous step)
        return np.clip(wl.total_concurrency - 1.0, 0.0, 1.0)
    return np.clip(np.asarray(wl.concurrency, dtype=float) - 1.0, 0.0, 1.0)


def decoding_share(wl: Workload, b) -> np.ndarray:
    """Chance that some other request is decoding when a prompt arrives (then it waits for the running step's end):
    1 - (1 - B/C)^(C - 1) for C clients each decoding a share B/C of the time, independently; 1 - exp(-B) in an
    open loop (a Poisson number of requests decoding). 0 for one client: the engine is idle."""
    b = np.maximum(np.asarray(b, dtype=float), 0.0)
    if wl.concurrency is None:
        return 1.0 - np.exp(-b)
    c = np.maximum(np.asarray(wl.concurrency, dtype=float), 1.0)
    return 1.0 - np.clip(1.0 - b / c, 0.0, 1.0) ** (c - 1.0)


def prefill_utilization(eng, wl: Workload, decode_tokens, x, t_it, d_p):
    """Fraction of time the engine's prefill is busy: X · (t_it / k + ΔP), k prompts per step.

    A prompt is served by the step(s) that carry its chunks: ΔP, what it adds to them, plus its share 1/k of their
    base time t_it, where k is the number of prompts one step's leftover budget (max_num_batched_tokens - decode
    tokens) holds: budget / ISL with chunked prefill (k < 1: a prompt spans 1/k steps), else whole prompts,
    max(1, floor(budget / ISL)) of them (a 5000-token prompt under an 8192 budget is alone in its step)."""
    return x * prompt_service_s(eng, wl, decode_tokens, t_it, d_p)


def prompt_service_s(eng, wl: Workload, decode_tokens, t_it, d_p):
    """Seconds of engine time one prompt takes: t_it / k + ΔP (prefill_utilization divides it out of u)."""
    if not eng.mixed_prefill:  # its own prefill steps, no decode step to share
        return d_p + 0.0 * np.asarray(t_it)
    avail = np.maximum(eng.max_num_batched_tokens - np.asarray(decode_tokens, dtype=float), 1.0)
    k = avail / wl.isl if eng.chunked_prefill else np.maximum(np.floor(avail / wl.isl), 1.0)
    return t_it / k + d_p


def _cohort_s(eng, wl: Workload, prompt_s=0.0):
    """The opt-in start-up term (Workload.startup_cohort), seconds: (C - 1)·(startup_client_s +
    startup_prefill_frac·`prompt_s`), what the other clients of a benchmark that starts all of them at once add to a
    request's TTFT (0 unless opted in); `prompt_s` is the engine seconds one prompt takes (prompt_service_s)."""
    if wl.concurrency is None or not wl.startup_cohort or not (np.any(eng.startup_client_s)
                                                               or np.any(eng.startup_prefill_frac)):  # (K, 1) in a fit
        return 0.0
    per_client = eng.startup_client_s + eng.startup_prefill_frac * np.asarray(prompt_s, dtype=float)
    return per_client * np.maximum(np.asarray(wl.concurrency, dtype=float) - 1.0, 0.0)


def step_terms(tab: GpuTables, eng, b):
    """(t_it, ΔP, chunks per prompt) at mean decode batch `b`, priced at max(b, 1): the engine's round
    (speculation/round.py: graphs per verify size, host work per round, issue 19) and what one prompt adds to the
    engine's time line (prompt_step_s, with the draft's own prefill), in seconds."""
    bc = np.maximum(np.asarray(b, dtype=float), 1.0)
    it_gpu, chunks, n_chunks, dp_draft, tokens = tab.at(bc)
    rnd = (tab.draft_len, tab.q, tab.kernels - tab.draft_kernels, tab.draft_kernels)
    t_it = round_s(eng, it_gpu, bc, *rnd)
    return t_it, prompt_step_s(tab, eng, it_gpu, chunks, bc, t_it, rnd, tokens) + dp_draft, n_chunks


def state(tab: GpuTables, eng, wl: Workload, b, admission: str = "immediate"):
    """Iteration seconds τ, request throughput X (1/s) and TTFT (s) at mean decode batch `b` (steady state).

    A mean batch below one sequence (a closed loop at low concurrency, where most of a request's time is its
    prefill) decodes at the cost of one sequence while it decodes: step costs are priced at max(b, 1), but
    Little's law on the decode stage, X = B / (N_d τ), uses B itself."""
    b = np.maximum(np.asarray(b, dtype=float), 0.0)
    t_it, d_p, n_chunks = step_terms(tab, eng, b)
    n_d = np.maximum((wl.osl - 1.0) / tab.al, 1e-9)
    tau = t_it + others_share(wl) * b * d_p / n_d  # B / N_d prompts enter per iteration, the others' share of them
    x = b / (n_d * tau)
    p_s = prompt_service_s(eng, wl, b * tab.q, t_it, d_p)
    u = x * p_s
    service = prefill_service_s(eng, tau, t_it, d_p, n_chunks)
    others = None if wl.concurrency is None else np.maximum(np.asarray(wl.concurrency, dtype=float) - 1.0, 0.0)
    ttft = _queue_wait_s(tau, u, service, p_s, others, decoding_share(wl, b)) + service
    if eng.ttft_includes_first_decode:
        ttft = ttft + tau
    ttft = ttft + _cohort_s(eng, wl, p_s)
    if admission == "next_departure" and wl.concurrency is not None:
        # the slot frees only at the next departure: one request always waits (none with a single client)
        ttft = ttft + np.minimum(others, 1.0) / np.maximum(x, 1e-300)
    return tau, x, ttft


def kv_cap_requests(model, hw, tp, wl: Workload, eng, spec: StepOptions, prec, target_only: float):
    """Requests whose whole KV (ISL + OSL) the cache holds beside the weights (`target_only`: the target's alone),
    with the draft's weights and its own KV per request where the mechanism has them (an external draft, an
    EAGLE-3 head, an MTP module: evaluate's max_batch), at each grid point's own D (a float without speculation,
    else an array shaped like draft_len: pricing D = 1 beside D = 32 gave D = 1 the cap of D = 32, 12 % lower)."""
    d = np.asarray(spec.draft_len, dtype=float)
    if spec.mechanism == "none" or not np.any(d > 0):
        return float(target_only)
    du, inv = (np.unique(d, return_inverse=True) if d.size > 1 and only_draft_len_varies(spec) else (d, None))
    r = spec.with_draft_len(np.maximum(du, 1.0)).evaluate(model, hw, tp, eng, prec, batch=1.0,
                                                           context_len=float(wl.isl + wl.osl))
    mb = np.broadcast_to(np.asarray(r.max_batch, dtype=float), du.shape)  # one evaluate per distinct D
    mb = mb / dp_ranks(tp)  # a Layout: one DP rank's requests (max_batch counts the instance)
    mb = mb if inv is None else mb[np.asarray(inv).reshape(d.shape)]
    return np.where(d > 0, np.minimum(float(target_only), mb), float(target_only))


def running_cap(eng, wl: Workload, kv_cap=None, draft_len=0.0):
    """Most requests the engine runs at once: max_num_seqs (where a grid point speculates, draft_len > 0, the
    engine's spec_max_num_seqs if lower: SGLang's default of 48), and the KV cache's room (`kv_cap`, requests) if
    given; a float, or an array over the grid points where the speculative cap differs."""
    cap = float(eng.max_num_seqs)
    d = np.asarray(draft_len, dtype=float)
    if eng.spec_max_num_seqs is not None and eng.spec_max_num_seqs < cap and np.any(d > 0):
        cap = np.where(d > 0, float(eng.spec_max_num_seqs), cap)
    return cap if kv_cap is None else np.minimum(cap, np.maximum(np.asarray(kv_cap, dtype=float), 1.0))


def spec_cap_applies(eng, wl: Workload, draft_len, kv_cap) -> np.ndarray:
    """True where the running cap is the speculative one (spec_max_num_seqs): running_cap below what it is without
    speculation (whether the load reaches it is the loop's business)."""
    d = np.asarray(draft_len, dtype=float)
    return np.asarray(running_cap(eng, wl, kv_cap, d) < running_cap(eng, wl, kv_cap)) & np.ones(d.shape, dtype=bool)


def _prefill_only(tab: GpuTables, eng, wl: Workload, shape, admission):
    """OSL 1: no decode. Prefill steps alone (engine step of each chunk at batch 1, eager); closed loop
    C = X·TTFT by bisection on X, open loop X = λ. Returns solve()'s SteadyState with TPOT nan (there is none)."""
    dp_draft = tab.at(np.ones(shape))[3]
    n_steps = np.ceil(wl.isl / eng.max_num_batched_tokens)
    s = (eng.step_s(tab.prefill_alone_gpu_s / n_steps, 1.0, tab.kernels, False, wl.isl / n_steps) * n_steps
         + dp_draft)  # its steps
    k = np.maximum(np.floor(eng.max_num_batched_tokens / wl.isl), 1.0) if not eng.chunked_prefill else 1.0
    p_s = s / k  # engine seconds per prompt when k prompts share a step
    cap_x = 1.0 / p_s

    def ttft_at(x, others):
        u = x * p_s
        w = np.where(u < 1.0, u / (2.0 * np.maximum(1.0 - u, 1e-12)) * s, np.inf)
        if others is not None:
            w = np.where(u < 1.0, np.minimum(w, others * p_s), np.inf)
        return s + w

    if wl.concurrency is not None:
        c = np.asarray(wl.concurrency, dtype=float) * np.ones(shape)
        others = np.maximum(c - 1.0, 0.0)
        lo, hi = np.zeros(shape), cap_x * np.ones(shape)
        for _ in range(2 * BISECTION_STEPS):
            mid = (lo + hi) / 2.0
            over = mid * np.nan_to_num(ttft_at(mid, others), posinf=1e30) > c
            hi = np.where(over, mid, hi)
            lo = np.where(over, lo, mid)
        x = lo
        ttft = ttft_at(x, others)
        ttft = np.where(np.isfinite(ttft), np.maximum(ttft, c / np.maximum(x, 1e-300)), c / np.maximum(x, 1e-300))
        stable = np.ones(shape, dtype=bool)
    else:
        x = np.asarray(wl.request_rate, dtype=float) * np.ones(shape)
        ttft = ttft_at(x, None)
        stable = np.isfinite(ttft)
        c = x * np.where(stable, ttft, 0.0)
    nan = np.full(shape, np.nan)
    return SteadyState(tpot_s=nan, ttft_s=ttft, ttft_p50_s=ttft, ttft_p90_s=ttft, iteration_s=nan,
                       decode_batch=np.zeros(shape), requests_per_s=x, concurrency=c, stable=stable,
                       admission_wait_s=np.zeros(shape), saturation_requests_per_s=cap_x * np.ones(shape))


def _open_loop_batch(tab: GpuTables, eng, wl: Workload, lam, n_d, top, admission, scan: int = 64):
    """(B, found): the smallest decode batch with B = λ·N_d·τ(B) at or below `top`, by a geometric scan for the first
    B where λ·N_d·τ(B) <= B, then bisection; found is False where there is none (arrivals over capacity). Fixed-point
    iteration from below crawls near capacity (slope near 1) and never settles above it."""
    g = lambda bb: lam * n_d * state(tab, eng, wl, bb, admission)[0] - bb  # noqa: E731  > 0 below the root
    lo, hi = np.zeros(np.shape(lam)), np.full(np.shape(lam), np.nan)
    for f in np.geomspace(1e-6, 1.0, scan):
        bb = f * top
        cross = np.isnan(hi) & (g(bb) <= 0.0)
        hi = np.where(cross, bb, hi)
        lo = np.where(np.isnan(hi), bb, lo)  # the last point still below the root
    found = np.isfinite(hi)
    hi = np.where(found, hi, top)
    for _ in range(BISECTION_STEPS + 10):
        mid = (lo + hi) / 2.0
        below = g(mid) > 0.0
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return np.where(found, hi, top), found


@record(eq=False)
class SteadyState(Record):
    """The steady state `solve` finds over the tables' grid points (arrays): TPOT, TTFT mean / p50 / p90 and
    iteration (s), decode batch, requests/s, concurrency, whether it is stable, the admission wait (s), and in an
    open loop the saturation rate (requests/s)."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("saturation_requests_per_s",)

    tpot_s: np.ndarray
    ttft_s: np.ndarray
    ttft_p50_s: np.ndarray
    ttft_p90_s: np.ndarray
    iteration_s: np.ndarray
    decode_batch: np.ndarray
    requests_per_s: np.ndarray
    concurrency: np.ndarray
    stable: np.ndarray
    admission_wait_s: np.ndarray
    saturation_requests_per_s: np.ndarray | None = None


def saturation_rate(tab: GpuTables, eng, wl: Workload, admission="immediate", kv_cap=None):
    """Most requests/s the engine sustains (open loop): the largest X over decode batches up to the running cap
    whose prefill busy fraction stays below 1 (1/s, shape of the tables' grid points)."""
    open_wl = wl if wl.concurrency is None else dataclasses.replace(wl, concurrency=None, request_rate=1.0)
    cap = running_cap(eng, wl, kv_cap, tab.draft_len) * np.ones(np.shape(tab.al))
    bs = np.geomspace(1e-3, 1.0, 60)[:, None] * cap.reshape(1, -1)
    shp = (60,) + np.shape(tab.al)
    bs = bs.reshape(shp)
    best = np.zeros(np.shape(tab.al))
    for i in range(60):
        tau, x, ttft = state(tab, eng, open_wl, bs[i], admission)
        best = np.where(np.isfinite(ttft), np.maximum(best, x), best)
    return best


def ttft_quantile_s(ttft_mean, wait_mean, u, q=0.9):
    """Quantile q of TTFT from its mean: the M/D/1 wait taken as zero with probability 1 - u and exponential
    otherwise (mean wait_mean / u), an approximation; the rest of TTFT is deterministic."""
    u = np.clip(np.asarray(u, dtype=float), 1e-12, 1.0 - 1e-12)
    w = np.asarray(wait_mean, dtype=float)
    tail = 1.0 - q
    qw = np.where(u > tail, w / u * np.log(u / tail), 0.0)
    return ttft_mean - w + qw


def ttft_p90_s(ttft_mean, wait_mean, u):
    """p90 of TTFT (ttft_quantile_s at 0.9)."""
    return ttft_quantile_s(ttft_mean, wait_mean, u, 0.9)


def solve(tab: GpuTables, eng, wl: Workload, admission: str = "immediate", kv_cap=None) -> SteadyState:
    """Steady state from the tables: closed loop C = B + X·TTFT by bisection on B (B at most the engine's running
    cap; what the loop cannot run or prefill waits in the admission queue, TTFT from Little's law), or open loop
    B = λ·N_d·τ(B) (unstable when λ exceeds the saturation rate)."""
    shape = np.shape(tab.al)
    if wl.osl == 1:
        return _prefill_only(tab, eng, wl, np.broadcast(np.zeros(shape), np.asarray(
            wl.concurrency if wl.concurrency is not None else wl.request_rate, dtype=float)).shape, admission)
    cap = running_cap(eng, wl, kv_cap, tab.draft_len)
    if wl.concurrency is not None:
        c = np.asarray(wl.concurrency, dtype=float) * np.ones(shape)
        lo, hi = np.zeros(c.shape), np.minimum(c, cap)
        for _ in range(BISECTION_STEPS + 10):  # C = B + X·TTFT, increasing in B
            mid = (lo + hi) / 2.0
            _, x, ttft = state(tab, eng, wl, mid, admission)
            over = mid + x * np.nan_to_num(ttft, posinf=1e30) > c
            hi = np.where(over, mid, hi)
            lo = np.where(over, lo, mid)
        b = lo
        tau, x, ttft = state(tab, eng, wl, b, admission)
        # requests neither decoding nor in the prefill's queue model wait for admission (running cap, or the
        # prefill saturated): Little's law gives their wait
        gap = np.maximum(c - b - x * ttft, 0.0)
        adm = np.where(gap > 1e-9 * c, gap / np.maximum(x, 1e-300), 0.0)
        ttft = ttft + adm
        stable = np.ones(c.shape, dtype=bool)
    else:
        lam = np.asarray(wl.request_rate, dtype=float) * np.ones(shape)  # one rate, or one per grid point
        n_d = np.maximum((wl.osl - 1.0) / tab.al, 1e-9)
        b, found = _open_loop_batch(tab, eng, wl, lam, n_d, np.minimum(np.exp(tab.log_b[-1]), cap), admission)
        tau, _, ttft = state(tab, eng, wl, b, admission)
        x = lam
        stable = np.isfinite(ttft) & found  # no fixed point up to the cap: arrivals exceed capacity
        c = b + x * np.where(np.isfinite(ttft), ttft, 0.0)
        adm = np.zeros(shape)
    # the wait part of TTFT for its p90 (state's queue term: TTFT minus its deterministic parts)
    t_it, d_p, n_chunks = step_terms(tab, eng, b)
    u = x * prompt_service_s(eng, wl, b * tab.q, t_it, d_p)
    service = prefill_service_s(eng, tau, t_it, d_p, n_chunks)
    others = None if wl.concurrency is None else np.maximum(np.asarray(wl.concurrency, dtype=float) - 1.0, 0.0)
    wait = _queue_wait_s(tau, u, service, u / np.maximum(x, 1e-300), others, 0.0)  # the queue part alone
    w_ok = np.where(np.isfinite(wait), wait, 0.0)
    p90 = np.where(np.isfinite(ttft), ttft_quantile_s(ttft, w_ok, u, 0.9), np.inf)
    p50 = np.where(np.isfinite(ttft), ttft_quantile_s(ttft, w_ok, u, 0.5), np.inf)
    return SteadyState(tpot_s=tau / tab.al, ttft_s=ttft, ttft_p50_s=p50, ttft_p90_s=p90, iteration_s=tau,
                       decode_batch=b, requests_per_s=x, concurrency=c, stable=stable, admission_wait_s=adm,
                       saturation_requests_per_s=(saturation_rate(tab, eng, wl, admission, kv_cap)
                                                  if wl.concurrency is None else None))


def step_options(dep: Deployment, spec: Speculation) -> StepOptions:
    """What a serving call passes to each step's pricing beyond the engine, TP and precision it resolves itself:
    the speculation, the deployment's host-cost source and its kernel choices (attention style and routing)."""
    return StepOptions(spec, dep.serving, StepKernels(attention_style=dep.kernels.attention_style,
                                                      routing=dep.kernels.routing))


def aggregated(dep: Deployment, spec: Speculation, workload: Workload, *, admission=None) -> ServingGrid:
    """Steady-state aggregated serving of `dep` running `spec` (arrays over spec.draft_len, and over concurrency
    when it is an array).

    A ServingGrid (tpot_s, ttft_s, request_latency_s, tokens_per_s_per_user, tokens_per_s_per_gpu, decode_batch,
    prefill_tokens_per_step, iteration_s, acceptance_length, requests_per_s, concurrency, fits, stable, ...).

    `dep.layout` may hold data-parallel attention and / or expert parallelism (model/parallel.py): the instance
    is priced per DP rank (rank_serving)."""
    tp = serving_parallelism(dep.instance())
    if isinstance(tp, Layout):
        tp.check(load_model(dep.model), load_hardware(dep.hardware))
    if dp_ranks(tp) > 1:
        return rank_serving(dep, spec, workload, admission=admission)
    return _instance(dep, spec, workload, admission)


def _instance(dep: Deployment, spec: Speculation, workload: Workload, admission) -> ServingGrid:
    """aggregated for one scheduling unit (an instance without DP attention, or one DP rank of one)."""
    m = load_model(dep.model)
    hw = load_hardware(dep.hardware)
    tp = serving_parallelism(dep.instance())
    engine, mechanism, draft_model = dep.engine, spec.mechanism, spec.draft.model
    dtype, kv_dtype = dep.dtypes.dtype, dep.dtypes.kv_dtype
    # the engine's defaults on this GPU and TP, then its rounds as it runs this mechanism (maybe without overlap)
    eng = load_engine(engine).for_hardware(hw, attention_tp(tp)).for_mechanism(mechanism)
    workload.check(m)
    prec = resolve_precision(m, hw, dtype, kv_dtype)
    conc = None if workload.concurrency is None else np.asarray(workload.concurrency, dtype=float)
    load = np.asarray(workload.concurrency if conc is not None else workload.request_rate, dtype=float)
    d = np.asarray(spec.draft_len, dtype=float)
    d = d * np.ones(np.broadcast(d, load).shape)  # one grid point per load of a sweep
    spec = step_options(dep, spec).with_draft_len(d)
    dpm = draft_prefill_model(m, mechanism, draft_model)
    warm = eng.zero_draft_extend and mechanism != "none"  # the draft runs at D = 0 too (keeps its KV warm)
    draft = None if dpm is None or (np.all(d == 0) and not warm) else (dpm, resolve_precision(dpm, hw, dtype,
                                                                                                  kv_dtype))
    one = memory_usage(m, hw, attention_tp(tp), 1, workload.isl + workload.osl, prec,
                       layout=tp if isinstance(tp, Layout) else None)
    kv_cap = kv_cap_requests(m, hw, tp, workload, eng, spec, prec, one.max_batch)
    cap = running_cap(eng, workload, kv_cap, d)
    b_max = min(float(np.max(conc)), float(np.max(cap))) if conc is not None else float(np.max(cap))
    tab = gpu_tables(m, hw, tp, workload, eng, spec, prec, b_max, draft)
    out = solve(tab, eng, workload, admission or eng.admission, kv_cap=kv_cap)
    tpot = out.tpot_s
    x = out.requests_per_s
    devices = float(tp.gpus if isinstance(tp, Layout) else tp)
    lat = out.ttft_s + (0.0 if workload.osl == 1 else (workload.osl - 1.0) * tpot)
    return ServingGrid(
        tpot_s=tpot, ttft_s=out.ttft_s, ttft_p50_s=out.ttft_p50_s, ttft_p90_s=out.ttft_p90_s,
        iteration_s=out.iteration_s, decode_batch=out.decode_batch, requests_per_s=x, concurrency=out.concurrency,
        stable=out.stable, admission_wait_s=out.admission_wait_s,
        saturation_requests_per_s=out.saturation_requests_per_s, request_latency_s=lat,
        tokens_per_s_per_user=1.0 / tpot, tokens_per_s_per_gpu=x * workload.osl / devices,
        prefill_tokens_per_step=x * workload.isl * out.iteration_s, acceptance_length=tab.al,
        fits=np.asarray(kv_cap >= 1) & np.ones(np.shape(out.ttft_s), dtype=bool), devices=devices,
        running_cap=cap, kv_cap_requests=kv_cap, kv_cap_draft=bool(np.any(kv_cap < one.max_batch)),
        spec_cap=spec_cap_applies(eng, workload, d, kv_cap),
        weights_bytes=float(one.weights_bytes),
        capacity_bytes=float(one.capacity_bytes),
    )


# keys of one DP rank's answer that count requests: the instance holds DP times as many
_PER_RANK_COUNTS = ("decode_batch", "requests_per_s", "concurrency", "running_cap", "kv_cap_requests",
                    "saturation_requests_per_s")


def rank_serving(dep: Deployment, spec: Speculation, workload: Workload, *, admission=None) -> ServingGrid:
    """Aggregated serving of an instance with data-parallel attention (`tp` a Layout with DP > 1), priced per DP rank,
    the unit each engine schedules (SGLang: one scheduler per DP-attention rank; vLLM: one engine per DP rank;
    TensorRT-LLM enable_attention_dp: each rank its own batch): one rank's share of the load (concurrency or rate /
    DP, Workload.per_rank), its running cap and token budget as the engine applies them (EngineProfile.per_dp_rank:
    SGLang divides its launch-wide values by DP), its KV (one rank's sequences: memory.py), and a step that is the
    instance's with every rank carrying the same load (parallel.instance_call: the MoE layers and their DeepEP
    all-to-alls see DP x the rank's tokens; low-latency kernels in decode, normal ones for prompt chunks beyond
    128 tokens per GPU). Requests, rates and batches come back for the instance (DP x a rank's), tokens/s/GPU over
    its TP x DP GPUs, so requests/s x latency = concurrency holds for the instance as for the rank. Assumption: the
    ranks' prompts arrive evenly and prefill in the same steps (an unaligned prefill on one rank would stall the
    others' decode too: synchronous MoE layers)."""
    tp = serving_parallelism(dep.instance())
    dp = tp.dp
    # the launch's defaults, then one rank's share of them
    eng = load_engine(dep.engine).for_hardware(load_hardware(dep.hardware), tp.tp)
    r = _instance(replace(dep, engine=eng.per_dp_rank(dp)), spec, workload.per_rank(dp), admission)
    counts = {k: np.asarray(v, dtype=float) * dp for k in _PER_RANK_COUNTS if (v := getattr(r, k)) is not None}
    rate = np.asarray(r.requests_per_s, dtype=float) * dp
    return replace(r, **counts, tokens_per_s_per_gpu=rate * workload.osl / float(tp.gpus),
                   devices=float(tp.gpus), dp_ranks=dp)

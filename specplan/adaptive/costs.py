"""Step costs the simulator looks up: one vectorized `evaluate` call over (batch, context, D), prefill,
KV memory per request, and CUDA-graph capture of (D, batch bucket) pairs.

- Decode / verify: `evaluate` on every integer batch 1..b_max × a geometric context grid × D = 0..d_max;
  a step of B sequences with mean context c̄ costs T(B, D, c̄) (exact in B and D, linear in context between grid
  points; the KV read is linear in context, so the mean context prices the batch's attention).
- Prefill: a step of n prompt tokens is `specplan.serving.prefill.mixed_step_s` with no decode rows (SGLang runs
  prefill batches as steps of their own unless --enable-mixed-chunk), n / mean ISL prompts per chunk, plus the
  engine's host time per step, eager launches and host seconds per prefill token.
- Engine (`--engine`, default sglang): host time per step and per-kernel graph launch cost on every decode step,
  its speculative iteration / draft-step host costs through `evaluate`.
- Memory: per-request bytes (KV + drafter state) and fixed bytes from `evaluate`'s memory at batch 1 and 2.
- CUDA graphs: see `GraphSet`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specplan.core.records import record
from specplan.adaptive.records import GraphCost
from specplan.core.errors import SpecplanError

N_CTX = 12
GRAPH_HOST_S = 0.05  # assumption (no measurement available): host time to warm up and capture one graph
GRAPH_RUNS = 3  # warm-up runs + the capture run of each graph (SGLang runs the shape twice, then captures)
# Assumption (no measurement in reference/): extra host launch seconds per kernel of a step that runs eagerly
# instead of replaying a CUDA graph; used when the engine profile sets no eager_launch_s.
EAGER_LAUNCH_S = 4.0e-6


@dataclass
class StepCosts:
    """Seconds of a decode/verify step for every (batch, context-grid point, D), plus prefill and memory."""

    iter_s: np.ndarray  # (b_max, n_ctx, d_max + 1); D = 0 is the plain decode step
    draft1_s: np.ndarray  # (b_max, n_ctx): one draft forward (SGLang's draft-extend at D = 0)
    ctx_grid: np.ndarray
    prefill_tokens: np.ndarray
    prefill_s_grid: np.ndarray
    per_seq_bytes: np.ndarray  # bytes one request holds at each context-grid point
    fixed_bytes: float  # weights, drafter weights
    capacity_bytes: float
    devices: float  # target devices (tokens/s/GPU divides by these)
    kernels: int  # kernels of one target step (eager launch penalty)
    rho: float  # draft layers / target layers (draft kernels per drafted token ≈ rho × kernels)
    model_id: str = ""
    hardware_id: str = ""
    eager_per_kernel_s: float = EAGER_LAUNCH_S  # extra seconds per kernel of a step without a captured graph
    engine_id: str = "ideal"
    tp: int = 1  # tensor-parallel degree of the target (graph memory per GPU)

    @property
    def b_max(self) -> int:
        """Largest batch tabulated."""
        return self.iter_s.shape[0]

    @property
    def d_max(self) -> int:
        """Largest draft length tabulated."""
        return self.iter_s.shape[2] - 1

    def _ctx_weights(self, ctx: float) -> tuple[int, int, float]:
        g = self.ctx_grid
        c = min(max(float(ctx), g[0]), g[-1])
        j = int(min(np.searchsorted(g, c, side="right"), g.size - 1))
        i = max(j - 1, 0)
        w = 0.0 if j == i else (c - g[i]) / (g[j] - g[i])
        return i, j, w

    def at(self, batch: int, ctx: float) -> np.ndarray:
        """Step seconds for D = 0..d_max at `batch` sequences of mean context `ctx`."""
        b = int(batch)
        if b < 1 or b > self.b_max:
            raise SpecplanError(f"batch {b} outside the tabulated 1..{self.b_max}")
        i, j, w = self._ctx_weights(ctx)
        return (1.0 - w) * self.iter_s[b - 1, i] + w * self.iter_s[b - 1, j]

    def draft1(self, batch: int, ctx: float) -> float:
        """Seconds of one draft forward for `batch` sequences (SGLang keeps the draft KV warm at D = 0)."""
        i, j, w = self._ctx_weights(ctx)
        return float((1.0 - w) * self.draft1_s[batch - 1, i] + w * self.draft1_s[batch - 1, j])

    def prefill_s(self, tokens: float) -> float:
        """Interim prefill seconds of `tokens` prompt tokens in one step (0 for none)."""
        if tokens <= 0:
            return 0.0
        return float(np.interp(tokens, self.prefill_tokens, self.prefill_s_grid))

    def seq_bytes(self, ctx) -> np.ndarray:
        """Bytes one request holds at context `ctx` (KV + drafter state; linear in context)."""
        return np.interp(ctx, self.ctx_grid, self.per_seq_bytes)

    def eager_extra_s(self, d: int) -> float:
        """Extra host seconds when a step at draft length d runs eagerly (no captured graph)."""
        return self.eager_per_kernel_s * self.kernels * (1.0 + self.rho * d)


def eager_per_kernel_s(eng) -> float:
    """Extra seconds per kernel when a decode step runs eagerly instead of replaying a graph: the engine's
    eager − graph launch cost; EAGER_LAUNCH_S for an engine that captures graphs up to a stated batch but states
    no eager cost; 0 otherwise (no decode graphs, or `ideal`: no engine cost at all)."""
    if eng.eager_launch_s > 0:
        return max(eng.eager_launch_s - eng.graph_launch_s, 0.0)
    return EAGER_LAUNCH_S if (eng.cuda_graphs_decode and eng.graph_max_batch > 0) else 0.0


@record
class CostGrid:
    """The ranges a step-cost table covers: the largest D, the cached context from ctx_min to ctx_max (tokens), the
    largest decode batch, the mean prompt (tokens) and the prefill token budget per step."""

    d_max: int
    ctx_min: float
    ctx_max: float
    b_max: int
    mean_isl: float
    prefill_budget: int


def build_costs(model, hardware, grid: CostGrid, *, mechanism: str = "eagle3", engine=None, tp: int = 1,
                dtypes=None, draft=None) -> StepCosts:
    """Tabulate step costs over `grid` with one `evaluate` call (and one for memory, one for prefill) under an
    engine profile (specplan/profiles/engine.py): its speculative iteration and draft-step host costs go into
    `evaluate`, its host time per step and per-kernel launch cost are added to every step here; the target on `tp`
    devices at `dtypes` (costs/precision.Dtypes; None: the checkpoint's), the draft placed by `draft`
    (speculation/spec.DraftPlacement; None: the mechanism's own)."""
    d_max, ctx_min, ctx_max, b_max = grid.d_max, grid.ctx_min, grid.ctx_max, grid.b_max
    mean_isl, prefill_budget = grid.mean_isl, grid.prefill_budget
    from specplan.profiles.registry import load_engine, load_hardware, load_model
    from specplan.serving.prefill import mixed_step_s, StepMix
    from specplan.speculation.acceptance import Acceptance
    from specplan.speculation.serving import ServingProfile
    from specplan.costs.precision import Dtypes
    from specplan.model.deployment import Deployment
    from specplan.speculation.spec import DraftPlacement, Speculation
    from specplan.speculation.speedup import evaluate
    from specplan.model.step import step_time
    from specplan.speculation.round import round_s

    from specplan.profiles.engine import engine_hardware

    m, eng = load_model(model), load_engine(engine)
    hw = engine_hardware(load_hardware(hardware), eng)  # the engine's kernels (GEMM scales, MoE path's count)
    srv = ServingProfile(eng.spec_iteration_overhead_s, eng.spec_draft_step_overhead_s, f"engine {eng.id}")
    dtypes, draft = dtypes or Dtypes(), draft or DraftPlacement()
    lo, hi = max(float(ctx_min), 1.0), max(float(ctx_max), float(ctx_min) + 1.0)
    ctx = np.unique(np.round(np.geomspace(lo, hi, N_CTX)))
    b = np.arange(1, b_max + 1, dtype=float)
    d = np.arange(d_max + 1, dtype=float)
    acc = Acceptance.from_rate(0.5)  # costs do not depend on acceptance
    r = evaluate(Deployment(m, hw, tp, dtypes=dtypes, serving=srv), Speculation(mechanism, d[None, None, :], acc, draft),
                 batch=b[:, None, None], context_len=ctx[None, :, None])
    prec = r.precision
    base = step_time(m, hw, tp, 1, 1, lo, precision=prec)
    rho = float(np.asarray(r.rho).flat[0])
    # the engine's round on a replayed graph (speculation.round.round_s, as the serving path prices it: host per step
    # and per sequence, overlapped when the engine overlaps; the simulator adds the eager cost where no graph runs)
    gpu = np.where(d[None, None, :] == 0, r.baseline_step_s, r.iter_s)
    graphs_all = eng.model_copy(update={"cuda_graphs_decode": True, "graph_max_batch": 0,
                                        "verify_graph_max_tokens": 0, "draft_graph_max_batch": 0})
    q = np.broadcast_to(np.asarray(r.verify_tokens, dtype=float), gpu.shape)
    iter_s = round_s(graphs_all, gpu, b[:, None, None], d[None, None, :], q, float(base.kernels),
                     base.kernels * rho * d[None, None, :])
    d1 = r.draft_s[:, :, 1] if d_max >= 1 else np.zeros(iter_s.shape[:2])
    mem = evaluate(Deployment(m, hw, tp, dtypes=dtypes), Speculation(mechanism, float(d_max), acc, draft),
                   batch=np.array([[1.0], [2.0]]), context_len=ctx[None, :]).memory_total_bytes
    per_seq = mem[1] - mem[0]
    fixed = float(np.min(mem[0] - per_seq))
    cap = float(np.asarray(r.memory_capacity_bytes).reshape(-1)[0])
    toks = np.unique(np.round(np.geomspace(1, max(prefill_budget, 2), 32)))
    seqs = np.maximum(1.0, toks / max(mean_isl, 1.0))
    pf = mixed_step_s(m, hw, tp, StepMix(0, 0, toks, 0, prefill_seqs=seqs), precision=prec, engine=eng)
    # the prefill chunk as an eager engine step (EngineProfile.step_s, as the serving path prices SGLang's prefill
    # apart): host time with the per-token part, launches, the per-step eager work, overlapped with the GPU or added
    pf = eng.step_s(pf, 1.0, base.kernels, False, toks)
    extra = eager_per_kernel_s(eng)
    return StepCosts(iter_s=np.asarray(iter_s, float), draft1_s=np.asarray(d1, float), ctx_grid=ctx,
                     prefill_tokens=toks, prefill_s_grid=np.asarray(pf, float), per_seq_bytes=per_seq,
                     fixed_bytes=fixed, capacity_bytes=cap, devices=float(np.asarray(r.target_devices).flat[0]),
                     kernels=int(base.kernels), rho=rho, model_id=m.id, hardware_id=hw.id,
                     eager_per_kernel_s=float(extra), engine_id=eng.id, tp=int(tp))


def sglang_graph_batch_sizes(max_bs: int) -> list[int]:
    """SGLang 0.5.23's decode CUDA-graph batch sizes with speculation (arg_groups/cuda_graph_hook.py,
    generate_decode_cuda_graph_batch_sizes): 1..8, 10..32 step 2, 40..64 step 4, 72..256 step 8, then step 16."""
    bs = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
          + list(range(272, max_bs + 1, 16)))
    bs = [x for x in bs if x <= max_bs]
    if max_bs not in bs:
        bs.append(max_bs)
    return bs


@record
class GraphSet:
    """CUDA graphs captured per (D, batch bucket). A step of batch B pads to the next captured bucket; a
    (D, bucket) pair not captured — or B above the largest bucket — runs eagerly (SGLang's can_run_graph
    falls back to eager) and pays `StepCosts.eager_extra_s`. A D with no graph at all is refused by SGLang
    ('Missing adaptive runtime state'); policies here only pick captured D unless told otherwise."""

    buckets: tuple[int, ...]
    captured: frozenset  # {(d, bucket)}

    def bucket(self, batch: int) -> int | None:
        """The captured bucket a batch pads to (None above the largest: eager)."""
        if not self.buckets:
            return None
        i = int(np.searchsorted(self.buckets, batch, side="left"))
        return self.buckets[i] if i < len(self.buckets) else None

    def has(self, d: int, batch: int) -> bool:
        """Whether a step of draft length d at this batch replays a captured graph."""
        bk = self.bucket(batch)
        return bk is not None and (d, bk) in self.captured

    def matrix(self, b_max: int, d_max: int) -> np.ndarray:
        """has(d, b) for b = 1..b_max (rows) and d = 0..d_max (columns)."""
        b = np.arange(1, b_max + 1)
        i = np.searchsorted(self.buckets, b, side="left")
        out = np.zeros((b_max, d_max + 1), dtype=bool)
        if not self.buckets:
            return out
        for d, bk in self.captured:
            if d <= d_max:
                out[:, d] |= (i < len(self.buckets)) & (np.asarray(self.buckets + (0,))[i] == bk)
        return out

    def ds(self) -> list[int]:
        """Draft lengths with at least one captured graph."""
        return sorted({d for d, _ in self.captured})

    def cost(self, costs: StepCosts, model, tp: int = 1) -> GraphCost:
        """One-time capture seconds and graph memory bytes: each graph runs GRAPH_RUNS times plus GRAPH_HOST_S;
        graphs share one memory pool (SGLang captures the largest batch first), sized by the activations of the
        largest captured (bucket × (1 + D)) tokens (memory.activation_bytes)."""
        from specplan.model.memory import activation_bytes
        from specplan.profiles.registry import load_model

        if not self.captured:
            return GraphCost(0, 0.0, 0.0)
        mid = len(costs.ctx_grid) // 2
        t = sum(GRAPH_RUNS * float(costs.iter_s[min(bk, costs.b_max) - 1, mid, min(d, costs.d_max)]) + GRAPH_HOST_S
                for d, bk in self.captured)
        tokens = max(bk * (1 + d) for d, bk in self.captured)
        mem = float(activation_bytes(load_model(model), tp, tokens))
        return GraphCost(len(self.captured), t, mem)


def graphs_for(ds, max_bs: int, slot_steps: dict[int, list[int]] | None = None) -> GraphSet:
    if max_bs < 1:  # the engine captures no decode graphs: every step runs eagerly
        return GraphSet((), frozenset())
    """Graphs for draft lengths `ds` at every SGLang bucket up to max_bs; with `slot_steps` (an SGLang adaptive
    config's {batch key: candidate steps}) only the buckets whose slot lists that D (cuda_graph_bs_for_step)."""
    import bisect

    buckets = sglang_graph_batch_sizes(max_bs)
    cap = set()
    for d in ds:
        for bk in buckets:
            if slot_steps is not None:
                keys = sorted(slot_steps)
                key = keys[max(0, bisect.bisect_right(keys, bk) - 1)]
                if d not in slot_steps[key]:
                    continue
            cap.add((int(d), bk))
    return GraphSet(tuple(buckets), frozenset(cap))

"""The step-cost table of the request-level simulator: every GPU cost of an engine step, priced once with numpy.

The simulator (serving/simulator.py) prices each engine step by looking up this table, never by calling the
roofline per event. The costs are the analytical model's own (serving/aggregated.py `gpu_tables`,
serving/prefill.py `mixed_step_s`): one vectorized pass each over

- `decode_gpu_s[b, c]`: a decode (or speculative) iteration of b sequences at mean cached context c
  (speculation.speedup.evaluate + speculation.round.round_gpu_extra_s, as `gpu_tables` prices it), on a geometric
  grid of batches (log-linear interpolation, as `GpuTables.at`) and a grid of contexts (linear);
- `linear_gpu_s[b, p]`: what p prompt tokens add to a step of b decode rows outside attention (GEMMs, norms, MoE,
  all-reduces, one LM-head row per prompt): mixed_step_s(b, p) - mixed_step_s(b, 0) - the chunk's attention; at
  b = 0 the whole non-attention cost of a prefill step of p tokens (SGLang's prefill batches run apart);
- `attention_gpu_s[p, c]`: the causal prefill attention (and KV write) of a chunk of p tokens after c cached
  tokens of the same prompt (prefill.prefill_attention_s), summed per prompt in a step.

A mixed step of b decode rows at context c carrying chunks (p_i, c_i) costs
decode_gpu_s(b, c) + linear_gpu_s(b, Σp_i) + Σ attention_gpu_s(p_i, c_i) GPU seconds, exactly mixed_step_s's
decomposition (plus, with a draft that runs over the prompt, its own prefill of each chunk: `draft_prefill_gpu_s`,
as the analytical model adds it); the engine's host time, launches and graphs are added by speculation.round.round_s /
EngineProfile.step_s, as in the analytical model.
"""

from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np

from specplan.core.records import record
from specplan.model.parallel import attention_tp
from specplan.profiles.engine import engine_hardware
from specplan.profiles.registry import load_kernel_family
from specplan.serving.prefill import mixed_step_s, StepMix, prefill_attention_s
from specplan.speculation.round import RoundShape, round_gpu_extra_s

BATCH_POINTS = 40  # geometric decode batches 1 ... b_max (the analytical tables' GRID_POINTS)
CONTEXT_POINTS = 12  # cached-context grid 0 ... ctx_max (attention is linear in context: linear interpolation)
TOKEN_POINTS = 28  # prompt-token grid 1 ... the largest chunk (geometric)


@record
class StepTable:
    """GPU seconds of engine steps on grids of decode batch, context and prompt tokens (see the module doc)."""

    batches: np.ndarray  # (Gb,) decode batches of the grid, 1 ... b_max
    contexts: np.ndarray  # (Gc,) cached tokens per sequence, 0 ... ctx_max
    tokens: np.ndarray  # (Gt,) prompt tokens of a step / chunk, 1 ... tok_max
    decode_gpu_s: np.ndarray  # (Gb, Gc) decode / speculative iteration GPU seconds
    linear_gpu_s: np.ndarray  # (Gb + 1, Gt) non-attention seconds p prompt tokens add (row 0: no decode rows)
    attention_gpu_s: np.ndarray  # (Gt, Gc) causal prefill attention of a chunk after c cached tokens
    tokens_per_seq: float  # tokens verified per sequence per iteration (1 + D; 1 without speculation)
    acceptance_length: float  # mean accepted tokens per iteration (1 without speculation)
    draft_len: float  # D
    target_kernels: float  # kernel launches of the target's part of one iteration
    draft_kernels: float  # kernel launches of the draft's part
    draft_prefill_gpu_s: np.ndarray | None = None  # (Gt,) the draft's own prefill of a chunk (EAGLE head, MTP, draft)

    def __post_init__(self):
        object.__setattr__(self, "_lb", [math.log(x) for x in self.batches])  # log grid, for the lookups

    def _b(self, b: float) -> tuple[int, float]:
        """Index and weight of decode batch b on the log grid (clipped to it)."""
        g, lb = self.batches, self._lb
        b = math.log(min(max(b, g[0]), g[-1]))
        i = min(max(bisect_right(lb, b) - 1, 0), len(g) - 2)
        return i, (b - lb[i]) / (lb[i + 1] - lb[i])

    def decode_s(self, b: float, ctx: float) -> float:
        """GPU seconds of one decode iteration of b sequences at mean context ctx (interpolated)."""
        i, w = self._b(b)
        lo = float(np.interp(ctx, self.contexts, self.decode_gpu_s[i]))
        hi = float(np.interp(ctx, self.contexts, self.decode_gpu_s[i + 1]))
        return lo + w * (hi - lo)

    def linear_s(self, b: float, tokens: float) -> float:
        """Non-attention GPU seconds that `tokens` prompt tokens add to a step of b decode rows (b = 0: alone)."""
        if tokens <= 0:
            return 0.0
        row = lambda k: float(np.interp(tokens, self.tokens, self.linear_gpu_s[k]))  # noqa: E731
        if b <= 0:
            return row(0)
        i, w = self._b(b)
        lo, hi = row(i + 1), row(i + 2)
        return lo + w * (hi - lo)

    def draft_prefill_s(self, tokens: float) -> float:
        """GPU seconds of the draft's own prefill of a chunk of `tokens` prompt tokens (0 without a draft)."""
        if self.draft_prefill_gpu_s is None or tokens <= 0:
            return 0.0
        return float(np.interp(tokens, self.tokens, self.draft_prefill_gpu_s))

    def attention_s(self, tokens: float, ctx: float) -> float:
        """Causal prefill attention GPU seconds of one chunk of `tokens` after `ctx` cached tokens (interpolated
        bilinearly; 0 for no tokens)."""
        if tokens <= 0:
            return 0.0
        t = self.tokens
        j = min(max(bisect_right(t, tokens) - 1, 0), len(t) - 2)
        w = (min(max(tokens, t[0]), t[-1]) - t[j]) / (t[j + 1] - t[j])
        lo = float(np.interp(ctx, self.contexts, self.attention_gpu_s[j]))
        hi = float(np.interp(ctx, self.contexts, self.attention_gpu_s[j + 1]))
        return lo + w * (hi - lo)


def _grid(top: float, n: int, start: float = 1.0) -> np.ndarray:
    """Whole numbers start ... top, geometric, unique (at least two)."""
    top = max(float(np.ceil(top)), start + 1.0)
    return np.unique(np.round(np.geomspace(start, top, n)))


def build_step_table(model, hw, tp, eng, prec, spec, *, b_max: float, ctx_max: float, tok_max: float,
                     draft=None) -> StepTable:
    """Price the StepTable of `model` on `hw` at `tp` (an int or a Layout) under engine `eng`, precision `prec`
    and step options `spec` (serving/aggregated.StepOptions, a scalar D), once: batches 1 ... b_max,
    contexts 0 ... ctx_max, prompt tokens 1 ... tok_max. `draft`: (draft model, precision) whose extend the round
    runs, as gpu_tables takes it."""
    batches = _grid(b_max, BATCH_POINTS)
    contexts = np.unique(np.round(np.linspace(0.0, max(float(ctx_max), 2.0), CONTEXT_POINTS)))
    tokens = _grid(tok_max, TOKEN_POINTS)
    d = float(spec.draft_len or 0)
    b2, c2 = batches[:, None], np.maximum(contexts[None, :], 1.0)
    r = spec.with_draft_len(d).evaluate(model, hw, tp, eng, prec, batch=b2, context_len=c2)
    q = float(np.asarray(r.verify_tokens, dtype=float).ravel()[0])
    dec = np.asarray(r.iter_s, dtype=float) * np.ones(b2.shape) + round_gpu_extra_s(
        model, engine_hardware(hw, eng), tp, RoundShape(b2, d, q, c2), spec.mechanism, draft)
    fam = load_kernel_family(eng.family_id("decode_attention" if q <= 1 else "verify_attention", hw))
    rows = np.concatenate([[0.0], batches])[:, None]
    p = tokens[None, :]
    att_p = prefill_attention_s(model, hw, attention_tp(tp), p, 0.0, prec,
                                load_kernel_family(eng.family_id("prefill_attention", hw)))
    with_p = mixed_step_s(model, hw, tp, StepMix(rows, 1.0, p, 0.0, q_len=q), precision=prec, engine=eng,
                          decode_family=fam)
    without = mixed_step_s(model, hw, tp, StepMix(rows[1:], 1.0, 0.0, 0.0, q_len=q), precision=prec, engine=eng,
                           decode_family=fam)
    lin = with_p - att_p
    lin[1:] = lin[1:] - without
    att = prefill_attention_s(model, hw, attention_tp(tp), tokens[:, None], contexts[None, :], prec,
                              load_kernel_family(eng.family_id("prefill_attention", hw)))
    from specplan.serving.aggregated import step_kernels

    rho_d = float(np.asarray(r.rho_d, dtype=float).ravel()[0])
    k = float(step_kernels(model, hw, tp, eng, prec))
    dpf = None
    if draft is not None and d > 0:  # the draft runs over the prompt too (aggregated.gpu_tables' draft_prefill_s)
        from specplan.model.parallel import draft_parallelism
        from specplan.serving.prefill import prefill_s

        dm, dprec = draft
        dpf = np.asarray(prefill_s(dm, hw, draft_parallelism(dm, tp), tokens, precision=dprec, engine=eng),
                         dtype=float)
    return StepTable(batches, contexts, tokens, dec, np.maximum(lin, 0.0), att, q,
                     float(np.asarray(r.acceptance_length, dtype=float).ravel()[0]), d, k, k * rho_d, dpf)

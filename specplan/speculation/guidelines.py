"""The five guidelines made computable: per-point diagnostics and the guideline that binds a choice of D.

- G1: verify GEMMs turn compute-bound when B·(1+D) crosses the ridge (weight-streaming GEMM: 2·M / bytes per
  weight FLOP/byte; = M for 16-bit weights, so 64·5 = 320 > 295 on an H100 in bf16). For MoE layers the GEMM-M
  of each expert is B·(1+D)·k / touched experts (`costs.moe.per_expert_m`), which crosses the ridge far later.
- G2: when attention dominates, D = 128/G_dev − 1 fills one 128-row tile per KV head.
- G3: past that, prefer G_dev·(1 + D) a multiple of 128.
- G4: at low latency (the far right of the Pareto curve: the D = 0 step at batch B is within
  LOW_LATENCY_STEP_RATIO of its batch-1 time, fixed costs dominate) the draft overhead ρ·D must be paid for by
  the AL gain.
- G5: the choice of mechanism (best decode speedup for the workload and hardware), not "speculation off".
Recurrent-state traffic (linear attention / Mamba, class "state") is neither attention nor a guideline: when it is
what grows most with D the explanation names the state checkpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np

from specplan.costs.gemm import compute_dtype_for
from specplan.costs.moe import per_expert_m
from specplan.core.dtypes import dtype_bytes
from specplan.core.records import Record, record
from specplan.costs.precision import Precision
from specplan.profiles.hardware import HardwareProfile
from specplan.profiles.model import ModelProfile
from specplan.model.step import StepKernels

ATTENTION_DOMINATES = 0.5  # full-attention share of the D = 0 step from which G2 is named (below it: G3 at most)
LOW_LATENCY_STEP_RATIO = 1.25  # G4's low-latency end: the D = 0 step at batch B takes <= this x its batch-1 time
MOE_D_SEARCH_MAX = 65536  # largest D searched for the experts' compute-bound D
NEVER = -1  # compute-bound D sentinel: not reached for any D <= MOE_D_SEARCH_MAX


def mla_family():
    """The MLA kernel family the step prices MLA attention with by default (engine_profiles/kernels/mla-latent)."""
    from specplan.profiles.registry import load_kernel_family

    return load_kernel_family("mla-latent")


def attention_tile_rows(model: ModelProfile, hw: HardwareProfile) -> int:
    """Query rows per tile of the model's attention kernel on this device (MLA: the MLA family's tile)."""
    from specplan.costs.attention import family_efficiency

    return int(family_efficiency(hw, mla_family() if model.mla is not None else None).tile_rows)


def attention_tile_d(g_dev: int, tile_rows: int = 128) -> int:
    """Guideline 2: D = floor(tile_rows / G_dev) − 1 (at least 0)."""
    return max(0, tile_rows // max(1, int(g_dev)) - 1)


def tile_aligned(g_dev: int, draft_len, tile_rows: int = 128) -> np.ndarray:
    """Guideline 3: G_dev · (1 + D) is a multiple of the tile rows."""
    return (g_dev * (1 + np.asarray(draft_len, dtype=int))) % tile_rows == 0


def dense_module(model: ModelProfile) -> str:
    """Precision module of the model's main dense GEMMs: the dense FFN when it has one, else the attention
    projections (an MoE model's dense FFN layers and projections; its experts are module 'moe')."""
    return "ffn" if model.ffn_size > 0 else "attention"


def gemm_dtype(model: ModelProfile, hw: HardwareProfile, prec: Precision, module: str | None = None) -> tuple[str, float]:
    """(math dtype, bytes per weight) of one precision module's GEMMs (default: the dense GEMMs, `dense_module`)."""
    w = prec.w(module or dense_module(model))
    return compute_dtype_for(hw, w, prec.compute), dtype_bytes(w)


def ridge_tokens(model: ModelProfile, hw: HardwareProfile, prec: Precision, effective: bool,
                 module: str | None = None) -> float:
    """GEMM-M (tokens) at which a weight-streaming GEMM reaches the ridge: ridge · bytes-per-weight / 2."""
    math, b_w = gemm_dtype(model, hw, prec, module)
    return hw.ridge_flops_per_byte(math, effective=effective) * b_w / 2.0


def compute_bound_from_d(batch, m_ridge: float) -> np.ndarray:
    """Smallest D >= 0 with B · (1 + D) > m_ridge (0 when already compute-bound without speculation)."""
    b = np.asarray(batch, dtype=float)
    return np.maximum(0, np.floor(m_ridge / b)).astype(int)


def moe_compute_bound_from_d(batch, m_ridge: float, num_experts: int, top_k: int, routing: str = "random",
                             d_max: int = MOE_D_SEARCH_MAX) -> np.ndarray:
    """Smallest D >= 0 with per-expert GEMM-M = B·(1+D)·k / touched experts >= m_ridge (`per_expert_m`).

    per_expert_m is increasing in tokens, so a vectorized bisection over integer D in [0, d_max] finds it;
    NEVER (-1) where even D = d_max stays below the ridge.
    """
    b = np.asarray(batch, dtype=float)
    ok = lambda d: per_expert_m(b * (1.0 + d), num_experts, top_k, routing) >= m_ridge  # noqa: E731
    lo = np.full(b.shape, -1.0)  # largest D known below the ridge (-1: none)
    hi = np.full(b.shape, float(d_max))  # smallest D known at or above it
    never = ~ok(hi)
    while np.any(hi - lo > 1):
        mid = np.floor((lo + hi) / 2.0)
        good = ok(mid)
        step = hi - lo > 1
        hi = np.where(step & good, mid, hi)
        lo = np.where(step & ~good, mid, lo)
    return np.where(never, NEVER, hi).astype(int)


@record
class G1Targets:
    """Guideline 1: the compute-bound D (per batch) and ridges (GEMM-M tokens, effective and spec-sheet) of the
    bulk of the weights (`applies_to`: 'experts' for MoE models, else 'dense GEMMs') and of the dense GEMMs."""

    applies_to: str
    compute_bound_from_d: np.ndarray
    compute_bound_from_d_spec_sheet: np.ndarray
    ridge_tokens_effective: float
    ridge_tokens_spec_sheet: float
    dense_compute_bound_from_d: np.ndarray
    dense_compute_bound_from_d_spec_sheet: np.ndarray
    dense_ridge_tokens_effective: float
    dense_ridge_tokens_spec_sheet: float


def g1_targets(model: ModelProfile, hw: HardwareProfile, prec: Precision, batch, routing: str = "random") -> G1Targets:
    """Guideline 1 for the dense GEMMs and, for MoE models, the experts: their compute-bound D and ridges.

    The bulk of the weights are the experts for MoE models, else the dense GEMMs; `applies_to` says which.
    """
    dense_eff = ridge_tokens(model, hw, prec, True)
    dense_spec = ridge_tokens(model, hw, prec, False)
    dense_d, dense_d_spec = compute_bound_from_d(batch, dense_eff), compute_bound_from_d(batch, dense_spec)
    dense = (dense_d, dense_d_spec, dense_eff, dense_spec)
    if model.moe is None:
        return G1Targets("dense GEMMs", dense_d, dense_d_spec, dense_eff, dense_spec, *dense)
    e, k = model.moe.num_experts, model.moe.top_k
    moe_eff = ridge_tokens(model, hw, prec, True, "moe")
    moe_spec = ridge_tokens(model, hw, prec, False, "moe")
    return G1Targets("experts", moe_compute_bound_from_d(batch, moe_eff, e, k, routing),
                     moe_compute_bound_from_d(batch, moe_spec, e, k, routing), moe_eff, moe_spec, *dense)


def d_phrase(compute_bound_from_d) -> str:
    """'D = 4', or 'no D <= 65536' for the NEVER sentinel (of the first point of an array)."""
    d = int(np.asarray(compute_bound_from_d).reshape(-1)[0])
    return f"no D <= {MOE_D_SEARCH_MAX}" if d == NEVER else f"D = {d}"


def g1_phrase(diag, key: str = "gemm_compute_bound_from_d") -> str:
    """'D = 4', or 'no D <= 65536' for the NEVER sentinel, of one compute-bound D of a diagnostics mapping."""
    return d_phrase(diag[key])


def attention_share(base) -> np.ndarray:
    """Share of the D = 0 step (a StepResult) spent in attention kernels: softmax attention of every attention
    mixer (full, sliding, chunked, MLA / DSA / compressed), not the recurrent-state kernels (class 'state')."""
    return np.asarray(base.breakdown_s["attention"], dtype=float) / np.asarray(base.total_s, dtype=float)


def low_latency(model, hw, tp, context_len, prec, base_total_s, style="shared", routing="random") -> np.ndarray:
    """Guideline 4's regime: the D = 0 step at this batch is within LOW_LATENCY_STEP_RATIO of the batch-1 step
    (fixed costs, weight streaming and launches, dominate; tokens/s/user is near its maximum)."""
    from specplan.model.step import step_time

    one = step_time(model, hw, tp, 1, 1, context_len, precision=prec,
                    kernels=StepKernels(attention_style=style, routing=routing)).total_s
    return np.asarray(base_total_s, dtype=float) <= LOW_LATENCY_STEP_RATIO * np.asarray(one, dtype=float)


@record(eq=False)
class Diagnostics(Record):
    """The guideline diagnostics per grid point (arrays broadcast to the grid; scalars where they do not vary), in
    the order of the dict answer they replaced (a read-only mapping by field name, as scripts read it): the tile
    (rows, G_dev, G2's D, G3's alignment), G4's low-latency regime, the verify GEMM and MoE regimes, Guideline 1
    (`G1Targets`: the bulk of the weights, then the dense GEMMs), the attention share of the D = 0 step and ρ."""

    tile_rows: int
    low_latency: np.ndarray
    g_dev: int
    attention_tile_d: int
    tile_aligned: np.ndarray
    gemm_regime: np.ndarray
    moe_regime: np.ndarray
    gemm_compute_bound_applies_to: str
    gemm_compute_bound_from_d: np.ndarray
    gemm_compute_bound_from_d_spec_sheet: np.ndarray
    ridge_tokens_effective: float
    ridge_tokens_spec_sheet: float
    dense_gemm_compute_bound_from_d: np.ndarray
    dense_gemm_compute_bound_from_d_spec_sheet: np.ndarray
    dense_ridge_tokens_effective: float
    dense_ridge_tokens_spec_sheet: float
    attention_share: np.ndarray
    rho: np.ndarray
    rho_d: np.ndarray


def diagnostics(model, hw, tp, batch, context_len, draft_len, prec, steps: tuple, rho, kernels=None) -> Diagnostics:
    """Guideline diagnostics per grid point (`Diagnostics`); `steps`: the (baseline, verify) StepResults;
    `kernels`: the StepKernels they were priced with (attention style, routing)."""
    base, verify = steps
    style = "shared" if kernels is None else kernels.attention_style
    routing = "random" if kernels is None else kernels.routing
    g = model.g_dev(tp)
    tile = attention_tile_rows(model, hw)
    d = np.asarray(draft_len, dtype=float)
    g1 = g1_targets(model, hw, prec, batch, routing)
    return Diagnostics(
        tile_rows=tile,
        low_latency=low_latency(model, hw, tp, context_len, prec, base.total_s, style, routing),
        g_dev=g,
        attention_tile_d=attention_tile_d(g, tile),
        tile_aligned=tile_aligned(g, d, tile),
        gemm_regime=verify.regime("gemm"),
        moe_regime=verify.regime("moe"),
        gemm_compute_bound_applies_to=g1.applies_to,
        gemm_compute_bound_from_d=g1.compute_bound_from_d,
        gemm_compute_bound_from_d_spec_sheet=g1.compute_bound_from_d_spec_sheet,
        ridge_tokens_effective=g1.ridge_tokens_effective,
        ridge_tokens_spec_sheet=g1.ridge_tokens_spec_sheet,
        dense_gemm_compute_bound_from_d=g1.dense_compute_bound_from_d,
        dense_gemm_compute_bound_from_d_spec_sheet=g1.dense_compute_bound_from_d_spec_sheet,
        dense_ridge_tokens_effective=g1.dense_ridge_tokens_effective,
        dense_ridge_tokens_spec_sheet=g1.dense_ridge_tokens_spec_sheet,
        attention_share=attention_share(base),
        rho=np.asarray(rho, dtype=float),
        rho_d=np.asarray(rho, dtype=float) * d,
    )


@record
class GuidelinePoint:
    """The diagnostics the binding rule reads at one point (one batch): G_dev, G2's D, the attention share of the
    D = 0 step, the tile rows, G4's low-latency regime and Guideline 1's compute-bound D and effective ridges
    (None: not known)."""

    g_dev: int | None = None
    attention_tile_d: int | None = None
    attention_share: float | None = None
    tile_rows: int = 128
    low_latency: bool = True
    gemm_compute_bound_applies_to: str = "dense GEMMs"
    gemm_compute_bound_from_d: int | None = None
    dense_gemm_compute_bound_from_d: int | None = None
    ridge_tokens_effective: float | None = None
    dense_ridge_tokens_effective: float | None = None

    @classmethod
    def of(cls, diag) -> "GuidelinePoint":
        """The point of a diagnostics mapping at one point (a Diagnostics, or the plain numbers planning keeps of
        it); a GuidelinePoint as it is."""
        return diag if isinstance(diag, GuidelinePoint) else _by_name(cls, diag, "guideline diagnostics")


def _by_name(cls, answer, what: str):
    """The frozen dataclass `cls` of the fields a mapping answer carries, by field name (the others keep their
    defaults): an answer read once at the entry of a function that takes the typed record."""
    if not isinstance(answer, Mapping):
        raise TypeError(f"{what}: expected a mapping, got {type(answer).__name__}")
    return cls(**{f.name: answer[f.name] for f in fields(cls) if f.name in answer})


@record
class StepCurve:
    """One mechanism at one batch over D (index = D): verify seconds by kernel class, draft seconds, acceptance
    length and speedup; optionally the recurrent-state and whole verify seconds, whether each D fits and its
    memory (bytes per device), ρ and the draft's time ratio (None: not known)."""

    verify_attention_s: np.ndarray
    verify_gemm_s: np.ndarray
    draft_s: np.ndarray
    acceptance_length: np.ndarray
    speedup: np.ndarray
    verify_state_s: np.ndarray | None = None
    verify_s: np.ndarray | None = None
    fits: np.ndarray | None = None
    memory_total_bytes: np.ndarray | None = None
    rho: np.ndarray | None = None
    rho_time: np.ndarray | None = None

    @classmethod
    def of(cls, grid, row=None) -> "StepCurve":
        """The curve of a SpeedupGrid over D: its row `row` of (batch, D) arrays, or its arrays flattened."""
        pick = (lambda v: np.asarray(v).reshape(-1)) if row is None else (lambda v: v[row])  # noqa: E731
        return cls(**{f.name: pick(getattr(grid, f.name)) for f in fields(cls)})


G1_NEAR = 1  # G1 is named when a GEMM class is compute-bound at D + G1_NEAR (its compute-bound D <= D + G1_NEAR)


@record
class Growth:
    """What one more drafted token adds per step (s): verify attention, verify GEMMs, drafting and (None: not
    priced) the verify step's recurrent-state traffic."""

    attention_s: float
    gemm_s: float
    draft_s: float
    state_s: float | None = None

    def top(self) -> str:
        """The kernel class that grows most: attention, gemm, draft or state (the first of a tie, in that order)."""
        grow = {"attention": self.attention_s, "gemm": self.gemm_s, "draft": self.draft_s}
        if self.state_s is not None:
            grow.update(state=self.state_s)
        return max(grow, key=grow.get)


def g1_near(diag, d: int, near: int = G1_NEAR) -> bool:
    """True when the bulk GEMMs' (or the dense GEMMs') verify step is compute-bound at D + 1: their compute-bound
    D is at most `d` + `near`, so raising D past `d` adds GEMM time (Guideline 1 has run its course). `diag`: a
    GuidelinePoint or a diagnostics mapping."""
    pt = GuidelinePoint.of(diag)
    for cb in (pt.gemm_compute_bound_from_d, pt.dense_gemm_compute_bound_from_d):
        if cb is not None:
            cb = int(np.asarray(cb).reshape(-1)[0])
            if cb != NEVER and cb <= d + near:
                return True
    return False


def binding_line(best_d: int, step: "StepCurve", diag, d_max=None, extrapolate: bool = False) -> tuple[str, str]:
    """(guideline, sentence) naming what binds the choice of D, from the cost growth one step past it.

    The one rule `predict` and `recommend` share. `step` (a StepCurve) holds 1-D arrays over D (index = D, at
    least up to best_d + 1) for one mechanism at one batch. In order: the acceptance
    data's range, the search range, D = 0 (G5), D + 1 faster (nothing binds), D + 1 out of memory, then the
    kernel class whose time grows most from D to D + 1: attention at the tile D (G2) or past it (G3), GEMMs
    only when a GEMM class is compute-bound at D + 1, i.e. its compute-bound D <= D + 1 (G1, `g1_near`), the draft (G4 with the draft's
    time ratio); otherwise the marginal trade of D + 1 (added verify ms by class and draft ms against the AL
    gain). `diag`: the guideline diagnostics at the batch (a GuidelinePoint, or a mapping of them by name).
    """
    pt = GuidelinePoint.of(diag)
    g, tile_d = pt.g_dev, pt.attention_tile_d
    share = float(pt.attention_share)
    n = len(step.speedup)
    if d_max is not None and not extrapolate and best_d >= d_max:
        return "range", (f"acceptance data end at D = {d_max:g}: larger D not considered "
                         f"(pass --extrapolate to continue the curve)")
    if best_d + 1 >= n:
        return "range", f"largest D searched ({best_d}); raise --max-draft-len"
    nxt = best_d + 1
    if step.fits is not None and not bool(step.fits[best_d]):
        return "memory", (f"D = {best_d} itself does not fit in memory at this batch "
                          f"({float(step.memory_total_bytes[best_d]) / 1e9:.1f} GB per device)")
    if step.fits is not None and not bool(step.fits[nxt]):
        return "memory", (f"D = {nxt} does not fit in memory at this batch "
                          f"({float(step.memory_total_bytes[nxt]) / 1e9:.1f} GB per device: KV cache, weights and "
                          f"the verify-time state of {nxt + 1} tokens)")
    sp, sp1 = float(step.speedup[best_d]), float(step.speedup[nxt])
    if sp1 > sp * (1 + 1e-9):
        return "none", (f"D = {nxt} is faster here (speedup {sp1:.3f} vs {sp:.3f}): no guideline binds D = {best_d}")
    if best_d == 0:
        return "off", "no draft length pays for its draft and verify cost here: speculation off"
    grow = Growth(attention_s=step.verify_attention_s[nxt] - step.verify_attention_s[best_d],
                  gemm_s=step.verify_gemm_s[nxt] - step.verify_gemm_s[best_d],
                  draft_s=step.draft_s[nxt] - step.draft_s[best_d],
                  state_s=None if step.verify_state_s is None else
                  step.verify_state_s[nxt] - step.verify_state_s[best_d])
    gain = float(step.acceptance_length[nxt] - step.acceptance_length[best_d])
    top = grow.top()
    rows = int(pt.tile_rows)
    if top == "attention" and best_d == tile_d and share >= ATTENTION_DOMINATES:
        return "G2", (f"attention dominates ({100 * share:.0f}% of the D = 0 step): D = {rows}/G − 1 = {rows}/{g} − 1 "
                      f"= {tile_d}; D = {nxt} opens a second {rows}-row tile")
    if top == "attention":
        return "G3", (f"attention tiles: G·(1 + D) = {g * (1 + best_d)} rows in {rows}-row tiles; D = {nxt} adds "
                      f"{1e3 * grow.attention_s:.3f} ms of attention per step (attention {100 * share:.0f}% of the "
                      f"D = 0 step)")
    if top == "state":
        return "state", (f"recurrent-state checkpoints: verification writes the linear-attention / Mamba state after "
                         f"every verified position, so D = {nxt} adds {1e3 * grow.state_s:.3f} ms of state traffic "
                         f"for +{gain:.2f} AL")
    if top == "gemm" and g1_near(pt, best_d):
        return "G1", (f"{g1_sentence(pt)}; past that each drafted token adds verify GEMM time: D = {nxt} adds "
                      f"{1e3 * grow.gemm_s:.3f} ms of GEMM for +{gain:.2f} AL")
    if top == "draft" and bool(np.asarray(pt.low_latency).reshape(-1)[0]):
        cost = ""
        if step.rho_time is not None:
            cost = f"; the draft step costs {float(step.rho_time[best_d]):.3f} of a target step"
            if step.rho is not None:
                cost += f" (layer ratio ρ = {float(step.rho[best_d]):.3g})"
        return "G4", (f"draft overhead ρD outweighs the AL gain beyond D = {best_d} (D = {nxt} adds "
                      f"{1e3 * grow.draft_s:.3f} ms of drafting for +{gain:.2f} AL){cost}")
    return "marginal", marginal_sentence(best_d, step, grow, gain, pt)


def marginal_sentence(d: int, step: "StepCurve", grow: Growth, gain: float, diag=None) -> str:
    """The trade of D + 1 in words: added verify ms by kernel class and draft ms against the AL gain; `diag` (a
    GuidelinePoint or a diagnostics mapping) adds where Guideline 1 would bind."""
    nxt = d + 1
    state = 0.0 if grow.state_s is None else grow.state_s
    parts = [f"{1e3 * grow.gemm_s:.3f} ms GEMM", f"{1e3 * grow.attention_s:.3f} ms attention"]
    if abs(float(state)) >= 5e-7:
        parts.append(f"{1e3 * grow.state_s:.3f} ms recurrent state")
    if step.verify_s is not None:
        other = float(step.verify_s[nxt] - step.verify_s[d]) - float(grow.gemm_s + grow.attention_s + state)
        if abs(other) >= 5e-7:
            parts.append(f"{1e3 * other:.3f} ms other")
    al0 = float(step.acceptance_length[d])
    pt = None if not diag else GuidelinePoint.of(diag)
    return (f"D = {nxt} adds {', '.join(parts)} of verify and {1e3 * float(grow.draft_s):.3f} ms of drafting "
            f"for +{gain:.2f} AL (+{100 * gain / al0:.1f}%): not worth it (speedup "
            f"{float(step.speedup[nxt]):.3f} vs {float(step.speedup[d]):.3f})"
            + ("" if pt is None or pt.gemm_compute_bound_from_d is None else "; G1 does not bind yet: the GEMMs "
               f"turn compute-bound only at {d_phrase(pt.gemm_compute_bound_from_d)}"))


def g1_sentence(diag) -> str:
    """Guideline 1 in words: where the bulk of the weights' verify GEMMs turn compute-bound, saying which GEMMs
    (for MoE models the experts first, then the dense GEMMs); `diag`: a GuidelinePoint or a diagnostics mapping."""
    pt = GuidelinePoint.of(diag)
    dense = (f"compute-bound at {d_phrase(pt.dense_gemm_compute_bound_from_d)} (B·(1 + D) crosses the "
             f"effective ridge of {float(pt.dense_ridge_tokens_effective):.0f} tokens)")
    if pt.gemm_compute_bound_applies_to != "experts":
        return f"verify GEMMs turn {dense}"
    return (f"expert GEMMs (the bulk of the weights) turn compute-bound at {d_phrase(pt.gemm_compute_bound_from_d)} "
            f"(per-expert GEMM-M B·(1 + D)·k / touched experts crosses the effective ridge of "
            f"{float(pt.ridge_tokens_effective):.0f} tokens); the dense GEMMs turn {dense}")


@record
class RankedPoint:
    """One ranked (mechanism, D) of a search, as Guideline 5 reads it: whether it is feasible, its decode speedup,
    acceptance length and draft seconds per iteration."""

    mechanism: str
    draft_len: int
    feasible: bool = False
    speedup: float = float("nan")
    acceptance_length: float = float("nan")
    draft_s: float = float("nan")


def mechanism_line(ranked: list) -> tuple[str, str] | None:
    """Guideline 5, the choice of mechanism: the best feasible row's mechanism against the best feasible row of
    every other mechanism (None when only one mechanism, or only D = 0, is feasible). `ranked`: the search's rows
    best first (RankedPoints, or the mappings a search answers with)."""
    points = [x if isinstance(x, RankedPoint) else _by_name(RankedPoint, x, "ranked row") for x in ranked]
    feasible = [x for x in points if x.feasible]
    if not feasible or feasible[0].mechanism == "none":
        return None
    best = feasible[0]
    others = {}
    for x in feasible:
        if x.mechanism not in ("none", best.mechanism) and x.mechanism not in others:
            others[x.mechanism] = x
    if not others:
        return None
    rest = "; ".join(f"{m} D = {x.draft_len}: speedup {x.speedup:.3f}, AL {x.acceptance_length:.2f}, "
                     f"draft {1e3 * x.draft_s:.3f} ms" for m, x in others.items())
    return "G5", (f"{best.mechanism} D = {best.draft_len} has the best decode speedup here "
                  f"({best.speedup:.3f}, AL {best.acceptance_length:.2f}, draft {1e3 * best.draft_s:.3f} ms "
                  f"per iteration) against {rest}")

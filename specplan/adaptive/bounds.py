"""The oracle (= clairvoyant) bound of a request-level run: no lossless one-D-per-step policy does better, on any seed.

With common random numbers the accepted drafts of request i at output position j for draft length D,
acc_i(j, D), are fixed before the run. Any lossless policy advances request i through positions 1 → OSL_i by
iterations j → min(j + acc_i(j, D) + 1, OSL_i), at context ISL_i + j. Prefill steps, host time, eager launches
and SGLang's draft-extend only add time, and the decode batch never exceeds B_reach = min(tabulated batch,
running cap, closed-loop concurrency, the most requests whose reserved KV fits at once). So every step request
i takes part in costs at least
- κ(D)            = min over B <= B_reach and the context grid of T(B, c, D)   (the fastest step at that D),
and its share of the step (T at the batch's mean context c̄, split over the B members) is at least
- σ(D, c_i)       = min over B <= B_reach of (a(B, D) + b(B, D) c_i) / B,
where a + b c <= T(B, c, D) is an affine minorant of the tabulated (piecewise-linear) step time in context: the
members' minorants sum to a + b c̄ <= T. σ is concave in c_i, so its chords on the context grid stay below it.
A dynamic program over positions (per request, vectorized over requests) gives
- f_i = min Σ κ(D) over the D sequences that finish request i: TPOT_i >= f_i / (OSL_i − 1);
- g_i = min Σ σ(D, ISL_i + j): the decode steps last >= Σ_i g_i in all.
Prefill runs as steps of its own (the simulator's SGLang-style schedule) and costs at least π = min over the
prefill grid of seconds per prompt token, so TTFT_i >= π ISL_i and the run lasts >= Σ_i g_i + π Σ_i ISL_i and
>= max_i (a_i − a_0 + π ISL_i + f_i): tokens/s/GPU <= Σ OSL / that / devices. Every TPOT and TTFT percentile of
a policy is >= the bound's (componentwise larger vectors have larger quantiles), tokens/s/user and SLO
attainment are <=.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from specplan.adaptive.costs import StepCosts
from specplan.adaptive.metrics import PCTS, attainment
from specplan.adaptive.records import BoundRow, finite_or_none
from specplan.adaptive.simulator import thresholds, token_uniforms
from specplan.adaptive.workload import Workload


def reach_batch(wl: Workload, costs: StepCosts, max_running: int | None = None) -> int:
    """Largest decode batch a run can reach: tabulated, running cap, closed loop, reserved KV (whole ISL + OSL)."""
    need = np.sort(costs.seq_bytes(wl.isl + wl.osl))
    fit = int(np.searchsorted(np.cumsum(need), costs.capacity_bytes - costs.fixed_bytes, side="right"))
    caps = [costs.b_max, max(fit, 1), wl.n] + [c for c in (max_running, wl.closed_loop) if c]
    return int(min(caps))


def affine_minorant(t: np.ndarray, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) per leading index with a + b c <= t(c) on the grid and b >= 0 (t: (..., n_ctx) over `grid`)."""
    if grid.size < 2:
        return t[..., 0], np.zeros(t.shape[:-1])
    b = np.maximum((np.diff(t, axis=-1) / np.diff(grid)).min(axis=-1), 0.0)
    a = (t - b[..., None] * grid).min(axis=-1)
    return a, b


def step_floors(costs: StepCosts, b_reach: int | None = None, at_zero: bool = False
                ) -> tuple[np.ndarray, np.ndarray]:
    """(κ(D), σ on the context grid (ctx, D)): least step seconds per D, least per-sequence share per (context,
    D); at_zero: σ at context 0 instead (one row, the minorants' intercepts)."""
    top = costs.b_max if b_reach is None else max(1, min(b_reach, costs.b_max))
    t = np.moveaxis(costs.iter_s[:top], 1, -1)  # (B, D, ctx)
    a, b = affine_minorant(t, costs.ctx_grid)  # (B, D)
    bb = np.arange(1, top + 1, dtype=float)[:, None, None]
    c = np.zeros(1) if at_zero else costs.ctx_grid
    share = ((a[..., None] + b[..., None] * c) / bb).min(axis=0)  # (D, ctx)
    return t.min(axis=(0, 2)), share.T


def prefill_floor_s(costs: StepCosts, budget: int | None = None) -> float:
    """Least prefill seconds per prompt token of a step of at most `budget` tokens: the grid is piecewise linear,
    so the minimum is at a grid point or, beyond the grid (priced at its last point), at the budget."""
    t, s = costs.prefill_tokens, costs.prefill_s_grid
    return float(min(np.min(s / np.maximum(t, 1)), s[-1] / max(float(budget or 0), float(t[-1]))))


def clairvoyant_dp(wl: Workload, costs: StepCosts, seed: int, b_reach: int | None = None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(f_i, g_i): least decode seconds of each request under κ and under σ (positions 1 → OSL_i)."""
    kappa, share = step_floors(costs, b_reach)
    grid = costs.ctx_grid
    share0 = step_floors(costs, b_reach, at_zero=True)[1][0]
    d_max = costs.d_max
    off, u = token_uniforms(wl, seed)
    n = wl.n
    w = d_max + 2
    f = np.zeros((n, w))
    g = np.zeros((n, w))
    req = np.arange(n)
    k = np.arange(max(d_max, 1))[None, :]
    rows = req[:, None]
    dd = np.arange(d_max + 1)[None, :]
    for j in range(int(wl.osl.max()) - 1, 0, -1):
        live = wl.osl > j
        pos = np.full(n, j)
        idx = np.minimum(off[:n, None] + j + k, u.size - 1)
        lead = np.cumprod(u[idx] < thresholds(wl, rows, pos[:, None], k), axis=1).sum(axis=1)
        step = np.minimum(lead[:, None], dd) + 1  # positions advanced for D = 0..d_max
        col = (j + step) % w
        c = (wl.isl + j).astype(float)
        sj = np.stack([np.interp(c, grid, share[:, d]) for d in range(d_max + 1)], axis=1)
        sj = np.where((c < grid[0])[:, None], share0[None, :], sj)  # below the grid: the minorant's intercept
        fj = (kappa[None, :] + f[rows, col]).min(axis=1)
        gj = (sj + g[rows, col]).min(axis=1)
        f[:, j % w] = np.where(live, fj, 0.0)
        g[:, j % w] = np.where(live, gj, 0.0)
    return f[:, 1 % w], g[:, 1 % w]


def clairvoyant_row(wl: Workload, costs: StepCosts, seed: int, *, max_tpot_s=None, max_ttft_s=None,
                    max_running: int | None = None, prefill_budget: int | None = None,
                    name: str = "clairvoyant") -> BoundRow:
    """Bounds in the shape of a policy row: TPOT and TTFT percentiles are lower bounds, the rest upper bounds."""
    b_reach = reach_batch(wl, costs, max_running)
    f, g = clairvoyant_dp(wl, costs, seed, b_reach)
    tpot = np.where(wl.osl > 1, f / np.maximum(wl.osl - 1, 1), np.nan)
    ttft = prefill_floor_s(costs, prefill_budget) * wl.isl
    a = wl.arrival_s - float(wl.arrival_s.min()) if wl.closed_loop is None else np.zeros(wl.n)
    dur = max(float(g.sum() + ttft.sum()), float(np.max(a + ttft + f)))
    ok = attainment(tpot, ttft, max_tpot_s, max_ttft_s)
    x = tpot[np.isfinite(tpot)]
    tp50, tp90, tp99 = (1e3 * float(np.percentile(x, q)) if x.size else float("nan") for q in PCTS)
    tf50, tf90, tf99 = (1e3 * float(np.percentile(ttft, q)) for q in PCTS)
    return finite_or_none(BoundRow(
        policy=name, lossy=False, bound=True, tpot_p50_ms=tp50, tpot_p90_ms=tp90, tpot_p99_ms=tp99,
        ttft_p50_ms=tf50, ttft_p90_ms=tf90, ttft_p99_ms=tf99,
        tokens_per_s_per_gpu=float(wl.osl.sum()) / dur / costs.devices if dur > 0 else float("nan"),
        tokens_per_s_per_user=float(np.nanmean(1.0 / tpot)) if np.isfinite(tpot).any() else float("nan"),
        slo_attainment=None if ok is None else float(ok.mean()),
        mean_draft_len=None,
        bound_batch=b_reach,
    ))


def lossless_bound_row(wl: Workload, costs: StepCosts, seed: int, engine, *, max_tpot_s=None, max_ttft_s=None,
                       name: str = "clairvoyant") -> BoundRow:
    """The bound of every lossless policy on `engine`: the clairvoyant bound under the running cap of a speculating
    server and, where the engine lowers its cap when it speculates (SGLang's 48), the bound of the plain (D = 0)
    server under its own cap (fixed:0 runs there); each metric the better of the two."""
    spec = clairvoyant_row(wl, costs, seed, max_tpot_s=max_tpot_s, max_ttft_s=max_ttft_s,
                           max_running=engine.running_cap(True), prefill_budget=engine.prefill_budget, name=name)
    if engine.running_cap(False) <= engine.running_cap(True):
        return spec
    plain = clairvoyant_row(wl, replace(costs, iter_s=costs.iter_s[:, :, :1]), seed, max_tpot_s=max_tpot_s,
                            max_ttft_s=max_ttft_s, max_running=engine.running_cap(False),
                            prefill_budget=engine.prefill_budget, name=name)
    return better_bounds(spec, plain)


def better_bounds(a: BoundRow, b: BoundRow) -> BoundRow:
    """Per metric the better of two bound rows: the lower TPOT / TTFT percentiles, the higher throughputs and SLO
    attainment, the larger reachable batch."""
    out = {}
    for k, va in a.items():
        vb = b.get(k)
        if not isinstance(vb, (int, float)) or isinstance(vb, bool):
            continue
        if not isinstance(va, (int, float)) or isinstance(va, bool):
            out[k] = vb
        elif k.startswith(("tpot_p", "ttft_p")):
            out[k] = min(va, vb)
        elif k in ("tokens_per_s_per_gpu", "tokens_per_s_per_user", "slo_attainment", "bound_batch"):
            out[k] = max(va, vb)
    return replace(a, **out)

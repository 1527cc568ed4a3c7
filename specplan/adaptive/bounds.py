"""The clairvoyant bound of a request-level run: no lossless one-D-per-step policy can do better, on any seed.

With common random numbers the accepted drafts of request i at output position j for draft length D,
acc_i(j, D), are fixed before the run. Any lossless policy advances request i through positions 1 → OSL_i by
iterations j → min(j + acc_i(j, D) + 1, OSL_i), and every step it takes part in costs at least
- κ(D)       = min over the tabulated (batch, context) of T(B, c, D)       (the fastest step at that D), and
- κ_share(D) = min over (batch, context) of T(B, c, D) / B                 (its share of the step's time),
because prefill, eager launches and SGLang's draft-extend only add time, and every batch's mean context is at
least the grid's smallest. A dynamic program over positions (per request, vectorized over requests) gives
- f_i = min Σ κ(D) over all D sequences that finish request i: TPOT_i >= f_i / (OSL_i − 1), hence every TPOT
  percentile and TPOT-SLO attainment of every policy is bounded by those of f;
- g_i = min Σ κ_share(D): the run's duration >= Σ_i g_i (steps are sequential) and >= max_i (a_i − a_0 + f_i),
  so tokens/s/GPU <= Σ OSL / max(Σ g_i, max_i(a_i − a_0 + f_i)) / devices.
TTFT is not bounded here (prefill is priced the same way by every policy).
"""

from __future__ import annotations

import numpy as np

from specplan.adaptive.costs import StepCosts
from specplan.adaptive.metrics import PCTS, attainment, finite_or_none
from specplan.adaptive.simulator import thresholds, token_uniforms
from specplan.adaptive.workload import Workload


def step_floors(costs: StepCosts) -> tuple[np.ndarray, np.ndarray]:
    """(κ(D), κ_share(D)): the least step seconds and the least per-sequence share at each D."""
    t = costs.iter_s
    b = np.arange(1, costs.b_max + 1, dtype=float)[:, None, None]
    return t.min(axis=(0, 1)), (t / b).min(axis=(0, 1))


def clairvoyant_dp(wl: Workload, costs: StepCosts, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(f_i, g_i): least decode seconds of each request under κ and under κ_share (positions 1 → OSL_i)."""
    kappa, share = step_floors(costs)
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
        fj = (kappa[None, :] + f[rows, col]).min(axis=1)
        gj = (share[None, :] + g[rows, col]).min(axis=1)
        f[:, j % w] = np.where(live, fj, 0.0)
        g[:, j % w] = np.where(live, gj, 0.0)
    return f[:, 1 % w], g[:, 1 % w]


def clairvoyant_row(wl: Workload, costs: StepCosts, seed: int, *, max_tpot_s=None) -> dict:
    """Bounds in the shape of a policy row: TPOT percentiles are lower bounds, the rest upper bounds."""
    f, g = clairvoyant_dp(wl, costs, seed)
    tpot = np.where(wl.osl > 1, f / np.maximum(wl.osl - 1, 1), np.nan)
    a = wl.arrival_s - float(wl.arrival_s.min()) if wl.closed_loop is None else np.zeros(wl.n)
    dur = max(float(g.sum()), float(np.max(a + f)))
    ok = attainment(tpot, None, max_tpot_s, None)
    out = {"policy": "clairvoyant", "lossy": False, "bound": True}
    for q in PCTS:
        x = tpot[np.isfinite(tpot)]
        out[f"tpot_p{q}_ms"] = 1e3 * float(np.percentile(x, q)) if x.size else float("nan")
    for q in PCTS:
        out[f"ttft_p{q}_ms"] = None
    out.update({
        "tokens_per_s_per_gpu": float(wl.osl.sum()) / dur / costs.devices if dur > 0 else float("nan"),
        "tokens_per_s_per_user": float(np.nanmean(1.0 / tpot)) if np.isfinite(tpot).any() else float("nan"),
        "slo_attainment": None if ok is None else float(ok.mean()),
        "mean_draft_len": None,
    })
    return finite_or_none(out)

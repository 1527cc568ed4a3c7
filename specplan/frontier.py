"""Pareto frontier of system throughput (tokens/s per GPU) against interactivity (tokens/s per user).

Both axes are maximized. A point is on the frontier when no other point is at least as good on both axes
and strictly better on one. Pure numpy, O(n log n): sort by interactivity (descending, ties by throughput
descending), then keep the points whose throughput beats the running maximum of everything before them.

`frontier_mask` / `frontier_indices` work on plain arrays; `frontier` takes the sweep DataFrame and returns
one table with a `set` column: `baseline` (D = 0), `speculation` (D >= 1, all mechanisms), `overall`
(everything), and `mechanism:<name>` (D >= 1 of one mechanism). Infeasible points (fits = False) never
enter a frontier. `best_at` reads the best configuration at given interactivity levels off a frontier.
"""

from __future__ import annotations

import numpy as np


def frontier_indices(user, gpu) -> np.ndarray:
    """Indices of the non-dominated points (maximize both), ordered by increasing interactivity.

    NaN points are ignored; of exact duplicates the first (lowest index) is kept.
    """
    u = np.asarray(user, dtype=np.float64).ravel()
    g = np.asarray(gpu, dtype=np.float64).ravel()
    ok = np.flatnonzero(np.isfinite(u) & np.isfinite(g))
    if ok.size == 0:
        return np.zeros(0, dtype=np.int64)
    uu, gg = u[ok], g[ok]
    # Primary key user desc, secondary gpu desc, tertiary index asc (lexsort: last key is primary).
    order = np.lexsort((ok, -gg, -uu))
    gs = gg[order]
    prev_max = np.maximum.accumulate(np.concatenate(([-np.inf], gs[:-1])))
    keep = gs > prev_max
    idx = ok[order[keep]]
    return idx[::-1].copy()


def frontier_mask(user, gpu) -> np.ndarray:
    """Boolean mask of the non-dominated points."""
    n = np.asarray(user).size
    m = np.zeros(n, dtype=bool)
    m[frontier_indices(user, gpu)] = True
    return m


def dominated_by(user, gpu, f_user, f_gpu) -> np.ndarray:
    """For each point, True when some frontier point dominates it (>= on both, > on one)."""
    fu = np.asarray(f_user, dtype=np.float64)
    fg = np.asarray(f_gpu, dtype=np.float64)
    order = np.argsort(fu, kind="stable")
    fu, fg = fu[order], fg[order]
    # Best throughput among frontier points with interactivity >= u: suffix max.
    suf = np.maximum.accumulate(fg[::-1])[::-1]
    u = np.asarray(user, dtype=np.float64)
    g = np.asarray(gpu, dtype=np.float64)
    pos = np.searchsorted(fu, u, side="left")
    best = np.where(pos < fu.size, suf[np.minimum(pos, fu.size - 1)], -np.inf)
    # Strictly better interactivity: first frontier point with fu > u.
    pos_s = np.searchsorted(fu, u, side="right")
    best_s = np.where(pos_s < fu.size, suf[np.minimum(pos_s, fu.size - 1)], -np.inf)
    return (best > g) | (best_s >= g)


def envelope(f_user, f_gpu, levels) -> np.ndarray:
    """Frontier throughput at interactivity `levels`: the best tok/s/GPU among frontier points with
    tok/s/user >= level (a step function); NaN above the frontier's highest interactivity."""
    fu = np.asarray(f_user, dtype=np.float64)
    fg = np.asarray(f_gpu, dtype=np.float64)
    order = np.argsort(fu, kind="stable")
    fu, fg = fu[order], fg[order]
    if fu.size == 0:
        return np.full(np.shape(levels), np.nan)
    suf = np.maximum.accumulate(fg[::-1])[::-1]
    pos = np.searchsorted(fu, np.asarray(levels, dtype=np.float64), side="left")
    return np.where(pos < fu.size, suf[np.minimum(pos, fu.size - 1)], np.nan)


def _subsets(df) -> list[tuple[str, np.ndarray]]:
    fits = df["fits"].to_numpy(dtype=bool)
    d = df["draft_len"].to_numpy()
    out = [("baseline", fits & (d == 0)), ("speculation", fits & (d >= 1))]
    mech = df["mechanism"]
    for name in sorted(set(mech[d >= 1].astype(str).unique())):
        out.append((f"mechanism:{name}", fits & (d >= 1) & (mech.astype(str).to_numpy() == name)))
    out.append(("overall", fits))
    return out


def frontier(df, sets: list[str] | None = None):
    """Frontier rows of a sweep DataFrame for each set (see module doc), with a `set` column first.

    Rows are the grid rows (all columns kept) ordered by set, then by increasing tok_s_user.
    """
    import pandas as pd

    u = df["tok_s_user"].to_numpy(dtype=np.float64)
    g = df["tok_s_gpu"].to_numpy(dtype=np.float64)
    parts = []
    for name, mask in _subsets(df):
        if sets is not None and name not in sets:
            continue
        sel = np.flatnonzero(mask)
        if sel.size == 0:
            continue
        idx = sel[frontier_indices(u[sel], g[sel])]
        part = df.iloc[idx].reset_index(drop=True)
        part.insert(0, "set", name)
        parts.append(part)
    if not parts:
        return df.iloc[0:0].assign(set=pd.Series(dtype=str))
    return pd.concat(parts, ignore_index=True)


def best_at(front, levels, set_name: str = "overall"):
    """Best configuration at each interactivity level: the frontier row with the highest tok_s_gpu among
    those with tok_s_user >= level. Returns a DataFrame with `level_tok_s_user` first; levels above the
    frontier's reach get no row."""
    f = front[front["set"] == set_name].reset_index(drop=True)
    levels = np.asarray(levels, dtype=np.float64)
    fu = f["tok_s_user"].to_numpy(dtype=np.float64)
    fg = f["tok_s_gpu"].to_numpy(dtype=np.float64)
    rows, kept = [], []
    for lv in levels:
        ok = np.flatnonzero(fu >= lv)
        if ok.size == 0:
            continue
        rows.append(ok[np.argmax(fg[ok])])
        kept.append(float(lv))
    out = f.iloc[rows].reset_index(drop=True)
    out.insert(0, "level_tok_s_user", np.asarray(kept, dtype=np.float64))
    return out


def interactivity_levels(front, n: int = 12, set_name: str = "overall") -> np.ndarray:
    """`n` round, geometrically spaced interactivity levels spanning a frontier set."""
    f = front[front["set"] == set_name]
    if f.empty:
        return np.zeros(0)
    lo, hi = float(f["tok_s_user"].min()), float(f["tok_s_user"].max())
    raw = np.geomspace(max(lo, 1e-6), hi, n)
    mag = 10.0 ** np.floor(np.log10(raw))
    return np.unique(np.floor(raw / mag * 2) / 2 * mag)

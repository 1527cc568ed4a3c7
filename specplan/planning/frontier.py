"""Pareto frontier of system throughput (tokens/s per GPU) against interactivity (tokens/s per user).

Both axes are maximized. A point is on the frontier when no other point is at least as good on both axes
and strictly better on one. Pure numpy, O(n log n): sort by interactivity (descending, ties by throughput
descending), then keep the points whose throughput beats the running maximum of everything before them.

Throughput is per target GPU by default (`per="gpu"`, column tok_s_gpu: draft devices cost nothing); with
`per="device"` it is tok_s_device, which counts an external draft's own devices (or extra LPU chips) too: use
that when drafts run on other hardware.

`frontier_mask` / `frontier_indices` work on plain arrays; `frontier` takes the sweep DataFrame and returns
one table with a `set` column: `baseline` (D = 0), `speculation` (D >= 1, all mechanisms), `overall`
(everything), and `mechanism:<name>` (D >= 1 of one mechanism). Infeasible points (fits = False) never
enter a frontier. `best_at` reads the best configuration at given interactivity levels off a frontier.

A `scope` column (second) says over which grid points each frontier was taken: `overall` (the whole grid), and
with `by=["hardware", "context_len"]` (what `specplan pareto` writes) one scope per (device, context), spelled
`hardware=h100-sxm context_len=4096`: context is a property of the workload, not a knob to pick, so a frontier
over several contexts alone would drop every context but the shortest.
"""

from __future__ import annotations

import numpy as np

from specplan.core.errors import SpecplanError
from specplan.core.records import Record, record

PER = {"gpu": "tok_s_gpu", "device": "tok_s_device"}  # throughput column ranked by each `per`


def throughput_column(per: str = "gpu") -> str:
    """The grid column a frontier ranks by: 'gpu' -> tok_s_gpu (per target GPU), 'device' -> tok_s_device
    (per device, draft devices included)."""
    if per not in PER:
        raise SpecplanError(f"per: must be one of {', '.join(PER)}, got {per!r}")
    return PER[per]


def frontier_indices(user, gpu) -> np.ndarray:
    """Indices of the non-dominated points (maximize both), ordered by increasing interactivity.

    NaN points are ignored; of exact duplicates one is kept. One argsort on interactivity (descending), a
    running maximum of throughput, then ties in interactivity resolved by keeping the highest throughput.
    """
    u = np.asarray(user).ravel()
    g = np.asarray(gpu).ravel()
    ok = np.isfinite(u) & np.isfinite(g)
    if not ok.all():
        sel = np.flatnonzero(ok)
        return sel[frontier_indices(u[sel], g[sel])] if sel.size else np.zeros(0, dtype=np.int64)
    if u.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(-u, kind="stable")  # of exact duplicates the first in the input's order is kept
    gs = g[order]
    run = np.maximum.accumulate(gs)
    keep = np.empty(gs.size, dtype=bool)
    keep[0] = True
    keep[1:] = gs[1:] > run[:-1]
    idx = order[keep]
    uk = u[idx]
    # Equal interactivity: throughput increases along `idx`, so only the last of each tie group survives.
    last = np.ones(idx.size, dtype=bool)
    last[:-1] = uk[1:] != uk[:-1]
    return idx[last][::-1].copy()


def frontier_mask(user, gpu) -> np.ndarray:
    """Boolean mask of the non-dominated points."""
    n = np.asarray(user).size
    m = np.zeros(n, dtype=bool)
    m[frontier_indices(user, gpu)] = True
    return m


def _sorted_suffix_best(f_user, f_gpu) -> tuple[np.ndarray, np.ndarray]:
    """Frontier tok/s/user ascending, and the best tok/s/GPU among points at or above each (suffix max)."""
    fu = np.asarray(f_user, dtype=np.float64)
    fg = np.asarray(f_gpu, dtype=np.float64)
    order = np.argsort(fu, kind="stable")
    fu, fg = fu[order], fg[order]
    return fu, np.maximum.accumulate(fg[::-1])[::-1]


def _best_at(fu, suf, pos, fill) -> np.ndarray:
    """suf[pos] where pos indexes the sorted frontier, `fill` past its end."""
    return np.where(pos < fu.size, suf[np.minimum(pos, fu.size - 1)], fill)


def dominated_by(user, gpu, f_user, f_gpu) -> np.ndarray:
    """For each point, True when some frontier point dominates it (>= on both, > on one)."""
    # Best throughput among frontier points with interactivity >= u: suffix max.
    fu, suf = _sorted_suffix_best(f_user, f_gpu)
    u = np.asarray(user, dtype=np.float64)
    g = np.asarray(gpu, dtype=np.float64)
    best = _best_at(fu, suf, np.searchsorted(fu, u, side="left"), -np.inf)
    # Strictly better interactivity: first frontier point with fu > u.
    best_s = _best_at(fu, suf, np.searchsorted(fu, u, side="right"), -np.inf)
    return (best > g) | (best_s >= g)


def envelope(f_user, f_gpu, levels) -> np.ndarray:
    """Frontier throughput at interactivity `levels`: the best tok/s/GPU among frontier points with
    tok/s/user >= level (a step function); NaN above the frontier's highest interactivity."""
    fu, suf = _sorted_suffix_best(f_user, f_gpu)
    if fu.size == 0:
        return np.full(np.shape(levels), np.nan)
    return _best_at(fu, suf, np.searchsorted(fu, np.asarray(levels, dtype=np.float64), side="left"), np.nan)


def frontier_sets(fits, draft_len, mech_codes, user, gpu, mech_names) -> dict[str, np.ndarray]:
    """Row indices of each frontier set (see module doc) from plain arrays; exact, using
    frontier(A u B) = frontier(frontier(A) u frontier(B)) so each point is sorted once."""
    fits = np.asarray(fits, dtype=bool)
    d = np.asarray(draft_len)
    codes = np.asarray(mech_codes)
    u = np.asarray(user)
    g = np.asarray(gpu)

    def front(sel):
        return sel[frontier_indices(u[sel], g[sel])] if sel.size else sel

    baseline = front(np.flatnonzero(fits & (d == 0)))
    spec = fits & (d >= 1)
    per = {}
    for c in np.unique(codes[spec]):
        per[f"mechanism:{mech_names[int(c)]}"] = front(np.flatnonzero(spec & (codes == c)))
    speculation = front(np.sort(np.concatenate(list(per.values())))) if per else np.zeros(0, np.int64)
    overall = front(np.sort(np.concatenate([baseline, speculation])))
    return {"baseline": baseline, "speculation": speculation, **dict(sorted(per.items())), "overall": overall}


OVERALL = "overall"  # the scope of the frontier over the whole grid


def scope_label(keys: dict) -> str:
    """'hardware=h100-sxm context_len=4096' of one group of a frontier `by` (the `scope` column)."""
    return " ".join(f"{k}={v}" for k, v in keys.items())


def frontier(df, sets: list[str] | None = None, per: str = "gpu", by: list[str] | None = None):
    """Frontier rows of a sweep DataFrame for each set (see module doc), with `set` and `scope` columns first.

    Rows are the grid rows (all columns kept) ordered by scope (overall first), set, then increasing
    tok_s_user. `per`: rank throughput per target GPU ('gpu', tok_s_gpu) or per device including draft devices
    ('device', tok_s_device). by: grid columns (e.g. hardware, context_len, layout); each group of equal
    values gets its own frontiers, scope `col=value,...`, besides the overall ones (scope `overall`).
    """
    import pandas as pd

    col = throughput_column(per)
    mech = df["mechanism"]
    if not isinstance(mech.dtype, pd.CategoricalDtype):
        mech = mech.astype("category")
    names = [str(c) for c in mech.cat.categories]
    fits = df["fits"].to_numpy(dtype=bool)
    d, codes = df["draft_len"].to_numpy(), mech.cat.codes.to_numpy()
    u, g = df["tok_s_user"].to_numpy(), df[col].to_numpy()
    groups = [(OVERALL, np.arange(len(df)))]
    if by:
        for key, idx in df.groupby(list(by), sort=True, observed=True).indices.items():
            key = key if isinstance(key, tuple) else (key,)
            groups.append((scope_label(dict(zip(by, key))), np.sort(idx)))
    idx_parts, set_names, scopes = [], [], []
    for scope, rows in groups:
        found = frontier_sets(fits[rows], d[rows], codes[rows], u[rows], g[rows], names)
        for name, idx in found.items():
            if (sets is not None and name not in sets) or idx.size == 0:
                continue
            idx_parts.append(rows[idx])
            set_names.append(np.full(idx.size, name, dtype=object))
            scopes.append(np.full(idx.size, scope, dtype=object))
    if not idx_parts:
        out = df.iloc[0:0].copy()
        out.insert(0, "scope", pd.Series(dtype=str))
        out.insert(0, "set", pd.Series(dtype=str))
        return out
    out = df.iloc[np.concatenate(idx_parts)].reset_index(drop=True)  # one take for every set and scope
    out.insert(0, "scope", np.concatenate(scopes))
    out.insert(0, "set", np.concatenate(set_names))
    return out


def overall(front):
    """The rows of a frontier table taken over the whole grid (scope `overall`; tables without a scope column
    are all overall)."""
    return front[front["scope"] == OVERALL] if "scope" in front.columns else front


def best_at(front, levels, set_name: str = "overall", per: str = "gpu"):
    """Best configuration at each interactivity level: the frontier row with the highest tok_s_gpu (per="device":
    tok_s_device) among those with tok_s_user >= level. Returns a DataFrame with `level_tok_s_user` first;
    levels above the frontier's reach get no row."""
    col = throughput_column(per)
    f = overall(front)
    f = f[f["set"] == set_name].reset_index(drop=True)
    levels = np.asarray(levels, dtype=np.float64)
    fu = f["tok_s_user"].to_numpy(dtype=np.float64)
    fg = f[col].to_numpy(dtype=np.float64)
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
    f = overall(front)
    f = f[f["set"] == set_name]
    if f.empty:
        return np.zeros(0)
    lo, hi = float(f["tok_s_user"].min()), float(f["tok_s_user"].max())
    raw = np.geomspace(max(lo, 1e-6), hi, n)
    mag = 10.0 ** np.floor(np.log10(raw))
    return np.unique(np.floor(raw / mag * 2) / 2 * mag)


def lower_envelope(user, value) -> tuple[np.ndarray, np.ndarray]:
    """Points (tok/s/user ascending) of the lowest `value` reachable at or above each tok/s/user."""
    u, v = np.asarray(user, dtype=float), np.asarray(value, dtype=float)
    order = np.argsort(-u, kind="stable")  # from the fastest user down: running minimum of the value
    best = np.minimum.accumulate(v[order])
    keep = np.r_[True, best[1:] < best[:-1]]
    return u[order][keep][::-1], best[keep][::-1]


@record
class BestSetup(Record):
    """The best frontier point's device, TP, context, layout, batch, D, mechanism (None at D = 0); fits False: none."""

    hardware: str
    tp: int
    context_len: int
    layout: str | None
    batch: int
    draft_len: int
    mechanism: str | None
    fits: bool


def best_setup(df, front, per: str = "gpu") -> BestSetup:
    """Highest throughput `per` on the speculation (else overall) frontier; no fit: first device, batch 16, D = 0."""
    col = throughput_column(per)
    front = overall(front)
    for name in ("speculation", "overall"):
        f = front[front["set"] == name]
        if not f.empty:
            r = f.loc[f[col].idxmax()]
            d = int(r["draft_len"])
            return BestSetup(str(r["hardware"]), int(r["tp"]), int(r["context_len"]),
                             str(r["layout"]) if "layout" in r else None, int(r["batch"]), d,
                             str(r["mechanism"]) if d > 0 else None, True)
    return BestSetup(str(df["hardware"].iloc[0]), int(df["tp"].min()), int(df["context_len"].min()), None, 16, 0,
                     None, False)


SERVING_BY = ("hardware", "mode")  # the serving frontier's scopes besides the overall one


def serving_frontier(grid, by=SERVING_BY):
    """Frontier of a serving grid (tokens_per_s_per_gpu against tokens_per_s_per_user, rows meeting the SLA
    only): sets baseline (D = 0), speculation (D >= 1) and overall, for the whole grid (scope `overall`) and
    for each group of `by` (scope `hardware=b200 mode=agg`). Rows ordered by scope, set, increasing
    tokens_per_s_per_user; `set` and `scope` columns first."""
    import pandas as pd

    ok = grid[grid["meets_sla"].to_numpy(dtype=bool)].reset_index(drop=True)
    u = ok["tokens_per_s_per_user"].to_numpy(dtype=float)
    g = ok["tokens_per_s_per_gpu"].to_numpy(dtype=float)
    d = ok["draft_len"].to_numpy()
    # rows with equal tokens/s/user and tokens/s/GPU (a saturated engine repeats its point over concurrency): the
    # frontier keeps the one of lowest TTFT, then lowest concurrency (the first of duplicates, in this order)
    rank = np.lexsort([ok[c].to_numpy(dtype=float) if c in ok else np.zeros(len(ok))
                       for c in ("concurrency", "ttft_ms")][::1])
    pos = np.empty(len(ok), dtype=np.int64)
    pos[rank] = np.arange(len(ok))
    groups = [(OVERALL, np.arange(len(ok)))]
    cols = [c for c in by if c in ok.columns]
    if cols and len(ok):
        for key, idx in ok.groupby(cols, sort=True).indices.items():
            key = key if isinstance(key, tuple) else (key,)
            groups.append((scope_label(dict(zip(cols, key))), np.sort(idx)))
    parts = []
    for scope, rows in groups:
        for name, sel in (("baseline", rows[d[rows] == 0]), ("speculation", rows[d[rows] >= 1]), ("overall", rows)):
            if sel.size == 0:
                continue
            sel = sel[np.argsort(pos[sel], kind="stable")]
            part = ok.iloc[sel[frontier_indices(u[sel], g[sel])]].reset_index(drop=True)
            part.insert(0, "scope", scope)
            part.insert(0, "set", name)
            parts.append(part)
    if not parts:
        out = ok.iloc[0:0].copy()
        out.insert(0, "scope", pd.Series(dtype=str))
        out.insert(0, "set", pd.Series(dtype=str))
        return out
    return pd.concat(parts, ignore_index=True)

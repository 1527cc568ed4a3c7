"""Frontier: non-domination on random and real grids; a hand-computed crossover of speculation vs baseline."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from specplan.planning.frontier import best_at, dominated_by, envelope, frontier, frontier_indices


def _brute(u, g):
    n = len(u)
    return np.array([not np.any((u >= u[k]) & (g >= g[k]) & ((u > u[k]) | (g > g[k]))) for k in range(n)])


@pytest.mark.parametrize("seed", range(5))
def test_matches_brute_force_with_ties(seed):
    rng = np.random.default_rng(seed)
    u = np.round(rng.random(400), 1)  # many ties
    g = np.round(rng.random(400), 1)
    idx = frontier_indices(u, g)
    want = {(a, b) for a, b in zip(u[_brute(u, g)], g[_brute(u, g)])}
    assert {(a, b) for a, b in zip(u[idx], g[idx])} == want
    assert len(idx) == len(want)  # one row per distinct frontier point
    assert np.all(np.diff(u[idx]) > 0) and np.all(np.diff(g[idx]) < 0)


def _check_set(grid, front):
    u, g = grid["tok_s_user"].to_numpy(float), grid["tok_s_gpu"].to_numpy(float)
    fu, fg = front["tok_s_user"].to_numpy(float), front["tok_s_gpu"].to_numpy(float)
    # No grid point dominates a frontier point.
    for a, b in zip(fu, fg):
        assert not np.any((u >= a) & (g >= b) & ((u > a) | (g > b)))
    # Every grid point is on or below the frontier: on it, or dominated by a frontier point.
    on = np.isin(u, fu) & np.isin(g, fg)
    assert np.all(on | dominated_by(u, g, fu, fg))


def test_real_grid_every_set(small_grid):
    front = frontier(small_grid)
    fit = small_grid[small_grid["fits"]]
    assert set(front["set"]) >= {"baseline", "speculation", "overall", "mechanism:eagle3"}
    assert front["fits"].all()  # infeasible points never enter a frontier
    _check_set(fit, front[front["set"] == "overall"])
    _check_set(fit[fit["draft_len"] == 0], front[front["set"] == "baseline"])
    _check_set(fit[fit["draft_len"] >= 1], front[front["set"] == "speculation"])
    sub = fit[(fit["draft_len"] >= 1) & (fit["mechanism"] == "ngram")]
    _check_set(sub, front[front["set"] == "mechanism:ngram"])


def test_best_at_levels(small_grid):
    front = frontier(small_grid)
    over = front[front["set"] == "overall"]
    levels = [float(over["tok_s_user"].min()), float(over["tok_s_user"].median()), 1e9]
    best = best_at(front, levels)
    assert len(best) == 2  # the last level is out of reach
    for _, r in best.iterrows():
        ok = over[over["tok_s_user"] >= r["level_tok_s_user"]]
        assert r["tok_s_gpu"] == ok["tok_s_gpu"].max()


# Hand-computed case. Step time T(B, D) = m + c * B * (1 + D) (fixed cost + per-token cost), AL = a at D.
# Baseline (D = 0): user = 1 / (m + cB), gpu = B * user. Speculation: user = a / (m + cB(1+D)), gpu = B * user.
# At equal interactivity u: gpu_base(u) = (1 - m u) / c and gpu_spec(u) = (a - m u) / (c (1 + D)), so
# speculation wins for u > (1 + D - a) / (D m); both frontiers sit at the same batch there:
#     B_cross = m (a - 1) / (c (1 + D - a))            (where speedup a (m + cB) / (m + cB(1+D)) = 1)
# With m = 10 ms, c = 0.1 ms/token, D = 3, a = 2.5: B_cross = 10 * 1.5 / (0.1 * 1.5) = 100.
M, C, D, A = 10e-3, 0.1e-3, 3, 2.5
B_CROSS = M * (A - 1) / (C * (1 + D - A))


def _hand_grid():
    b = np.arange(1, 301, dtype=float)
    rows = []
    for d, al in ((0, 1.0), (D, A)):
        it = M + C * b * (1 + d)
        user = al / it
        rows.append(pd.DataFrame({"hardware": "hand", "mechanism": "none" if d == 0 else "hand", "tp": 1,
                                  "batch": b.astype(int), "draft_len": d, "tok_s_user": user, "tok_s_gpu": b * user,
                                  "speedup": al * (M + C * b) / it, "fits": True}))
    return pd.concat(rows, ignore_index=True)


def test_hand_computed_crossover():
    assert B_CROSS == pytest.approx(100.0)
    grid = _hand_grid()
    front = frontier(grid)
    base = front[front["set"] == "baseline"]
    spec = front[front["set"] == "speculation"]
    assert len(base) == 300 and len(spec) == 300  # every point of each curve is non-dominated
    env_base = envelope(base["tok_s_user"], base["tok_s_gpu"], spec["tok_s_user"])
    beats = ~(env_base >= spec["tok_s_gpu"].to_numpy())  # NaN: baseline cannot reach that interactivity
    sb = spec["batch"].to_numpy()
    assert beats[sb < B_CROSS].all()  # small batch: speculation frontier above the baseline
    assert not beats[sb > B_CROSS].any()  # large batch: below
    crossover = sb[beats].max()
    assert abs(crossover - B_CROSS) <= 1
    # The overall frontier takes speculation up to the crossover and the baseline beyond it.
    # At B = B_cross itself the two tie (up to rounding of B_CROSS = 99.999...), so either may be kept there.
    over = front[front["set"] == "overall"]
    assert over.loc[over["draft_len"] == D, "batch"].max() <= round(B_CROSS)
    assert over.loc[over["draft_len"] == 0, "batch"].min() >= round(B_CROSS)
    # Same crossover read off the per-batch speedup.
    s = grid[grid["draft_len"] == D]
    assert s.loc[s["speedup"] > 1, "batch"].max() == pytest.approx(B_CROSS - 1)
    assert s.loc[s["speedup"] < 1, "batch"].min() == pytest.approx(B_CROSS + 1)


def test_frontier_by_device_and_context_keeps_every_pair(small_grid):
    """Context is the workload's, not a knob: a frontier per (device, context) pair, each the frontier of that
    pair's points alone, plus the overall one unchanged."""
    from specplan.planning.frontier import overall

    front = frontier(small_grid, by=["hardware", "context_len"])
    assert list(front.columns[:2]) == ["set", "scope"]
    pairs = {(h, c) for h in ("h100-sxm", "b200") for c in (1024, 65536)}
    want = {"overall"} | {f"hardware={h} context_len={c}" for h, c in pairs}
    assert set(front["scope"]) == want
    # The overall scope is exactly the frontier without `by`.
    plain = frontier(small_grid)
    over = overall(front).drop(columns="scope").reset_index(drop=True)
    pd.testing.assert_frame_equal(over, plain.drop(columns="scope"))
    # The overall frontier drops most pairs (the faster device, the short context win); the scopes keep them.
    o = over[over["set"] == "overall"]
    assert len({(h, c) for h, c in zip(o["hardware"], o["context_len"])}) < 4
    fit = small_grid[small_grid["fits"]]
    for h, c in pairs:
        f = front[front["scope"] == f"hardware={h} context_len={c}"]
        assert set(f["hardware"]) == {h} and set(f["context_len"]) == {c}
        sub = fit[(fit["hardware"] == h) & (fit["context_len"] == c)]
        _check_set(sub, f[f["set"] == "overall"])
        _check_set(sub[sub["draft_len"] == 0], f[f["set"] == "baseline"])
    # best_at reads the overall frontier only, whatever the scopes.
    levels = [float(o["tok_s_user"].min())]
    assert best_at(front, levels)["tok_s_gpu"].iloc[0] == o["tok_s_gpu"].max()

"""Adaptive speculation simulator: trace parsing, draws, policy choices and ordering."""

import numpy as np
import pytest

from specplan.adaptive import best_d, draw_accepted, parse_policy, parse_trace, simulate
from specplan.errors import SpecplanError
from specplan.speculation.acceptance import al_from_rate


def test_parse_trace_and_errors():
    segs = parse_trace("0.9@8x300,0.5x10", default_batch=2)
    assert [(s.alpha, s.batch, s.iterations) for s in segs] == [(0.9, 8, 300), (0.5, 2, 10)]
    for bad in ("1.5x10", "0.5@0x10", "abc", ""):
        with pytest.raises(SpecplanError):
            parse_trace(bad)
    assert parse_policy("static:3") == ("static", 3)
    with pytest.raises(SpecplanError):
        parse_policy("greedy")


def test_truncated_geometric_mean_matches_closed_form():
    rng = np.random.default_rng(1)
    for a, d in ((0.8, 4), (0.5, 7), (0.95, 3)):
        x = draw_accepted(rng, a, d, 200_000)
        assert x.max() <= d and x.min() >= 0
        se = np.std(x + 1) / np.sqrt(x.size)
        assert abs(np.mean(x + 1) - al_from_rate(a, d)) < 4 * se


def test_best_d_by_hand():
    # Iteration cost 1 + 0.1 D, α = 0.8: AL/cost = 3.689/1.5 = 2.459 (D=5), 3.951/1.6 = 2.469 (D=6),
    # 4.161/1.7 = 2.448 (D=7): the best D is 6 by hand.
    costs = 1 + 0.1 * np.arange(11)
    assert best_d(0.8, costs) == 6
    assert best_d(0.0, costs) == 0
    # A TPOT SLO of 0.5 s excludes D whose T/AL exceeds it.
    tpot = costs / al_from_rate(0.3, np.arange(11))
    d = best_d(0.3, costs, slo_tpot_s=0.5)
    assert tpot[d] <= 0.5 or not np.any(tpot <= 0.5)


def test_oracle_beats_static_when_acceptance_shifts():
    costs = {4: 1 + 0.15 * np.arange(9)}
    trace = parse_trace("0.95@4x400,0.2@4x400")
    r = {p: simulate(trace, costs, p, seed=3) for p in ("static:0", "static:6", "ema", "model", "oracle")}
    assert r["oracle"]["tokens_per_s_per_user"] >= r["static:6"]["tokens_per_s_per_user"]
    assert r["oracle"]["tokens_per_s_per_user"] >= r["static:0"]["tokens_per_s_per_user"]
    # The model-based policy lowers D after the drop in acceptance.
    d = r["model"]["chosen_d"]
    assert d[350:400].mean() > d[-50:].mean()
    # The EMA policy only uses its tiers.
    assert set(np.unique(r["ema"]["chosen_d"])) <= {1, 3, 7}


def test_model_policy_recovers_when_acceptance_rises_again():
    """A low-acceptance start must not switch speculation off for good: probes re-measure α."""
    costs = {4: 1 + 0.15 * np.arange(9)}
    trace = parse_trace("0.05@4x300,0.95@4x600")
    r = simulate(trace, costs, "model", seed=1)
    d = r["chosen_d"]
    assert d[:300].mean() < 0.5  # speculation (mostly) off while nothing is accepted
    assert d[-300:].mean() > 3  # back on once acceptance is high
    o = simulate(trace, costs, "oracle", seed=1)
    assert r["tokens_per_s_per_user"] > 0.85 * o["tokens_per_s_per_user"]

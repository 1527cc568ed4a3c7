"""Acceptance: closed forms by hand, per-position, tables, Monte Carlo, bad inputs."""

import dataclasses

import numpy as np
import pytest

from specplan.core.errors import SpecplanError
from specplan.speculation.acceptance import (Acceptance, al_from_rate, load_profile, profile_ids, rate_from_length,
                                             simulate_al, simulate_generation, tree_per_position, tree_tokens)


def test_closed_form_by_hand():
    # α = 0.8, D = 4: (1 − 0.8^5) / 0.2 = (1 − 0.32768) / 0.2 = 3.3616
    assert Acceptance.from_rate(0.8).al(4) == pytest.approx(3.3616)
    assert Acceptance.from_rate(0.5).al(2) == pytest.approx(1 + 0.5 + 0.25)
    assert Acceptance.from_rate(1.0).al(7) == pytest.approx(8.0)
    assert Acceptance.from_rate(0.0).al(7) == pytest.approx(1.0)
    assert Acceptance.from_rate(0.8).al(0) == pytest.approx(1.0)


def test_per_position_by_hand():
    acc = Acceptance.from_per_position([0.9, 0.8, 0.5])
    assert acc.al(1) == pytest.approx(1.9)
    assert acc.al(2) == pytest.approx(1 + 0.9 + 0.72)
    assert acc.al(3) == pytest.approx(1 + 0.9 + 0.72 + 0.36)
    assert acc.d_max == 3


def test_per_position_equal_rates_match_closed_form():
    d = np.arange(0, 9)
    np.testing.assert_allclose(Acceptance.from_per_position([0.7] * 8).al(d), al_from_rate(0.7, d))


def test_length_round_trip():
    acc = Acceptance.from_length(3.08, 4)
    assert acc.al(4) == pytest.approx(3.08, abs=1e-9)
    assert rate_from_length(al_from_rate(0.83, 6), 6) == pytest.approx(0.83, abs=1e-9)


@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.6, 0.9, 1.0])
def test_al_within_bounds(alpha):
    d = np.arange(0, 33)
    al = Acceptance.from_rate(alpha).al(d)
    assert np.all(al >= 1 - 1e-12) and np.all(al <= 1 + d + 1e-12)
    assert np.all(np.diff(al) >= -1e-12)


def test_table_interpolation_is_monotone_and_exact_at_points():
    acc = Acceptance.from_profile("eagle3-llama-3.1-8b-mtbench")
    for d, al in [(2, 2.36), (4, 3.08), (7, 3.54)]:
        assert acc.al(d) == pytest.approx(al)
    grid = np.linspace(0, 12, 241)
    al = acc.al(grid)
    assert np.all(np.diff(al) >= -1e-12)
    assert np.all(al <= 1 + grid + 1e-12) and np.all(al >= 1)
    assert acc.d_max == 7 and acc.al(12) > acc.al(7)  # extrapolation continues, monotonically


def test_table_rejects_decreasing_and_impossible():
    with pytest.raises(SpecplanError, match="must not decrease"):
        Acceptance.from_table([1, 2], [1.8, 1.5])
    with pytest.raises(SpecplanError, match=r"\[1, 1 \+ D\]"):
        Acceptance.from_table([2], [3.5])


@pytest.mark.parametrize("probs", [[0.8] * 5, [0.95, 0.8, 0.6, 0.4], [0.5] * 10])
def test_monte_carlo_agrees_with_closed_form(probs):
    mean, se = simulate_al(probs, n_iter=200_000, seed=1)
    exact = float(Acceptance.from_per_position(probs).al(len(probs)))
    assert abs(mean - exact) < 4 * se
    assert 1 <= mean <= 1 + len(probs)


def test_generation_loop_tokens_per_iteration():
    # truncation of the last iteration only lowers the mean slightly
    exact = float(al_from_rate(0.8, 4))
    assert simulate_generation([0.8] * 4, n_tokens=50_000, seed=2) == pytest.approx(exact, rel=0.02)


def test_tree_helpers():
    # a list of ints is a full tree's branching: 1 + 4 + 4·8 + 4·8·8 + 4·8·8·4 verified tokens
    assert tree_tokens([4, 8, 8, 4]) == 1 + 4 + 32 + 256 + 1024
    assert tree_tokens([(0,), (1,), (0, 0)]) == 4  # a sparse tree: its nodes + the root
    p = tree_per_position(0.6, [1, 2, 4])
    assert p == pytest.approx((0.6, 1 - 0.4 ** 2, 1 - 0.4 ** 4))


@pytest.mark.parametrize("bad", [-0.1, 1.5])
def test_rate_outside_unit_interval(bad):
    with pytest.raises(SpecplanError, match=r"α must be in \[0, 1\]"):
        Acceptance.from_rate(bad)


def test_length_above_one_plus_d():
    with pytest.raises(SpecplanError, match=r"AL must be in \[1, 1 \+ D\]"):
        Acceptance.from_length(6.0, 4)


def test_negative_draft_length():
    with pytest.raises(SpecplanError, match="draft length"):
        Acceptance.from_rate(0.5).al(-1)


def test_shipped_profiles_are_sourced_and_consistent():
    assert len(profile_ids()) >= 5
    for pid in profile_ids():
        p = load_profile(pid)
        assert p["source"] and p["mechanism"] and p["target"]
        acc = Acceptance.from_profile(pid)
        for d, al in p["points"]:
            assert 1 <= al <= 1 + d
            assert acc.al(d) == pytest.approx(al)


def test_unknown_profile():
    with pytest.raises(SpecplanError, match="unknown acceptance profile"):
        Acceptance.from_profile("no-such-profile")


def test_generation_without_drafts_makes_one_token_per_iteration():
    # no draft positions (D = 0): every iteration emits exactly the one verified token
    assert simulate_generation([], n_tokens=100) == 1.0


def test_acceptances_hash_and_compare_without_their_meta():
    # an Acceptance is a frozen value: hashable (a dict key, a cache key) and equal to one with other metadata
    a = Acceptance.from_rate(0.7)
    b = dataclasses.replace(a, meta={"source": "somewhere", "heads": 4})
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1


def test_a_table_of_one_point_is_the_chain_through_it_and_of_two_points_passes_both():
    # one measured (D, AL): the i.i.d. chain through it, AL(D) = (1 - a^(D+1)) / (1 - a) with a from that point
    one = Acceptance.from_table([3], [2.5])
    a = rate_from_length(2.5, 3)
    assert float(one.al(3)) == pytest.approx(2.5, rel=1e-9)
    assert float(one.al(1)) == pytest.approx(1 + a, rel=1e-9)
    # two points: the table passes through both (and through (0, 1))
    two = Acceptance.from_table([2, 4], [2.0, 2.8])
    assert [float(two.al(x)) for x in (0, 2, 4)] == pytest.approx([1.0, 2.0, 2.8], rel=1e-9)


def test_rate_from_length_below_the_cap_is_not_one():
    # AL 3.5 at D = 3 is below the cap 1 + D = 4: a rate below 1 whose chain gives exactly 3.5; only AL = 4 is rate 1
    a = rate_from_length(3.5, 3)
    assert 0.8 < a < 1.0 and al_from_rate(a, 3) == pytest.approx(3.5, rel=1e-9)
    assert rate_from_length(4.0, 3) == 1.0


@pytest.mark.parametrize("pt", [[0, 1.0], [257, 3.0], [2.5, 2.0]])
def test_acceptance_profile_points_need_a_whole_d_in_1_to_256(pt):
    from specplan.speculation.acceptance import _check_points

    with pytest.raises(SpecplanError, match=r"D must be a whole number in \[1, 256\]"):
        _check_points([pt], "points")
    _check_points([[3, 300.0]], "points")  # an AL out of range is the table's check, not this one


def test_a_profile_file_is_parsed_once_into_a_record_of_its_fields():
    # medusa-vicuna-7b-specbench.yaml states tree_tokens: 64 (63 nodes + root) and heads: 5; it names no draft_model
    p = load_profile("medusa-vicuna-7b-specbench")
    assert (p.mechanism, p.target, p.tree_tokens, p.heads, p.default) == ("medusa", "vicuna-7b", 64, 5, True)
    assert p.draft_model is None and "draft_model" not in p and p.get("draft_model", "-") == "-"
    assert p["points"] == p.points and all(len(pt) == 2 for pt in p.points)
    acc = Acceptance.from_profile("medusa-vicuna-7b-specbench")
    assert (acc.tree_tokens, acc.heads) == (64, 5) and acc.meta is p
    # a chain profile carries neither
    chain = Acceptance.from_profile("eagle3-llama-3.1-8b-mtbench")
    assert (chain.tree_tokens, chain.heads) == (None, None)

"""The busiest EP rank's expert rows and touched experts (issue 44, a mutant that survived): N tokens' counts on a
rank are a sum of N one-token counts, so their skewness is the one-token skewness / sqrt(N). The one-token count
under uniformly random top-k routing is hypergeometric (k draws from E experts, E / EP of them on the rank): its
mean, variance and skewness in closed form, and the expected maximum over EP ranks by Blom's normal quantile with
the Cornish-Fisher term z + (z^2 - 1) g / 6, all by hand here."""

import math
from statistics import NormalDist

import numpy as np
import pytest

from specplan.costs import moe

E, K_TOP, EP = 256, 8, 8  # DeepSeek-V3's 256 routed experts, top-8, over 8 ranks (no group limit)


def _hypergeometric():
    """(mean, variance, skewness) of the experts one token picks on one rank, by the textbook formulas."""
    n, big_k, big_n = K_TOP, E // EP, E
    mean = n * big_k / big_n
    var = n * big_k / big_n * (big_n - big_k) / big_n * (big_n - n) / (big_n - 1)
    skew = ((big_n - 2 * big_k) * math.sqrt(big_n - 1) * (big_n - 2 * n)
            / (math.sqrt(n * big_k * (big_n - big_k) * (big_n - n)) * (big_n - 2)))
    return mean, var, skew


@pytest.mark.parametrize("n", [1, 4, 16])
def test_busiest_rank_rows_by_hand(n):
    mean, var, skew = _hypergeometric()
    z = NormalDist().inv_cdf((EP - 0.375) / (EP + 0.25))  # Blom: expected maximum of 8 standard normals
    g = skew / math.sqrt(n)  # the skewness of a sum of n i.i.d. counts
    by_hand = n * mean + (z + (z * z - 1.0) * g / 6.0) * math.sqrt(n * var)
    assert float(moe.rank_rows(float(n), E, K_TOP, EP)) == pytest.approx(by_hand, rel=1e-9)


def test_touched_experts_use_the_same_skewness_of_n_tokens(monkeypatch):
    _, _, skew = _hypergeometric()
    seen = []
    real = moe._max_quantile
    monkeypatch.setattr(moe, "_max_quantile", lambda ep, g: seen.append(float(np.asarray(g))) or real(ep, g))
    for n in (1, 4, 16):
        seen.clear()
        moe.rank_touched_experts(float(n), E, K_TOP, EP)
        assert seen == pytest.approx([skew / math.sqrt(n)], rel=1e-9)

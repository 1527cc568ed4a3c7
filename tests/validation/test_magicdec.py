"""MagicDec sweeps: the per-forward time h in the speedup, its leave-one-sweep-out fit, the must-show trend."""

import numpy as np
import pytest

from specplan.validation import magicdec as md


def test_speedup_with_host_hand_computed():
    # T_b = 10 ms, T_iter = 16 ms (verify + 3 draft steps), h = 2 ms, AL = 2.5:
    # 2.5 * (10 + 2) / (16 + 4 * 2) = 30 / 24 = 1.25
    assert md.speedup_with_host(2.5, 10e-3, 16e-3, 3, 2e-3) == pytest.approx(1.25)
    # h = 0 is the pure roofline ratio AL * T_b / T_iter
    assert md.speedup_with_host(2.5, 10e-3, 16e-3, 3, 0.0) == pytest.approx(2.5 * 10 / 16)


def test_al_from_speedup_inverts():
    # measured 1.25 at the same times: AL = 1.25 * 24 / 12 = 2.5
    assert md.al_from_speedup(1.25, 10e-3, 16e-3, 3, 2e-3) == pytest.approx(2.5)


def test_rate_from_length_matches_closed_form():
    # α = 0.5, D = 3: AL = 1 + 0.5 + 0.25 + 0.125 = 1.875
    assert md._rate_from_length(np.array([1.875]), 3)[0] == pytest.approx(0.5, abs=1e-9)


def _synthetic(host_s, al=2.5, d=3):
    """A sweep whose measured speedups are made with a known h: base grows with batch, draft does not."""
    batch = np.array([32, 64, 128])
    base = 2e-3 + 0.4e-3 * batch  # fixed weights + KV per sequence
    it = 1.05 * base + d * (2e-3 + 0.03e-3 * batch)
    meas = md.speedup_with_host(al, base, it, d, host_s)
    return {"batch": batch, "d": np.full(3, d), "measured": meas, "base_s": base, "iter_s": it}


def test_fit_recovers_known_host_time():
    tables = [_synthetic(1.5e-3, al=2.2), _synthetic(1.5e-3, al=3.0, d=4)]
    assert md.fit_host_s(tables) == pytest.approx(1.5e-3, abs=1e-5)
    p, al, _ = md._predict(tables[0], 1.5e-3)
    assert al[0] == pytest.approx(2.2)
    assert np.allclose(p[0], tables[0]["measured"])


def test_magicdec_trend_right_in_every_sweep():
    """Must-show 2: with AL fitted at batch 32 and h from the other sweeps, every sweep's trend is right."""
    rows = md.predict_sweeps()
    trend = md.trend_right(rows)
    assert len(trend) == 6 and all(trend.values()), trend
    assert all(r["error"] == pytest.approx(0.0, abs=1e-9) for r in rows if r["fit_row"])
    held = [abs(r["error"]) for r in rows if not r["fit_row"]]
    assert len(held) == 11

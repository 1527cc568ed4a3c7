"""Issue 38 (search speed): acceptance tables are interpolated by a numpy PCHIP (no scipy import, about 0.4 s of a
CLI run) that answers what scipy's PchipInterpolator answers, bit for bit; draft models derived from a target are
built once per target object (so that step_time's cache, keyed on the objects, sees one draft model)."""

import numpy as np
import pytest

from specplan.speculation.acceptance import Acceptance, _pchip
from specplan.speculation.drafters import eagle3_head, mtp_module
from specplan.profiles.registry import load_model

scipy_interpolate = pytest.importorskip("scipy.interpolate")


def _scipy(x, y, xq):
    return scipy_interpolate.PchipInterpolator(x, y, extrapolate=False)(xq)


def test_numpy_pchip_is_scipys_on_random_tables():
    rng = np.random.default_rng(38)
    for _ in range(400):
        n = int(rng.integers(2, 9))
        x = np.unique(np.round(rng.uniform(0.0, 12.0, n) * 4) / 4)
        if x.size < 2:
            continue
        # monotone AL-like tables, flat stretches and non-monotone ones (the end-slope and sign cases)
        kind = rng.integers(3)
        y = (1.0 + np.cumsum(rng.uniform(0.0, 1.0, x.size)) if kind == 0 else
             1.0 + np.cumsum(rng.uniform(0.0, 1.0, x.size) * (rng.uniform(size=x.size) < 0.6)) if kind == 1 else
             rng.uniform(0.0, 5.0, x.size))
        xq = np.concatenate([x, rng.uniform(x[0] - 1.0, x[-1] + 1.0, 40), np.arange(0.0, 13.0)])
        np.testing.assert_array_equal(_pchip(x, y, xq), _scipy(x, y, xq))  # NaN outside, as scipy's


def test_numpy_pchip_is_scipys_on_the_shipped_acceptance_profiles():
    from specplan.speculation.acceptance import PROFILE_DIR

    names = sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))
    assert len(names) >= 5
    d = np.linspace(0.0, 12.0, 97)
    for name in names:
        acc = Acceptance.from_profile(name)
        if acc.kind != "table":
            continue
        x, y = np.asarray(acc.table_d), np.asarray(acc.table_al)
        q = np.clip(d, x[0], x[-1])
        np.testing.assert_array_equal(_pchip(x, y, q), _scipy(x, y, q))


def test_pchip_two_points_is_the_line_and_keeps_monotone_data_monotone():
    np.testing.assert_allclose(_pchip(np.array([0.0, 4.0]), np.array([1.0, 3.0]), np.array([1.0, 2.0, 3.0])),
                               [1.5, 2.0, 2.5], rtol=0, atol=1e-15)  # by hand: 1 + t / 2
    x, y = np.array([0.0, 1.0, 2.0, 5.0]), np.array([1.0, 1.8, 2.2, 2.3])
    v = _pchip(x, y, np.linspace(0.0, 5.0, 501))
    assert np.all(np.diff(v) >= 0) and np.all(v <= 2.3)  # monotone data: monotone, never overshooting
    np.testing.assert_allclose(v[[0, 100, 200, 500]], y, rtol=1e-15)  # through the knots


def test_derived_draft_models_are_built_once_per_target_object():
    m = load_model("deepseek-r1")
    assert mtp_module(m) is mtp_module(m)
    assert mtp_module(m).num_layers == 1
    llama = load_model("llama-3.1-8b")
    assert eagle3_head(llama) is eagle3_head(llama)
    assert eagle3_head(llama).kind == "eagle3_head"

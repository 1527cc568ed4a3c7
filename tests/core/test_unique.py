"""core.unique.on_unique: the same numbers as pricing every grid point, from the distinct inputs only."""

import numpy as np

from specplan.core.unique import on_unique


def test_matches_the_direct_evaluation_and_calls_fn_on_distinct_tuples_only():
    calls = []

    def fn(b, t, c):
        calls.append(np.size(b))
        return b * 10.0 + t ** 2 - c / 7.0

    b = np.array([1.0, 2.0, 4.0]).reshape(3, 1, 1)
    t = np.array([1.0, 2.0, 3.0, 4.0]).reshape(1, 1, 4) * np.ones((1, 5, 1))  # repeated along axis 1
    out = on_unique(fn, b, t, 640.0)
    assert out.shape == (3, 5, 4)
    np.testing.assert_array_equal(out, b * 10.0 + t ** 2 - 640.0 / 7.0)
    assert calls == [12]  # 3 batches x 4 token counts, not 60 grid points


def test_scalars_and_one_column():
    assert on_unique(lambda x: x + 1.0, 2.0) == 3.0
    x = np.array([[3.0, 1.0, 3.0], [1.0, 2.0, 2.0]])
    np.testing.assert_array_equal(on_unique(np.sqrt, x), np.sqrt(x))

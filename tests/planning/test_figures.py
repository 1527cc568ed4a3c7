"""The numbers the figures draw (planning/figures.py, planning/frontier.lower_envelope), checked by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd

from specplan.planning.figures import best_per_batch, energy_figure, frontier_figure
from specplan.planning.frontier import lower_envelope


def test_lower_envelope_by_hand():
    """Cost 5 at 10 tok/s/user, 3 at 20, 4 at 30, 1 at 40: at or above 10 the lowest is 1 (from 40), so the envelope
    keeps only the points where the running minimum from the fast end falls: (40, 1)."""
    x, y = lower_envelope([10, 20, 30, 40], [5, 3, 4, 1])
    assert x.tolist() == [40.0] and y.tolist() == [1.0]
    x, y = lower_envelope([10, 20, 30, 40], [1, 2, 3, 4])  # the slower, the cheaper: every point is on it
    assert x.tolist() == [10.0, 20.0, 30.0, 40.0] and y.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_energy_figure_panels_devices_and_rows_a_log_axis_shows():
    df = pd.DataFrame({"hardware": ["a", "a", "b", "b"], "draft_len": [0, 2, 0, 2],
                       "meets_sla": [True, True, True, False], "tokens_per_s_per_user": [10.0, 20.0, np.nan, 30.0],
                       "joules_per_token": [1.0, 0.5, 2.0, 0.1]})
    ef = energy_figure(df)
    assert ef.devices == ("a", "b") and [p.column for p in ef.panels] == ["joules_per_token"]
    p = ef.panels[0]
    assert p.tok_s_user.tolist() == [10.0, 20.0] and p.value.tolist() == [1.0, 0.5]  # NaN and the SLA miss dropped
    assert [(c.hardware, c.speculative, c.tok_s_user.tolist(), c.value.tolist()) for c in p.curves] == [
        ("a", False, [10.0], [1.0]), ("a", True, [20.0], [0.5])]


def test_frontier_figure_one_curve_pair_per_device_and_context(small_grid):
    ff = frontier_figure(small_grid)
    n_ctx = small_grid["context_len"].nunique()
    assert len(ff.curves) == small_grid["hardware"].nunique() * n_ctx and ff.throughput_column == "tok_s_gpu"
    for cv in ff.curves:
        assert (cv.baseline["draft_len"] == 0).all() and list(cv.speculation.index) == list(range(len(cv.speculation)))
    assert frontier_figure(small_grid, "device").throughput_column == "tok_s_device"


def test_best_per_batch_by_hand():
    df = pd.DataFrame({"batch": [1, 1, 1, 4, 4], "draft_len": [0, 1, 2, 1, 2], "context_len": 1024,
                       "fits": [True, True, True, True, False], "speedup": [1.0, 1.4, 1.6, 1.2, 9.0]})
    rows, ctx = best_per_batch(df, None)
    assert ctx == 1024 and rows["draft_len"].tolist() == [2, 1]  # batch 4's D = 2 does not fit
    assert best_per_batch(df.assign(fits=False), None) == (None, None)

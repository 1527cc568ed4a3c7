"""Must-show 2: the fitted model (two engine parameters, leave-one-out) tracks the vLLM EAGLE-3 sweep."""

from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def load_script():
    """The report module (was scripts/eagle3_sweep_report.py; the script now calls it)."""
    from specplan.validation import eagle3_sweep

    return eagle3_sweep


def sweep_rows(s):
    """(D, measured AL, measured speedup) arrays of the published sweep."""
    rs = s.rows()
    return tuple(np.array([float(r[k]) for r in rs]) for k in ("draft_len", "acceptance_length", "speedup"))


def test_leave_one_out_within_20_percent_and_best_d_within_one():
    s = load_script()
    d, al, meas = sweep_rows(s)
    assert len(d) == 6
    base = s.model_speedup(d, al, None)
    for i in range(len(d)):
        keep = np.arange(len(d)) != i
        sp = s.fit(d[keep], al[keep], meas[keep], {k: v[keep] for k, v in base.items() if isinstance(v, np.ndarray)})
        pred = s.model_speedup(d, al, sp)["speedup"]
        assert abs(pred[i] - meas[i]) / meas[i] < 0.20
        assert abs(d[np.argmax(pred)] - d[np.argmax(meas)]) <= 1


def test_leave_one_out_regression_guard():
    """Tighter than the issue's criteria, near what the fit achieves today (worst held-out error 3.8 %,
    every fit picks the measured best D): a change that degrades the fit fails here long before 20 %."""
    s = load_script()
    d, al, meas = sweep_rows(s)
    base = s.model_speedup(d, al, None)
    errs = []
    for i in range(len(d)):
        keep = np.arange(len(d)) != i
        sp = s.fit(d[keep], al[keep], meas[keep], {k: v[keep] for k, v in base.items() if isinstance(v, np.ndarray)})
        pred = s.model_speedup(d, al, sp)["speedup"]
        errs.append(abs(pred[i] - meas[i]) / meas[i])
        assert d[np.argmax(pred)] == d[np.argmax(meas)]
    assert max(errs) < 0.06, errs


def test_committed_report_lists_every_row():
    text = (ROOT / "docs" / "eagle3_llama8b_validation.md").read_text()
    for d in range(2, 8):
        assert f"\n| {d} | " in text


def test_shipped_serving_profile_is_the_all_row_fit():
    """The built-in vllm-v1-eagle-2025 profile must be what the script fits on all six rows (no stale numbers)."""
    from specplan.speculation.serving import VLLM_V1_EAGLE_2025

    s = load_script()
    d, al, meas = sweep_rows(s)
    base = s.model_speedup(d, al, None)
    sp = s.fit(d, al, meas, {k: v for k, v in base.items() if isinstance(v, np.ndarray)})
    assert abs(sp.iteration_overhead_s - VLLM_V1_EAGLE_2025.iteration_overhead_s) < 0.01e-3
    assert abs(sp.draft_step_overhead_s - VLLM_V1_EAGLE_2025.draft_step_overhead_s) < 0.01e-3

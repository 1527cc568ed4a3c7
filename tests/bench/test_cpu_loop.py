"""The whole loop on a CPU: bench (torch, small shapes) -> calibrate on some shapes -> validate on others."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the benchmark harness needs it (pip "
                            "install torch, then pip install -e '.[bench]')")

from specplan.bench import harness  # noqa: E402
from specplan.bench.calibrate import calibrate  # noqa: E402
from specplan.validation.kernels import validate  # noqa: E402
from specplan.profiles.registry import load_hardware  # noqa: E402

# Interleaved (N, K) grid: every other shape is held out, so validation shapes lie inside the fitted range.
# No N or K below 512: a 256 x 256 GEMV takes a few microseconds on a CPU, where one scheduler hiccup on a
# loaded runner is a large fraction of the time.
GRID = [(n, k) for n in (512, 1024, 1536, 2048) for k in (512, 1024, 1536, 2048)]
FIT = [s for i, s in enumerate(GRID) if (i + i // 4) % 2 == 0]
HOLD = [s for s in GRID if s not in FIT]
M_VALUES = [1, 8, 32, 128, 256]
PASSES = 3  # independent timing passes; each row keeps the minimum of its per-pass medians
# Bound on the held-out median APE, percent. A 4-parameter roofline (bandwidth, peak fraction, half-efficiency
# FLOPs, launch overhead) fitted on one CPU's own timings leaves a systematic 10-20 % median on held-out shapes
# (cache effects it does not model: a 2048 x 2048 fp32 weight is 16 MB, beyond most L2 and some L3); the bound
# allows that plus the timing noise left after min-of-medians, and is still far below what a wrong profile
# scores (test_loop_can_fail: > 80 %).
MEDIAN_APE_BOUND = 35.0


@pytest.fixture(scope="module")
def measured() -> pd.DataFrame:
    """Time the grid on the CPU (fp32, one thread) in thread CPU time (time.thread_time): per row the minimum
    over PASSES passes of the median of 7 repeats. Wall time on a loaded machine counts the time other
    processes hold the core (a 2-core runner shared by 7 jobs: held-out median 70 % in wall time); the thread's
    own CPU time does not, and the minimum of medians removes what load still adds (cache misses). One thread
    keeps the timing independent of how many cores other jobs leave free."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        shapes = [{"n": n, "k": k, "name": f"{n}x{k}"} for n, k in GRID]
        passes = [pd.DataFrame(harness.bench_gemm(shapes, M_VALUES, device="cpu", dtype="fp32",
                                                  timing=harness.TimingPlan(reps=7, progress=False, cpu_clock="thread")))
                  for _ in range(PASSES)]
    finally:
        torch.set_num_threads(threads)
    df = passes[0].copy()
    df["time_us"] = np.min(np.stack([p["time_us"].to_numpy(float) for p in passes]), axis=0)
    assert set(harness.GEMM_COLUMNS) <= set(df.columns)
    assert len(df) == len(GRID) * len(M_VALUES)
    assert df["source"].str.contains("thread_time").all()
    return df


def _select(df: pd.DataFrame, shapes) -> pd.DataFrame:
    keys = set(shapes)
    return df[[(n, k) in keys for n, k in zip(df["n"], df["k"])]]


def test_calibrate_on_some_shapes_validate_on_others(measured, tmp_path):
    base = load_hardware("cpu-generic")
    fitted = calibrate([("cpu_fit.csv", _select(measured, FIT))], base, "cpu-calibrated")
    _, s_fit, _ = validate(_select(measured, HOLD), fitted)
    _, s_base, _ = validate(_select(measured, HOLD), base)
    assert s_fit["rows"] == len(HOLD) * len(M_VALUES)
    assert s_fit["median_ape"] < MEDIAN_APE_BOUND, s_fit
    # Calibration must help: the fitted profile beats the uncalibrated example CPU on held-out shapes.
    assert s_fit["median_ape"] < s_base["median_ape"]
    assert fitted.calibration["fits"]["gemm"]["rows"] > 0
    assert "specplan calibrate" in fitted.sources["efficiency"]


def test_loop_can_fail(measured):
    """The bound is real: a profile 10x too fast in every term misses it by far."""
    base = load_hardware("cpu-generic")
    d = base.model_dump()
    d["mem_bandwidth_bytes_s"] *= 10
    d["peak_flops"] = {k: v * 10 for k, v in d["peak_flops"].items()}
    d["kernel_overhead_s"] = 0.0
    wrong = type(base).model_validate(d)
    _, s, _ = validate(_select(measured, HOLD), wrong)
    assert s["median_ape"] > 80.0 > MEDIAN_APE_BOUND
    assert np.isfinite(s["mape"])

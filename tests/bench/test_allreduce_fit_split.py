"""The all-reduce fit keeps each kernel on its own rows: the custom kernel's bandwidth fraction never sees the NCCL
rows (nor the custom rows beyond the kernel's reach, which run NCCL), and NCCL's never sees the custom rows."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specplan.bench.calibrate import allreduce_latency_floors, custom_kernel_rows, fit_allreduce
from specplan.profiles.registry import load_hardware

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def train_and_hw():
    """The kernel report's H100 fit rows (TRTLLM-kernel and NCCL 2.29.2) and h100-sxm at those rows' floors."""
    r = pd.read_csv(ROOT / "reference" / "measured" / "allreduce_h100_a100.csv.gz")
    rh = r[r["device"] == "h100-sxm"]
    train = rh[(rh["kernel"] == "TRTLLM") | (rh["framework"] == "nccl 2.29.2")].copy()
    hw = load_hardware("h100-sxm")
    hw = hw.model_copy(update={"allreduce": hw.allreduce.model_copy(update=allreduce_latency_floors(train))})
    return train, hw


def _scaled(df: pd.DataFrame, rows: np.ndarray, factor: float) -> pd.DataFrame:
    out = df.copy()
    out.loc[rows, "time_us"] = out.loc[rows, "time_us"] * factor
    return out


def test_custom_kernel_rows_are_the_one_shot_rows_by_count(train_and_hw):
    """TRTLLM rows at messages <= oneshot_max_bytes (1.05 MB): bf16 sizes 128 ... 512K elements (256 B ... 1 MiB,
    13 sizes) x 2/4/8 GPUs x 4 frameworks (trtllm 1.2.0rc5 / 1.3.0rc10 / 1.3.0rc20, sglang 0.5.6.post2) = 156."""
    train, hw = train_and_hw
    mask = custom_kernel_rows(train, hw)
    assert int(mask.sum()) == 13 * 3 * 4
    picked = train[mask]
    assert set(picked["kernel"]) == {"TRTLLM"} and picked["message_elems"].max() == 512 * 1024


@pytest.mark.parametrize("factor", [0.8, 1.25])
def test_nccl_rows_do_not_move_the_custom_fraction(train_and_hw, factor):
    """NCCL rows 20 % faster or 25 % slower: NCCL's fraction moves, the custom kernel's does not (the joint fit of
    session 19 moved it 0.689 -> 0.687 / 0.665 here)."""
    train, hw = train_and_hw
    base, _ = fit_allreduce(train, hw, fit_latency=False)
    nccl = (train["kernel"] == "NCCL").to_numpy()
    moved, _ = fit_allreduce(_scaled(train, nccl, factor), hw, fit_latency=False)
    assert abs(moved.allreduce.nccl_bw_fraction - base.allreduce.nccl_bw_fraction) > 0.05
    assert moved.allreduce.custom_bw_fraction == base.allreduce.custom_bw_fraction


def test_custom_rows_beyond_the_kernel_do_not_move_either_fraction(train_and_hw):
    """TRTLLM rows above oneshot_max_bytes run NCCL inside the engine: 30 % slower, they change nothing."""
    train, hw = train_and_hw
    base, _ = fit_allreduce(train, hw, fit_latency=False)
    beyond = ((train["kernel"] == "TRTLLM").to_numpy() & ~custom_kernel_rows(train, hw))
    assert beyond.sum() == 10 * 3 * 4
    moved, _ = fit_allreduce(_scaled(train, beyond, 1.3), hw, fit_latency=False)
    assert moved.allreduce.custom_bw_fraction == base.allreduce.custom_bw_fraction
    assert moved.allreduce.nccl_bw_fraction == base.allreduce.nccl_bw_fraction


def test_custom_kernel_rows_do_move_it_and_not_nccl(train_and_hw):
    """The custom fraction is fitted on its rows: the same rows 30 % slower move it, and leave NCCL's alone."""
    train, hw = train_and_hw
    base, _ = fit_allreduce(train, hw, fit_latency=False)
    moved, _ = fit_allreduce(_scaled(train, custom_kernel_rows(train, hw), 1.3), hw, fit_latency=False)
    assert moved.allreduce.custom_bw_fraction < base.allreduce.custom_bw_fraction - 0.05
    assert moved.allreduce.nccl_bw_fraction == base.allreduce.nccl_bw_fraction


def test_one_shot_fraction_recovered_from_rows_made_by_hand():
    """TRTLLM rows written as one-shot times by hand, 3 us + (n - 1) x bytes / (450 GB/s x 0.5), with NCCL rows of
    any speed beside them: the fit returns 0.5."""
    hw = load_hardware("h100-sxm")
    hw = hw.model_copy(update={"allreduce": hw.allreduce.model_copy(update={"custom_latency_s": 3e-6})})
    rows = []
    for n in (2, 4, 8):
        for elems in (1024, 16384, 131072, 524288):
            b = elems * 2.0
            rows.append(("TRTLLM", n, elems, 3.0 + (n - 1) * b / (450e9 * 0.5) * 1e6))
            rows.append(("NCCL", n, elems, 50.0 + b / 1e5))
    df = pd.DataFrame(rows, columns=["kernel", "num_gpus", "message_elems", "time_us"]).assign(
        dtype="bfloat16", device="h100-sxm", framework="x")
    fit, info = fit_allreduce(df, hw, fit_latency=False)
    assert fit.allreduce.custom_bw_fraction == pytest.approx(0.5, rel=1e-4)
    assert info["custom_kernel_rows"] == 12 and info["nccl_rows"] == 12

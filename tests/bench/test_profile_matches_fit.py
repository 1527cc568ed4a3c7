"""The built-in H100 profile carries the efficiencies the committed validation report fitted (no drift)."""

import json
from pathlib import Path

import pytest

from specplan.profiles.registry import load_hardware

ROOT = Path(__file__).resolve().parents[2]


def test_h100_profile_equals_the_committed_fit():
    fit = json.loads((ROOT / "docs" / "validation" / "h100_fit.json").read_text())
    h = load_hardware("h100-sxm")
    assert h.kernel_overhead_s == pytest.approx(fit["gemm"]["kernel_overhead_s"], rel=0.01)
    assert h.attention.mem_bw_fraction == pytest.approx(fit["attention"]["mem_bw_fraction"], abs=0.002)
    assert h.attention.cta_overhead_s == pytest.approx(fit["attention"]["cta_overhead_s"], rel=0.01)
    for k in ("custom_bw_fraction", "nccl_bw_fraction"):
        assert getattr(h.allreduce, k) == pytest.approx(fit["allreduce"][k], abs=0.002), k
    assert h.allreduce.nvls and h.allreduce.nvls_latency_s == pytest.approx(fit["allreduce"]["nvls_latency_s"], rel=0.01)
    # latencies: the fit rows' own small-message floors (TRT-LLM custom, NCCL 2.29.2), not the held-out rows'
    for k in ("custom_latency_s", "nccl_latency_s", "nccl_latency_per_peer_s"):
        assert getattr(h.allreduce, k) == pytest.approx(fit["allreduce"][k], rel=0.01), k
    assert "held out" in fit["allreduce"]["fitted_on"]


def test_allreduce_latencies_come_from_the_fit_rows_only():
    """The floors of the TRT-LLM custom and NCCL 2.29.2 rows, by hand from the measured table: fastest time at
    messages <= 8 KB per (framework, GPUs); the profile must equal them (not the held-out vLLM / SGLang rows')."""
    import pandas as pd

    r = pd.read_csv(ROOT / "reference" / "measured" / "allreduce_h100_a100.csv.gz")
    width = r["dtype"].map({"half": 2, "bfloat16": 2, "int8": 1})
    r = r[(r["device"] == "h100-sxm") & (r["message_elems"] * width <= 8192)]
    trt = r[r["kernel"] == "TRTLLM"].groupby(["framework", "num_gpus"])["time_us"].min()
    h = load_hardware("h100-sxm")
    assert h.allreduce.custom_latency_s * 1e6 == pytest.approx(float(trt.median()), abs=0.01)
    nccl = r[r["framework"] == "nccl 2.29.2"].groupby("num_gpus")["time_us"].min()
    x = nccl.index.to_numpy(float) - 1
    slope = ((x - x.mean()) * (nccl.to_numpy() - nccl.mean())).sum() / ((x - x.mean()) ** 2).sum()
    assert h.allreduce.nccl_latency_per_peer_s * 1e6 == pytest.approx(slope, abs=0.01)
    assert h.allreduce.nccl_latency_s * 1e6 == pytest.approx(nccl.mean() - slope * x.mean(), abs=0.01)


def test_moe_block_and_eager_floors_equal_the_committed_fit():
    """h100-sxm's grouped-GEMM fractions and the engines' eager all-reduce floors are the ones the committed report
    fitted (docs/validation/h100_fit.json: moe, allreduce_engine)."""
    from specplan.profiles.registry import load_engine

    fit = json.loads((ROOT / "docs" / "validation" / "h100_fit.json").read_text())
    h = load_hardware("h100-sxm")
    assert h.moe.tile_rows == fit["moe"]["tile_rows"] and h.moe.tile_cols == fit["moe"]["tile_cols"]
    for k, v in fit["moe"]["compute_fraction"].items():
        assert h.moe.compute_fraction[k] == pytest.approx(v, abs=0.001), k
    for eng, v in fit["allreduce_engine"]["allreduce_eager_s"].items():
        assert load_engine(eng).allreduce_eager_s == pytest.approx(v, rel=0.01), eng
    assert fit["moe"]["median_ape"]["loo"] < fit["moe"]["median_ape"]["before"]  # out of sample beats the old rule

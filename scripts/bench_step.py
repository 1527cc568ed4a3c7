"""Benchmark (not a test): evaluate 1,000,000 (batch, q_len, context) decode-step points on one core.

Usage: python scripts/bench_step.py   (set OMP_NUM_THREADS=1 for a one-core figure)
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

from specplan.profiles.registry import load_hardware, load_model  # noqa: E402
from specplan.model.step import step_time  # noqa: E402


def main() -> None:
    hw = load_hardware("h100-sxm")
    rng = np.random.default_rng(0)
    n = 1_000_000
    batch = rng.integers(1, 1025, n)
    q_len = rng.integers(1, 33, n)
    context = rng.integers(0, 131073, n)
    print(f"{'model':24s} {'points':>9s} {'seconds':>8s} {'points/s':>12s}")
    for model_id, tp in (("qwen3.5-122b-a10b", 4), ("deepseek-v3", 8)):
        model = load_model(model_id)
        step_time(model, hw, tp, batch[:10], q_len[:10], context[:10])  # warm caches
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            r = step_time(model, hw, tp, batch, q_len, context)
            best = min(best, time.perf_counter() - t0)
        assert r.total_s.shape == (n,) and np.all(np.isfinite(r.total_s))
        print(f"{model_id:24s} {n:9d} {best:8.3f} {n / best:12.0f}")


if __name__ == "__main__":
    main()

"""Benchmark (not a test): simulate 10,000 requests per policy on one core (process CPU time and wall time).

Usage: OMP_NUM_THREADS=1 python scripts/bench_adaptive.py
Workload: Llama-3.1-8B on one H100 (SGLang engine profile), Poisson 20 requests/s, ISL 1024, OSL 256, α per request
~ Beta(8, 2); D up to 8. The cost table (one `evaluate` call) is built once and timed separately.
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("SPECPLAN_NO_PROGRESS", "1")

from specplan.adaptive import build_workload, run_requests  # noqa: E402
from specplan.adaptive.costs import CostGrid, build_costs  # noqa: E402
from specplan.adaptive.workload import synthetic  # noqa: E402

N, RATE, ISL, OSL = 10_000, 20.0, 1024, 256
POLICIES = ("fixed:3", "sglang", "model", "model:acc=0", "oracle")


def main() -> None:
    a, i, o = synthetic(N, ISL, OSL, rate_per_s=RATE, seed=0)
    wl = build_workload(a, i, o, dist="beta:8,2", seed=0)
    c0, w0 = time.process_time(), time.perf_counter()
    costs = build_costs("llama-3.1-8b", "h100-sxm",
                        CostGrid(d_max=8, ctx_min=ISL, ctx_max=ISL + OSL, b_max=1024, mean_isl=ISL, prefill_budget=8192),
                        engine="sglang")
    print(f"cost table: {time.process_time() - c0:.2f} s CPU, {time.perf_counter() - w0:.2f} s wall")
    print(f"{'policy':12s} {'requests':>9s} {'steps':>7s} {'CPU s':>7s} {'wall s':>7s} {'tok/s/GPU':>10s}")
    total = 0.0
    for p in POLICIES:
        c0, w0 = time.process_time(), time.perf_counter()
        r = run_requests("llama-3.1-8b", "h100-sxm", wl, [p], costs=costs)["policies"][0]
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        total += cpu
        print(f"{p:12s} {N:9d} {r.get('steps', 0):7d} {cpu:7.2f} {wall:7.2f} {r['tokens_per_s_per_gpu']:10.0f}")
    print(f"all {len(POLICIES)} policies: {total:.1f} s CPU")


if __name__ == "__main__":
    main()

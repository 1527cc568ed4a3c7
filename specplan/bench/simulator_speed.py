"""Benchmark (not a test) of the request-level serving simulator: 10,000 requests of Llama-3.3-70B on one core.

`scripts/bench_simulator.py` calls `main()`. Workloads: H100 TP 4 fp8, ISL 1024, OSL 256, on each engine
(vLLM, SGLang, TensorRT-LLM): a closed loop of 64 clients starting together, and an open loop at 8 requests/s
(Poisson); with vLLM also EAGLE-3 at D = 3. The step table (one vectorized pricing pass) is inside the timing.
Target (issue 39): <= 2 s of process CPU time per 10,000-request run.
"""

from __future__ import annotations

import os
import time

N, ISL, OSL, TP = 10_000, 1024, 256, 4


def runs():
    """(label, RequestSet, SimSetup fields) of the benchmark."""
    from specplan.serving.arrivals import closed_loop, lengths, open_loop

    isl, osl = lengths(ISL, None, N, 0), lengths(OSL, None, N, 1)
    out = []
    for eng in ("vllm", "sglang", "trtllm"):
        out.append((f"{eng}, closed loop C = 64", closed_loop(isl, osl, 64), eng, "none", 0))
        out.append((f"{eng}, open loop 8 req/s", open_loop(isl, osl, 8.0, seed=0), eng, "none", 0))
    out.append(("vllm, EAGLE-3 D = 3 (α 0.7), closed loop C = 64", closed_loop(isl, osl, 64), "vllm", "eagle3", 3))
    return out


def main() -> None:
    """Print one line per run: process CPU seconds, wall seconds, TTFT p50 / p99, TPOT, requests/s."""
    os.environ.setdefault("SPECPLAN_NO_PROGRESS", "1")
    from specplan.costs.precision import resolve_precision
    from specplan.profiles.registry import load_engine, load_hardware, load_model
    from specplan.serving.sim_serving import SimSetup, simulate_serving
    from specplan.speculation.acceptance import Acceptance

    m, hw = load_model("llama-3.3-70b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, "fp8", "fp8")
    simulate_serving(m, hw, runs()[1][1], SimSetup(TP, load_engine("vllm"), prec))  # imports and caches warm
    print(f"request-level simulator, {N:,} requests of llama-3.3-70b fp8 on H100 TP {TP}, ISL {ISL}, OSL {OSL}")
    for label, req, eng, mech, d in runs():
        c0, w0 = time.process_time(), time.perf_counter()
        s = simulate_serving(m, hw, req, SimSetup(TP, load_engine(eng), prec, mechanism=mech, draft_len=d,
                                                  acceptance=Acceptance.from_rate(0.7) if d else None))
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        print(f"{label:42s} CPU {cpu:5.2f} s  wall {wall:5.2f} s  TTFT p50 {s.ttft_p50_s * 1e3:7.1f} ms  "
              f"p99 {s.ttft_p99_s * 1e3:7.1f} ms  TPOT {s.tpot_mean_s * 1e3:6.2f} ms  {s.requests_per_s:6.2f} req/s")

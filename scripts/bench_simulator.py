"""Benchmark (not a test): the request-level serving simulator on 10,000 requests of Llama-3.3-70B, one core.

Usage: OMP_NUM_THREADS=1 python scripts/bench_simulator.py   (logic: specplan/bench/simulator_speed.py)
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from specplan.bench.simulator_speed import main  # noqa: E402

if __name__ == "__main__":
    main()

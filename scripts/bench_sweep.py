"""Speed benchmark of the Pareto sweep + frontier (`--pareto`: the whole `specplan pareto` command): calls
specplan.bench.speed_sweep.main; run `OMP_NUM_THREADS=1 python scripts/bench_sweep.py [--pareto --repeat 5]`."""

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

from specplan.bench.speed_sweep import main  # noqa: E402

if __name__ == "__main__":
    main()

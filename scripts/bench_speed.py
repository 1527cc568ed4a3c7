"""Speed of the commands users wait for (issue 43), written into docs/performance.md: calls
specplan.bench.speed.main, the same as `specplan bench-speed`; run `python scripts/bench_speed.py [--only pareto]`."""

from specplan.bench.speed import main

if __name__ == "__main__":
    raise SystemExit(main())

"""Long-mode fuzzing: N fuzzed invocations over every CLI command and loader, then the property tests.

    python scripts/fuzz.py --n 10000                 # 10,000 invocations (CLI and loaders), then 100,000 property examples
    python scripts/fuzz.py --n 500 --properties 0    # a quick run, no property tests

Every invocation runs in-process with a 60 s limit (tests/fuzz/harness.py); the strategies are those of the CI
fuzz test (tests/fuzz/strategies.py) without its fixed seed. Prints counts (invocations per command / loader,
tracebacks, hangs, slowest run, non-finite or overflowed numbers, code execution, other problems) and each
distinct problem once with the command that caused it; exit status 1 when anything was found.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))


def _classify(problem: str) -> str:
    if "traceback" in problem:
        return "tracebacks"
    if "hang" in problem or "slow (" in problem:
        return "hangs"
    if "non-finite" in problem or "negative " in problem or "overflow" in problem:
        return "non-finite or overflowed numbers"
    if "code execution" in problem:
        return "code execution"
    if "Little's law" in problem:
        return "Little's-law violations (closed loops)"
    return "other problems"


def fuzz(n: int, seed: int, cli_share: float, timeout_s: float, only=None) -> int:
    """Run n examples (a cli_share of them CLI invocations, the rest loader calls); print the report."""
    from hypothesis import HealthCheck, Phase, given, settings

    from strategies import cli_invocation, loader_call, run_invocation, run_loader

    counts: Counter = Counter()
    kinds: Counter = Counter()
    found: dict[str, str] = {}
    slowest = [0.0, ""]
    t_start = time.perf_counter()
    cpu_start = time.process_time()

    def record(label: str, probs: list[str], what: str, seconds: float) -> None:
        counts[label] += 1
        if seconds > slowest[0]:
            slowest[:] = [seconds, what[:160]]
        for p in probs:
            kinds[_classify(p)] += 1
            key = re.sub(r"/tmp/specplan-fuzz-\w+", "TMP", p)[:160]
            found.setdefault(key, what[:400])
        done = sum(counts.values())
        if done % 500 == 0:
            print(f"... {done:,} invocations, {sum(kinds.values())} problems, "
                  f"{time.perf_counter() - t_start:.0f} s", flush=True)

    cfg = dict(database=None, deadline=None, phases=[Phase.generate], suppress_health_check=list(HealthCheck))

    n_cli = int(round(n * cli_share))

    @settings(max_examples=max(n_cli, 1), **cfg)
    @given(inv=cli_invocation(only))
    def cli(inv):
        family, argv = inv
        t0 = time.perf_counter()
        r, probs = run_invocation(family, argv, timeout_s)
        shown = " ".join(str(a) if not isinstance(a, tuple) else f"<{a[1]}{a[2]}: {a[3][:120]!r}>" for a in argv)
        record(f"cli {family}", probs, shown, time.perf_counter() - t0)

    @settings(max_examples=max(n - n_cli, 1), **cfg)
    @given(call=loader_call())
    def loaders(call):
        name, spec = call
        t0 = time.perf_counter()
        probs = run_loader(name, spec, timeout_s)
        record(f"loader {name}", probs, f"{name} <{spec[3][:200]!r}>", time.perf_counter() - t0)

    from hypothesis import seed as hseed

    for fn, k in ((cli, n_cli), (loaders, n - n_cli)):
        if k:
            hseed(seed)(fn)()
    total = sum(counts.values())
    wall, cpu = time.perf_counter() - t_start, time.process_time() - cpu_start
    print(f"\nfuzzed invocations: {total:,} ({wall:.0f} s wall, {cpu:.0f} s CPU, seed {seed})")
    for label, c in sorted(counts.items()):
        print(f"  {label:<24}{c:>7,}")
    for k in ("tracebacks", "hangs", "non-finite or overflowed numbers", "code execution",
              "Little's-law violations (closed loops)", "other problems"):
        print(f"{k}: {kinds.get(k, 0)}")
    print(f"slowest run: {slowest[0]:.1f} s (limit {timeout_s:.0f} s): {slowest[1]}")
    for p, what in sorted(found.items()):
        print(f"PROBLEM {p}\n    from: {what}")
    return 1 if kinds else 0


def properties(n: int) -> int:
    """Run tests/speculation/test_properties.py with `n` examples in all, each test in its own process (they run
    side by side: the niced run takes what the machine has idle); print the counts and the pytest summaries."""
    env = dict(os.environ, SPECPLAN_PROPERTY_EXAMPLES=str(n), PYTHONPATH=str(ROOT))
    path = str(ROOT / "tests" / "speculation" / "test_properties.py")
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0"]  # one process each
    ids = [ln for ln in subprocess.run(base + ["--co", path], env=env, capture_output=True, text=True,
                                       cwd=ROOT).stdout.splitlines() if "::" in ln]
    t0 = time.perf_counter()
    procs = [subprocess.Popen(base + ["--hypothesis-show-statistics", i], env=env, cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for i in ids]
    outs = [p.communicate()[0] for p in procs]
    out = "\n".join(outs)
    passing = sum(int(x) for x in re.findall(r"(\d+) passing, \d+ failing", out))
    failing = sum(int(x) for x in re.findall(r"\d+ passing, (\d+) failing", out))
    rc = max((p.returncode for p in procs), default=1) if ids else 1
    ok = sum(p.returncode == 0 for p in procs)
    print(f"\nproperty examples: {passing:,} passing, {failing} failing over {len(ids)} property tests "
          f"({ok} passed) in {time.perf_counter() - t0:.0f} s")
    if rc:
        print(out[-3000:])
    return rc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10000, help="fuzzed invocations (CLI and loaders)")
    ap.add_argument("--seed", type=int, default=13, help="hypothesis seed")
    ap.add_argument("--cli-share", type=float, default=0.5, help="share of CLI invocations (rest: loader calls)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds allowed per invocation")
    ap.add_argument("--properties", type=int, default=100000, help="property-test examples in all (0: skip)")
    ap.add_argument("--commands", default="", help="only these CLI command families, comma list (e.g. adaptive)")
    a = ap.parse_args()
    only = [c for c in a.commands.split(",") if c] or None
    rc = fuzz(a.n, a.seed, a.cli_share, a.timeout, only) if a.n > 0 else 0
    if a.properties > 0:
        rc |= properties(a.properties)
    return rc


if __name__ == "__main__":
    sys.exit(main())

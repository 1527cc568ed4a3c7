"""The request-level simulator's surfaces in the fuzz suite (issue 44, for the surfaces of issue 39): seeded draws of
`predict --simulate / --workload / --prefix-hit / --isl-dist / --osl-dist / --arrival-cv / --requests`, bad values
among them, judged like every CLI draw (no traceback, one-line errors, finite JSON) and by the laws a finite run
must keep: percentiles in order, a request's latency at least its TTFT, a closed loop never holding more requests
than its clients (Little's law: requests/s x mean latency <= concurrency), and at a fixed OSL the identity
mean latency = mean TTFT + (OSL - 1) x mean TPOT, which holds request by request."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))
from strategies import run_invocation  # noqa: E402

CI = dict(derandomize=True, database=None, deadline=None, phases=[Phase.generate],
          suppress_health_check=list(HealthCheck))
TRACE = str(Path(__file__).resolve().parents[2] / "specplan" / "data" / "traces" / "synthetic_chat.csv")
TOL = 1e-6


GOOD = {"--isl": ["256", "2048"], "--osl": ["1", "64", "200"], "--concurrency": ["1", "8", "48"],
        "--request-rate": ["0.5", "4"], "--prefix-hit": ["0.0", "0.6", "0.95"],
        "--isl-dist": ["lognormal:1000,0.5", "uniform:100,900"], "--osl-dist": ["lognormal:128,0.5", "uniform:16,200"],
        "--arrival-cv": ["1", "3"], "--requests": ["50", "200"], "--workload": [TRACE]}
BAD = {"--isl": ["0"], "--concurrency": ["0"], "--request-rate": ["-1"], "--prefix-hit": ["1.5", "nan"],
       "--isl-dist": ["normal:x", "lognormal:-5,1"], "--osl-dist": ["bogus"], "--arrival-cv": ["0", "-2"],
       "--requests": ["0", "x"], "--workload": ["nosuch.csv"]}


@st.composite
def simulator_argv(draw):
    """One predict invocation through the simulator: a model and device, a closed or open loop (or a trace), the
    simulator's options, speculation sometimes; one draw in four gives one option a bad value (a one-line error).
    The choices come from a seeded random.Random (uniform, where hypothesis's own draws lean to the edges)."""
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))
    bad = rnd.choice(sorted(BAD)) if rnd.random() < 0.25 else None

    def val(flag):
        return rnd.choice(BAD[flag] if flag == bad else GOOD[flag])

    def maybe(flag, p):
        return [flag, val(flag)] if (flag == bad or rnd.random() < p) else []

    argv = ["predict", "-m", rnd.choice(["llama-3.1-8b", "llama-3.2-1b"]), "-H", rnd.choice(["h100-sxm", "a100-sxm-80gb"])]
    if bad == "--workload" or (bad is None and rnd.random() < 0.3):
        argv += ["--workload", val("--workload")]
    else:
        argv += ["--isl", val("--isl"), "--osl", val("--osl")]
        loop = "--request-rate" if bad == "--request-rate" or rnd.random() < 0.4 else "--concurrency"
        argv += [loop, val(loop)] + (["--simulate"] if rnd.random() < 0.5 else [])
    argv += ["--engine", rnd.choice(["vllm", "sglang", "trtllm", "vllm-0.10"])]
    for flag, p in (("--prefix-hit", 0.4), ("--isl-dist", 0.3), ("--osl-dist", 0.3), ("--arrival-cv", 0.3),
                    ("--requests", 0.5)):
        argv += maybe(flag, p)
    if rnd.random() < 0.5:
        argv += ["--mechanism", "eagle3", "-D", rnd.choice(["2", "3"]), "--acceptance-rate", "0.7"]
    return argv + ["--json"]


def simulated_laws(data: dict, fixed_osl: int | None) -> list[str]:
    """What a finite simulated run must keep (module doc); `fixed_osl`: the one OSL every request has (None:
    lengths drawn or read from a trace)."""
    s = data.get("serving") or {}
    out = []
    for name in ("baseline", "speculative"):
        b = (s.get(name) or {}).get("simulated")
        if not isinstance(b, dict) or not b.get("requests"):
            continue
        for k in ("ttft", "tpot", "e2e"):
            p = [b.get(f"{k}_p{q}_s") for q in (50, 90, 99)]
            if all(isinstance(x, float) for x in p) and not p[0] <= p[1] + TOL and p[1] <= p[2] + TOL:
                out.append(f"{name}: {k} percentiles out of order {p}")
        if b["e2e_mean_s"] < b["ttft_mean_s"] - TOL:
            out.append(f"{name}: mean latency {b['e2e_mean_s']} below mean TTFT {b['ttft_mean_s']}")
        c = s.get("concurrency")
        if isinstance(c, (int, float)) and b["requests_per_s"] * b["e2e_mean_s"] > c * (1 + 0.01):
            out.append(f"{name}: {b['requests_per_s'] * b['e2e_mean_s']:.4g} requests in flight with {c:g} clients")
        if fixed_osl is not None and fixed_osl > 1 and isinstance(b.get("tpot_mean_s"), float):
            want = b["ttft_mean_s"] + (fixed_osl - 1) * b["tpot_mean_s"]
            if abs(b["e2e_mean_s"] / want - 1.0) > 1e-6:
                out.append(f"{name}: mean latency {b['e2e_mean_s']:.6g} s, TTFT + (OSL - 1) TPOT {want:.6g} s")
    return out


@settings(max_examples=40, **CI)
@given(argv=simulator_argv())
def test_fuzz_simulator(argv):
    r, problems = run_invocation("serving", argv, timeout_s=60)
    assert not problems, (argv, problems, r.err[:500])
    if r.rc == 0:
        data = json.loads(r.out)
        osl = None if ("--osl-dist" in argv or "--workload" in argv) else int(argv[argv.index("--osl") + 1])
        assert not simulated_laws(data, osl), (argv, simulated_laws(data, osl))


def test_the_laws_catch_a_broken_run():
    """The judge is not vacuous: a run whose latency misses TTFT + (OSL - 1) TPOT, or that holds more requests
    than its clients, is reported."""
    block = dict(ttft_p50_s=0.1, ttft_p90_s=0.2, ttft_p99_s=0.3, tpot_p50_s=0.01, tpot_p90_s=0.01, tpot_p99_s=0.01,
                 e2e_p50_s=1.0, e2e_p90_s=1.1, e2e_p99_s=1.2, ttft_mean_s=0.1, tpot_mean_s=0.01, e2e_mean_s=1.09,
                 requests_per_s=7.0, requests=100)
    good = {"serving": {"concurrency": 8, "baseline": {"simulated": block}}}
    assert simulated_laws(good, 100) == []  # 0.1 + 99 x 0.01 = 1.09; 7 x 1.09 = 7.63 in flight <= 8
    late = {"serving": {"concurrency": 8, "baseline": {"simulated": dict(block, e2e_mean_s=1.2)}}}
    assert any("TTFT + (OSL - 1) TPOT" in p for p in simulated_laws(late, 100))
    crowded = {"serving": {"concurrency": 4, "baseline": {"simulated": block}}}
    assert any("in flight" in p for p in simulated_laws(crowded, 100))

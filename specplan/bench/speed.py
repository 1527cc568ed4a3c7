"""`specplan bench-speed`: the CPU seconds of the commands users wait for, each as a ratio to a fixed numpy
reference computation timed on the same machine, with the top cProfile entries of each; written into
docs/performance.md between its generated-table markers (`scripts/bench_speed.py` calls `main`).

Each command runs as `python -m specplan ...` in a fresh process (imports included: what a user waits for), after
one untimed warm-up run (bytecode compiled and cached, files in the page cache); the figure kept is the fewest
CPU seconds (user + system of the child, `resource.getrusage(RUSAGE_CHILDREN)`) of `repeat` runs: CPU time is the
stable figure on a shared machine, wall time is printed beside it. The reference computation (sorting a fixed
array of 2**21 seeded random floats, 5 times, and a 512 x 512 float64 matmul, 20 times) is timed in this process
before and after the commands (the fewest CPU seconds of each set); a command's ratio is its CPU seconds over the
reference's, a figure that moves with the code rather than with the machine.
"""

from __future__ import annotations

import argparse
import io
import os
import pstats
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from specplan.core.records import record

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "performance.md"
BEGIN, END = "<!-- bench-speed:begin -->", "<!-- bench-speed:end -->"

STEP_PARETO = ["pareto", "--model", "llama-3.3-70b", "--hardware", "h100-sxm", "--hardware", "h200-sxm", "--hardware",
               "b200", "--tp", "1,2,4,8", "-c", "1k,4k,8k,32k,128k", "--max-draft-len", "16", "--mechanisms",
               "eagle3,dflash,ngram", "--acceptance", "eagle3=0.8", "--acceptance", "dflash=0.7", "--acceptance",
               "ngram=0.4", "--no-progress"]
STEP_PARETO_POINTS = 270_480  # 3 devices x 4 TP x 5 contexts x (1 + 16 x 3) D-mechanism rows x 92 batch values
# issue 38's deployment search over TP / DEP / TEP layouts and xPyD pools of their own layouts (--hardware follows)
MOE_SEARCH = ("recommend", "--model", "deepseek-r1", "--isl", "4096", "--osl", "1024", "--max-ttft-ms", "2000",
              "--max-tpot-ms", "50", "--mechanisms", "mtp", "--json", "--hardware")


@record
class Command:
    """One timed command: a name, its argv after `specplan` (OUT: a fresh output folder), the issue's budget."""

    name: str
    argv: tuple
    budget: str = ""
    points: int = 0  # grid points it computes (points/s), 0 when not a grid


COMMANDS = (
    Command("cold recommend (README main job)",
            ("recommend", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--context", "4096",
             "--target-tps-per-user", "150", "--mechanisms", "eagle3,dflash,ngram", "--acceptance", "eagle3=0.8",
             "--acceptance", "dflash=0.7", "--acceptance", "ngram=0.4"), "<= 0.35 s"),
    Command("step pareto, 270,480 points, --no-plots", (*STEP_PARETO, "--no-plots", "--timings", "-o", "OUT"),
            ">= 500k points/s (the work: sweep, frontier, tables)", STEP_PARETO_POINTS),
    Command("step pareto, --figures all", (*STEP_PARETO, "--figures", "all", "-o", "OUT"), "(6.4 s before)"),
    Command("recommend --gpus 8, EAGLE-3, fp8 and bf16",
            ("recommend", "-m", "llama-3.3-70b", "-H", "h100-sxm", "--gpus", "8", "--isl", "2048", "--osl", "512",
             "--engine", "vllm", "--dtypes", "fp8,bf16", "--mechanisms", "eagle3", "--acceptance", "eagle3=0.7",
             "--max-ttft-ms", "1000", "--max-tpot-ms", "30"), "<= 1.5 s"),
    Command("serving pareto, Llama-3.1-8B, H100 + B200, TP 1-8, ISL/OSL 1024",
            ("pareto", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-H", "b200", "--tp", "1,2,4,8", "--isl", "1024",
             "--osl", "1024", "--no-plots", "--no-progress", "-o", "OUT"), "<= 5 s"),
    Command("study g_sweep_long_context", ("study", "examples/studies/g_sweep_long_context.yaml", "-o", "OUT"),
            "(5.8 s before)"),
    Command("recommend --gpus 32, DeepSeek-R1, H200, MTP (issue 38)", (*MOE_SEARCH, "h200-sxm", "--gpus", "32"),
            "< 3 s (issue 38)"),
    Command("recommend --gpus 72, DeepSeek-R1, GB200, MTP (issue 38)", (*MOE_SEARCH, "gb200", "--gpus", "72"),
            "< 5 s (issue 38)"),
)


@record
class Timing:
    """CPU and wall seconds of one command (the fewest of its runs), and what --timings printed."""

    command: Command
    cpu_s: float
    wall_s: float
    work_s: float | None = None  # the pareto's own --timings figure (sweep + frontier + tables), CPU s
    failed: str = ""


def reference_s(repeat: int = 3) -> float:
    """CPU seconds of the fixed reference computation (the fewest of `repeat`)."""
    import numpy as np

    a = np.random.default_rng(0).random(2 ** 21)
    m = np.random.default_rng(1).random((512, 512))
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for _ in range(5):
            np.sort(a)
        for _ in range(20):
            m @ m
        best = min(best, time.process_time() - t0)
    return best


def _env() -> dict:
    """The children's environment: bytecode written and read (a user's installation caches it), one BLAS thread."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(v, "1")
    return env


def _argv(cmd: Command, out: Path) -> list[str]:
    return [str(out) if a == "OUT" else a for a in cmd.argv]


def run_once(cmd: Command, timeout_s: float, prefix: tuple = ("-m", "specplan")) -> tuple[float, float, str]:
    """(CPU s, wall s, stdout) of one run of `cmd` in a fresh process and output folder."""
    with tempfile.TemporaryDirectory(prefix="specplan-bench-") as d:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, *prefix, *_argv(cmd, Path(d) / "out")], capture_output=True, text=True,
                           cwd=ROOT, env=_env(), timeout=timeout_s)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd.name}: exit {p.returncode}: {p.stderr.strip()[-300:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, p.stdout


def time_command(cmd: Command, repeat: int, timeout_s: float) -> Timing:
    """The fewest CPU seconds of `repeat` runs after one warm-up run (and the wall seconds of that run)."""
    try:
        run_once(cmd, timeout_s)
        runs = [run_once(cmd, timeout_s) for _ in range(repeat)]
    except subprocess.TimeoutExpired:
        return Timing(cmd, float("nan"), float("nan"), failed=f"over {timeout_s:.0f} s")
    except RuntimeError as exc:
        return Timing(cmd, float("nan"), float("nan"), failed=str(exc))
    cpu, wall, out = min(runs, key=lambda r: r[0])
    m = re.search(r"the command's work ([0-9.]+)", out)
    return Timing(cmd, cpu, wall, float(m.group(1)) if m else None)


# `python -c _PROFILED OUT ARGS`: `specplan ARGS` as the program runs it (`python -m specplan`, so the CLI imports
# only that command's module), under cProfile, the stats dumped to OUT; the exit code kept.
_PROFILED = """import cProfile, runpy, sys
out, sys.argv = sys.argv[1], ["specplan", *sys.argv[2:]]
prof, code = cProfile.Profile(), 0
prof.enable()
try:
    runpy.run_module("specplan", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
finally:
    prof.disable()
    prof.dump_stats(out)
sys.exit(code)
"""


def profile_summary(cmd: Command, timeout_s: float, top: int = 12) -> str:
    """The top `top` of specplan's functions by cumulative time and the top `top // 2` of all functions by own
    time, of one run under cProfile, as text."""
    with tempfile.TemporaryDirectory(prefix="specplan-prof-") as d:
        prof = Path(d) / "run.prof"
        try:
            run_once(cmd, timeout_s, prefix=("-c", _PROFILED, str(prof)))
        except (subprocess.TimeoutExpired, RuntimeError) as exc:
            return f"(no profile: {exc})"
        parts = []
        for sort, pattern, n in (("cumulative", r"specplan/(?!cli/__init__|__main__)", top), ("tottime", "", top // 2)):
            buf = io.StringIO()
            pstats.Stats(str(prof), stream=buf).sort_stats(sort).print_stats(pattern, n)
            lines = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
            start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls")), 0)
            if not parts:
                parts.append(next((ln.strip() for ln in lines if "function calls" in ln), ""))
            parts.append(f"-- by {sort}" + (" (specplan's functions)" if pattern else " (all functions)"))
            parts += [re.sub(r"\S*/(site-packages|lib/python[0-9.]+)/", "", re.sub(r"\S*/specplan/", "specplan/", ln))
                      for ln in lines[start:]]
    return "\n".join(parts)


def table(timings: list[Timing], ref_s: float) -> str:
    """The markdown table of the timings."""
    rows = ["| command | CPU s | wall s | CPU / reference | budget (issue 43 unless named) | note |", "|---|---:|---:|---:|---|---|"]
    for t in timings:
        if t.failed:
            rows.append(f"| {t.command.name} | – | – | – | {t.command.budget} | {t.failed} |")
            continue
        note = ""
        if t.work_s is not None and t.command.points:
            note = (f"work (sweep + frontier + tables) {t.work_s:.2f} CPU s: "
                    f"{t.command.points / max(t.work_s, 1e-9) / 1e3:,.0f}k points/s")
        rows.append(f"| {t.command.name} | {t.cpu_s:.2f} | {t.wall_s:.2f} | {t.cpu_s / ref_s:.1f} | "
                    f"{t.command.budget} | {note} |")
    return "\n".join(rows)


def report(timings: list[Timing], ref: tuple[float, float], profiles: dict[str, str]) -> str:
    """The generated part of docs/performance.md."""
    import platform

    ref_s = min(ref)
    out = [f"Measured by `specplan bench-speed` on {platform.machine()} with {os.cpu_count()} CPUs, Python "
           f"{platform.python_version()}; reference computation {ref[0]:.3f} CPU s before the commands, "
           f"{ref[1]:.3f} s after (the ratios use the smaller). Each figure is the fewest CPU seconds of the runs "
           f"(after a warm-up run; the whole command in a fresh process, imports included).", "", table(timings, ref_s)]
    for name, text in profiles.items():
        out += ["", f"### cProfile: {name}", "", "```", text, "```"]
    return "\n".join(out)


def write_doc(generated: str, path: Path = DOC) -> None:
    """Put `generated` between the markers of `path` (appended with the markers when they are missing)."""
    from specplan.core.io import atomic_write_text

    text = path.read_text() if path.is_file() else "# Performance\n"
    block = f"{BEGIN}\n{generated}\n{END}"
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    atomic_write_text(path, text)


def run(names: list[str] | None = None, repeat: int = 3, timeout_s: float = 600.0, profiles: bool = True,
        doc: Path | None = DOC, log=print) -> str:
    """Time the commands (all, or those whose name contains one of `names`), profile each, write the report into
    `doc` (None: not written); the report text."""
    cmds = [c for c in COMMANDS if not names or any(n in c.name for n in names)]
    ref0 = reference_s()
    log(f"reference computation: {ref0:.3f} CPU s")
    timings, profs = [], {}
    for c in cmds:
        t = time_command(c, repeat, timeout_s)
        log(f"{c.name}: " + (t.failed if t.failed else f"{t.cpu_s:.2f} CPU s, {t.wall_s:.2f} wall s"
                             + (f", work {t.work_s:.2f} CPU s" if t.work_s is not None else "")))
        timings.append(t)
        if profiles and not t.failed:
            profs[c.name] = profile_summary(c, timeout_s)
    ref1 = reference_s()
    text = report(timings, (ref0, ref1), profs)
    if doc is not None:
        write_doc(text, doc)
        log(f"wrote {doc}")
    return text


def main(argv: list[str] | None = None) -> int:
    """`python scripts/bench_speed.py [--only NAME ...] [--repeat N] [--no-profiles] [--no-doc]`."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", action="append", help="time only the commands whose name contains this; repeat")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per command (the fewest CPU seconds kept)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per run")
    ap.add_argument("--no-profiles", action="store_true", help="no cProfile run per command")
    ap.add_argument("--no-doc", action="store_true", help="print the report, do not write docs/performance.md")
    a = ap.parse_args(argv)
    text = run(a.only, a.repeat, a.timeout, not a.no_profiles, None if a.no_doc else DOC)
    if a.no_doc:
        print(text)
    return 0

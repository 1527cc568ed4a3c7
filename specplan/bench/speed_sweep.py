"""Benchmark: grid points per second of `specplan.planning.sweep.sweep` + `specplan.planning.frontier.frontier`, file writing
excluded, for qwen3.5-122b-a10b and deepseek-v3 on ~6.9 million points each:
128 batch x 33 D (0..32) x 7 mechanisms x 6 layouts (tp1, tp2, tp4, tp8, tp8ep8, dp8ep8) x 8 contexts x 5 devices
(the D = 0 baseline is evaluated once per device/layout/context/batch, so 128 x (1 + 32 x 7) x 6 x 8 x 5 = 6.9 M
rows).

Run single-threaded: `OMP_NUM_THREADS=1 python scripts/bench_sweep.py` (the script also pins BLAS threads and,
on Linux, the CPU affinity to one core). Reports wall seconds, process CPU seconds (time.process_time: the
figure to quote on a loaded machine), points per wall and per CPU second, and peak RSS (ru_maxrss).

`--pareto` times the whole `specplan pareto` command instead (a subprocess: imports, sweep, frontier, the
default outputs — grid Parquet, frontier and best-at-interactivity CSV, the frontier figure as PNG —; with
--no-plots; and with everything: --figures all --grid-csv --formats png,svg) on PARETO_ARGS (181,584 points), next to its sweep + frontier alone in a fresh process, in wall and process CPU seconds (CPU time is
the stable figure on a shared machine); `--repeat N` keeps the fastest of N interleaved runs of each.
"""

from __future__ import annotations

import os
import re

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

CONTEXTS = [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]
DEVICES = ["h100-sxm", "h200-sxm", "b200", "gb200", "mi300x"]
LAYOUTS = ["tp1", "tp2", "tp4", "tp8", "tp8ep8", "dp8ep8"]
CASES = {
    "qwen3.5-122b-a10b": dict(
        mechanisms=["eagle3", "mtp", "dflash", "dspark", "ngram", "self", "external"],
        acceptance={"eagle3": 0.7, "mtp": 0.8, "dflash": 0.75, "dspark": 0.78, "ngram": 0.4, "self": 0.6},
        draft_model="qwen3.5-35b-a3b"),
    "deepseek-v3": dict(
        mechanisms=["eagle3", "mtp", "dflash", "dspark", "ngram", "self", "medusa"],
        acceptance={"eagle3": 0.7, "mtp": 0.8, "dflash": 0.75, "dspark": 0.78, "ngram": 0.4, "self": 0.6,
                    "medusa": 0.6}),
}


PARETO_ARGS = ["--model", "qwen3.5-122b-a10b", "-H", "b200", "-H", "h200-sxm", "--batch-max", "256",
               "--max-draft-len", "32", "--mechanisms", "mtp,dflash,ngram", "--acceptance", "mtp=0.8",
               "--acceptance", "dflash=0.75", "--acceptance", "ngram=0.4", "--tp", "1,2,4,8",
               "--context", "8k,32k,128k", "--no-progress"]


# What a fresh `specplan pareto` process imports before it does any work (start-up, counted apart).
STARTUP_NO_MPL = ("import specplan.cli, specplan.cli.sweep_cmd, specplan.planning.sweep, specplan.planning.frontier, "
                  "specplan.core.io, pandas, pyarrow.csv, pyarrow.parquet")
STARTUP_IMPORTS = STARTUP_NO_MPL + ", specplan.plots"

# PARETO_ARGS' sweep + frontier alone in a fresh process after the same imports (profiles loaded by id, as
# the command does): the CPU seconds of the two calls, as JSON on stdout.
SWEEP_ONLY = STARTUP_NO_MPL + """
import json, time
from specplan.cli.parsing import int_list, mech_values
from specplan.planning.frontier import frontier
from specplan.planning.sweep import sweep
c0, w0 = time.process_time(), time.perf_counter()
from specplan.planning.sweep import SweepAxes
from specplan.speculation.spec import DraftSearch
df = sweep("qwen3.5-122b-a10b", ["b200", "h200-sxm"],
           axes=SweepAxes(batch_max=256, tp=[1, 2, 4, 8], contexts=int_list(["8k,32k,128k"], "--context")),
           drafts=DraftSearch(["mtp", "dflash", "ngram"],
                              mech_values(["mtp=0.8", "dflash=0.75", "ngram=0.4"], "MECH=VALUE"), 32), progress=False)
frontier(df)
print(json.dumps({"cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - w0, "points": len(df)}))
"""


def _child(cmd: list[str]) -> tuple[float, float, str]:
    """(wall s, CPU s of the child, its stdout) of one subprocess run."""
    import subprocess

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    wall = time.perf_counter() - w0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), out


def bench_pareto(repeat: int = 1) -> dict:
    """Wall and CPU seconds of the whole pareto command, with and without plots (and with SVG too), of the
    start-up imports, and of its sweep + frontier alone, each in a fresh process; with `repeat` > 1 each is
    run that many times, interleaved, and the fastest run is kept (a shared machine only ever adds time)."""
    import tempfile

    runs = {"sweep_frontier": [sys.executable, "-c", SWEEP_ONLY],
            "startup_imports": [sys.executable, "-c", STARTUP_IMPORTS],
            "startup_imports_no_mpl": [sys.executable, "-c", STARTUP_NO_MPL],
            "pareto_tables_only": ["--no-plots"], "pareto": [],
            "pareto_everything": ["--figures", "all", "--grid-csv", "--formats", "png,svg"]}
    best: dict[str, tuple[float, float]] = {}
    out: dict = {"repeat": repeat}
    for _ in range(repeat):
        for name, extra in runs.items():
            with tempfile.TemporaryDirectory() as tmp:
                is_pareto = name.startswith("pareto")
                cmd = [sys.executable, "-m", "specplan", "pareto", *PARETO_ARGS, *extra, "--timings", "-o", tmp] \
                    if is_pareto else extra
                wall, cpu, text = _child(cmd)
                if name == "sweep_frontier":  # its own timing, imports excluded
                    rec = json.loads(text)
                    wall, cpu, out["points"] = rec["wall_s"], rec["cpu_s"], rec["points"]
                if is_pareto:
                    out[f"{name}_files"] = sorted(p.name for p in os.scandir(tmp) if not p.name.endswith(".md"))
                    line = next(x for x in text.splitlines() if x.startswith("timings"))
                    if name not in best or cpu < best[name][1]:  # the in-process phases of the fastest run
                        out[f"{name}_timings"] = line
                        out[f"{name}_in_process_ratio"] = float(re.search(r"= ([\d.]+)x", line).group(1))
            b = best.get(name)
            best[name] = (min(wall, b[0]), min(cpu, b[1])) if b else (wall, cpu)
    n = out["points"]
    for name, (wall, cpu) in best.items():
        out.update({f"{name}_wall_s": round(wall, 2), f"{name}_cpu_s": round(cpu, 2)})
        if name.startswith("pareto"):
            out[f"{name}_points_per_cpu_s"] = round(n / cpu)
    out["sweep_frontier_points_per_cpu_s"] = round(n / best["sweep_frontier"][1])
    # The command's own work: its CPU time less a fresh interpreter's start-up and imports of the same modules
    # (matplotlib included only where the command plots), against sweep + frontier (fresh process, imports
    # excluded).
    sweep_cpu = best["sweep_frontier"][1]
    for name, start in (("pareto_tables_only", "startup_imports_no_mpl"), ("pareto", "startup_imports"),
                        ("pareto_everything", "startup_imports")):
        work = best[name][1] - best[start][1]
        out[f"{name}_work_cpu_s"] = round(work, 2)
        out[f"{name}_work_over_sweep_frontier"] = round(work / sweep_cpu, 2)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=list(CASES))
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--max-draft-len", type=int, default=32)
    ap.add_argument("--json", action="store_true", help="print one JSON line per model")
    ap.add_argument("--pareto", action="store_true", help="time the whole pareto command (see the module doc)")
    ap.add_argument("--repeat", type=int, default=1, help="--pareto: runs of each measurement, fastest kept")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    if args.pareto:
        print(json.dumps(bench_pareto(args.repeat)))
        return
    from specplan.planning.frontier import frontier
    from specplan.planning.sweep import SweepAxes, sweep
    from specplan.speculation.spec import DraftPlacement, DraftSearch

    # Warm-up (imports, profile loading) outside the timing.
    sweep("llama-3.1-8b", "h100-sxm", axes=SweepAxes(batch=[1, 2], tp=[1]),
          drafts=DraftSearch(max_draft_len=1, mechanisms=["ngram"], acceptance={"ngram": 0.5}), progress=False)
    for model in args.models:
        case = CASES[model]
        t0, c0 = time.perf_counter(), time.process_time()
        df = sweep(model, DEVICES,
                   axes=SweepAxes(batch=list(range(1, args.batch + 1)), layouts=LAYOUTS, contexts=CONTEXTS),
                   drafts=DraftSearch(case["mechanisms"], case["acceptance"], args.max_draft_len),
                   draft=DraftPlacement(case.get("draft_model")), progress=False)
        t1 = time.perf_counter()
        front = frontier(df)
        t2, c2 = time.perf_counter(), time.process_time()
        peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9
        n = len(df)
        rec = {"model": model, "points": n, "sweep_s": round(t1 - t0, 3), "frontier_s": round(t2 - t1, 3),
               "total_s": round(t2 - t0, 3), "cpu_s": round(c2 - c0, 3), "points_per_s": round(n / (t2 - t0)),
               "points_per_cpu_s": round(n / (c2 - c0)), "frontier_rows": len(front),
               "feasible": int(df["fits"].sum()), "peak_rss_gb": round(peak_gb, 2)}
        if args.json:
            print(json.dumps(rec))
        else:
            print(f"{model}: {n:,} points ({rec['feasible']:,} feasible) in {rec['total_s']:.2f} s wall, "
                  f"{rec['cpu_s']:.2f} s CPU (sweep {rec['sweep_s']:.2f} s, frontier {rec['frontier_s']:.2f} s) = "
                  f"{rec['points_per_s'] / 1e6:.2f} M points/s wall, {rec['points_per_cpu_s'] / 1e6:.2f} M per CPU "
                  f"second; peak RSS {peak_gb:.2f} GB")
        del df, front
        sys.stdout.flush()


if __name__ == "__main__":
    main()

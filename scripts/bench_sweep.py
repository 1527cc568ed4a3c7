"""Benchmark: grid points per second of `specplan.sweep.sweep` + `specplan.frontier.frontier`, file writing
excluded, for qwen3.5-122b-a10b and deepseek-v3 on ~6.9 million points each:
128 batch x 33 D (0..32) x 7 mechanisms x 6 layouts (tp1, tp2, tp4, tp8, tp8ep8, dp8ep8) x 8 contexts x 5 devices
(the D = 0 baseline is evaluated once per device/layout/context/batch, so 128 x (1 + 32 x 7) x 6 x 8 x 5 = 6.9 M
rows).

Run single-threaded: `OMP_NUM_THREADS=1 python scripts/bench_sweep.py` (the script also pins BLAS threads and,
on Linux, the CPU affinity to one core). Reports wall seconds, process CPU seconds (time.process_time: the
figure to quote on a loaded machine), points per wall and per CPU second, and peak RSS (ru_maxrss).

`--pareto` times the whole `specplan pareto` command instead (a subprocess: imports, sweep, frontier, the CSV +
Parquet tables and the five plots) on PARETO_ARGS (~0.3 M points), next to its sweep + frontier alone, in wall
and process CPU seconds (CPU time is the stable figure on a shared machine).
"""

from __future__ import annotations

import os

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
STARTUP_NO_MPL = ("import specplan.cli, specplan.cli.sweep_cmd, specplan.sweep, specplan.frontier, "
                  "specplan.io, pandas, pyarrow.csv, pyarrow.parquet")
STARTUP_IMPORTS = STARTUP_NO_MPL + ", specplan.plots"


def bench_pareto() -> dict:
    """Wall and CPU seconds of the whole pareto command (subprocess) and of its sweep + frontier in-process."""
    import subprocess
    import tempfile

    from specplan.cli.parsing import int_list, mech_values
    from specplan.frontier import frontier
    from specplan.sweep import sweep

    a = PARETO_ARGS
    hws = [a[i + 1] for i, x in enumerate(a) if x == "-H"]
    acc = mech_values([a[i + 1] for i, x in enumerate(a) if x == "--acceptance"], "MECH=VALUE")
    kw = dict(batch_max=256, max_draft_len=32, mechanisms=["mtp", "dflash", "ngram"], acceptance=acc,
              tp=[1, 2, 4, 8], contexts=int_list(["8k,32k,128k"], "--context"), progress=False)
    w0, c0 = time.perf_counter(), time.process_time()
    df = sweep("qwen3.5-122b-a10b", hws, **kw)
    frontier(df)
    sweep_wall, sweep_cpu = time.perf_counter() - w0, time.process_time() - c0
    n = len(df)
    out = {"points": n, "sweep_frontier_wall_s": round(sweep_wall, 2), "sweep_frontier_cpu_s": round(sweep_cpu, 2)}
    runs = (("startup_imports", ["-c", STARTUP_IMPORTS], False), ("startup_imports_no_mpl", ["-c", STARTUP_NO_MPL],
            False), ("pareto_tables_only", ["--no-plots"], True), ("pareto", [], True))
    for name, extra, is_pareto in runs:
        with tempfile.TemporaryDirectory() as tmp:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            w0 = time.perf_counter()
            cmd = [sys.executable, "-m", "specplan", "pareto", *a, *extra, "-o", tmp] if is_pareto else \
                [sys.executable, *extra]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            wall = time.perf_counter() - w0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            out["tables"] = sorted(p.name for p in os.scandir(tmp) if p.name.endswith((".csv", ".parquet")))
        out.update({f"{name}_wall_s": round(wall, 2), f"{name}_cpu_s": round(cpu, 2)})
        if is_pareto:
            out[f"{name}_points_per_cpu_s"] = round(n / cpu)
    # The command's own work: its CPU time less a fresh interpreter's start-up and imports of the same modules
    # (matplotlib included only where the command plots), against sweep + frontier in-process.
    for name, start in (("pareto_tables_only", "startup_imports_no_mpl"), ("pareto", "startup_imports")):
        work = out[f"{name}_cpu_s"] - out[f"{start}_cpu_s"]
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
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    if args.pareto:
        print(json.dumps(bench_pareto()))
        return
    from specplan.frontier import frontier
    from specplan.sweep import sweep

    # Warm-up (imports, profile loading) outside the timing.
    sweep("llama-3.1-8b", "h100-sxm", batch=[1, 2], max_draft_len=1, mechanisms=["ngram"],
          acceptance={"ngram": 0.5}, tp=[1], progress=False)
    for model in args.models:
        case = CASES[model]
        t0, c0 = time.perf_counter(), time.process_time()
        df = sweep(model, DEVICES, batch=list(range(1, args.batch + 1)), max_draft_len=args.max_draft_len,
                   layouts=LAYOUTS, contexts=CONTEXTS, progress=False, **case)
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

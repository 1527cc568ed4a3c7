"""Run specplan's CLI in-process (sys.argv patched, SystemExit caught) and judge the outcome.

A subprocess per invocation would cost about a second of imports each; `run_cli` costs only the command.
`judge` returns the list of problems of one run (empty = fine):

- a traceback (any exception escaping `specplan.cli.main` other than SystemExit);
- a hang (the run exceeded its time limit; SIGALRM interrupts it);
- a non-zero exit without exactly one line on stderr (exit 2 = bad input) or with an unexpected code;
- a non-finite number (nan, inf, JSON null in place of a number) or an overflowed integer column in stdout or in
  any file the run wrote;
- code execution (a canary file created by a YAML payload);
- a closed-loop serving answer in --json output that breaks Little's law (requests/s x latency = concurrency
  within 1 %, `littles_law`).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

# How Python and numpy print a non-finite float in plain text (JSON and YAML output are parsed instead).
PLAIN_NONFINITE = re.compile(r"(?<![\w.-])[-+]?(nan|inf)(?![\w.])")
INT_COLUMNS = ("batch", "context_len", "draft_len", "tp", "target_devices", "draft_devices")


class Hang(Exception):
    """The run exceeded its time limit."""


@dataclass
class Result:
    argv: list
    rc: int | None
    out: str
    err: str
    seconds: float
    exc: str = ""  # traceback text of an escaped exception
    hang: bool = False
    problems: list = field(default_factory=list)


def _alarm(signum, frame):
    raise Hang()


def run_cli(argv: list[str], timeout_s: float = 60.0) -> Result:
    """Run `specplan ARGV` in this process with a time limit; stdout/stderr captured."""
    from specplan.cli import main

    out, err = io.StringIO(), io.StringIO()
    old_argv, old_handler = sys.argv, signal.signal(signal.SIGALRM, _alarm)
    sys.argv = ["specplan", *[str(a) for a in argv]]
    t0 = time.perf_counter()
    rc, exc, hang = None, "", False
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            main()
        rc = 0
    except SystemExit as e:
        rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Hang:
        hang = True
    except KeyboardInterrupt:  # the fuzz run itself was interrupted
        raise
    except BaseException:  # noqa: BLE001 - any escaped exception is a finding
        exc = traceback.format_exc()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        sys.argv = old_argv
    import matplotlib.pyplot as plt  # figures a failed run left open would pile up

    plt.close("all")
    return Result(list(argv), rc, out.getvalue(), err.getvalue(), time.perf_counter() - t0, exc, hang)


def _walk_json(v, path=""):
    """Non-finite floats anywhere in parsed JSON (NaN / inf literals)."""
    if isinstance(v, float) and not math.isfinite(v):
        yield f"{path}: {v}"
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from _walk_json(x, f"{path}.{k}")
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _walk_json(x, f"{path}[{i}]")


# Results that step / predict / recommend always have: null here is a NaN that reached the output.
RESULT_KEYS = frozenset({"step_ms", "verify_ms", "draft_ms", "speedup", "acceptance_length", "break_even_al",
                         "tokens_per_s_per_user", "tokens_per_s_per_gpu", "total_gb", "weights_gb", "kv_cache_gb"})


def _null_results(v, path=""):
    """Results that are null where every run has them; a serving row that says why it has none (an unstable
    open loop: no throughput or latency; OSL 1: no TPOT) in its `note` is an answer, not a NaN that got out."""
    if isinstance(v, dict):
        said = v.get("stable") is False or isinstance(v.get("note"), str)
        for k, x in v.items():
            if x is None and k in RESULT_KEYS and not said:
                yield f"{path}.{k}"
            else:
                yield from _null_results(x, f"{path}.{k}")
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _null_results(x, f"{path}[{i}]")


LITTLE_JUDGE = True  # off only to see the other findings of a run while the serving loop is being fixed
LITTLE_TOL = 0.01  # closed loop: requests/s x request latency = concurrency within 1 %


def littles_law(data) -> list[str]:
    """Closed-loop serving answers that break Little's law, X·L = C (issue 25): predict's serving block (each
    stable baseline / speculative row at its concurrency) and recommend's ranked serving rows (aggregated, where
    X = tokens/s/GPU · TP / OSL and L = TTFT + (OSL − 1)·TPOT)."""
    out = []
    if not isinstance(data, dict):
        return out
    srv = data.get("serving")
    blocks = srv.get("points") if isinstance(srv, dict) and isinstance(srv.get("points"), list) else [srv]
    for s in blocks:  # predict's one load, or each of its concurrencies (--concurrency 1,8,64)
        if not (isinstance(s, dict) and isinstance(s.get("concurrency"), (int, float))):
            continue
        if s.get("method") == "simulated":  # a finite run (start-up and drain): judged by simulated_laws
            continue
        for name in ("baseline", "speculative"):
            x = s.get(name)
            if not isinstance(x, dict) or not x.get("stable", True) or not isinstance(x.get("requests_per_s"), float):
                continue
            lat = x.get("request_latency_ms")
            if isinstance(lat, (int, float)):
                n = x["requests_per_s"] * lat / 1e3
                if abs(n / s["concurrency"] - 1.0) > LITTLE_TOL:
                    out.append(f"Little's law: serving.{name} requests/s x latency = {n:.6g} in flight at "
                               f"concurrency {s['concurrency']:g}")
    if isinstance(data.get("ranked"), list) and isinstance(data.get("osl"), int) and data.get("mode") == "agg":
        tp, osl = data.get("tp") or 1, data["osl"]
        for i, r in enumerate(data["ranked"]):
            try:
                x = r["tokens_per_s_per_gpu"] * tp / osl
                lat = (r["ttft_ms"] + (osl - 1) * r["tpot_ms"]) / 1e3 if osl > 1 else r["ttft_ms"] / 1e3
                c = r["concurrency"]
            except (KeyError, TypeError):
                continue
            if r.get("feasible") and c and abs(x * lat / c - 1.0) > LITTLE_TOL:
                out.append(f"Little's law: ranked[{i}] requests/s x latency = {x * lat:.6g} in flight at "
                           f"concurrency {c:g}")
    if isinstance(data.get("layouts"), list) and isinstance(data.get("osl"), int):  # recommend --gpus (issue 44)
        osl = data["osl"]
        for x in data["layouts"]:
            b = x.get("best") if isinstance(x, dict) else None
            if not isinstance(b, dict) or not isinstance(x.get("tokens_per_s"), float) or osl < 2:
                continue
            n = x["tokens_per_s"] / osl * (b["ttft_ms"] + (osl - 1) * b["tpot_ms"]) / 1e3  # the whole budget's
            if abs(n / x["total_concurrency"] - 1.0) > LITTLE_TOL:
                out.append(f"Little's law: layout {x.get('layout')} requests/s x latency = {n:.6g} in flight at "
                           f"concurrency {x['total_concurrency']:g}")
    return out


def check_text(text: str, where: str, echo: frozenset = frozenset(), results: bool = False) -> list[str]:
    """Problems in printed or written text: non-finite numbers in JSON or YAML output, `nan` / `inf` tokens in
    plain text (tokens in `echo`, text the user gave, e.g. a kernel named 'inf' in a measured table, excepted)."""
    s = text.strip()
    data = None
    if s[:1] in "[{":
        try:
            data = json.loads(s)
        except ValueError:
            data = None
    if data is None and s and re.match(r"^[\w-]+:( |$)", s):  # YAML (profiles show, model import)
        try:
            import yaml

            data = yaml.safe_load(s)
        except yaml.YAMLError:
            data = None
    if isinstance(data, (dict, list)):
        return [f"{where}: non-finite {p}" for p in _walk_json(data)] + [
            f"{where}: {p} is null (a result every run has)" for p in (_null_results(data) if results else ())] + [
            f"{where}: {p}" for p in (littles_law(data) if results and LITTLE_JUDGE else ())]
    for m in PLAIN_NONFINITE.finditer(text):
        if m.group(0).lstrip("-+") in echo:
            continue
        a, b = text.rfind("\n", 0, m.start()) + 1, text.find("\n", m.end())
        return [f"{where}: non-finite token '{m.group(0)}' in: {text[a:b if b >= 0 else None][:160]}"]
    return []


def _is_number(cell: str) -> bool:
    try:
        return math.isfinite(float(cell))
    except ValueError:
        return False


def check_file(path: Path, echo: frozenset = frozenset()) -> list[str]:
    """Problems in one written file: non-finite cells of numeric CSV columns, negative integer grid columns,
    non-finite numbers in JSON / YAML files."""
    if path.suffix in (".png", ".svg", ".parquet"):
        return [f"{path}: empty file"] if path.stat().st_size == 0 else []
    try:
        text = path.read_text()
    except (UnicodeDecodeError, OSError) as exc:
        return [f"{path}: unreadable ({exc})"]
    if not path.name.endswith(".csv"):
        return check_text(text, str(path), echo)
    import csv

    rows = list(csv.reader(text.splitlines()))
    if len(rows) < 2:
        return []
    head, body = rows[0], rows[1:]
    for j, col in enumerate(head):
        cells = [r[j] for r in body if j < len(r)]
        numeric = sum(_is_number(c) for c in cells) > len(cells) // 2  # a number column (not a name column)
        for c in cells:
            if numeric and c.strip().lower() in ("nan", "inf", "-inf", "infinity", "-infinity"):
                return [f"{path}: non-finite {col} '{c}'"]
            if col in INT_COLUMNS and c.startswith("-"):
                return [f"{path}: negative {col} {c}"]
    return []


def judge(r: Result, outdir: Path | None = None, canary: Path | None = None, allowed_rc=(0, 1, 2),
          inputs: str = "") -> list[str]:
    """The problems of one run (see the module docstring); `inputs`: the text of the argv and input files.
    step / predict / recommend JSON must have every result in RESULT_KEYS (null = a NaN that got out)."""
    echo = frozenset(m.group(1) for m in PLAIN_NONFINITE.finditer(inputs))
    probs = []
    if r.hang:
        probs.append(f"hang (> limit, {r.seconds:.0f} s)")
    if r.exc:
        probs.append("traceback: " + r.exc.strip().splitlines()[-1])
    if r.rc is not None and r.rc not in allowed_rc:
        probs.append(f"exit code {r.rc}")
    if r.rc == 2:
        lines = [ln for ln in r.err.splitlines() if ln.strip()]
        if len(lines) != 1:
            probs.append(f"exit 2 with {len(lines)} stderr lines: {r.err[:300]!r}")
        elif len(lines[0]) > 2000:
            probs.append(f"exit 2 with a {len(lines[0])}-character error line")
        if "Traceback" in r.err:
            probs.append("traceback text on stderr")
        if "not a finite number: the inputs" in r.err or "is not finite at batch" in r.err:
            probs.append("non-finite value reached the output: " + r.err.strip()[:200])
    if r.rc == 0:
        results = bool(r.argv) and str(r.argv[0]) in ("step", "predict", "recommend")
        probs += check_text(r.out, "stdout", echo, results)
    if outdir is not None and outdir.exists():
        for p in sorted(outdir.rglob("*")):
            if p.is_file():
                if p.name.startswith(".") and (".tmp" in p.name or p.name.startswith(".tmp")):
                    probs.append(f"{p}: temp file left behind")
                elif r.rc == 0:
                    probs += check_file(p, echo)
    if canary is not None and canary.exists():
        probs.append(f"code execution: {canary} was created")
    return probs

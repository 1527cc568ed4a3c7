"""Request traces: CSV or JSONL rows with `arrival_s`, `isl`, `osl` and optional `alpha`, `prefix_id`, `prefix_len`.

The one trace format of specplan (`adaptive --workload` and `predict --workload` read it; docs/serving.md maps the
Azure LLM inference and Mooncake traces onto it). A row is one request: arrival seconds from the trace's start
(sorted), prompt tokens, output tokens; `alpha` that request's acceptance rate (adaptive); `prefix_id` and
`prefix_len` a shared prefix (a system prompt, a conversation's earlier turns, an agent's context) of
`prefix_len` tokens: the first request of an id prefills it, later ones find it in the prefix cache. JSONL rows
are objects with the same keys; a `.jsonl` / `.json` file (or one whose first character is `{`) is read as JSONL.
Bad input is one line naming the file, the row (data rows from 1; a CSV header is row 0) and the column.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np

from specplan.core.records import record
from specplan.core.errors import SpecplanError, brief

MAX_REQUESTS = 1_000_000  # a trace beyond this is refused: the simulators' work is bounded
MAX_OUTPUT_TOKENS = 50_000_000
REQUIRED = ("arrival_s", "isl", "osl")
OPTIONAL = ("alpha", "prefix_id", "prefix_len", "hash_ids")
BLOCK_TOKENS = 512  # tokens per `hash_ids` block (Mooncake's traces: FAST'25 artifact README, block size 512)


@record
class Trace:
    """A trace's columns in row order (tokens as int64, seconds as float); optional ones None when absent."""

    arrival_s: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    alpha: np.ndarray | None = None
    prefix_id: np.ndarray | None = None  # strings ("" where a row has none)
    prefix_len: np.ndarray | None = None
    source: str = ""
    hash_ids: tuple | None = None  # per row, the prompt's block hashes (BLOCK_TOKENS each; JSONL only)


def check_sizes(n: int, osl_total: float, where: str) -> None:
    """Refuse workloads whose work is unbounded (too many requests or output tokens), in one line."""
    if n > MAX_REQUESTS:
        raise SpecplanError(f"{where}: {n:,} requests exceed the simulator's cap of {MAX_REQUESTS:,}")
    if osl_total > MAX_OUTPUT_TOKENS:
        raise SpecplanError(f"{where}: {osl_total:,.0f} output tokens exceed the simulator's cap of "
                            f"{MAX_OUTPUT_TOKENS:,}")


def _cell(path: str, row: int, col: str, text, kind: type):
    try:
        v = kind(float(text)) if kind is int else float(text)
        if kind is int and float(text) != v:
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise SpecplanError(f"{path}: row {row}, column '{col}': expected {'an integer' if kind is int else 'a number'}"
                            f", got '{brief(str(text), 40)}'") from None
    if not np.isfinite(v):
        raise SpecplanError(f"{path}: row {row}, column '{col}': must be finite, got '{brief(str(text), 40)}'")
    return v


def _missing(path: str, header: list) -> None:
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise SpecplanError(f"{path}: missing column '{missing[0]}' (row 0 has: {', '.join(header) or 'nothing'};"
                            f" needs {', '.join(REQUIRED)}, optional {', '.join(OPTIONAL)})")


def _csv_columns(path: str, text: str) -> dict:
    with io.StringIO(text, newline="") as f:
        reader = csv.reader(f)
        header = [h.strip() for h in next(reader, [])]
        _missing(path, header)
        idx = {c: header.index(c) for c in (*REQUIRED, *OPTIONAL) if c in header}
        cols = {c: [] for c in idx}
        for r, line in enumerate(reader, 1):
            if not any(x.strip() for x in line):
                continue
            if r > MAX_REQUESTS:
                raise SpecplanError(f"{path}: more than {MAX_REQUESTS:,} rows (the simulator's cap)")
            for c, i in idx.items():
                v = line[i].strip() if i < len(line) else ""
                if c == "hash_ids":
                    raise SpecplanError(f"{path}: column 'hash_ids' is read from JSONL traces only (a list per row)")
                if not v and c != "prefix_id":
                    raise SpecplanError(f"{path}: row {r}, column '{c}': missing value")
                cols[c].append(v)
    return cols


def _jsonl_columns(path: str, text: str) -> dict:
    cols: dict = {}
    rows = [ln for ln in text.splitlines() if ln.strip()]
    if len(rows) > MAX_REQUESTS:
        raise SpecplanError(f"{path}: more than {MAX_REQUESTS:,} rows (the simulator's cap)")
    for r, ln in enumerate(rows, 1):
        try:
            obj = json.loads(ln)
        except json.JSONDecodeError as e:
            raise SpecplanError(f"{path}: row {r}: not a JSON object ({e.msg})") from None
        if not isinstance(obj, dict):
            raise SpecplanError(f"{path}: row {r}: expected a JSON object, got {type(obj).__name__}")
        if r == 1:
            _missing(path, list(obj))
            cols = {c: [] for c in (*REQUIRED, *OPTIONAL) if c in obj}
        for c in cols:
            if c not in obj or (obj[c] is None and c != "prefix_id"):
                raise SpecplanError(f"{path}: row {r}, column '{c}': missing value")
            cols[c].append("" if obj[c] is None else obj[c])
    return cols


def _numbers(path: str, cols: dict, name: str, kind: type) -> np.ndarray:
    return np.array([_cell(path, r, name, t, kind) for r, t in enumerate(cols[name], 1)])


def _check_low(path: str, cols: dict, name: str, v: np.ndarray, low: float, what: str) -> None:
    bad = np.flatnonzero(v < low)
    if bad.size:
        r = int(bad[0]) + 1
        raise SpecplanError(f"{path}: row {r}, column '{name}': {what}, got {cols[name][r - 1]}")


def read_trace(path: str, flag: str = "--workload") -> Trace:
    """The Trace in a CSV or JSONL file; one line naming the file, row and column on bad input."""
    p = Path(path)
    if not p.is_file():
        raise SpecplanError(f"{flag}: no such file '{path}'")
    from specplan.core.loader import read_text  # the bounded reader: size cap, one line for a binary file

    text = read_text(p, "workload trace")
    jsonl = p.suffix.lower() in (".jsonl", ".json") or text.lstrip()[:1] == "{"
    cols = _jsonl_columns(path, text) if jsonl else _csv_columns(path, text)
    if not cols.get("arrival_s"):
        raise SpecplanError(f"{path}: no data rows")
    arr = _numbers(path, cols, "arrival_s", float)
    isl = _numbers(path, cols, "isl", int)
    osl = _numbers(path, cols, "osl", int)
    _check_low(path, cols, "arrival_s", arr, 0, "must be >= 0 seconds")
    _check_low(path, cols, "isl", isl, 1, "must be >= 1 token")
    _check_low(path, cols, "osl", osl, 1, "must be >= 1 token")
    back = np.flatnonzero(np.diff(arr) < 0)
    if back.size:
        r = int(back[0]) + 2
        raise SpecplanError(f"{path}: row {r}, column 'arrival_s': {arr[r - 1]:g} is before row {r - 1}'s "
                            f"{arr[r - 2]:g} (rows must be sorted by arrival time)")
    alpha = None
    if "alpha" in cols:
        alpha = _numbers(path, cols, "alpha", float)
        bad = np.flatnonzero((alpha < 0) | (alpha > 1))
        if bad.size:
            r = int(bad[0]) + 1
            raise SpecplanError(f"{path}: row {r}, column 'alpha': must be in [0, 1], got {cols['alpha'][r - 1]}")
    plen = pid = None
    if "prefix_len" in cols:
        plen = _numbers(path, cols, "prefix_len", int)
        _check_low(path, cols, "prefix_len", plen, 0, "must be >= 0 tokens")
        over = np.flatnonzero(plen > isl)
        if over.size:
            r = int(over[0]) + 1
            raise SpecplanError(f"{path}: row {r}, column 'prefix_len': {int(plen[r - 1])} tokens exceed the "
                                f"prompt's isl {int(isl[r - 1])}")
        pid = np.array([str(x) for x in cols["prefix_id"]]) if "prefix_id" in cols else np.full(plen.size, "shared")
    hashes = None
    if "hash_ids" in cols:
        for r, h in enumerate(cols["hash_ids"], 1):
            if not isinstance(h, list) or not all(isinstance(x, (int, str)) and not isinstance(x, bool) for x in h):
                raise SpecplanError(f"{path}: row {r}, column 'hash_ids': expected a list of block hashes, got "
                                    f"'{brief(str(h), 40)}'")
        hashes = tuple(tuple(h) for h in cols["hash_ids"])
    check_sizes(arr.size, float(osl.sum()), path)
    return Trace(arr, isl.astype(np.int64), osl.astype(np.int64), alpha, pid,
                 None if plen is None else plen.astype(np.int64), str(path), hashes)


def cached_prefix_tokens(trace: Trace) -> np.ndarray:
    """Prompt tokens each request finds in the prefix cache: its prefix_len when an earlier request carried the
    same prefix_id (the first one prefills it), else 0; zeros without prefix columns. The cache is taken to keep
    every prefix once computed (no eviction: an upper bound on hits)."""
    n = trace.isl.size
    if trace.hash_ids is not None:
        return _block_hits(trace)
    if trace.prefix_len is None:
        return np.zeros(n, dtype=np.int64)
    seen: dict = {}
    out = np.zeros(n, dtype=np.int64)
    for i, (pid, ln) in enumerate(zip(trace.prefix_id, trace.prefix_len)):
        if not pid or ln <= 0:
            continue
        out[i] = min(int(ln), seen.get(pid, 0))
        seen[pid] = max(seen.get(pid, 0), int(ln))
    return out


def _block_hits(trace: Trace) -> np.ndarray:
    """Prefix-cache hits from block hashes (Mooncake): the leading blocks of a prompt that some earlier request
    computed, BLOCK_TOKENS each (a block's hash names its whole prefix, so the run stops at the first new block),
    at most the prompt less one token."""
    seen: set = set()
    out = np.zeros(trace.isl.size, dtype=np.int64)
    for i, h in enumerate(trace.hash_ids):
        k = 0
        while k < len(h) and h[k] in seen:
            k += 1
        out[i] = min(k * BLOCK_TOKENS, int(trace.isl[i]) - 1)
        seen.update(h)
    return out


def shared_prefix_tokens(trace: Trace) -> float:
    """KV tokens the distinct shared prefixes hold (each stored once)."""
    if trace.hash_ids is not None:
        from collections import Counter

        uses = Counter(x for h in trace.hash_ids for x in h)
        return float(sum(1 for v in uses.values() if v > 1) * BLOCK_TOKENS)
    if trace.prefix_len is None:
        return 0.0
    best: dict = {}
    for pid, ln in zip(trace.prefix_id, trace.prefix_len):
        if pid:
            best[pid] = max(best.get(pid, 0), int(ln))
    return float(sum(best.values()))

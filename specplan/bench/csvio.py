"""Benchmark CSV tables: standard column orders, atomic write (``.gz`` compresses), typed read-back."""

from __future__ import annotations

import csv
import gzip
import io
import os
import tempfile
from typing import Sequence

GEMM_COLUMNS: tuple[str, ...] = (
    "device", "dtype", "m", "n", "k", "time_us", "framework", "kernel", "source",
    "torch_version", "device_name",
)
ATTENTION_COLUMNS: tuple[str, ...] = (
    "device", "framework", "kernel", "dtype", "kv_dtype", "batch", "q_len", "n_q_heads",
    "n_kv_heads", "head_dim", "kv_len", "time_us", "source", "torch_version", "device_name",
)
CHECK_COLUMNS: tuple[str, ...] = (
    "device", "kernel", "reference", "dtype", "batch", "q_len", "n_q_heads", "n_kv_heads",
    "head_dim", "kv_len", "max_abs_err", "ref_max_abs", "torch_version", "device_name",
)
INT_COLUMNS = frozenset({"m", "n", "k", "batch", "q_len", "n_q_heads", "n_kv_heads", "head_dim", "kv_len"})
FLOAT_COLUMNS = frozenset({"time_us", "max_abs_err", "ref_max_abs"})


def _columns_for(rows: Sequence[dict]) -> tuple[str, ...]:
    """The standard column order whose set matches the rows' keys (else the first row's order)."""
    if not rows:
        raise ValueError("no rows and no columns given")
    keys = set(rows[0])
    for cols in (ATTENTION_COLUMNS, GEMM_COLUMNS, CHECK_COLUMNS):
        if keys == set(cols):
            return cols
    return tuple(rows[0].keys())


def write_csv(rows: Sequence[dict], path: str | os.PathLike, columns: Sequence[str] | None = None) -> str:
    """Write ``rows`` with the standard column order; atomic (temp file + os.replace).

    A path ending in ``.gz`` is gzip-compressed.  Returns the path.
    """
    path = os.fspath(path)
    cols = tuple(columns) if columns is not None else _columns_for(rows)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols, extrasaction="raise", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: row.get(c, "") for c in cols})
    data = buf.getvalue().encode("utf-8")
    if path.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".csv", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def read_csv(path: str | os.PathLike) -> list[dict]:
    """Read a CSV written by :func:`write_csv`; int/float columns converted back."""
    path = os.fspath(path)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        for key, val in row.items():
            if val == "":
                continue
            if key in INT_COLUMNS:
                row[key] = int(val)
            elif key in FLOAT_COLUMNS:
                row[key] = float(val)
    return rows



def split_path(out: str, suffix: str) -> str:
    """measured.csv -> measured_gemm.csv (one output per table of ``bench all``)."""
    for ext in (".csv.gz", ".csv"):
        if out.endswith(ext):
            return out[: -len(ext)] + f"_{suffix}" + ext
    return f"{out}_{suffix}.csv"

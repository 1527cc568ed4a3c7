"""Result tables on disk: CSV at 6 significant digits written by pyarrow (vectorized, byte-identical to
`pandas.to_csv(float_format="%.6g")`, deterministic) and Parquet, each written atomically."""

from __future__ import annotations

import numpy as np


def round_significant(a, digits: int = 6) -> np.ndarray:
    """Float values rounded to `digits` significant decimal digits (vectorized; NaN, inf and 0 unchanged)."""
    x = np.asarray(a, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mag = np.floor(np.log10(np.abs(x)))
        scale = np.where(np.isfinite(mag), 10.0 ** (digits - 1 - np.where(np.isfinite(mag), mag, 0)), 1.0)
        out = np.round(x * scale) / scale
    return np.where(np.isfinite(out), out, x)


def csv_bytes(df, digits: int = 6) -> bytes:
    """The frame as CSV bytes, floats at `digits` significant digits, written by pyarrow (vectorized, no
    per-cell Python formatting): a float32 rounded to 6 digits prints as its shortest repr, which is those
    digits. Deterministic: the same frame always gives the same bytes."""
    import io

    import pyarrow as pa
    import pyarrow.csv as pacsv

    cols, names = [], []
    for name in df.columns:
        s = df[name]
        kind = s.dtype.kind if hasattr(s.dtype, "kind") else "O"
        if kind == "f":
            v = s.to_numpy()
            arr = pa.array(round_significant(v).astype(v.dtype), mask=np.isnan(v))  # NaN: an empty cell
        elif kind == "b":  # True / False as pandas writes them
            arr = pa.DictionaryArray.from_arrays(s.to_numpy().astype(np.int8), ["False", "True"])
        elif kind in "iu":
            arr = pa.array(s.to_numpy())
        elif hasattr(s, "cat"):  # categoricals: codes + names, no per-row strings
            arr = pa.DictionaryArray.from_arrays(s.cat.codes.to_numpy(), [str(c) for c in s.cat.categories])
        else:
            arr = pa.array(s.astype(str).to_numpy(), type=pa.string())
        cols.append(arr)
        names.append(str(name))
    table = pa.Table.from_arrays(cols, names=names)
    head = ",".join(f'"{n}"' if any(ch in n for ch in ',"\n') else n for n in names) + "\n"
    buf = io.BytesIO()
    try:
        pacsv.write_csv(table, buf, pacsv.WriteOptions(include_header=False, quoting_style="none"))
    except pa.ArrowInvalid:  # a value with a comma or quote: quote the strings
        buf = io.BytesIO()
        pacsv.write_csv(table, buf, pacsv.WriteOptions(include_header=False, quoting_style="needed"))
    return head.encode() + buf.getvalue()


def write_table(df, stem, parquet: bool = True, csv: bool = True) -> list:
    """Write `stem.csv` (6 significant digits, `csv_bytes`) and/or `stem.parquet` (snappy), each atomically."""
    import io
    from pathlib import Path

    from specplan.core.io import atomic_write_bytes

    stem = Path(stem)
    out = []
    if csv:
        atomic_write_bytes(stem.with_suffix(".csv"), csv_bytes(df))
        out.append(stem.with_suffix(".csv"))
    if parquet:
        import pyarrow as pa
        import pyarrow.parquet as pq

        buf = io.BytesIO()
        table = pa.Table.from_pandas(df, preserve_index=False)
        # Dictionary encoding for the categorical (dictionary) columns only: on the float and integer columns it
        # costs ~4x the write time and makes the file larger (few repeated values).
        dict_cols = [f.name for f in table.schema if pa.types.is_dictionary(f.type)]
        pq.write_table(table, buf, compression="snappy", use_dictionary=dict_cols)
        atomic_write_bytes(stem.with_suffix(".parquet"), buf.getvalue())
        out.append(stem.with_suffix(".parquet"))
    return out

"""Printing helpers for the CLI: JSON and plain-text tables (no heavy imports)."""

from __future__ import annotations

import json
import math

import numpy as np


def to_jsonable(obj, path: str = ""):
    """Numpy scalars/arrays and floats -> plain JSON types. NaN means "no value" (e.g. a time window without a
    decode step) and becomes null; an infinity is never a result and is an error naming its key."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v, f"{path}.{k}" if path else str(k)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, f"{path}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist() if obj.ndim else obj.item(), path)
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item(), path)
    if isinstance(obj, float):
        if math.isnan(obj):
            return None
        if math.isinf(obj):
            from specplan.errors import SpecplanError

            raise SpecplanError(f"output {path or 'value'} is {obj}, not a finite number: the inputs are outside "
                                f"what the model can price (please report the command)")
        return round(obj, 6) if abs(obj) < 1e15 else obj
    return obj


def print_json(obj) -> None:
    """Print an object as indented JSON."""
    print(json.dumps(to_jsonable(obj), indent=2))


def table(rows: list[list], header: list[str]) -> str:
    """A plain aligned text table."""
    cells = [[str(c) for c in header]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(v) -> str:
    if isinstance(v, (float, np.floating)):
        if v == 0:
            return "0"
        if abs(v) >= 1e5 or abs(v) < 1e-3:
            return f"{v:.3g}"
        return f"{v:.3f}".rstrip("0").rstrip(".")
    return str(v)

"""Printing helpers for the CLI: JSON and plain-text tables (no heavy imports)."""

from __future__ import annotations

import json

import numpy as np

from specplan.core.jsonable import to_jsonable  # noqa: F401  (re-exported: specplan.cli.output.to_jsonable)


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
    """A table cell: '-' for no value (None), whole numbers from 1e5 up to 1e12 (a TTFT of 155000 ms, not 1.55e+05),
    three significant digits beyond or below 1e-3, else up to three decimals."""
    if v is None:
        return "-"
    if isinstance(v, (float, np.floating)):
        if v == 0:
            return "0"
        if 1e5 <= abs(v) < 1e12:
            return f"{v:.0f}"
        if abs(v) >= 1e12 or abs(v) < 1e-3 or v != v:
            return f"{v:.3g}"
        return f"{v:.3f}".rstrip("0").rstrip(".")
    return str(v)

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


TERMS = ("terms: AL = tokens produced per iteration (1 ... 1 + D); G_dev = query heads per KV head on one device; "
         "ridge = GEMM rows B·(1 + D) at which a GEMM turns compute-bound; G1-G5 = the five guidelines "
         "(docs/speculation.md#guidelines-guidelinespy)")


def layout_phrase(lay: dict) -> str:
    """'tp 8', or 'tp 1 dp 8 ep 8 (expert-TP 1, 8 GPUs)' for a layout beyond TP."""
    if lay["dp"] == lay["ep"] == lay["pp"] == 1:
        return f"tp {lay['tp']}"
    pp = f" pp {lay['pp']}" if lay["pp"] > 1 else ""
    return f"tp {lay['tp']} dp {lay['dp']} ep {lay['ep']}{pp} (expert-TP {lay['expert_tp']}, {lay['gpus']} GPUs)"


def energy_phrase(x: dict) -> str:
    """'612 W/GPU, 0.110 J/token, 7.9M tok/s/MW, $0.056/Mtok' of a row (what it has)."""
    if "joules_per_token" not in x:
        return "no power model for this hardware"
    usd = f", ${x['usd_per_mtok']:.3f}/Mtok" if "usd_per_mtok" in x else ""
    return (f"{x['power_w_per_gpu']:.0f} W/GPU, {x['joules_per_token']:.3f} J/token, "
            f"{x['tokens_per_s_per_mw'] / 1e6:.2f}M tok/s per MW{usd}")


def or_dash(x):
    """A number for a table, or '-' where there is none (None or NaN: OSL 1 has no TPOT)."""
    return "-" if x is None or x != x else x

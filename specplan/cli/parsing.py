"""Parsing of repeated / comma-separated CLI option values into lists and mechanism maps."""

from __future__ import annotations

from typing import Iterable, Optional

from specplan.errors import SpecplanError


def comma_list(values: str | Iterable[str] | None) -> list[str]:
    """Items of a comma list, or of several (repeated options), stripped, empties dropped."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    return [x.strip() for v in values for x in v.split(",") if x.strip()]


def int_list(values: Optional[Iterable[str]], name: str) -> list[int] | None:
    """Integers of repeated comma lists ('8k' = 8192); None when nothing is given."""
    if not values:
        return None
    out = []
    for part in comma_list([str(v) for v in values]):
        try:
            low = part.lower()
            out.append(int(low[:-1]) * 1024 if low.endswith("k") else int(part))  # 8k = 8192 tokens
        except ValueError:
            raise SpecplanError(f"{name}: expected integers, got '{part}'") from None
    return out


def mech_values(items: Optional[Iterable[str]], expected: str) -> dict[str, str]:
    """{mechanism: value} from repeated `--acceptance MECH=VALUE` options; `expected` describes the form in errors."""
    out = {}
    for item in items or []:
        if "=" not in item:
            raise SpecplanError(f"--acceptance: expected {expected}, got '{item}'")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out

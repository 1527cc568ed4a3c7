"""Typed, one-line-error access to the fields of a Hugging Face config.json (read, text_config flattened).

A Hugging Face config is a foreign document: it is read without judging its values (`specplan.core.loader`, foreign),
and every field the importer reads is checked here when it is read (finite numbers, 64-bit integers, not given
twice), so a field specplan never uses (Nemotron-H's `"time_step_limit": [0.0, Infinity]`) is carried, not refused.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from specplan.core.errors import SpecplanError
from specplan.core.loader import check_values

_MISSING = object()


def checked(value: Any, where: str, field: str) -> Any:
    """`value` (a field of a foreign document, with everything under it) when it holds only finite numbers,
    64-bit integers and keys given once; else a one-line error naming the file and the field."""
    check_values(value, where, field)
    return value


class HfFields:
    """Typed access to a config mapping; every failure is one line naming the file and the field."""

    def __init__(self, data: dict, where: str):
        self.data = data
        self.where = where

    def fail(self, field: str, msg: str) -> SpecplanError:
        return SpecplanError(f"{self.where}: {field}: {msg}")

    def has(self, name: str) -> bool:
        return self.data.get(name) is not None

    def value(self, name: str) -> Any:
        """The field `name` (None when absent), checked (see `checked`)."""
        return checked(self.data.get(name), self.where, name)

    def get(self, *names: str, default: Any = None) -> Any:
        for n in names:
            v = self.value(n)
            if v is not None:
                return v
        return default

    def int(self, *names: str, default: Any = _MISSING, minimum: int = 1) -> int:
        for n in names:
            v = self.value(n)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or int(v) != v:
                raise self.fail(n, f"expected an integer, got {v!r}")
            if v < minimum:
                raise self.fail(n, f"must be >= {minimum}, got {v!r}")
            return int(v)
        if default is _MISSING:
            raise self.fail(names[0], "missing field")
        return default

    def bool(self, name: str, default: bool) -> bool:
        v = self.value(name)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise self.fail(name, f"expected true or false, got {v!r}")
        return v

    def list(self, name: str) -> list | None:
        v = self.value(name)
        if v is None:
            return None
        if not isinstance(v, list):
            raise self.fail(name, f"expected a list, got {type(v).__name__}")
        return v


def read_json(path: Path) -> dict:
    """A config.json object read as a foreign document with the bounds of `specplan.core.loader` (size, nesting);
    its values are checked field by field as the importer reads them (HfFields)."""
    from specplan.core.loader import read_json as _read

    data = _read(path, "config file", mapping=False, foreign=True)
    if not isinstance(data, dict):
        raise SpecplanError(f"{path}: expected a JSON object of config fields, got {type(data).__name__}")
    return data


def flatten_text_config(raw: dict, where: str = "config") -> dict:
    """The text model's fields: `text_config` (when nested) over the top-level fields."""
    text = raw.get("text_config")
    if text is not None and not isinstance(text, dict):
        checked(text, where, "text_config")  # a key given twice: one line, not a silent fallback to the top level
    if isinstance(text, dict):
        top = {k: v for k, v in raw.items() if k not in ("text_config", "vision_config", "audio_config")}
        merged = dict(top)
        merged.update({k: v for k, v in text.items() if v is not None})
        return merged
    return dict(raw)


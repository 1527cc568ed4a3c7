"""Typed, one-line-error access to the fields of a Hugging Face config.json (read, text_config flattened)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from specplan.core.errors import SpecplanError

_MISSING = object()


class HfFields:
    """Typed access to a config mapping; every failure is one line naming the file and the field."""

    def __init__(self, data: dict, where: str):
        self.data = data
        self.where = where

    def fail(self, field: str, msg: str) -> SpecplanError:
        return SpecplanError(f"{self.where}: {field}: {msg}")

    def has(self, name: str) -> bool:
        return self.data.get(name) is not None

    def get(self, *names: str, default: Any = None) -> Any:
        for n in names:
            if self.data.get(n) is not None:
                return self.data[n]
        return default

    def int(self, *names: str, default: Any = _MISSING, minimum: int = 1) -> int:
        for n in names:
            v = self.data.get(n)
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
        v = self.data.get(name)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise self.fail(name, f"expected true or false, got {v!r}")
        return v

    def list(self, name: str) -> list | None:
        v = self.data.get(name)
        if v is None:
            return None
        if not isinstance(v, list):
            raise self.fail(name, f"expected a list, got {type(v).__name__}")
        return v


def read_json(path: Path) -> dict:
    """A config.json object read with the bounds of `specplan.core.loader` (duplicate keys, NaN / inf / 1e400 and
    integers beyond 64 bits are one-line errors naming the field)."""
    from specplan.core.loader import read_json as _read

    data = _read(path, "config file", mapping=False)
    if not isinstance(data, dict):
        raise SpecplanError(f"{path}: expected a JSON object of config fields, got {type(data).__name__}")
    return data


def flatten_text_config(raw: dict) -> dict:
    """The text model's fields: `text_config` (when nested) over the top-level fields."""
    text = raw.get("text_config")
    if isinstance(text, dict):
        top = {k: v for k, v in raw.items() if k not in ("text_config", "vision_config", "audio_config")}
        merged = dict(top)
        merged.update({k: v for k, v in text.items() if v is not None})
        merged["_top_model_type"] = raw.get("model_type")
        return merged
    return dict(raw)


"""A frozen record that also reads as a read-only mapping by field name (for code written against a dict answer)."""

from __future__ import annotations

from collections.abc import Mapping


class FieldMapping(Mapping):
    """Mapping over the fields `_names()` lists (in that order): record[name] is getattr(record, name)."""

    def _names(self) -> list[str]:
        raise NotImplementedError

    def __getitem__(self, key: str):
        if key not in self._names():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self):
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

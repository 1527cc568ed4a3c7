"""A frozen record that also reads as a read-only mapping by field name (for code written against a dict answer)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import ClassVar


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


class Record(FieldMapping):
    """Base of a frozen dataclass answer: a read-only mapping over its fields in declaration order, leaving out the
    fields named in OPTIONAL while they are None (keys an answer carries only sometimes); `to_jsonable` writes it as
    that mapping, so a record's JSON is the dict answer it replaced, key for key."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ()

    def _names(self) -> list[str]:
        return [f.name for f in fields(self) if not (f.name in self.OPTIONAL and getattr(self, f.name) is None)]

    def as_dict(self) -> dict:
        """The mapping as a plain dict (shallow: nested records stay records)."""
        return {k: getattr(self, k) for k in self._names()}

"""A frozen record of the fields we read from one block of a foreign document (a config.json block, an error dict)."""

from __future__ import annotations

from dataclasses import fields
from typing import ClassVar

from specplan.core.records import record


@record
class FileRecord:
    """Base of a frozen record of one block of a foreign document; undeclared fields of the block are ignored."""

    # a field's names in the block when it goes by more than its own (the first one present wins)
    ALIASES: ClassVar[dict[str, tuple[str, ...]]] = {}

    @classmethod
    def read(cls, block: dict):
        """The record of `block`: each declared field from the block, its default where the block lacks it."""
        given = {}
        for f in fields(cls):
            name = next((n for n in cls.ALIASES.get(f.name, (f.name,)) if n in block), None)
            if name is not None:
                given[f.name] = block[name]
        return cls(**given)

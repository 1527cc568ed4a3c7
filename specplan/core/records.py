"""A frozen record that also reads as a read-only mapping by field name (for code written against a dict answer)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from operator import attrgetter
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

    @classmethod
    def _field_names(cls) -> tuple[str, ...]:
        """The class's field names in order (found once per class: a renderer reads hundreds of keys)."""
        names = cls.__dict__.get("_record_field_names")
        if names is None:
            names = tuple(f.name for f in fields(cls))
            cls._record_field_names = names
        return names

    def _names(self) -> list[str]:
        return [n for n in self._field_names() if not (n in self.OPTIONAL and getattr(self, n) is None)]

    def __getitem__(self, key: str):
        if key not in self._field_names() or (key in self.OPTIONAL and getattr(self, key) is None):
            raise KeyError(key)
        return getattr(self, key)

    def as_dict(self) -> dict:
        """The mapping as a plain dict (shallow: nested records stay records)."""
        return {k: getattr(self, k) for k in self._names()}


def _value_eq(self, other):
    """Equal when of the same class with equal compared fields (dataclass's eq: tuples of the fields)."""
    if other.__class__ is not self.__class__:
        return NotImplemented
    key = self.__class__._compared
    return key(self) == key(other)


def _value_hash(self) -> int:
    """Hash of the hashed fields (dataclass's hash of a frozen class with eq)."""
    return hash(self.__class__._hashed(self))


def _tuple_of(names: tuple):
    """A function of an object giving the tuple of its attributes `names` (operator.attrgetter, always a tuple)."""
    if len(names) == 1:
        get = attrgetter(names[0])
        return lambda x: (get(x),)
    return attrgetter(*names) if names else (lambda x: ())


def _fields_repr(self) -> str:
    """ClassName(field=value, ...) over the fields with repr (dataclass's repr)."""
    inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__class__._shown)
    return f"{self.__class__.__qualname__}({inner})"


def record(cls=None, *, eq: bool = True, kw_only: bool = False):
    """`@dataclass(frozen=True, eq=eq, kw_only=kw_only)` with the same __eq__, __hash__ and __repr__ as dataclass
    writes (a class's own __eq__, __hash__ or __repr__ kept, as dataclass keeps them), from shared functions instead
    of code compiled per class: a command imports about a hundred frozen classes (answers, profiles' value objects),
    and dataclass compiles three methods for each (about 0.5-1 ms of start-up per class)."""

    def wrap(c):
        own = c.__dict__
        explicit_hash = "__hash__" in own and not (own["__hash__"] is None and "__eq__" in own)
        own_eq, own_repr = "__eq__" in own, "__repr__" in own
        c = dataclass(frozen=True, eq=False, repr=False, kw_only=kw_only)(c)
        fs = fields(c)
        c._shown = tuple(f.name for f in fs if f.repr)
        if not own_repr:
            c.__repr__ = _fields_repr
        if eq:
            c._compared = _tuple_of(tuple(f.name for f in fs if f.compare))
            c._hashed = _tuple_of(tuple(f.name for f in fs if (f.compare if f.hash is None else f.hash)))
            if not own_eq:
                c.__eq__ = _value_eq
            if not explicit_hash:
                c.__hash__ = _value_hash
        return c

    return wrap if cls is None else wrap(cls)

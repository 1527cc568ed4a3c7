"""core/records.Record: a frozen answer that reads and writes as the dict it replaced."""

from dataclasses import FrozenInstanceError, dataclass

import numpy as np
import pytest

from specplan.core.jsonable import to_jsonable
from specplan.core.records import Record


@dataclass(frozen=True)
class _Row(Record):
    OPTIONAL = ("note",)
    tpot_s: float
    best: object = None
    note: object = None


def test_optional_field_left_out_while_none_and_plain_none_kept():
    r = _Row(tpot_s=np.float64(0.0125))
    assert list(r) == ["tpot_s", "best"]  # best is None but not optional: written as null
    assert to_jsonable(r) == {"tpot_s": 0.0125, "best": None}
    assert "note" not in r and r.get("note") is None


def test_optional_field_present_in_declaration_order_and_nested():
    r = _Row(tpot_s=1.0, best=_Row(tpot_s=2.0), note="x")
    assert list(r.as_dict()) == ["tpot_s", "best", "note"]
    assert to_jsonable({"rows": [r]}) == {"rows": [{"tpot_s": 1, "best": {"tpot_s": 2, "best": None}, "note": "x"}]}
    with pytest.raises(KeyError):
        r["tpot"]
    with pytest.raises(FrozenInstanceError):
        r.tpot_s = 3.0


def test_record_decorator_behaves_as_dataclass_frozen():
    """@record writes no per-class methods but compares, hashes and prints as @dataclass(frozen=True) does."""
    from dataclasses import field, replace

    from specplan.core.records import record

    class Base(Record):
        a: int
        b: object = None
        c: int = field(default=0, compare=False, repr=False)

    ours = record(type("Ours", (Base,), {"__annotations__": dict(Base.__annotations__)}))
    theirs = dataclass(frozen=True)(type("Ours", (Base,), {"__annotations__": dict(Base.__annotations__)}))
    for args in [(1,), (1, "x"), (1, (2, 3), 7)]:
        x, y = ours(*args), theirs(*args)
        assert repr(x) == repr(y) == repr(theirs(*args))
        assert hash(x) == hash(y)
        assert x == ours(*args) and not (x != ours(*args))
    assert ours(1, c=1) == ours(1, c=2)  # c takes no part in equality
    assert ours(1, "x") != ours(2, "x") and ours(1) != theirs(1)  # other values, other classes
    assert replace(ours(1, "x"), a=5) == ours(5, "x")
    with pytest.raises(FrozenInstanceError):
        ours(1).a = 2
    with pytest.raises(TypeError):  # a list field cannot be hashed, as with dataclass
        hash(ours(1, [1]))


def test_record_without_eq_keeps_the_mapping_comparison():
    from specplan.core.records import record

    @record(eq=False)
    class R(Record):
        a: int

    assert R(1) == {"a": 1} and R(1) != R(2)  # Mapping's __eq__, as @dataclass(frozen=True, eq=False) left it


def test_record_keeps_a_class_own_methods_as_dataclass_does():
    from specplan.core.records import record

    @record
    class Own:
        a: int

        def __repr__(self):
            return "own"

        def __eq__(self, other):
            return True

    assert repr(Own(1)) == "own" and Own(1) == Own(2)
    assert hash(Own(1)) == hash((1,))  # eq without hash in the body: dataclass writes the field hash, so do we

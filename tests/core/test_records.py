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

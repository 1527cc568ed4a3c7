"""Acceptance as users write it: a rate '0.8', a length 'AL@D', per-position '0.9/0.8/0.7', or a profile name."""

from __future__ import annotations

from specplan.core.errors import SpecplanError
from specplan.core.limits import DRAFT_LEN_LIMIT, check_int
from specplan.speculation.acceptance import Acceptance


def parse_acceptance(value, at_d: float | None = None) -> Acceptance:
    """A rate '0.8', a length 'AL@D' (or 'AL' with `at_d`), per-position '0.9/0.8/0.7' or '0.9,0.8', or a profile."""
    if isinstance(value, Acceptance):
        return value
    s = str(value).strip()
    if "@" in s:
        al, d = s.split("@", 1)
        return Acceptance.from_length(_num(al, s), _num(d, s))
    if "/" in s or "," in s:
        return Acceptance.from_per_position([_num(x, s) for x in s.replace("/", ",").split(",") if x.strip()])
    try:
        x = float(s)
    except ValueError:
        return Acceptance.from_profile(s)
    if at_d is not None and x > 1:
        return Acceptance.from_length(x, at_d)
    return Acceptance.from_rate(x)


def _num(x: str, whole: str) -> float:
    try:
        return float(x)
    except ValueError:
        raise SpecplanError(f"acceptance: cannot read '{whole}' (rate 0.8, length 3.1@4, per-position 0.9/0.8, "
                            f"or a profile name)") from None


def _draft_len(draft_len) -> int:
    """--draft-len checked before it bounds an acceptance length (a 400-digit D is no float: one line, not a trace)."""
    return check_int(draft_len, "draft length (--draft-len)", 0, DRAFT_LEN_LIMIT)


def cli_acceptance(length=None, rate=None, per_position=None, profile=None, draft_len=0) -> Acceptance | None:
    """At most one of the predict command's acceptance options, as an Acceptance (None when none is given)."""
    given = [(k, v) for k, v in (("length", length), ("rate", rate), ("per-position", per_position),
                                 ("profile", profile)) if v is not None]
    if len(given) > 1:
        raise SpecplanError("acceptance: give one of --acceptance-length/-rate/-per-position/-profile, got "
                            + ", ".join(k for k, _ in given))
    if not given:
        return None
    kind, v = given[0]
    if kind == "length":
        draft_len = _draft_len(draft_len)
        return Acceptance.from_length(float(v), float(draft_len))
    if kind == "rate":
        return Acceptance.from_rate(float(v))
    if kind == "per-position":
        return parse_acceptance(str(v) if ("," in str(v) or "/" in str(v)) else f"{v},")
    return Acceptance.from_profile(str(v))


def one_acceptance(items, mechanism: str, draft_len: int, given: bool = False) -> Acceptance:
    """predict's `--acceptance [MECH=]VALUE` (the recommend / pareto form) for its one mechanism."""
    if given:
        raise SpecplanError("acceptance: give --acceptance or one of --acceptance-length/-rate/-per-position/"
                            "-profile, not both")
    if len(items) > 1:
        raise SpecplanError(f"--acceptance: predict takes one value (its one mechanism), got {len(items)}")
    item = items[0]
    mech, sep, value = item.partition("=")
    if not sep:
        mech, value = mechanism, item
    if mech.strip().lower() != mechanism:
        raise SpecplanError(f"--acceptance: '{item}' names {mech.strip()}, but --mechanism is {mechanism}")
    draft_len = _draft_len(draft_len)
    return parse_acceptance(value.strip(), at_d=float(draft_len) if draft_len else None)

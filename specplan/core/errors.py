"""The one error type users see: a single line naming the file, field and value."""

import reprlib


class SpecplanError(ValueError):
    """Bad input: printed by the CLI as one line, exit code 2."""


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80
_REPR.maxlist = _REPR.maxdict = _REPR.maxtuple = _REPR.maxset = 6
_REPR.maxlevel = 3
_REPR.maxlong = 40


def brief(value, limit: int = 80) -> str:
    """A short, single-line repr of a user value for error messages (bounded however big the value is)."""
    if isinstance(value, str):
        text = value if len(value) <= limit else f"{value[:limit]}... ({len(value):,} characters)"
        return " ".join(text.split()) if "\n" in text or "\r" in text else text
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**40:
        return f"an integer of {len(str(abs(value))) if abs(value) < 10**4000 else 'over 4000'} digits"
    out = _REPR.repr(value)
    return " ".join(out.split())


def without_repeat(path: str, head: str) -> str:
    """`path` without its last component where a validator's message starts with that field again
    ('x.peak_flops' + 'peak_flops.bf16' -> 'x' + 'peak_flops.bf16')."""
    base, _, last = path.rpartition(".")
    return base if last and (head == last or head.startswith(last + ".")) else path

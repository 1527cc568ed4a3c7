"""The loaders' part of the fuzz suite in CI (test_fuzz.py has the CLI's): seeded hypothesis examples over every
loader (tests/fuzz/strategies.loader_call), in a file of its own so that pytest-xdist runs it beside the CLI's.

Deterministic (derandomize: a fixed seed, no example database). A failure prints the drawn file and the problem."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given, settings

sys.path.insert(0, str(Path(__file__).resolve().parent))
from strategies import loader_call, run_loader  # noqa: E402
from test_fuzz import CI  # noqa: E402


@settings(max_examples=250, **CI)
@given(call=loader_call())
def test_fuzz_loaders(call):
    name, spec = call
    problems = run_loader(name, spec, timeout_s=60)
    assert not problems, (name, spec[3][:300] if isinstance(spec, tuple) else spec, problems)

"""The validation report's stated bounds and Must-show verdicts agree with the numbers it computed.

Reads the committed docs/validation/h100_fit.json (written by scripts/make_validation_report.py) and the
committed docs/validation/README.md: a bound or target marked as holding must actually hold, a missed one must
be reported as missed, and the README must not call a missed bound met.
"""

import json
import operator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIT = json.loads((ROOT / "docs" / "validation" / "h100_fit.json").read_text())
README = (ROOT / "docs" / "validation" / "README.md").read_text()
OPS = {"<=": operator.le, ">=": operator.ge}


def test_bounds_are_recorded():
    assert FIT.get("bounds"), "h100_fit.json has no 'bounds' (regenerate: python scripts/make_validation_report.py)"
    for b in FIT["bounds"]:
        assert b["groups"] and set(b["measured"]) == set(b["groups"]), b["id"]


@pytest.mark.parametrize("b", FIT.get("bounds", []), ids=lambda b: b["id"])
def test_bound_verdict_matches_its_numbers(b):
    ok = {g: OPS[b["op"]](v, b["limit"]) for g, v in b["measured"].items()}
    assert b["holds"] == all(ok.values()), b["id"]
    assert sorted(b["missed"]) == sorted(g for g, good in ok.items() if not good), b["id"]


@pytest.mark.parametrize("b", FIT.get("bounds", []), ids=lambda b: b["id"])
def test_readme_states_the_same_verdict(b):
    rows = [line for line in README.splitlines() if line.startswith(f"| {b['text']} |")]
    assert len(rows) == 1, f"bound {b['id']} is not (exactly once) in the README's Bounds table"
    verdict = rows[0].rstrip(" |").rsplit("|", 1)[-1].strip()
    if b["holds"]:
        assert verdict == "yes", b["id"]
    else:
        assert verdict.startswith("**no**") and all(g in verdict for g in b["missed"]), b["id"]


def test_summary_row_counts_the_misses():
    missed = [b["id"] for b in FIT["bounds"] if not b["holds"]]
    row = next(line for line in README.splitlines() if line.startswith("| All-reduce, MoE, MLA, linear attention"))
    if missed:
        assert "**no**" in row and all(m in row for m in missed)
    else:
        assert "**no**" not in row


@pytest.mark.parametrize("key", sorted(FIT["must_show"]))
def test_must_show_holds_only_within_its_bounds(key):
    v = FIT["must_show"][key]
    lim = v["bounds"]
    within = v["model"]["mape"] <= lim["mape"] and v["model"]["median_ape"] <= lim["median_ape"]
    assert v["holds"] == within, key
    reach = v["oracle"]["mape"] <= lim["mape"] and v["oracle"]["median_ape"] <= lim["median_ape"]
    assert v["reachable"] == reach, key

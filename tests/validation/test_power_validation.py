"""validate-power: the H100 profile holds the fit the report makes; rows are H100 only and map to profiles."""

import pytest

from specplan.profiles.registry import load_hardware
from specplan.validation.power import load_rows, power_markdown, run


def test_profile_split_is_the_reports_fit_and_rows_are_h100():
    rows = load_rows()
    assert len(rows) >= 150 and all(r["power_w"] > 0 for r in rows)
    res = run()
    spec = load_hardware("h100-sxm").power
    for k in ("active_floor", "compute", "memory"):
        assert getattr(spec, k) == pytest.approx(res["fitted"][k], abs=1e-3)
    # every scored row sits in [idle, TDP] of the model, and the fit rows are the dense lm-arena ones
    assert all(spec.idle_w <= r["model_w"] <= spec.tdp_w for r in res["rows"])
    assert {r["profile"] for r in res["rows"] if r["fit"]} == {"llama-3.1-8b", "llama-3.3-70b", "llama-3.1-405b",
                                                                "qwen3-8b", "qwen3-32b"}
    md = power_markdown(res)
    assert "all H100 rows" in md and "What it misses" in md

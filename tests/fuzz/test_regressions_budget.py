"""recommend --gpus across budgets (issue 44): every budget the flag accepts answers in bounded time, each layout's
replicas fill the budget (the idle GPUs hold no further unit), and each layout's answer keeps Little's law over the
whole budget (requests/s x (TTFT + (OSL - 1) TPOT) = its total concurrency; harness.littles_law)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import FAST  # noqa: E402
from harness import judge, run_cli  # noqa: E402


@pytest.mark.parametrize("gpus", ["1", "3", "12", "4096"])
def test_a_budget_answers_filled_and_by_littles_law(gpus):
    r = run_cli(["recommend", *FAST, "--isl", "512", "--osl", "64", "--engine", "vllm", "--mechanisms", "none",
                 "--gpus", gpus, "--json"], timeout_s=120)
    assert judge(r) == [], (r.err, r.exc, judge(r))
    assert r.rc == 0, r.err
    data = json.loads(r.out)
    g = int(gpus)
    for x in data["layouts"]:
        if x["best"] is None:
            continue
        unit = x["unit_gpus"]
        assert x["replicas"] == g // unit and 0 <= x["idle_gpus"] == g - x["gpus_used"] < unit
    assert data["best"]["tokens_per_s"] == max(x["tokens_per_s"] for x in data["layouts"] if x["best"] is not None)

"""Saved answers and prices (issue 44): `launch` refuses a fractional whole-number field in one line instead of
rounding it (draft_len 2.5 became 3), while a load (concurrency) is still rounded up to the requests it admits;
`--gpu-hour-usd 0` prices owned GPUs (energy only, with --kwh-usd) and a negative price is one line."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specplan.core.errors import SpecplanError
from specplan.planning.launch.emit import plan_from_answer

ROOT = Path(__file__).resolve().parents[2]
ANSWER = {"model": "llama-3.1-8b", "engine": "vllm", "mode": "agg", "isl": 1024, "osl": 256, "tp": 1,
          "best": {"mechanism": "eagle3", "draft_len": 3, "concurrency": 64.0, "pools": None}}


def run(*args):
    return subprocess.run([sys.executable, "-m", "specplan", *args], capture_output=True, text=True, cwd=ROOT)


@pytest.mark.parametrize("field, value", [("draft_len", 2.5), ("tp", 1.5), ("tree_tokens", 4.2), ("batch", 31.5),
                                          ("replicas", 2.5)])
def test_a_fractional_whole_number_is_refused(field, value):
    bad = {**ANSWER, "best": {**ANSWER["best"], field: value}}
    with pytest.raises(SpecplanError, match=rf"answer field '{field}' must be a whole number, got {value}"):
        plan_from_answer(bad)


def test_launch_refuses_draft_len_two_and_a_half_in_one_line(tmp_path):
    f = tmp_path / "answer.json"
    f.write_text(json.dumps({**ANSWER, "best": {**ANSWER["best"], "draft_len": 2.5}}))
    p = run("launch", str(f), "--engine", "vllm")
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "'draft_len' must be a whole number, got 2.5" in p.stderr


def test_a_fractional_load_is_rounded_up_to_the_requests_it_admits():
    # an open-loop answer's concurrency is Little's law's mean load: 63.2 in flight needs room for 64
    p = plan_from_answer({**ANSWER, "best": {**ANSWER["best"], "concurrency": 63.2}})
    assert p["max_batch"] == 64 and p["draft_len"] == 3


def test_a_zero_gpu_hour_price_is_energy_only():
    base = ["recommend", "--model", "llama-3.1-8b", "-H", "h100-sxm", "--isl", "128", "--osl", "1024",
            "--max-tpot-ms", "8", "--engine", "vllm", "--mechanisms", "none", "--json"]
    p = run(*base, "--gpu-hour-usd", "0", "--kwh-usd", "0.1")
    assert p.returncode == 0, p.stderr
    b = json.loads(p.stdout)["best"]
    # $0/GPU-hour: $/Mtok = J/token x PUE 1.3 (H100, air-cooled) x $0.1/kWh x 1e6 tokens / 3.6e6 J per kWh
    assert b["usd_per_mtok"] == pytest.approx(b["joules_per_token"] * 1.3 * 0.1 / 3.6, rel=1e-6)
    q = run(*base, "--gpu-hour-usd", "-1")
    assert q.returncode != 0 and len(q.stderr.strip().splitlines()) == 1
    assert "--gpu-hour-usd: must be >= 0, got -1" in q.stderr


@pytest.mark.parametrize("sched", [[[1, 8]], [[1, 8, 2.5]], [[1, "8", 2]], {"8": 2.5}, {"eight": 2}, [[1, 8, True]]])
def test_a_d_schedule_of_other_than_whole_triples_is_one_line(sched):
    # a row of two numbers, a fractional D, a string or a bool: refused naming the field (2.5 used to become 2)
    bad = {**ANSWER, "best": {**ANSWER["best"], "d_schedule": sched}}
    with pytest.raises(SpecplanError, match="answer field 'd_schedule' must be"):
        plan_from_answer(bad)


def test_a_d_schedule_of_whole_numbers_is_read():
    p = plan_from_answer({**ANSWER, "best": {**ANSWER["best"], "d_schedule": {"8": 3, "64": 2.0}}})
    assert p["d_schedule"] == [(1, 8, 3), (9, 64, 2)]


def test_the_default_token_budget_holds_every_sequences_verify():
    # no token_budget in the answer: one step must hold B x (1 + D) tokens (each sequence verifies its D drafts and
    # the token before them): 4096 x (1 + 3) = 16384, above the engines' default budget
    p = plan_from_answer({**ANSWER, "best": {**ANSWER["best"], "batch": 4096, "draft_len": 3}})
    assert p["token_budget"] == 16384

"""`specplan adaptive`: JSON keys, the SLO option and its alias, the committed example, one-line input errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE = ["adaptive", "-m", "llama-3.1-8b", "-H", "h100-sxm"]
SYN0 = ["--request-rate", "20", "--requests", "60", "--isl", "256", "--osl", "48"]
SYN = SYN0 + ["--acceptance-rate", "0.7"]
KEYS = {"tpot_p50_ms", "tpot_p99_ms", "ttft_p50_ms", "tokens_per_s_per_gpu", "tokens_per_s_per_user",
        "slo_attainment", "mean_draft_len"}


def run(*args):
    return subprocess.run([sys.executable, "-m", "specplan", *args], capture_output=True, text=True, cwd=ROOT,
                          env={"SPECPLAN_NO_PROGRESS": "1", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})


def one_line_error(r, needle):
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert needle in lines[0], lines[0]


def test_json_has_the_issue_keys_per_policy():
    r = run(*BASE, *SYN, "--policies", "fixed:3,sglang,model,oracle", "--max-tpot-ms", "9", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert [p["policy"] for p in d["policies"]] == ["fixed:3", "sglang", "model", "oracle"]
    for p in d["policies"]:
        assert KEYS <= set(p)
    assert set(d["series"]["model"]) >= {"t_s", "draft_len", "batch", "al", "tpot_ms"}


def test_slo_alias_is_the_same_option():
    a = run(*BASE, *SYN, "--policies", "model", "--max-tpot-ms", "7", "--json")
    b = run(*BASE, *SYN, "--policies", "model", "--slo-tpot-ms", "7", "--json")
    assert a.returncode == 0 and a.stdout == b.stdout


def test_example_slo_changes_the_choice():
    """The committed example (α 0.9 → 0.4 while load rises): with --max-tpot-ms the model policy picks other
    D than the same policy told to ignore the SLO, and meets the SLO for more requests. Fails if the option or
    the policy ignores the target."""
    r = run(*BASE, "--workload", "examples/adaptive/workload.csv", "--policies", "model,model:slo=0",
            "--max-draft-len", "8", "--max-tpot-ms", "8", "--json")
    assert r.returncode == 0, r.stderr
    aware, blind = json.loads(r.stdout)["policies"]
    assert aware["mean_draft_len"] < blind["mean_draft_len"] - 0.3
    assert aware["slo_attainment"] > blind["slo_attainment"] + 0.02


def test_help_shows_the_trace_syntax_literally():
    r = run(*BASE, "--help")
    assert "alpha[@batch]xITER" in " ".join(r.stdout.split()).replace("│", "")


def test_trace_shorthand_still_works():
    r = run(*BASE, "--trace", "0.9@8x50,0.5@32x50", "--context", "2048", "--policies", "static:3,sglang,oracle",
            "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["policies"]
    assert rows[0]["policy"] == "fixed:3" and all(x["tokens_per_s_per_user"] > 0 for x in rows)


@pytest.mark.parametrize("csv,needle", [
    ("arrival_s,isl\n0,10\n", "missing column 'osl'"),
    ("arrival_s,isl,osl\n0,10,5\n1,-3,5\n", "row 2, column 'isl': must be >= 1 token, got -3"),
    ("arrival_s,isl,osl\n0,10,5\n1,10,0\n", "row 2, column 'osl': must be >= 1 token, got 0"),
    ("arrival_s,isl,osl\n0,10,5\n2,10,5\n1,10,5\n", "row 3, column 'arrival_s': 1 is before row 2's 2"),
    ("arrival_s,isl,osl\n0,10,5\nx,10,5\n", "row 2, column 'arrival_s': expected a number, got 'x'"),
    ("arrival_s,isl,osl,alpha\n0,10,5,1.5\n", "row 1, column 'alpha': must be in [0, 1], got 1.5"),
    ("arrival_s,isl,osl\n0,10\n", "row 1, column 'osl': missing value"),
])
def test_bad_workload_is_one_line_naming_row_and_column(tmp_path, csv, needle):
    p = tmp_path / "w.csv"
    p.write_text(csv)
    one_line_error(run(*BASE, "--workload", str(p), "--acceptance-rate", "0.7"), needle)


@pytest.mark.parametrize("args,needle", [
    (["--tiers", "1,7,3"], "--tiers: position 3: 3 is not above 7"),
    (["--tiers", "1,-3"], "--tiers: position 2: must be >= 0, got -3"),
    (["--seed", "-1"], "--seed: must be an integer >= 0"),
    (["--policies", "fixed:3,greedy"], "policy: unknown 'greedy'"),
    (["--max-tpot-ms", "0"], "--max-tpot-ms: must be > 0"),
    (["--captured-d", "0,abc"], "--captured-d: position 2: expected an integer, got 'abc'"),  # said --tiers
    (["--mechanism", "none", "--policies", "fixed:0,fixed:3,oracle"],
     "--mechanism none: no drafter, so only fixed:0 runs; got fixed:3, oracle"),  # priced free drafts
])
def test_bad_options_are_one_line(args, needle):
    one_line_error(run(*BASE, *SYN, *args), needle)


def test_an_acceptance_rate_out_of_range_names_its_own_flag():
    """It said --acceptance-dist, a flag the user did not give."""
    one_line_error(run(*BASE, *SYN0, "--acceptance-rate", "1.5"), "--acceptance-rate: α must be in [0, 1], got 1.5")


def test_a_run_that_does_not_fit_says_so_in_the_table():
    """Llama-3.1-405B on one H100: every request runs alone on memory the GPU does not have; the table's fits
    column says no and one line says why (only --json said over_capacity before)."""
    r = run(*BASE[:2], "llama-3.1-405b", "-H", "h100-sxm", "--concurrency", "4", "--requests", "8", "--isl", "64",
            "--osl", "8", "--acceptance-rate", "0.7", "--policies", "fixed:0,fixed:2,oracle")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    head = next(i for i, x in enumerate(lines) if x.startswith("policy"))
    assert lines[head].split()[-1] == "fits"
    assert [x.split()[-1] for x in lines[head + 2:head + 5]] == ["no", "no", "-"]
    assert any(x.startswith("fits: no: the weights leave 0.0 GB of") for x in lines)


def test_bad_acceptance_dist_is_one_line():
    one_line_error(run(*BASE, *SYN0, "--acceptance-dist", "beta:0,1"), "beta parameters must be > 0")
    one_line_error(run(*BASE, *SYN0), "acceptance: give --acceptance-rate A, --acceptance-dist SPEC")


def test_bad_trace_and_sglang_config(tmp_path):
    one_line_error(run(*BASE, "--trace", "0.9@0x10", "--context", "1024"), "batch and iterations must be >= 1")
    p = tmp_path / "cfg.json"
    p.write_text('{"1": {"candidate_steps": [1, "3"]}}')
    one_line_error(run(*BASE, *SYN, "--sglang-config", str(p)), "candidate_steps must be a list of non-negative")

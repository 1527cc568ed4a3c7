"""CLI: predict / recommend output, JSON keys, and one-line errors with exit code 2 (Must-show 4)."""

import json
import subprocess
import sys

import pytest


def run(*args):
    return subprocess.run([sys.executable, "-m", "specplan", *args], capture_output=True, text=True)


def test_predict_json_keys():
    p = run("predict", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "4", "--context", "2048",
            "--mechanism", "eagle3", "--draft-len", "3", "--acceptance-rate", "0.7", "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    for key in ("acceptance_length", "speedup", "tokens_per_s_per_user", "tokens_per_s_per_gpu", "guidelines"):
        assert key in r
    assert r["baseline"]["step_ms"] > 0 and r["speculative"]["step_ms"] > 0
    assert r["speculative"]["draft_ms"] > 0 and r["speculative"]["verify_ms"] > 0
    assert r["memory"]["total_gb"] > 0 and r["memory"]["fits"] is True
    assert r["guidelines"]["g_dev"] == 4


def test_recommend_llama_names_d4():
    p = run("recommend", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "64", "--context", "1024",
            "--mechanisms", "eagle3", "--acceptance", "eagle3=0.8", "--max-draft-len", "12")
    assert p.returncode == 0, p.stderr
    assert "best: eagle3 D = 4" in p.stdout
    assert "verify GEMMs turn compute-bound at D = 4" in p.stdout


@pytest.mark.parametrize("args,msg", [
    (["--mechanism", "eagle3", "--draft-len", "3", "--acceptance-rate", "1.5"], "α must be in [0, 1]"),
    (["--mechanism", "eagle3", "--draft-len", "-1", "--acceptance-rate", "0.5"], "draft length"),
    (["--mechanism", "eagle3", "--draft-len", "3", "--acceptance-length", "5"], "AL must be in [1, 1 + D]"),
    (["--mechanism", "eagle9", "--draft-len", "3", "--acceptance-rate", "0.5"], "unknown mechanism 'eagle9'"),
    (["--mechanism", "dflash", "--draft-len", "3"], "mechanism dflash"),
    (["--mechanism", "self", "--draft-len", "2", "--acceptance-rate", "0.7", "--draft-kv-budget", "-5"],
     "error: draft KV budget (--draft-kv-budget): must be >= 0 tokens, got -5"),
])
def test_bad_inputs_one_line_exit_2(args, msg):
    p = run("predict", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "1", "--context", "1024",
            *args)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and msg in lines[0]


def test_recommend_negative_target_tps_one_line_exit_2():
    p = run("recommend", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--context", "1024",
            "--target-tps-per-user", "-10", "--mechanisms", "eagle3", "--acceptance", "eagle3=0.8")
    assert p.returncode == 2
    assert p.stderr == "error: --target-tps-per-user: must be > 0, got -10\n"  # the one rule (core/limits)


def test_predict_lpu_same_lpu_draft_counts_its_chips():
    p = run("predict", "-m", "llama-3.1-8b", "-H", "groq-3-lpu", "-b", "1", "-c", "4096", "--mechanism", "external",
            "--draft-model", "llama-3.2-1b", "--draft-len", "4", "--acceptance-rate", "0.7", "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["devices"] == {"target": 17.0, "draft": 3.0}  # ceil(9.60 GB / 0.5 GB) = 20 chips in all
    assert r["tokens_per_s_per_device"] == pytest.approx(r["tokens_per_s_per_gpu"] * 17 / 20, rel=1e-5)

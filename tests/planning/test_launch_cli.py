"""CLI: recommend --emit and `specplan launch RESULT.json --engine E` (must-show 1 commands)."""

import json
import subprocess
import sys
from pathlib import Path

from specplan.planning.launch.emit import Launch, check_launch

ROOT = Path(__file__).resolve().parents[2]
MUST_SHOW = ["recommend", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--isl", "1024", "--osl", "256",
             "--max-tpot-ms", "20", "--engine", "vllm", "--mechanisms", "eagle3", "--acceptance", "eagle3=0.8"]


def run(*args):
    return subprocess.run([sys.executable, "-m", "specplan", *args], capture_output=True, text=True, cwd=ROOT)


def test_recommend_emit_json_and_launch_from_the_saved_answer(tmp_path):
    r = run(*MUST_SHOW, "--emit", "sglang", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    best, launch = out["best"], out["launch"]
    fields = {k: launch[k] for k in ("engine", "version", "argv", "files", "notes")}
    assert check_launch(Launch(**fields)) == []
    argv = launch["argv"]
    assert argv[argv.index("--speculative-num-steps") + 1] == str(best["draft_len"])
    assert argv[argv.index("--max-running-requests") + 1] == str(int(best["concurrency"]))
    saved = tmp_path / "answer.json"
    saved.write_text(r.stdout)
    for engine in ("vllm", "trtllm"):
        s = run("launch", str(saved), "--engine", engine, "--json")
        assert s.returncode == 0, s.stderr
        assert check_launch(Launch(**json.loads(s.stdout))) == []
    text = run("launch", str(saved), "--engine", "vllm")
    assert text.returncode == 0 and "vllm serve meta-llama/Meta-Llama-3.1-8B" in text.stdout
    assert '"num_speculative_tokens":%d' % best["draft_len"] in text.stdout


def test_launch_errors_are_one_line(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    r = run("launch", str(bad), "--engine", "vllm")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "not JSON" in r.stderr
    agg = tmp_path / "a.json"
    agg.write_text(json.dumps({"model": "llama-3.1-8b", "best": {"mechanism": "eagle3", "draft_len": 3, "batch": 8}}))
    r = run("launch", str(agg), "--engine", "dynamo", "--backend", "nosuch")
    assert r.returncode == 2 and "dynamo backend must be one of" in r.stderr and r.stderr.count("\n") == 1
    med = tmp_path / "m.json"
    med.write_text(json.dumps({"model": "llama-3.1-8b", "best": {"mechanism": "medusa", "draft_len": 3, "batch": 8}}))
    r = run("launch", str(med), "--engine", "vllm")
    assert r.returncode == 2 and "medusa" in r.stderr and r.stderr.count("\n") == 1

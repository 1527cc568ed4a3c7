"""Answers that should warn (issue 42): a serving answer bound by no SLA says so, with its latency."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASE = ["recommend", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--isl", "1024", "--osl", "256", "--engine", "vllm",
        "--mechanisms", "eagle3", "--acceptance", "eagle3=0.7", "--max-draft-len", "2"]


def run(*args):
    return subprocess.run([sys.executable, "-m", "specplan", *args], capture_output=True, text=True, cwd=ROOT)


def test_a_gpus_answer_without_an_sla_warns():
    r = run(*BASE, "--gpus", "1", "--mode", "agg")
    assert r.returncode == 0, r.stderr
    assert "warning: no SLA given (--max-ttft-ms / --max-tpot-ms)" in r.stdout
    with_sla = run(*BASE, "--gpus", "1", "--mode", "agg", "--max-tpot-ms", "30")
    assert with_sla.returncode == 0 and "warning: no SLA" not in with_sla.stdout


def test_a_serving_answer_without_an_sla_warns():
    r = run(*BASE)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("warning: no SLA"))
    best = next(x for x in r.stdout.splitlines() if x.startswith("best: "))
    ttft = best.split("TTFT ")[1].split(" ms")[0]  # the best line's TTFT, rounded to whole ms in the warning
    assert f"TTFT {float(ttft):,.0f} ms" in line


def test_a_gpus_answer_says_whether_speculation_pays():
    """issue 42: a one-line verdict in --gpus answers, the answer's tokens/s/GPU over the best without speculation
    on its layout (the number --json carries as best.best.speedup_vs_none); --objective energy is refused there."""
    import json

    args = [*BASE, "--gpus", "2", "--mode", "agg", "--max-tpot-ms", "30"]
    text, js = run(*args), run(*args, "--json")
    assert text.returncode == 0 and js.returncode == 0, text.stderr + js.stderr
    best = json.loads(js.stdout)["best"]["best"]
    assert best["mechanism"] == "eagle3" and best["speedup_vs_none"] > 1
    assert f"speculation pays: x {best['speedup_vs_none']:.2f} the tokens/s/GPU of the best without" in text.stdout
    e = run(*args, "--objective", "energy")
    assert e.returncode == 2 and "--objective energy ranks serving points: drop --gpus" in e.stderr
    c = run(*args, "--objective", "cost")  # not silently ignored: said to rank as the budget's tokens/s
    assert c.returncode == 0 and c.stdout.startswith("note: --objective cost with --gpus")
    assert c.stdout.splitlines()[1:] == text.stdout.splitlines()

"""Habits users bring from the engines: their flags answered with one line naming ours (exit 2, no traceback),
and engine / mechanism ids in any case (vLLM, EAGLE3)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE = ["-m", "llama-3.1-8b", "-H", "h100-sxm"]


def run(*args):
    return subprocess.run([sys.executable, "-m", "specplan", *args], capture_output=True, text=True, cwd=ROOT)


@pytest.mark.parametrize("command, flag, ours", [
    ("predict", ["-tp", "2"], "with --tp"),
    ("pareto", ["--tensor-parallel-size", "2"], "with --tp or --layouts"),
    ("recommend", ["--tp-size=2"], "with --tp"),
    ("predict", ["--num-speculative-tokens", "3"], "with --draft-len"),
    ("pareto", ["--speculative-num-steps", "3"], "with --max-draft-len"),
    ("predict", ["--max-num-seqs", "64"], "with --batch or --concurrency"),
])
def test_engine_flag_is_one_line_naming_ours(command, flag, ours):
    r = run(command, *BASE, *flag)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    name = flag[0].split("=")[0]
    assert lines[0].startswith(f"error: specplan {command}: {name} is an engine flag; specplan sets ")
    assert lines[0].endswith(ours)


def test_engine_flag_names_the_command_own_option():
    """The same flag gets the option each command has: pareto caps the batch, adaptive the running batch."""
    from specplan.cli import _click_group
    from specplan.cli.foreign import foreign_flag_error

    g = _click_group
    assert foreign_flag_error(["pareto", "--max-num-seqs", "8"], g).endswith("with --batch-max or --concurrency")
    assert foreign_flag_error(["adaptive", "--max-num-seqs", "8"], g).endswith(
        "with --max-running or --concurrency")
    # Not a flag before `--`, nor our own --tp: nothing to say.
    assert foreign_flag_error(["pareto", "--tp", "2"], g) is None
    assert foreign_flag_error(["pareto", "--", "-tp"], g) is None
    # A command without such an option: the line says where the option is.
    assert "on predict, recommend, pareto or adaptive" in foreign_flag_error(["profiles", "list", "-tp"], g)


def test_engine_and_mechanism_ids_are_case_folded():
    from specplan.profiles.registry import load_engine, load_hardware

    assert load_engine("vLLM").id == "vllm" and load_engine("TRTLLM").id == "trtllm"
    assert load_hardware("H100-SXM").id == "h100-sxm"
    args = ["-D", "3", "--isl", "1024", "--osl", "128", "--concurrency", "8", "--json"]
    upper = run("predict", *BASE, "--mechanism", "EAGLE3", "--acceptance", "EAGLE3=0.7", "--engine", "vLLM", *args)
    lower = run("predict", *BASE, "--mechanism", "eagle3", "--acceptance", "eagle3=0.7", "--engine", "vllm", *args)
    assert upper.returncode == 0, upper.stderr
    assert json.loads(upper.stdout) == json.loads(lower.stdout)
    r = run("recommend", *BASE, "-c", "4k", "--mechanisms", "EAGLE3,NGRAM", "--acceptance", "NGRAM=0.5", "--json")
    assert r.returncode == 0, r.stderr
    assert {x["mechanism"] for x in json.loads(r.stdout)["per_mechanism"]} == {"none", "eagle3", "ngram"}


def test_predict_names_the_batch_of_its_step_block():
    """predict with a workload prints the serving table, then the decode step alone at the baseline's decode batch
    (not the speculative one): the line between them says which batch and what the step leaves out."""
    p = run("predict", *BASE, "--isl", "1024", "--osl", "256", "--mechanism", "eagle3", "-D", "3",
            "--concurrency", "128", "--mode", "disagg")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    i = next(k for k, x in enumerate(lines) if x.startswith("decode step alone"))
    batch = lines[i].split("decode batch ")[1].split(":")[0]
    assert f"batch {batch}, context" in lines[i + 1] and "serving speedup" in lines[i - 1]
    p1 = run("predict", *BASE, "--batch", "8", "--context", "1024")
    assert "none D = 0 (1 verified token);" in p1.stdout and "(4 verified tokens)" in p.stdout


@pytest.mark.parametrize("command", ["adaptive", "study", "pareto", "validate-speculation", "validate-serving",
                                     "validate-round", "validate-power"])
def test_every_output_option_takes_o_out_and_output(command):
    """README: one spelling everywhere: -o/--out, --output an alias (adaptive took only --output, study and pareto
    only --out)."""
    p = run(command, "--help")
    assert p.returncode == 0, p.stderr
    assert "-o, --out, --output" in " ".join(p.stdout.split()), p.stdout


def test_cost_objective_names_the_device_without_a_price():
    """--objective cost over two devices, one without a power model or price (a100-sxm-80gb): the error names it."""
    p = run("recommend", *BASE, "-H", "a100-sxm-80gb", "--isl", "1024", "--osl", "256", "--objective", "cost")
    assert p.returncode == 2 and "no usd_per_mtok on a100-sxm-80gb" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("command, extra", [("predict", ["--batch", "1"]), ("step", ["--batch", "1"]),
                                            ("recommend", []), ("pareto", ["-o", "OUT", "--no-plots"]),
                                            ("adaptive", ["--trace", "0.8@8x10"])])
def test_a_context_beyond_the_model_is_refused_on_the_step_path_too(command, extra, tmp_path):
    """Llama-3.1-8B's config: max_position_embeddings 131072 (max_context_len); the serving commands refused
    ISL + OSL beyond it, the step path priced a 10M-token context silently."""
    extra = [str(tmp_path) if x == "OUT" else x for x in extra]
    p = run(command, *BASE, *extra, "--context", "10000000")
    assert p.returncode == 2 and "exceeds llama-3.1-8b's context of 131072 tokens" in p.stderr, p.stderr
    if command != "pareto":  # (a 128k pareto grid is slow; its check is the same function)
        assert run(command, *BASE, *extra, "--context", "128k").returncode == 0

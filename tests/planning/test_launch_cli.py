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
    # the answer's D by load reaches the launch (issue 42): vLLM takes the schedule, with its largest D as
    # num_speculative_tokens; the answer's own D is one of the schedule's bands
    sched = out["d_by_load"]["vllm"]
    assert best["draft_len"] in [d for _, _, d in sched]
    assert '"num_speculative_tokens":%d' % max(d for _, _, d in sched) in text.stdout
    assert '"num_speculative_tokens_per_batch_size":%s' % json.dumps(sched, separators=(",", ":")) in text.stdout


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


DRAFT_70B = ["recommend", "-m", "meta-llama/Llama-3.3-70B-Instruct", "-H", "h100-sxm", "--tp", "4", "--isl", "1024",
             "--osl", "256", "--max-tpot-ms", "30", "--engine", "vllm", "--mechanisms", "eagle3", "--acceptance",
             "eagle3=0.7", "--draft-model", "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B"]


def test_must_show_3_a_draft_by_repo_id_round_trips(tmp_path):
    """issue 42 must-show 3: a draft named by its Hugging Face repo (no built-in profile) is priced as a head of the
    target's shape, emitted by its repo id, and a saved --json answer launches with it; the model by its repo too."""
    r = run(*DRAFT_70B, "--emit", "vllm", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["model"], out["hf_repo"], out["draft_model"]) == (
        "llama-3.3-70b", "meta-llama/Llama-3.3-70B-Instruct", "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B")
    sc = json.loads(out["launch"]["argv"][out["launch"]["argv"].index("--speculative-config") + 1])
    assert sc["model"] == "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B"
    assert out["launch"]["argv"][2] == "meta-llama/Llama-3.3-70B-Instruct"
    assert any("no built-in profile; priced as a head of llama-3.3-70b's shape" in n for n in out["launch"]["notes"])
    saved = tmp_path / "a.json"
    saved.write_text(json.dumps({k: v for k, v in out.items() if k != "launch"}))
    for engine in ("vllm", "sglang", "trtllm"):
        s = run("launch", str(saved), "--engine", engine, "--json")
        assert s.returncode == 0, s.stderr
        text = json.dumps(json.loads(s.stdout))
        assert "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B" in text and "meta-llama/Llama-3.3-70B-Instruct" in text


def test_a_missing_head_is_refused_before_the_search():
    """--emit with a draft mechanism and no draft known for the model: one line, before any pricing."""
    r = run(*[a for a in DRAFT_70B if a not in ("--draft-model", "yuhuili/EAGLE3-LLaMA3.3-Instruct-70B")],
            "--emit", "vllm")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "needs a draft model for llama-3.3-70b" in r.stderr and "refused before the search" in r.stderr
    assert r.stdout == ""


def test_an_unknown_repo_id_is_one_line():
    r = run("recommend", "-m", "nosuch-org/NoSuchModel", "-H", "h100-sxm", "--context", "4096", "--batch", "8")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no built-in model profile has this" in r.stderr
    r = run(*DRAFT_70B[:-1], "nosuch/draft", "--mechanisms", "external", "--acceptance", "external=0.6")
    assert r.returncode == 2 and "an external draft is priced from its profile" in r.stderr


def test_emit_prices_with_its_engine_unless_engine_says_otherwise():
    """One engine throughout: --emit vllm without --engine prices with vLLM (the answer's engine); --engine X
    --emit Y keeps X's pricing and says so in the launch's notes."""
    base = [a for a in MUST_SHOW if a not in ("--engine", "vllm")]
    r = run(*base, "--emit", "vllm", "--json")
    out = json.loads(r.stdout)
    assert out["engine"] == "vllm" and not any("priced with" in n for n in out["launch"]["notes"])
    r2 = run(*MUST_SHOW, "--emit", "trtllm", "--json")
    notes = json.loads(r2.stdout)["launch"]["notes"]
    assert any(n.startswith("the answer was priced with vllm's engine profile and is launched on trtllm") for n in notes)
    r3 = run(*base, "--engine", "ideal", "--emit", "sglang", "--json")
    assert any("priced with the ideal engine" in n for n in json.loads(r3.stdout)["launch"]["notes"])

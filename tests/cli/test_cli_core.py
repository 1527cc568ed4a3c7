"""CLI: profiles, step JSON, and bad input as one clear line with a non-zero exit."""

import json
import subprocess
import sys

import pytest

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def run(*args):
    return subprocess.run([sys.executable, "-m", "specplan", *args], capture_output=True, text=True, cwd=ROOT)


def test_profiles_list_json_has_every_id():
    r = run("profiles", "list", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    hw = {h["id"] for h in data["hardware"]}
    models = {m["id"] for m in data["models"]}
    assert {"h100-sxm", "h200-sxm", "b200", "gb200", "a100-sxm-80gb", "mi300x", "groq-lpu", "groq-3-lpu"} <= hw
    assert {"llama-3.1-8b", "qwen3.5-122b-a10b", "deepseek-v3", "eagle3-llama-3.1-8b", "nemotron-3.5-lightning-30b-a3b"} <= models


def test_profiles_list_shows_acceptance_and_engine_profiles_one_line_each():
    """Every shipped acceptance profile (specplan/data/acceptance_profiles/*.yaml) and engine profile
    (engine_profiles/*.yaml) on one line of its table: mechanism, model, dataset and source for acceptance."""
    import yaml

    acc_dir = ROOT / "specplan" / "data" / "acceptance_profiles"
    eng_dir = ROOT / "engine_profiles"
    r = run("profiles", "list")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    acc_ids = sorted(p.stem for p in acc_dir.glob("*.yaml"))
    eng_ids = sorted(p.stem for p in eng_dir.glob("*.yaml"))
    assert acc_ids and {"vllm", "trtllm", "sglang", "ideal"} <= set(eng_ids)
    a = lines.index(next(x for x in lines if x.startswith("Acceptance profiles")))
    e = lines.index(next(x for x in lines if x.startswith("Engine profiles")))
    assert f"({len(acc_ids)})" in lines[a] and f"({len(eng_ids)})" in lines[e]
    for i in acc_ids:
        y = yaml.safe_load((acc_dir / f"{i}.yaml").read_text())
        row = [x for x in lines[a:e] if x.startswith(i + " ")]
        assert len(row) == 1, i
        assert y["mechanism"] in row[0] and y["target"] in row[0] and y["workload"] in row[0], row[0]
        assert any(part in row[0] for part in ("https://", "reference/")), row[0]  # the source, in brief
    for i in eng_ids:
        row = [x for x in lines[e:] if x.startswith(i + " ")]
        assert len(row) == 1 and f"engine_profiles/{i}.yaml" in row[0], i
    data = json.loads(run("profiles", "list", "--json").stdout)
    assert [x["id"] for x in data["acceptance"]] == acc_ids and [x["id"] for x in data["engines"]] == eng_ids
    vllm = next(x for x in data["engines"] if x["id"] == "vllm")
    want = 1e3 * yaml.safe_load((eng_dir / "vllm.yaml").read_text())["host_step_s"]
    assert vllm["host_step_ms"] == round(want, 3)


def test_step_json_fields():
    r = run("step", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "4", "--context", "2048", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["step_ms"] > 0
    assert set(d["breakdown_ms"]) >= {"gemm", "attention", "moe", "communication", "overhead"}
    assert d["memory"]["fits"] is True and d["memory"]["max_batch"] > 4 and d["memory"]["total_gb"] > 16


def test_does_not_fit_is_a_result_not_an_error():
    r = run("step", "--model", "llama-3.1-405b", "--hardware", "h100-sxm", "--batch", "1", "--context", "1024", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["memory"]["fits"] is False


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--model", "llama-3.1-8x", "--hardware", "h100-sxm", "--batch", "1", "--context", "10"], "did you mean 'llama-3.1-8b'"),
        (["--model", "llama-3.1-8b", "--hardware", "h100", "--batch", "1", "--context", "10"], "did you mean 'h100-sxm'"),
        (["--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "0", "--context", "10"], "batch: must be"),
        (["--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "-3", "--context", "10"], "batch: must be"),
        (["--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--batch", "1", "--context", "-1"], "context: must be"),
        (["--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--tp", "3", "--batch", "1", "--context", "10"], "does not divide"),
        (["--model", "llama-3.1-8b", "--hardware", "a100-sxm-80gb", "--dtype", "fp8", "--batch", "1", "--context", "10"], "cannot compute in fp8"),
        (["--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--dtype", "fp7", "--batch", "1", "--context", "10"], "unknown dtype 'fp7'"),
        (["--model", "/nonexistent/model.yaml", "--hardware", "h100-sxm", "--batch", "1", "--context", "10"], "file not found"),
    ],
)
def test_bad_input_one_line(args, needle):
    r = run("step", *args)
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert needle in lines[0]
    assert "Traceback" not in r.stderr


def test_malformed_and_wrong_field_yaml(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: x\nname: [unclosed\n")
    r = run("step", "--model", "llama-3.1-8b", "--hardware", str(bad), "--batch", "1", "--context", "10")
    assert r.returncode != 0 and "malformed YAML" in r.stderr and str(bad) in r.stderr
    wrong = tmp_path / "wrong.yaml"
    src = (ROOT / "hardware_profiles" / "h100-sxm.yaml").read_text()
    wrong.write_text(src.replace("mem_bandwidth_bytes_s: 3.35e12", "mem_bandwidth_bytes_s: -1"))
    r = run("step", "--model", "llama-3.1-8b", "--hardware", str(wrong), "--batch", "1", "--context", "10")
    assert r.returncode != 0
    assert "mem_bandwidth_bytes_s" in r.stderr and "-1" in r.stderr and str(wrong) in r.stderr
    extra = tmp_path / "extra.yaml"
    extra.write_text(src + "\nmem_bandwith: 1\n")
    r = run("step", "--model", "llama-3.1-8b", "--hardware", str(extra), "--batch", "1", "--context", "10")
    assert r.returncode != 0 and "mem_bandwith" in r.stderr


@pytest.mark.parametrize(
    "args, needle",
    [
        (["step", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "-b", "abc", "-c", "10"], "Invalid value for '--batch'"),
        (["step", "--model", "llama-3.1-8b"], "Missing option '--hardware'"),
        (["nosuch"], "No such command 'nosuch'"),
        (["step", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "-b", "1", "-c", "1", "--bogus", "3"], "No such option"),
    ],
)
def test_usage_errors_are_one_line(args, needle):
    r = run(*args)
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], r.stderr


def test_bare_command_prints_help():
    r = run()
    assert r.returncode == 0 and "step" in r.stdout and "recommend" in r.stdout


CTX_COMMANDS = {
    "step": ["step", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-b", "8", "--json"],
    "predict": ["predict", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-b", "8", "--mechanism", "eagle3", "-D", "3",
                "--acceptance-rate", "0.7", "--json"],
    "recommend": ["recommend", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-b", "8", "--mechanisms", "eagle3",
                  "--acceptance", "eagle3=0.7", "--max-draft-len", "4", "--json"],
    "adaptive": ["adaptive", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--trace", "0.9@8x20", "--policies", "static:3",
                 "--json"],
}


@pytest.mark.parametrize("cmd", sorted(CTX_COMMANDS))
def test_context_k_suffix_everywhere(cmd):
    """--context 32k = 32768 as in `pareto`; the same JSON as the plain integer; a bad value is one line."""
    a = run(*CTX_COMMANDS[cmd], "--context", "32k")
    b = run(*CTX_COMMANDS[cmd], "--context", "32768")
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout
    if cmd != "adaptive":
        assert json.loads(a.stdout)["context_len"] == 32768
    bad = run(*CTX_COMMANDS[cmd], "--context", "32x")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip() == "error: --context: expected a token count such as 4096 or 32k, got '32x'"

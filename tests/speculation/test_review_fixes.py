"""New-user review: draft devices in the text outputs, the integer batch search, LPU labels, rho_time, the shared
binding rule, recommend's draft options, tree notes and the MLA-under-TP note."""

import json
import subprocess
import sys

import numpy as np
import pytest

from specplan.planning.predict import predict_summary
from specplan.planning.recommend import recommend
from specplan.speculation.acceptance import Acceptance
from specplan.speculation.guidelines import StepCurve, binding_line
from specplan.speculation.speedup import evaluate
from specplan.planning.sweep import sweep
from specplan.speculation.spec import DraftSearch
from specplan.planning.sweep import SweepAxes
from specplan.model.deployment import Deployment
from specplan.speculation.spec import Speculation


def run(*args):
    return subprocess.run([sys.executable, "-m", "specplan", *args], capture_output=True, text=True)


LPU_DRAFT = ("-m", "qwen3.5-122b-a10b", "-H", "b200", "--tp", "2", "-c", "8192", "--batch", "64",
             "--mechanisms", "external", "--draft-model", "qwen3.5-35b-a3b", "--draft-hardware", "groq-3-lpu")


def test_recommend_takes_draft_hardware_and_shows_draft_devices():
    p = run("recommend", *LPU_DRAFT)
    assert p.returncode == 0, p.stderr
    assert "draft dev" in p.stdout and "tok/s/device" in p.stdout
    best = next(x for x in p.stdout.splitlines() if x.startswith("best:"))
    assert "tok/s/device over 2 target +" in best and "draft devices" in best
    j = json.loads(run("recommend", *LPU_DRAFT, "--json").stdout)
    b = j["best"]
    assert b["draft_devices"] > 0 and b["target_devices"] == 2
    assert b["tokens_per_s_per_device"] == pytest.approx(
        b["tokens_per_s_per_gpu"] * 2 / (2 + b["draft_devices"]), rel=1e-6)


@pytest.mark.parametrize("mech,extra,opt,val", [
    ("external", ("--draft-model", "llama-3.2-1b"), "--draft-dtype", "fp8"),
    ("self", (), "--draft-kv-budget", "512"),
])
def test_recommend_passes_draft_dtype_and_kv_budget(mech, extra, opt, val):
    base = ("-m", "llama-3.1-8b", "-H", "h100-sxm", "-c", "8192", "--batch", "16", "--mechanisms", mech,
            "--acceptance", f"{mech}=0.6", "--max-draft-len", "6", "--json", *extra)
    a = json.loads(run("recommend", *base).stdout)["ranked"]
    p = run("recommend", *base, opt, val)
    assert p.returncode == 0, p.stderr
    b = json.loads(p.stdout)["ranked"]
    fast = {x["draft_len"]: x["draft_s"] for x in b}
    assert all(fast[x["draft_len"]] < x["draft_s"] for x in a if x["draft_len"] > 0)


def test_predict_text_shows_draft_devices():
    p = run("predict", "-m", "qwen3.5-122b-a10b", "-H", "b200", "--tp", "2", "-c", "8192", "-b", "64",
            "--mechanism", "external", "-D", "4", "--draft-model", "qwen3.5-35b-a3b", "--draft-hardware",
            "groq-3-lpu", "--acceptance-profile", "external-qwen3.5-35b-a3b-qwen3.5-122b-speedbench32k")
    assert p.returncode == 0, p.stderr
    assert "tok/s/device" in p.stdout
    assert "devices: 2 target + " in p.stdout


def test_recommend_searches_every_integer_batch():
    r = recommend("llama-3.3-70b", "h200-sxm", tp=2, context_len=32768, target_tps_per_user=50,
                  drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": "0.75"}, max_draft_len=16))
    df = sweep("llama-3.3-70b", "h200-sxm", axes=SweepAxes(tp=[2], contexts=[32768]),
               drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": 0.75}, max_draft_len=16),
               progress=False)
    ok = df[df["fits"] & (df["tok_s_user"] >= 50)]
    assert r["best"]["tokens_per_s_per_gpu"] == pytest.approx(float(ok["tok_s_gpu"].max()), rel=1e-4)
    assert r["best"]["batch"] == 11  # not on the old coarse list 1, 2, 3, 4, 6, 8, 12, ...


def test_predict_lpu_labels_chips_and_hides_tiles():
    p = run("predict", "-m", "llama-3.1-8b", "-H", "groq-3-lpu", "-b", "8", "-c", "1024", "--mechanism", "eagle3",
            "-D", "3", "--acceptance-rate", "0.7")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "tok/s/GPU" not in out and "tok/s/chip" in out
    assert "chips of 0.50 GB SRAM" in out and "per device" not in out and "fits: true" not in out
    assert "attention tiles n/a (LPU)" in out and "tile aligned" not in out


def test_rho_time_is_draft_time_per_token_over_baseline_step():
    r = evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                 Speculation(mechanism="eagle3", draft_len=np.arange(0, 5), acceptance=Acceptance.from_rate(0.7)),
                 batch=8, context_len=1024)
    d = np.arange(0, 5)
    want = np.where(d > 0, r["draft_s"] / np.maximum(d, 1), 0) / r["baseline_step_s"]
    assert np.allclose(r["rho_time"], want)
    assert 0 < r["rho_time"][3] < 0.2 and r["rho"][3] < r["rho_time"][3]  # cost ratio, not the layer ratio
    s = predict_summary("llama-3.1-8b", "h100-sxm", batch=8, mechanism="eagle3", draft_len=3,
                        acceptance=Acceptance.from_rate(0.7))
    assert s["rho_time"] == pytest.approx(float(r["rho_time"][3]))
    p = run("predict", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-b", "8", "-c", "1024", "--mechanism", "eagle3",
            "-D", "3", "--acceptance-rate", "0.7")
    assert "draft/target step time 0.0" in p.stdout and "layer ratio ρ" in p.stdout


def test_g4_sentence_gives_the_time_ratio():
    r = recommend("llama-3.3-70b", "h200-sxm", tp=2, context_len=32768, batch=1,
                  drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": "0.75"}, max_draft_len=16))  # G4 is the low-latency end
    assert r["binding"]["guideline"] == "G4"
    assert "the draft step costs 0.0" in r["binding"]["line"] and "of a target step (layer ratio ρ = " in \
        r["binding"]["line"]


def _step(**over):
    n = 6
    base = {"verify_attention_s": np.linspace(1, 1.5, n) * 1e-3, "verify_gemm_s": np.linspace(5, 9, n) * 1e-3,
            "draft_s": np.linspace(0, 0.5, n) * 1e-3, "acceptance_length": np.array([1, 1.8, 2.4, 2.8, 2.95, 3.0]),
            "speedup": np.array([1, 1.5, 1.7, 1.8, 1.75, 1.6])}
    base.update(over)
    return StepCurve(**base)


DIAG = {"g_dev": 8, "attention_tile_d": 15, "attention_share": 0.2, "gemm_compute_bound_applies_to": "dense GEMMs",
        "gemm_compute_bound_from_d": 1457, "gemm_compute_bound_from_d_spec_sheet": 1500,
        "dense_gemm_compute_bound_from_d": 1457, "dense_gemm_compute_bound_from_d_spec_sheet": 1500,
        "dense_ridge_tokens_effective": 200, "ridge_tokens_effective": 200, "ridge_tokens_spec_sheet": 210}


def test_g1_named_only_once_the_gemms_reach_the_ridge():
    g, line = binding_line(3, _step(), DIAG)
    assert g == "marginal" and "D = 4 adds" in line and "ms GEMM" in line and "ms of drafting" in line
    assert "+0.15 AL" in line and "only at D = 1457" in line
    for cb in (0, 2, 3, 4):  # compute-bound at or before D + 1 = 4: the GEMM growth is Guideline 1's
        g, line = binding_line(3, _step(), {**DIAG, "gemm_compute_bound_from_d": cb,
                                            "dense_gemm_compute_bound_from_d": cb})
        assert g == "G1" and "D = 4 adds" in line
    g, _ = binding_line(3, _step(), {**DIAG, "gemm_compute_bound_from_d": 5, "dense_gemm_compute_bound_from_d": 5})
    assert g == "marginal"


def test_predict_and_recommend_share_the_binding_rule():
    kw = dict(tp=2, context_len=8192, batch=4)
    r = recommend("qwen3.5-122b-a10b", "b200", drafts=DraftSearch(["mtp"], {"mtp": "0.8"}, 12), **kw)
    d = r["best"]["draft_len"]
    p = predict_summary("qwen3.5-122b-a10b", "b200", tp=2, batch=4, context_len=8192, mechanism="mtp", draft_len=d,
                        acceptance=Acceptance.from_rate(0.8))
    assert p["binding"] == r["binding"]
    assert p["guidelines"]["binding"] == r["binding"]["guideline"]
    assert r["binding"]["guideline"] != "G1"  # the experts turn compute-bound at D in the thousands


def test_tree_with_chain_acceptance_is_flagged():
    p = run("predict", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-b", "4", "-c", "2048", "--mechanism", "medusa",
            "-D", "4", "--tree-tokens", "16", "--acceptance-rate", "0.7", "--json")
    assert p.returncode == 0, p.stderr
    notes = json.loads(p.stdout)["notes"]
    assert any("tree" in n and "chain acceptance" in n and "tree_per_position" in n for n in notes)
    chain = predict_summary("llama-3.1-8b", "h100-sxm", batch=4, context_len=2048, mechanism="medusa", draft_len=4,
                            acceptance=Acceptance.from_rate(0.7))
    assert not any("tree" in n for n in chain["notes"])
    tree_pp = predict_summary("llama-3.1-8b", "h100-sxm", batch=4, context_len=2048, mechanism="medusa",
                              draft_len=4, tree_tokens=16, acceptance=Acceptance.from_per_position([0.9, 0.8, 0.7, 0.6]))
    assert not any("chain acceptance" in n for n in tree_pp["notes"])


def test_mla_under_tp_infeasible_names_the_cause_and_the_largest_batch():
    r = recommend("deepseek-v3", "h200-sxm", tp=8, batch=64, context_len=131072)
    assert r["best"] is None
    msg = r["infeasible"]
    assert "latent KV cache is replicated on every one of the 8 TP ranks" in msg
    assert "data-parallel attention (--dp N --tp 1 --ep N) holds it once per sequence" in msg
    assert "the largest batch that fits" in msg
    assert "is 5 (D = 0)" in msg
    p = run("recommend", "-m", "deepseek-v3", "-H", "h200-sxm", "--tp", "8", "-c", "131072", "--batch", "64")
    assert p.returncode == 1 and "replicated on every one of the 8 TP ranks" in p.stdout


def test_memory_notes_span_the_batch_range():
    """The memory limits over the batch range stay in the JSON (`memory_limits`); the printed notes are about
    the chosen operating point (tests/planning/test_user_facing.py)."""
    r = recommend("qwen3.5-122b-a10b", "b200", tp=2, context_len=8192,
                  drafts=DraftSearch(mechanisms=["mtp"], acceptance={"mtp": "0.8"}, max_draft_len=32))
    notes = [n for n in r["memory_limits"] if "does not fit" in n]
    batches = [int(n.split("at batch ")[1].split(",")[0]) for n in notes]
    assert len(notes) == 3 and batches == sorted(batches) and batches[-1] - batches[0] > 100


def test_recommend_on_lpu_has_no_tile_guideline():
    p = run("recommend", "-m", "llama-3.1-8b", "-H", "groq-3-lpu", "-c", "1024", "--acceptance", "eagle3=0.7",
            "--mechanisms", "eagle3")
    assert p.returncode == 0, p.stderr
    assert "tok/s/chip" in p.stdout and "tok/s/GPU" not in p.stdout
    assert "attention tiles n/a (LPU)" in p.stdout and "128/G" not in p.stdout


def test_mla_model_whose_weights_alone_do_not_fit_blames_the_weights():
    """DeepSeek-V3 at TP 8 on 80 GB H100s: ~671 B parameters, mostly fp8, are about 85 GB per device, over the
    77.3 GB usable before any KV: the note names the weights, not the replicated latent KV (session-10 QA)."""
    from specplan.costs.precision import resolve_precision
    from specplan.model.memory import memory_usage
    from specplan.planning.predict import mla_tp_note
    from specplan.profiles.registry import load_hardware, load_model

    m, hw = load_model("deepseek-v3"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    mem = memory_usage(m, hw, 8, 1, 4096, prec)
    assert 671e9 / 8 / 1e9 < mem.weights_bytes / 1e9 < 90 and mem.weights_bytes > mem.capacity_bytes
    note = mla_tp_note(m, hw, 8, 4096, prec)
    assert note.startswith("deepseek-v3 does not fit: its weights take") and "replicated" not in note
    assert "replicated" in mla_tp_note(m, load_hardware("h200-sxm"), 8, 4096,
                                       resolve_precision(m, load_hardware("h200-sxm"), None, None))


def test_an_external_draft_with_another_vocabulary_is_named():
    """qwen3-4b (vocabulary 151,936) drafting for llama-3.1-8b (128,256): priced, with a note that no engine runs
    a draft whose token ids are not the target's; llama-3.2-1b shares Llama 3's 128,256 and gets no such note."""
    acc = Acceptance.from_rate(0.6)
    bad = predict_summary("llama-3.1-8b", "h100-sxm", batch=8, context_len=2048, mechanism="external", draft_len=3,
                          draft_model="qwen3-4b", acceptance=acc)
    assert any("vocabulary (151,936) is not llama-3.1-8b's (128,256)" in n for n in bad["notes"])
    ok = predict_summary("llama-3.1-8b", "h100-sxm", batch=8, context_len=2048, mechanism="external", draft_len=3,
                         draft_model="llama-3.2-1b", acceptance=acc)
    assert not any("vocabulary" in n for n in ok["notes"])

"""evaluate(): the speedup formula, invariants, limits by hand, memory of drafts and hybrid checkpoints."""

import numpy as np
import pytest

from specplan.core.errors import SpecplanError
from specplan.model.memory import state_bytes_per_seq
from specplan.profiles.registry import load_hardware, load_model
from specplan.speculation import Acceptance, ServingProfile, evaluate, evaluate_kw, mechanism_names
from specplan.model.step import step_time
from specplan.model.deployment import Deployment
from specplan.speculation.spec import DraftPlacement
from specplan.costs.precision import Dtypes
from specplan.speculation.spec import Speculation

A8 = Acceptance.from_rate(0.8)


def fast_memory_hw():
    """h100-sxm with no launch overhead and 1000x the compute: every kernel memory-bound."""
    hw = load_hardware("h100-sxm")
    return hw.model_copy(update={"kernel_overhead_s": 0.0,
                                 "peak_flops": {k: v * 1e3 for k, v in hw.peak_flops.items()}})


def overhead_bound_hw():
    """h100-sxm with 1e6x the bandwidth and compute: every kernel costs only its launch overhead."""
    hw = load_hardware("h100-sxm")
    return hw.model_copy(update={"mem_bandwidth_bytes_s": hw.mem_bandwidth_bytes_s * 1e6,
                                 "peak_flops": {k: v * 1e6 for k, v in hw.peak_flops.items()}})


def test_mechanisms_listed():
    assert set(mechanism_names()) == {"none", "external", "eagle3", "mtp", "medusa", "dflash", "dspark", "ngram",
                                      "self"}


def test_formula_by_hand():
    r = evaluate(Deployment("llama-3.1-8b", "h100-sxm"), Speculation(mechanism="eagle3", draft_len=3, acceptance=A8),
                 batch=8, context_len=2048)
    base = step_time("llama-3.1-8b", "h100-sxm", 1, 8, 1, 2048).total_s
    ver = step_time("llama-3.1-8b", "h100-sxm", 1, 8, 4, 2048).total_s
    assert r["baseline_step_s"] == pytest.approx(base)
    assert r["verify_s"] == pytest.approx(ver)
    al = 1 + 0.8 + 0.64 + 0.512
    assert r["speedup"] == pytest.approx(base * al / (ver + r["draft_s"]))
    assert r["tokens_per_s_per_gpu"] == pytest.approx(8 * al / r["iter_s"])
    assert r["break_even_al"] == pytest.approx(r["iter_s"] / base)


def test_vectorized_grid_matches_points():
    b = np.array([1, 16, 64])[:, None, None]
    ctx = np.array([512, 8192])[None, :, None]
    d = np.arange(0, 5)[None, None, :]
    r = evaluate(Deployment("llama-3.1-8b", "h100-sxm"), Speculation(mechanism="eagle3", draft_len=d, acceptance=A8),
                 batch=b, context_len=ctx)
    assert r["speedup"].shape == (3, 2, 5)
    np.testing.assert_allclose(r["speedup"][:, :, 0], 1.0)
    one = evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                   Speculation(mechanism="eagle3", draft_len=3, acceptance=A8), batch=16, context_len=8192)
    assert r["speedup"][1, 1, 3] == pytest.approx(float(one["speedup"]))


@pytest.mark.parametrize("mech", ["eagle3", "dflash", "dspark", "ngram", "self", "medusa"])
def test_invariants(mech):
    d = np.arange(0, 9)
    r = evaluate(Deployment("llama-3.1-8b", "h100-sxm"), Speculation(mechanism=mech, draft_len=d, acceptance=A8),
                 batch=np.array([[1], [32]]), context_len=4096)
    al = r["acceptance_length"]
    assert np.all(al >= 1) and np.all(al <= 1 + d)
    assert np.all(r["speedup"] <= al + 1e-9)
    assert np.all(r["draft_s"] >= 0) and np.all(r["draft_s"][:, 0] == 0)


def test_zero_draft_memory_bound_speedup_equals_al():
    hw = fast_memory_hw()
    for d in (2, 4, 7):
        r = evaluate(Deployment("llama-3.1-8b", hw), Speculation(mechanism="ngram", draft_len=d, acceptance=A8),
                     batch=1, context_len=1024)
        assert float(r["speedup"]) == pytest.approx(float(r["acceptance_length"]), rel=0.01)


def test_ngram_draft_cost_near_zero():
    r = evaluate(Deployment("llama-3.1-8b", "h100-sxm"), Speculation(mechanism="ngram", draft_len=5, acceptance=A8),
                 batch=1, context_len=1024)
    assert float(r["draft_s"]) < 1e-3 * float(r["baseline_step_s"])
    assert float(r["memory_total_bytes"]) == pytest.approx(
        float(evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                       Speculation(mechanism="medusa", draft_len=5, acceptance=A8), batch=1, context_len=1024)["memory_total_bytes"]) - 5 * (4096 * 4096 + 128256 * 4096) * 2.0, rel=1e-9)


def test_seed_example_draft_overhead():
    # D = 11: a one-layer MTP head runs 11 serial steps (O_d = 11 / L); a five-layer DFlash head one pass (5 / L)
    for model in ("deepseek-v3", "qwen3.5-122b-a10b"):
        L = load_model(model).num_layers
        mtp = evaluate(Deployment(model, "b200", tp=8, dtypes=Dtypes(dtype="fp8")),
                       Speculation(mechanism="mtp", draft_len=11, acceptance=A8), batch=1, context_len=1024)
        dfl = evaluate(Deployment(model, "b200", tp=8, dtypes=Dtypes(dtype="fp8")),
                       Speculation(mechanism="dflash", draft_len=11, acceptance=A8), batch=1, context_len=1024)
        assert float(mtp["rho_d"]) == pytest.approx(11 / L)
        assert float(dfl["rho_d"]) == pytest.approx(5 / L)


def test_low_latency_limit_self_exact():
    # every kernel overhead-bound and a draft with the target's layer structure (ρ = 1): AL / (1 + ρD) exactly
    hw = overhead_bound_hw()
    for d in (1, 3, 6):
        r = evaluate(Deployment("llama-3.1-8b", hw), Speculation(mechanism="self", draft_len=d, acceptance=A8),
                     batch=1, context_len=1024)
        assert float(r["speedup"]) == pytest.approx(float(r["acceptance_length"]) / (1 + 1.0 * d), rel=1e-3)


@pytest.mark.parametrize("model,mech,tol", [("llama-3.1-405b", "eagle3", 0.05), ("llama-3.3-70b", "eagle3", 0.1),
                                            ("deepseek-v3", "mtp", 0.1)])
def test_low_latency_limit_one_layer_drafts(model, mech, tol):
    # a one-layer head also launches its LM head, embedding and final norm: ≈ AL / (1 + ρD), closer as L grows
    hw = overhead_bound_hw()
    for d in (2, 5, 11):
        r = evaluate(Deployment(model, hw), Speculation(mechanism=mech, draft_len=d, acceptance=A8), batch=1,
                     context_len=1024)
        limit = float(r["acceptance_length"]) / (1 + float(r["rho_d"]))
        assert float(r["speedup"]) == pytest.approx(limit, rel=tol)


def test_hybrid_verify_memory_includes_state_checkpoints():
    m = load_model("qwen3.5-35b-a3b")
    per_seq = state_bytes_per_seq(m, 1)
    assert per_seq > 0
    r = evaluate(Deployment(m, "h200-sxm"), Speculation(mechanism="ngram", draft_len=np.array([0, 3]), acceptance=A8),
                 batch=4, context_len=4096)
    np.testing.assert_allclose(r["memory_state_bytes"], 4 * per_seq * np.array([1, 4]))
    assert r["memory_total_bytes"][1] - r["memory_total_bytes"][0] >= 3 * 4 * per_seq
    # and the verify step writes (1 + D) checkpoints: attention-class time grows with D even at short context
    assert r["verify_s"][1] > r["verify_s"][0]


def test_draft_memory_counts_weights_and_kv():
    base = evaluate(Deployment("llama-3.1-8b", "h100-sxm"), Speculation(mechanism="none", draft_len=0), batch=8,
                    context_len=8192)
    ext = evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                   Speculation(mechanism="external", draft_len=4, acceptance=A8, draft=DraftPlacement(model="llama-3.2-1b")),
                   batch=8, context_len=8192)
    extra = float(ext["memory_total_bytes"] - base["memory_total_bytes"])
    assert extra > 2.4e9  # llama-3.2-1b weights (~2.5 GB bf16) + its KV for 8 x 8K tokens


def test_external_draft_on_other_hardware_counts_its_devices():
    r = evaluate(Deployment("llama-3.3-70b", "h100-sxm", tp=4),
                 Speculation(mechanism="external", draft_len=4, acceptance=A8, draft=DraftPlacement(model="llama-3.2-1b", hardware="groq-lpu")),
                 batch=1, context_len=2048)
    assert float(r["draft_devices"]) >= 1
    assert float(r["tokens_per_s_per_device"]) < float(r["tokens_per_s_per_gpu"])
    assert float(r["target_devices"]) == 4


LPU_EXT = dict(batch=1, context_len=4096, draft_len=4, mechanism="external", acceptance=Acceptance.from_rate(0.7),
               draft_model="llama-3.2-1b")


def test_lpu_draft_on_the_same_lpu_gets_its_own_chips():
    from specplan.model.memory import memory_usage

    hw = load_hardware("groq-3-lpu")
    r = evaluate_kw("llama-3.1-8b", "groq-3-lpu", **LPU_EXT)
    # target alone at q_len = 1 + D = 5: ceil(its bytes / 0.5 GB of SRAM per chip)
    own = memory_usage(load_model("llama-3.1-8b"), hw, 1, 1, 4096, r["precision"], q_len=5).total_bytes
    assert hw.mem_capacity_bytes == 0.5e9
    assert float(r["target_devices"]) == np.ceil(float(own) / 0.5e9) == 17
    # target + draft weights + draft KV: 9.60 GB -> ceil(19.2) = 20 chips, 3 of them for the draft
    total = float(r["memory_total_bytes"])
    assert total == pytest.approx(9.605e9, rel=1e-3)
    assert float(r["draft_devices"]) == np.ceil(total / 0.5e9) - 17 == 3
    per_dev = float(r["acceptance_length"]) / (float(r["iter_s"]) * 20)  # B = 1 over 17 + 3 chips
    assert float(r["tokens_per_s_per_device"]) == pytest.approx(per_dev)
    assert float(r["tokens_per_s_per_gpu"]) == pytest.approx(per_dev * 20 / 17)
    none = evaluate(Deployment("llama-3.1-8b", "groq-3-lpu"), batch=1, context_len=4096)
    assert float(none["draft_devices"]) == 0 and float(none["baseline_devices"]) == float(none["target_devices"])


def test_draft_hardware_equal_to_target_shares_devices_and_says_so():
    plain = evaluate_kw("llama-3.1-8b", "groq-3-lpu", **LPU_EXT)
    same = evaluate_kw("llama-3.1-8b", "groq-3-lpu", draft_hardware="groq-3-lpu", **LPU_EXT)
    assert float(same["draft_devices"]) == float(plain["draft_devices"]) == 3
    assert any("shares the target's devices" in n for n in same["notes"])
    assert not any("shares" in n for n in plain["notes"])
    gpu = evaluate_kw("llama-3.1-8b", "h100-sxm", draft_hardware="h100-sxm", **LPU_EXT)
    assert float(gpu["draft_devices"]) == 0 and any("shares the target's devices" in n for n in gpu["notes"])


def test_tree_verification_costs_verified_tokens():
    chain = evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                     Speculation(mechanism="medusa", draft_len=4, acceptance=A8), batch=32, context_len=1024)
    tree = evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                    Speculation(mechanism="medusa", draft_len=4, acceptance=A8, tree_tokens=64), batch=32,
                    context_len=1024)
    assert float(tree["verify_tokens"]) == 64
    assert float(tree["verify_s"]) > float(chain["verify_s"])
    with pytest.raises(SpecplanError, match="tree tokens"):
        evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                 Speculation(mechanism="medusa", draft_len=4, acceptance=A8, tree_tokens=3))


def test_serving_parameters_add_to_the_iteration():
    srv = ServingProfile(iteration_overhead_s=1e-3, draft_step_overhead_s=5e-4)
    a = evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                 Speculation(mechanism="eagle3", draft_len=np.array([0, 3]), acceptance=A8))
    b = evaluate(Deployment("llama-3.1-8b", "h100-sxm", serving=srv),
                 Speculation(mechanism="eagle3", draft_len=np.array([0, 3]), acceptance=A8))
    assert b["iter_s"][0] == pytest.approx(a["iter_s"][0])
    assert b["iter_s"][1] - a["iter_s"][1] == pytest.approx(1e-3 + 3 * 5e-4)


def test_bad_inputs():
    with pytest.raises(SpecplanError, match="unknown mechanism 'foo'"):
        evaluate(Deployment("llama-3.1-8b", "h100-sxm"), Speculation(mechanism="foo", draft_len=2, acceptance=A8))
    with pytest.raises(SpecplanError, match="mechanism dflash"):
        evaluate(Deployment("llama-3.1-8b", "h100-sxm"), Speculation(mechanism="dflash", draft_len=2))
    with pytest.raises(SpecplanError, match="draft length"):
        evaluate(Deployment("llama-3.1-8b", "h100-sxm"), Speculation(mechanism="eagle3", draft_len=-1, acceptance=A8))
    with pytest.raises(SpecplanError, match="no MTP module"):
        evaluate(Deployment("llama-3.1-8b", "h100-sxm"), Speculation(mechanism="mtp", draft_len=2, acceptance=A8))
    with pytest.raises(SpecplanError, match="draft model"):
        evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                 Speculation(mechanism="external", draft_len=2, acceptance=A8))


def test_shipped_profile_used_when_no_acceptance():
    r = evaluate(Deployment("llama-3.1-8b", "h100-sxm"), Speculation(mechanism="eagle3", draft_len=np.arange(2, 8)))
    np.testing.assert_allclose(r["acceptance_length"], [2.36, 2.79, 3.08, 3.32, 3.46, 3.54])


def test_draft_kv_budget_is_named_in_its_error_and_zero_is_honoured():
    with pytest.raises(SpecplanError, match=r"^draft KV budget \(--draft-kv-budget\): must be >= 0 tokens, got -5$"):
        evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                 Speculation(mechanism="self", draft_len=2, acceptance=A8, draft=DraftPlacement(kv_budget=-5)),
                 context_len=4096)
    zero = evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                    Speculation(mechanism="self", draft_len=2, acceptance=A8, draft=DraftPlacement(kv_budget=0)),
                    context_len=4096)
    assert zero["notes"] == ["self-draft with a KV budget of 0 tokens"]  # was silently the 2048 default
    # the draft reads no KV: 2 draft steps at context 0
    assert float(zero["draft_s"]) == pytest.approx(2 * float(step_time("llama-3.1-8b", "h100-sxm", 1, 1, 1, 0).total_s))


@pytest.mark.parametrize("draft_hw", [None, "h200-sxm"], ids=["same-device", "other-device"])
def test_external_draft_time_and_overhead_by_hand(draft_hw):
    # an external draft runs D decode steps of its own model (q_len 1 each) at batch B, on its device(s); on other
    # hardware it adds one transfer per iteration and runs at TP 1. rho (its kernels per target kernel, the
    # launch-overhead weight) is draft layers / target layers: 16 / 32 for Llama-3.2-1B under Llama-3.1-8B.
    from specplan.costs.precision import resolve_precision
    from specplan.model.step import step_time
    from specplan.speculation.drafters import CROSS_DEVICE_TRANSFER_S

    b, ctx, d = 8, 2048, 4
    r = evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                 Speculation(mechanism="external", draft_len=d, acceptance=A8, draft=DraftPlacement(model="llama-3.2-1b", hardware=draft_hw)),
                 batch=b, context_len=ctx)
    dm, dhw = load_model("llama-3.2-1b"), load_hardware(draft_hw or "h100-sxm")
    one = float(step_time(dm, dhw, 1, b, 1, ctx, precision=resolve_precision(dm, dhw, None, None)).total_s)
    transfer = CROSS_DEVICE_TRANSFER_S if draft_hw else 0.0
    assert float(r["draft_s"]) == pytest.approx(d * one + transfer, rel=1e-9)
    assert float(r["rho_d"]) == pytest.approx(d * 16 / 32, rel=1e-12)


@pytest.mark.parametrize("model", ["llama-3.1-8b", "mixtral-8x7b"])
def test_verify_gemm_time_is_dense_plus_expert_gemms(model):
    # the verify GEMM class (what G1 reads) is the dense GEMMs plus the expert (MoE) GEMMs of the verify step:
    # step_time of B sequences at q_len 1 + D, its breakdown summed by hand (MoE 0 for a dense model)
    from specplan.costs.precision import resolve_precision
    from specplan.model.step import step_time

    m, hw = load_model(model), load_hardware("h100-sxm")
    tp = 1 if model == "llama-3.1-8b" else 2
    r = evaluate(Deployment(m, hw, tp=tp), Speculation(mechanism="eagle3", draft_len=3, acceptance=A8), batch=16,
                 context_len=2048)
    v = step_time(m, hw, tp, 16, int(r["verify_tokens"]), 2048, precision=resolve_precision(m, hw, None, None))
    assert float(r["verify_gemm_s"]) == pytest.approx(float(v.breakdown_s["gemm"] + v.breakdown_s["moe"]), rel=1e-9)
    assert (float(v.breakdown_s["moe"]) > 0) == (model == "mixtral-8x7b")


@pytest.mark.parametrize("draft_hw", [None, "h200-sxm"], ids=["same-device", "other-device"])
def test_external_draft_pays_the_engines_overhead_once_per_serial_step(draft_hw):
    # an engine's spec_draft_step_overhead_s is host time per serial draft step: an external draft runs D of them
    from specplan.profiles.registry import load_engine

    kw = dict(batch=8, context_len=2048, draft_len=4, mechanism="external", acceptance=A8,
              draft_model="llama-3.2-1b", draft_hardware=draft_hw)
    eng = load_engine("ideal")
    slow = eng.model_copy(update={"spec_draft_step_overhead_s": 1e-4, "sources": {**eng.sources,
                                                                                   "spec_draft_step_overhead_s": "t"}})
    a = evaluate_kw("llama-3.1-8b", "h100-sxm", engine=eng, **kw)
    b = evaluate_kw("llama-3.1-8b", "h100-sxm", engine=slow, **kw)
    assert float(b["draft_s"]) - float(a["draft_s"]) == pytest.approx(4 * 1e-4, rel=1e-9)


def test_ngram_note_states_its_host_lookup_per_sequence():
    from specplan.speculation.drafters import NGRAM_CPU_S_PER_SEQ

    r = evaluate(Deployment("llama-3.1-8b", "h100-sxm"), Speculation(mechanism="ngram", draft_len=3, acceptance=A8),
                 batch=4, context_len=1024)
    assert f"n-gram lookup {NGRAM_CPU_S_PER_SEQ * 1e6:g} us per sequence" in " ".join(r["notes"])
    assert NGRAM_CPU_S_PER_SEQ * 1e6 == pytest.approx(2.0)


def test_the_unfitted_round_note_only_with_speculation():
    # the note that an engine's speculative round holds unfitted numbers belongs to speculative results only
    none = evaluate(Deployment("llama-3.1-8b", "h100-sxm", engine="vllm"), batch=8, context_len=1024)
    spec = evaluate(Deployment("llama-3.1-8b", "h100-sxm", engine="vllm"),
                    Speculation(mechanism="eagle3", draft_len=3, acceptance=A8), batch=8, context_len=1024)
    assert not any("speculative round" in n for n in none["notes"])
    assert any("speculative round" in n for n in spec["notes"])


@pytest.mark.parametrize("d", [1, 3])
def test_a_tree_priced_with_a_chains_acceptance_is_said(d):
    # a verify of more tokens than the chain's 1 + D (a tree) with a chain's AL (a rate) overstates nothing only
    # if said: the note names the verified tokens, at every D >= 1
    r = evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                 Speculation(mechanism="eagle3", draft_len=d, acceptance=A8, tree_tokens=d + 3), batch=4,
                 context_len=1024)
    assert any(n.startswith(f"tree verification prices {d + 3} verified tokens per sequence") for n in r["notes"])


def test_ngram_drafting_is_a_host_lookup_per_sequence():
    # n-gram drafting has no GPU pass: D > 0 costs NGRAM_CPU_S_PER_SEQ (2 us) per sequence per iteration
    r = evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                 Speculation(mechanism="ngram", draft_len=np.array([0, 3]), acceptance=A8), batch=8, context_len=1024)
    np.testing.assert_allclose(r["draft_s"], [0.0, 8 * 2e-6], rtol=1e-12)


def test_one_token_more_than_the_chain_is_already_a_tree():
    r = evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                 Speculation(mechanism="eagle3", draft_len=3, acceptance=A8, tree_tokens=5), batch=4,
                 context_len=1024)
    assert any(n.startswith("tree verification prices 5 verified tokens per sequence") for n in r["notes"])


def test_verify_tokens_of_a_tree_and_without_drafts():
    from specplan.speculation.speedup import verify_tokens

    np.testing.assert_array_equal(verify_tokens(np.array([0, 1, 3])), [1, 2, 4])  # a chain: 1 + D
    np.testing.assert_array_equal(verify_tokens(np.array([0, 3]), np.array([5, 5])), [1, 5])  # D = 0 verifies one


"""Guideline diagnostics and recommend, checked against hand calculations (Must-show 3)."""

import numpy as np
import pytest

from specplan.core.errors import SpecplanError
from specplan.profiles.registry import load_hardware, load_model
from specplan.speculation.acceptance_spec import parse_acceptance
from specplan.planning.predict import predict_summary
from specplan.planning.recommend import recommend
from specplan.speculation.guidelines import attention_tile_d, compute_bound_from_d, tile_aligned
from specplan.speculation.spec import DraftSearch


@pytest.mark.parametrize("g,d", [(4, 31), (8, 15), (16, 7), (32, 3), (64, 1)])
def test_attention_tile_d(g, d):
    assert attention_tile_d(g) == d  # guidelines_recovered.md: derived 128/G − 1


def test_tile_aligned():
    np.testing.assert_array_equal(tile_aligned(16, [6, 7, 8, 15]), [False, True, False, True])


def test_spec_sheet_ridge_by_hand():
    hw = load_hardware("h100-sxm")
    ridge = hw.ridge_flops_per_byte("bf16")
    assert ridge == pytest.approx(989.4e12 / 3.35e12)  # 295.3 FLOP/B
    # bf16 weight-streaming GEMM intensity = M: 64·(1 + D) > 295 first at D = 4 (64·5 = 320; 64·4 = 256)
    assert int(compute_bound_from_d(64, ridge)) == 4
    assert int(compute_bound_from_d(8, ridge)) == 36
    assert int(compute_bound_from_d(512, ridge)) == 0


def test_llama_batch64_names_compute_bound_d4():
    r = recommend("llama-3.1-8b", "h100-sxm", batch=64, context_len=1024,
                  drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": "0.8"}, max_draft_len=16))
    g = r["guidelines"]
    assert g["gemm_compute_bound_from_d_spec_sheet"] == 4
    assert g["gemm_compute_bound_from_d"] == 4
    assert g["ridge_tokens_spec_sheet"] == pytest.approx(295.3, abs=0.1)
    assert r["best"]["draft_len"] == 4
    assert r["binding"]["guideline"] == "G1"
    assert "compute-bound at D = 4" in r["binding"]["line"]


def test_predict_llama_gemm_regime_flips_at_d4():
    at3 = predict_summary("llama-3.1-8b", "h100-sxm", batch=64, context_len=1024, mechanism="eagle3", draft_len=3,
                          acceptance=parse_acceptance("0.8"))
    at4 = predict_summary("llama-3.1-8b", "h100-sxm", batch=64, context_len=1024, mechanism="eagle3", draft_len=4,
                          acceptance=parse_acceptance("0.8"))
    assert at3["guidelines"]["gemm_regime"] == "memory"
    assert at4["guidelines"]["gemm_regime"] == "compute"


QWEN = dict(tp=2, context_len=131072, dtype="fp4", kv_dtype="fp8")


def test_qwen35_gdev16_tile_d7():
    assert load_model("qwen3.5-122b-a10b").g_dev(2) == 16
    r = recommend("qwen3.5-122b-a10b", "b200", batch=64,
                  drafts=DraftSearch(mechanisms=["mtp"], acceptance={"mtp": "0.8"}, max_draft_len=16), **QWEN)
    assert r["guidelines"]["g_dev"] == 16 and r["guidelines"]["attention_tile_d"] == 7


def test_qwen35_attention_bound_cheap_draft_picks_tile_d7():
    # with a drafter that costs nothing on the GPU, the attention tile binds: D = 128/G − 1 = 7
    r = recommend("qwen3.5-122b-a10b", "b200", batch=64,
                  drafts=DraftSearch(mechanisms=["ngram"], acceptance={"ngram": "0.8"}, max_draft_len=16), **QWEN)
    assert r["best"]["draft_len"] == 7
    assert r["binding"]["guideline"] == "G2"
    assert "128/G − 1" in r["binding"]["line"] and "= 7" in r["binding"]["line"]


def test_qwen35_mtp_long_context_draft_cost_binds():
    # MTP drafts serially through a full-attention layer over the 131K-token context: each draft step costs
    # ~1/12 of the target's attention, so the draft stops D just short of the tile (model finding; see
    # docs/speculation.md, "Must-show 3"); batch 64 is not the low-latency end, so that is the marginal trade, not G4
    r = recommend("qwen3.5-122b-a10b", "b200", batch=64,
                  drafts=DraftSearch(mechanisms=["mtp"], acceptance={"mtp": "0.8"}, max_draft_len=16), **QWEN)
    assert r["best"]["mechanism"] == "mtp"
    assert 5 <= r["best"]["draft_len"] <= 7
    ranked = {x["draft_len"]: x for x in r["ranked"]}
    assert ranked[8]["speedup"] < 0.95 * ranked[7]["speedup"]  # the second attention tile
    assert r["binding"]["guideline"] in ("G2", "marginal")
    assert r["binding"]["guideline"] == "G2" or "of drafting" in r["binding"]["line"]


def test_infeasible_rows_are_explained():
    r = recommend("qwen3.5-122b-a10b", "b200", batch=128,
                  drafts=DraftSearch(mechanisms=["mtp"], acceptance={"mtp": "0.8"}, max_draft_len=8), **QWEN)
    assert any("does not fit" in n and "checkpoints" in n for n in r["memory_limits"])
    assert any(not x["feasible"] for x in r["ranked"])


def test_target_tps_mode_respects_interactivity():
    r = recommend("llama-3.1-8b", "h100-sxm", target_tps_per_user=150, context_len=2048,
                  drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": "0.8"}, max_draft_len=10))
    assert r["best"]["tokens_per_s_per_user"] >= 150
    impossible = recommend("llama-3.1-8b", "h100-sxm", target_tps_per_user=1e6, context_len=2048,
                           drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": "0.8"}, max_draft_len=4))
    assert impossible["best"] is None and "reaches" in impossible["infeasible"]


def test_profile_range_respected_unless_extrapolate():
    r = recommend("llama-3.1-8b", "h100-sxm", batch=1, context_len=1024,
                  drafts=DraftSearch(mechanisms=["eagle3"], max_draft_len=12))
    assert max(x["draft_len"] for x in r["ranked"]) <= 7 and any("D <= 7" in n for n in r["notes"])
    r2 = recommend("llama-3.1-8b", "h100-sxm", batch=1, context_len=1024, top=20,
                   drafts=DraftSearch(mechanisms=["eagle3"], max_draft_len=12, extrapolate=True))
    assert max(x["draft_len"] for x in r2["ranked"]) > 7


def test_recommend_bad_inputs():
    with pytest.raises(SpecplanError, match="at most one"):
        recommend("llama-3.1-8b", "h100-sxm", batch=8, target_tps_per_user=100, context_len=1024,
                  drafts=DraftSearch(mechanisms=["eagle3"], max_draft_len=32))
    with pytest.raises(SpecplanError, match="unknown mechanism"):
        recommend("llama-3.1-8b", "h100-sxm", batch=1, context_len=1024,
                  drafts=DraftSearch(mechanisms=["eagle4"], max_draft_len=32))
    with pytest.raises(SpecplanError, match="α must be"):
        recommend("llama-3.1-8b", "h100-sxm", batch=1, context_len=1024,
                  drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": "1.2"}, max_draft_len=32))


def test_recommend_without_batch_maximizes_throughput_over_batches_that_fit():
    r = recommend("llama-3.1-8b", "h100-sxm", context_len=2048,
                  drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": 0.8}, max_draft_len=8))
    fixed = [recommend("llama-3.1-8b", "h100-sxm", batch=b, context_len=2048,
                       drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": 0.8}, max_draft_len=8))["best"] for b in (1, 64, 128)]
    assert r["best"]["tokens_per_s_per_gpu"] >= max(f["tokens_per_s_per_gpu"] for f in fixed) - 1e-6


def test_memory_binds_when_the_next_draft_length_does_not_fit():
    r = recommend("qwen3.5-122b-a10b", "b200", tp=2, batch=112, dtype="fp4", kv_dtype="fp8", context_len=131072,
                  drafts=DraftSearch(mechanisms=["mtp"], acceptance={"mtp": 0.8}, max_draft_len=32))
    d = r["best"]["draft_len"]
    nxt = [x for x in r["ranked"] if x["draft_len"] == d + 1]
    assert r["binding"]["guideline"] == "memory"
    assert not nxt or not nxt[0]["feasible"]


# --- Guideline 1 on MoE models: the experts' GEMM-M is B·(1+D)·k / touched experts, not B·(1+D) ---

def test_moe_compute_bound_from_d_balanced_by_hand():
    from specplan.speculation.guidelines import NEVER, moe_compute_bound_from_d

    # balanced routing, E = 256, k = 8, B = 64: every expert touched (64·8 = 512 >= 256), so per-expert
    # M = 64·(1+D)·8 / 256 = 2·(1+D); >= 100 first at D = 49 (2·50 = 100; 2·49 = 98)
    assert int(moe_compute_bound_from_d(64, 100.0, 256, 8, "balanced")) == 49
    assert int(moe_compute_bound_from_d(64, 1.0, 256, 8, "balanced")) == 0  # M = 2 already
    assert int(moe_compute_bound_from_d(64, 1e9, 256, 8, "balanced")) == NEVER == -1  # not within D <= 65536
    np.testing.assert_array_equal(moe_compute_bound_from_d(np.array([64, 128]), 100.0, 256, 8, "balanced"),
                                  [49, 24])  # 128: 4·(1+D) >= 100 at D = 24


def test_deepseek_v3_g1_reports_experts_not_dense_gemms():
    from specplan.costs.moe import per_expert_m
    from specplan.model.step import step_time

    r = predict_summary("deepseek-v3", "h100-sxm", tp=8, batch=64, context_len=4096, mechanism="mtp", draft_len=3,
                        acceptance=parse_acceptance("0.8"))
    g = r["guidelines"]
    assert g["gemm_compute_bound_applies_to"] == "experts"
    assert g["dense_gemm_compute_bound_from_d"] == 3  # the old (dense-ridge) answer, now labelled as such
    d, ridge = g["gemm_compute_bound_from_d"], g["ridge_tokens_effective"]
    assert d > 16  # the step model's experts stay memory-bound over q_len 1..16
    assert set(step_time("deepseek-v3", "h100-sxm", 8, 64, np.arange(1, 17), 4096).regime("moe")) == {"memory"}
    assert g["moe_regime"] == "memory"
    # smallest D: per-expert M = 64·(1+D)·8 / touched(64·(1+D)) crosses the ridge at D, not at D − 1
    assert per_expert_m(64 * (1 + d), 256, 8) >= ridge > per_expert_m(64 * d, 256, 8)


def test_g1_sentence_says_which_gemms():
    from specplan.speculation.guidelines import g1_sentence

    dense = {"gemm_compute_bound_applies_to": "dense GEMMs", "gemm_compute_bound_from_d": 4,
             "ridge_tokens_effective": 276.0, "dense_gemm_compute_bound_from_d": 4,
             "dense_ridge_tokens_effective": 276.0}
    assert g1_sentence(dense) == ("verify GEMMs turn compute-bound at D = 4 (B·(1 + D) crosses the effective "
                                  "ridge of 276 tokens)")
    moe = {**dense, "gemm_compute_bound_applies_to": "experts", "gemm_compute_bound_from_d": -1,
           "ridge_tokens_effective": 150.0, "dense_gemm_compute_bound_from_d": 2}
    s = g1_sentence(moe)
    assert s.startswith("expert GEMMs (the bulk of the weights) turn compute-bound at no D <= 65536")
    assert s.endswith("the dense GEMMs turn compute-bound at D = 2 (B·(1 + D) crosses the effective ridge of 276 tokens)")


def test_recommend_moe_g1_line_names_experts():
    r = recommend("deepseek-v3", "h200-sxm", tp=8, batch=64, context_len=4096,
                  drafts=DraftSearch(mechanisms=["mtp"], acceptance={"mtp": "0.8"}, max_draft_len=8))
    g = r["guidelines"]
    assert g["gemm_compute_bound_applies_to"] == "experts"
    assert g["g1_line"].startswith(f"expert GEMMs (the bulk of the weights) turn compute-bound at "
                                   f"D = {g['gemm_compute_bound_from_d']} ")
    assert f"dense GEMMs turn compute-bound at D = {g['dense_gemm_compute_bound_from_d']} " in g["g1_line"]


def test_recommend_rejects_non_positive_target_tps():
    for bad in (-10, 0):
        with pytest.raises(SpecplanError, match=rf"^target tokens/s/user \(--target-tps-per-user\): must be > 0, got {bad}$"):
            recommend("llama-3.1-8b", "h100-sxm", target_tps_per_user=bad, context_len=1024,
                      drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": "0.8"}, max_draft_len=4))


def test_near_best_lists_runners_up_within_two_percent():
    r = recommend("qwen3.5-122b-a10b", "b200", tp=2, batch=64, dtype="fp4", kv_dtype="fp8", context_len=131072,
                  drafts=DraftSearch(mechanisms=["mtp"], acceptance={"mtp": 0.8}, max_draft_len=32))
    top = r["best"]["tokens_per_s_per_gpu"]
    near = {x["draft_len"] for x in r["near_best"]}
    for x in r["ranked"]:
        if x["feasible"] and x is not r["best"] and x["draft_len"] != r["best"]["draft_len"]:
            assert (x["draft_len"] in near) == (x["tokens_per_s_per_gpu"] >= 0.98 * top)


def test_mechanism_line_only_when_a_speculative_mechanism_wins_over_another():
    from specplan.speculation.guidelines import mechanism_line

    def row(mech, d, t, al=2.0):
        return {"mechanism": mech, "draft_len": d, "feasible": True, "tokens_per_s_per_gpu": t,
                "acceptance_length": al, "speedup": t / 100.0, "batch": 8, "iter_s": 0.01, "draft_s": 0.001}

    ranked = [row("eagle3", 4, 900.0, 3.0), row("ngram", 3, 700.0, 2.0), row("none", 0, 300.0, 1.0)]
    g = mechanism_line(ranked)
    assert g is not None and g[0] == "G5" and "ngram" in g[1]
    assert mechanism_line([row("none", 0, 300.0, 1.0), row("eagle3", 4, 200.0, 3.0)]) is None
    assert mechanism_line([row("eagle3", 4, 900.0, 3.0), row("none", 0, 300.0, 1.0)]) is None  # no rival

"""Issue 10: drafter sizes, trees, guideline attribution and max batch, each checked against a hand count, a
closed form or a Monte Carlo of the draft tree (numbers not taken from the code under test)."""

from __future__ import annotations

import numpy as np
import pytest

from specplan.profiles.registry import load_hardware, load_model
from specplan.planning.recommend import recommend
from specplan.speculation import drafters
from specplan.speculation import acceptance as acc_module
from specplan.speculation.acceptance import Acceptance, al_from_per_position, tree_per_position, tree_tokens
from specplan.speculation.guidelines import StepCurve, binding_line
from specplan.speculation.speedup import evaluate, evaluate_kw
from specplan.speculation.spec import DraftSearch
from specplan.model.deployment import Deployment
from specplan.speculation.spec import Speculation

A8 = Acceptance.from_rate(0.8)


# ---------------- item 2: Medusa heads are the drafter's, not the search's ----------------

def test_medusa_memory_does_not_follow_the_searched_d():
    kw = dict(batch=4, context_len=2048, mechanism="medusa", acceptance=A8)
    short = evaluate_kw("llama-3.1-8b", "h100-sxm", draft_len=np.arange(0, 3), **kw)
    long = evaluate_kw("llama-3.1-8b", "h100-sxm", draft_len=np.arange(0, 5), **kw)
    assert float(short["memory_total_bytes"][2]) == float(long["memory_total_bytes"][2])
    # 5 heads (reference/model_configs.csv medusa-heads: medusa_num_heads 5), each ResBlock h x h + LM head h x V
    base = evaluate(Deployment("llama-3.1-8b", "h100-sxm"), Speculation(draft_len=0), batch=4, context_len=2048)
    heads = 5 * (4096 * 4096 + 128256 * 4096) * 2.0
    act = float(long["memory_total_bytes"][2]) - float(base["memory_total_bytes"])
    assert act == pytest.approx(heads, rel=0.01)  # + the verify tokens' KV and activations (< 1 %)


def test_medusa_heads_flag_and_beyond_the_heads_is_not_feasible():
    r = evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                 Speculation(mechanism="medusa", draft_len=np.arange(0, 5), acceptance=A8, draft_heads=3), batch=1,
                 context_len=2048)
    assert list(r["fits"]) == [True, True, True, True, False]


def test_recommend_medusa_answer_does_not_depend_on_max_draft_len():
    kw = dict(batch=8, context_len=4096)
    a = recommend("llama-3.1-8b", "h100-sxm", drafts=DraftSearch(["medusa"], {"medusa": "0.7"}, 4, True), **kw)
    b = recommend("llama-3.1-8b", "h100-sxm", drafts=DraftSearch(["medusa"], {"medusa": "0.7"}, 5, True), **kw)
    rows_a = {x["draft_len"]: x for x in a["ranked"]}
    rows_b = {x["draft_len"]: x for x in b["ranked"]}
    for d in range(1, 5):
        for k in ("memory_total_bytes", "tokens_per_s_per_gpu"):
            assert rows_a[d][k] == rows_b[d][k], (d, k)


# ---------------- item 3: DFlash / DSpark drafts are dense ----------------

def test_dflash_draft_for_moe_target_is_dense_with_a_hand_counted_size():
    m = load_model("qwen3.5-122b-a10b")
    five = drafters.dflash_model(m)
    assert five.moe is None and {(g.mixer, g.ffn) for g in five.groups()} == {("full", "dense")}
    h = 3072
    assert five.ffn_size == 3 * h  # DFLASH_FFN_PER_HIDDEN x hidden (no dense FFN in the target)
    hw = load_hardware("h100-sxm")
    r = evaluate(Deployment(m, hw), Speculation(mechanism="dflash", draft_len=4, acceptance=A8), batch=1,
                 context_len=4096)
    base = evaluate(Deployment(m, hw), Speculation(mechanism="ngram", draft_len=4, acceptance=A8), batch=1,
                    context_len=4096)  # same verify
    qh, kvh, d = m.num_q_heads, m.num_kv_heads, m.head_dim
    attn = (2 * qh * d + 2 * kvh * d) * h + h * qh * d  # gated q (output gate), k, v; o
    layer = attn + 3 * h * (3 * h) + 2 * d  # + SwiGLU FFN + qk-norm weights
    weights = 5 * layer + 5 * h * h + 5 * 2 * kvh * d * h  # + fusion of 5 hidden states, per-layer KV projection
    extra = float(r["memory_total_bytes"]) - float(base["memory_total_bytes"])
    assert extra == pytest.approx(weights * 2.0, rel=0.03)  # + draft KV / verify activations at B = 1


def test_dflash_prices_one_pass_at_q_len_d_plus_one(monkeypatch):
    seen = []
    real = drafters.step_time

    def spy(model, hw, tp, b, q, ctx, **kw):
        seen.append(np.asarray(q).copy())
        return real(model, hw, tp, b, q, ctx, **kw)

    monkeypatch.setattr(drafters, "step_time", spy)
    evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
             Speculation(mechanism="dflash", draft_len=np.array([1, 4, 7]), acceptance=A8), batch=1, context_len=1024)
    assert any(np.array_equal(q, [2, 5, 8]) for q in seen)  # anchor + D masked positions


# ---------------- item 4: trees ----------------

SPARSE = [(0,), (1,), (2,), (0, 0), (0, 1), (1, 0), (0, 0, 0), (0, 1, 0), (0, 0, 0, 0)]


def _monte_carlo_tree_al(alpha: float, paths, n: int = 200_000, seed: int = 1) -> tuple[float, float]:
    """Walk the tree: at a node each child candidate (rank order) is accepted with probability α; follow the
    first accepted child; tokens = accepted depth + 1 (bonus)."""
    rng = np.random.default_rng(seed)
    kids = {}
    for p in paths:
        kids.setdefault(p[:-1], []).append(p)
    for k in kids.values():
        k.sort()
    tokens = np.empty(n)
    for i in range(n):
        node, depth = (), 0
        while node in kids:
            nxt = next((c for c in kids[node] if rng.random() < alpha), None)
            if nxt is None:
                break
            node, depth = nxt, depth + 1
        tokens[i] = depth + 1
    return float(tokens.mean()), float(tokens.std(ddof=1) / np.sqrt(n))


def test_sparse_tree_acceptance_matches_monte_carlo():
    alpha = 0.55
    assert tree_tokens(SPARSE) == 10 and acc_module.tree_depth(SPARSE) == 4
    al = float(al_from_per_position(tree_per_position(alpha, SPARSE), 4))
    mc, se = _monte_carlo_tree_al(alpha, SPARSE)
    assert abs(al - mc) < 4 * se + 1e-3
    # the old reading: each depth's width (3, 3, 2, 1 nodes) as independent candidates 1 − (1 − α)^w claims more
    widths_al = float(al_from_per_position([1 - (1 - alpha) ** w for w in (3, 3, 2, 1)], 4))
    assert widths_al > mc + 0.2


def test_full_tree_closed_form_and_token_count():
    # branching [2, 2]: 1 + 2 + 4 verified tokens; per depth 1 − (1 − α)^2
    assert tree_tokens([2, 2]) == 7
    assert tree_per_position(0.5, [2, 2]) == pytest.approx((0.75, 0.75))


def test_shipped_medusa_profile_prices_its_64_token_tree():
    acc = Acceptance.from_profile("medusa-vicuna-7b-specbench")
    r = evaluate(Deployment("llama-3.1-8b", "h100-sxm"), Speculation(mechanism="medusa", draft_len=4, acceptance=acc),
                 batch=1, context_len=2048)
    assert float(r["verify_tokens"]) == 64  # mc_sim_7b_63: 63 nodes + root
    assert not any("chain" in n for n in r["notes"])
    chain = evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                     Speculation(mechanism="medusa", draft_len=4, acceptance=acc, tree_tokens=5), batch=1,
                     context_len=2048)
    assert any("tree verification of 64" in n for n in chain["notes"])


# ---------------- item 5: which guideline binds ----------------

def _step(n=6, **over):
    base = {"verify_attention_s": np.zeros(n), "verify_gemm_s": np.linspace(5, 5.1, n) * 1e-3,
            "verify_state_s": np.zeros(n), "draft_s": np.linspace(0, 0.05, n) * 1e-3,
            "acceptance_length": np.array([1, 1.8, 2.4, 2.8, 2.95, 3.0]),
            "speedup": np.array([1, 1.5, 1.7, 1.8, 1.75, 1.6])}
    base.update(over)
    return StepCurve(**base)


def _diag(**over):
    d = {"g_dev": 32, "attention_tile_d": 3, "tile_rows": 128, "attention_share": 0.7, "low_latency": True,
         "gemm_compute_bound_from_d": 100, "dense_gemm_compute_bound_from_d": 100,
         "dense_ridge_tokens_effective": 300.0, "ridge_tokens_effective": 300.0}
    d.update(over)
    return d


def test_g2_only_when_attention_dominates():
    att = np.array([1.0, 1.0, 1.0, 1.0, 2.0, 2.0]) * 1e-3  # the second tile opens at D = 4
    assert binding_line(3, _step(verify_attention_s=att), _diag(attention_share=0.7))[0] == "G2"
    assert binding_line(3, _step(verify_attention_s=att), _diag(attention_share=0.3))[0] == "G3"


def test_state_growth_is_not_attention():
    state = np.linspace(0, 5, 6) * 1e-3
    g, line = binding_line(3, _step(verify_state_s=state), _diag())
    assert g == "state" and "recurrent-state" in line


def test_g4_only_at_the_low_latency_end():
    draft = np.linspace(0, 5, 6) * 1e-3
    assert binding_line(3, _step(draft_s=draft), _diag(low_latency=True))[0] == "G4"
    assert binding_line(3, _step(draft_s=draft), _diag(low_latency=False))[0] == "marginal"


def test_speculation_off_is_not_g5_and_g5_names_the_mechanism_choice():
    sp = np.array([1.0, 0.9, 0.8, 0.7, 0.6, 0.5])
    assert binding_line(0, _step(speedup=sp), _diag())[0] == "off"
    r = recommend("llama-3.1-8b", "h100-sxm", batch=4, context_len=4096,
                  drafts=DraftSearch(mechanisms=["eagle3", "ngram"], acceptance={"eagle3": "0.8", "ngram": "0.4"}, max_draft_len=8))
    assert r["mechanism_choice"]["guideline"] == "G5"
    assert r["best"]["mechanism"] in r["mechanism_choice"]["line"] and "ngram" in r["mechanism_choice"]["line"]


def test_mid_batch_draft_growth_is_not_g4():
    # batch 11 at 32K: the D = 0 step is 1.7x its batch-1 time, not the low-latency end
    r = recommend("llama-3.3-70b", "h200-sxm", tp=2, context_len=32768, target_tps_per_user=50,
                  drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": "0.75"}, max_draft_len=16))
    assert r["best"]["batch"] > 4 and r["binding"]["guideline"] != "G4"
    low = recommend("llama-3.3-70b", "h200-sxm", tp=2, context_len=32768, batch=1,
                    drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": "0.75"}, max_draft_len=16))
    assert low["binding"]["guideline"] == "G4"


def test_hybrid_state_traffic_is_not_explained_as_attention_tiles():
    r = recommend("qwen3.5-122b-a10b", "b200", batch=64, tp=2, context_len=131072, dtype="fp4", kv_dtype="fp8",
                  drafts=DraftSearch(mechanisms=["mtp"], acceptance={"mtp": "0.8"}, max_draft_len=16))
    g, line = r["binding"]["guideline"], r["binding"]["line"]
    assert g not in ("G2", "G3") or "recurrent" not in line
    assert "recurrent state" in line or g == "state"


# ---------------- item 6: EAGLE-3 fusion once per proposal ----------------

def test_eagle3_fusion_runs_once_per_proposal():
    """T_draft(D) = D x (layer + LM head) + fc(3h -> h) once: the intercept of the line through D = 1, 2 is the
    fc's weight read, 3·4096·4096·2 B = 100.7 MB at the H100's achievable bandwidth (~40 us)."""
    hw = load_hardware("h100-sxm")
    r = evaluate(Deployment("llama-3.1-8b", hw),
                 Speculation(mechanism="eagle3", draft_len=np.array([1, 2, 3]), acceptance=A8), batch=1,
                 context_len=1024)
    t = r["draft_s"]
    assert t[2] - t[1] == pytest.approx(t[1] - t[0], rel=1e-6)  # a line in D
    intercept = 2 * t[0] - t[1]
    fc_read_s = 3 * 4096 * 4096 * 2.0 / hw.mem_bandwidth_bytes_s
    assert 0.9 * fc_read_s < intercept < 1.6 * fc_read_s


# ---------------- item 6: max batch at the verify q_len ----------------

def test_recommend_max_batch_is_the_verify_step_max_batch():
    r = recommend("llama-3.1-8b", "h100-sxm", batch=1, context_len=131072,
                  drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": "0.8"}, max_draft_len=8))
    for x in r["ranked"]:
        mb = x["max_batch"]
        ok = evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                      Speculation(mechanism="eagle3" if x["draft_len"] else "none", draft_len=x["draft_len"], acceptance=A8 if x["draft_len"] else None),
                      batch=np.array([mb, mb + 1]), context_len=131072)["fits"]
        assert list(ok) == [True, False], x


def test_memory_binds_when_the_next_d_does_not_fit_and_says_how_many_tokens_verify():
    # D = 3 fits, D = 4 does not: the memory line names D + 1 = 4 and the verify-time state of 1 + 4 = 5 tokens
    fits = np.array([True, True, True, True, False, False])
    mem = np.array([70, 72, 74, 76, 81.5, 83]) * 1e9
    kind, line = binding_line(3, _step(fits=fits, memory_total_bytes=mem), _diag())
    assert kind == "memory"
    assert line == ("D = 4 does not fit in memory at this batch (81.5 GB per device: KV cache, weights and the "
                    "verify-time state of 5 tokens)")
    kind, line = binding_line(3, _step(fits=np.array([True] * 3 + [False] * 3), memory_total_bytes=mem), _diag())
    assert kind == "memory" and line.startswith("D = 3 itself does not fit in memory at this batch (76.0 GB")


def test_marginal_sentence_lists_each_class_of_added_verify_time():
    # D = 3 -> 4 adds 0.2 ms GEMM, 0.1 ms attention, 1 ms recurrent state (each grow x 1e3, 3 decimals)
    from specplan.speculation.guidelines import Growth, marginal_sentence

    step = _step(speedup=np.array([1, 1.5, 1.7, 1.8, 1.75, 1.6]))
    grow = Growth(gemm_s=2e-4, attention_s=1e-4, state_s=1e-3, draft_s=3e-4)
    line = marginal_sentence(3, step, grow, 0.15)
    assert line.startswith("D = 4 adds 0.200 ms GEMM, 0.100 ms attention, 1.000 ms recurrent state of verify and "
                           "0.300 ms of drafting for +0.15 AL (+5.4%): not worth it (speedup 1.750 vs 1.800)"), line


def test_marginal_sentence_names_verify_time_outside_the_classes():
    # the verify step grows by 0.6 ms from D = 3 to 4 while GEMM + attention + state grow by 0.4 ms: 0.2 ms other
    from specplan.speculation.guidelines import Growth, marginal_sentence

    step = _step(verify_s=np.array([5.0, 5.1, 5.2, 5.3, 5.9, 6.5]) * 1e-3)
    grow = Growth(gemm_s=2e-4, attention_s=1e-4, state_s=1e-4, draft_s=3e-4)
    line = marginal_sentence(3, step, grow, 0.15)
    assert "0.200 ms GEMM, 0.100 ms attention, 0.100 ms recurrent state, 0.200 ms other of verify" in line, line


def test_g3_names_the_attention_rows_and_tiles():
    # G = 32 query heads per KV head at D = 3: 32 x 4 = 128 rows, one 128-row tile; D = 4 opens a second one
    att = np.array([1.0, 1.0, 1.0, 1.0, 2.0, 2.0]) * 1e-3
    g, line = binding_line(3, _step(verify_attention_s=att), _diag(attention_share=0.3))
    assert g == "G3" and line.startswith("attention tiles: G·(1 + D) = 128 rows in 128-row tiles; D = 4 adds"), line


def test_growth_names_the_class_that_grows_most_and_state_only_when_priced():
    from specplan.speculation.guidelines import Growth

    assert Growth(attention_s=1e-4, gemm_s=3e-4, draft_s=2e-4).top() == "gemm"
    assert Growth(attention_s=1e-4, gemm_s=3e-4, draft_s=2e-4, state_s=4e-4).top() == "state"
    assert Growth(attention_s=2e-4, gemm_s=2e-4, draft_s=1e-4).top() == "attention"  # a tie: the first class


def test_guideline_diagnostics_read_as_the_dict_answer_in_its_key_order():
    from specplan.speculation.speedup import evaluate_kw

    g = evaluate_kw("llama-3.1-8b", "h100-sxm", batch=8, context_len=1024, draft_len=3, mechanism="eagle3",
                    acceptance=None, guidelines=True).guidelines
    assert list(g)[:4] == ["tile_rows", "low_latency", "g_dev", "attention_tile_d"] and list(g)[-1] == "rho_d"
    # Llama-3.1-8B: 32 query heads over 8 KV heads, G = 4 at TP 1; G2's D = tile rows / G - 1
    assert g.g_dev == g["g_dev"] == 4
    assert g.attention_tile_d == g.tile_rows // 4 - 1
    assert g.gemm_compute_bound_applies_to == "dense GEMMs"

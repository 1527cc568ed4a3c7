"""The speculative round as engines run it (specplan/speculation/round.py, issue 19): hand-computed round costs,
tree verification through the masked prefill kernel, verify tokens in the token budget, the step path agreeing
with the serving path at concurrency 1, and speedups that do not rise once the verify GEMMs are compute-bound."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specplan.profiles.engine import EngineProfile
from specplan.profiles.registry import load_engine, load_hardware, load_kernel_family, load_model
from specplan.serving.aggregated import aggregated, gpu_tables, solve
from specplan.serving.prefill import mixed_step_s, StepMix
from specplan.serving.workload import Workload
from specplan.speculation.acceptance import Acceptance
from specplan.speculation.round import (REJECTION_PASSES, RoundShape, rejection_s, round_gpu_extra_s, round_s,
                                        unfitted_note, verify_graphed)
from specplan.speculation.speedup import evaluate, evaluate_kw
from specplan.model.step import StepKernels, step_time
from specplan.planning.options import GridOptions, Sla
from specplan.speculation.spec import DraftSearch
from specplan.model.deployment import Deployment
from specplan.speculation.spec import Speculation
from specplan.serving.aggregated import StepOptions
from specplan.speculation.spec import Speculation

SRC = {k: "test" for k in ("host_step_s", "host_per_seq_s", "spec_host_per_seq_s", "eager_launch_s",
                           "graph_max_batch", "verify_graph_max_tokens", "draft_graph_max_batch",
                           "max_num_batched_tokens", "max_num_seqs")}


def _engine(**kw) -> EngineProfile:
    base = dict(id="t", host_step_s=1e-3, host_per_seq_s=2e-5, spec_host_per_seq_s=5e-5, eager_launch_s=1e-5,
                cuda_graphs_decode=True, graph_max_batch=512, verify_graph_max_tokens=512, draft_graph_max_batch=1024,
                sources=SRC)
    base.update(kw)
    return EngineProfile(**base)


def test_round_cost_by_hand_host_graphs_and_overlap():
    eng = _engine()
    # B = 8, D = 3 (q = 4): verify graphed (8 <= 512 // 4), no launch cost; host added (no overlap):
    # 1 ms + 8 x 20 us (step) + 8 x 50 us (round) + 5 ms GPU
    assert round_s(eng, 5e-3, 8, 3, 4, 300, 30) == pytest.approx(1e-3 + 8 * 2e-5 + 8 * 5e-5 + 5e-3, rel=1e-12)
    # B = 129 > 512 // 4 = 128: the verify runs eagerly, 300 target kernels x 10 us = 3 ms of launches, which
    # bind over a 2 ms GPU round; the 30 draft kernels stay graphed (129 <= 1024)
    assert not verify_graphed(eng, 129, 4) and verify_graphed(eng, 128, 4)
    host = 1e-3 + 129 * (2e-5 + 5e-5)
    assert round_s(eng, 2e-3, 129, 3, 4, 300, 30) == pytest.approx(host + 3e-3, rel=1e-12)
    # draft graphs capped at 100: its 30 kernels go eager too (+0.3 ms of launches)
    eng_d = _engine(draft_graph_max_batch=100)
    assert round_s(eng_d, 2e-3, 129, 3, 4, 300, 30) == pytest.approx(host + 3.3e-3, rel=1e-12)
    # overlapped rounds: max(GPU, host + launches)
    eng_o = _engine(spec_overlap=True)
    assert round_s(eng_o, 5e-3, 8, 3, 4, 300, 30) == pytest.approx(5e-3, rel=1e-12)
    assert round_s(eng_o, 1e-4, 8, 3, 4, 300, 30) == pytest.approx(1e-3 + 8 * 7e-5, rel=1e-12)
    # D = 0 is the engine's decode step, untouched
    for b in (1.0, 8.0, 600.0):
        assert round_s(eng, 4e-3, b, 0, 1, 300, 0) == pytest.approx(float(eng.step_s(4e-3, b, 300, b <= 512)))


def test_a_step_that_replays_no_graph_pays_the_per_step_eager_work():
    # TensorRT-LLM's eager_step_s (issue 22) is host work of a step carrying a prompt (eager=True), fitted on
    # context steps; a decode step beyond the graph cap pays its kernels' eager launches only (issue 40).
    # Overlap scheduler, 1 ms GPU, 100 kernels x 10 us, 20 ms eager work:
    eng = _engine(eager_step_s=0.02, overlap_scheduler=True, host_step_s=0.0, host_per_seq_s=0.0,
                  sources={**SRC, "eager_step_s": "test"})
    assert float(round_s(eng, 1e-3, 8, 0, 1, 100, 0, eager=True)) == pytest.approx(0.02 + 100 * 1e-5, rel=1e-12)
    assert float(round_s(eng, 1e-3, 8, 0, 1, 100, 0)) == pytest.approx(1e-3, rel=1e-12)  # graphed decode
    # beyond the cap 512: max(0.5 ms GPU, 100 x 10 us of launches), no eager_step_s
    assert float(round_s(eng, 5e-4, 600, 0, 1, 100, 0)) == pytest.approx(1e-3, rel=1e-12)
    for b, graphed in ((8.0, True), (8.0, False), (600.0, False)):  # D = 0: the engine's step_s, either state
        assert float(round_s(eng, 1e-3, b, 0, 1, 100, 0, eager=not graphed)) == pytest.approx(
            float(eng.step_s(1e-3, b, 100, graphed)), rel=1e-12)


def test_round_gpu_extras_by_hand_rejection_and_extend():
    m = load_model("llama-3.1-8b")
    hw = load_hardware("h100-sxm")
    b, d, q = 16.0, 3.0, 4.0
    bw = hw.mem_bandwidth_bytes_s * hw.kernel_eff("default").mem_bw_fraction
    # probabilistic rejection: 4 fp32 passes over the B x (q - 1) extra rows of a 128256-token vocabulary
    by_hand = 16 * 3 * 128256 * 4 * 4 / bw + hw.kernel_overhead_s
    assert REJECTION_PASSES["probabilistic"] == 4.0
    assert float(rejection_s(hw, b, q, 128256)) == pytest.approx(by_hand, rel=1e-9)
    greedy = 16 * 3 * 128256 * 4 * 1 / bw + hw.kernel_overhead_s
    assert float(rejection_s(hw, b, q, 128256, sampling="greedy")) == pytest.approx(greedy, rel=1e-9)
    # n-gram has no draft extend: its extras are the rejection alone
    assert float(round_gpu_extra_s(m, hw, 1, RoundShape(b, d, q, 1024), "ngram")) == pytest.approx(by_hand, rel=1e-9)
    # EAGLE-3 adds the head's pass at q tokens per sequence beyond the q = 1 step the drafter prices
    from specplan.costs.precision import resolve_precision
    from specplan.speculation.round import round_draft_model

    head = round_draft_model(m, "eagle3")
    hp = resolve_precision(head, hw, None, None)
    from specplan.costs.gemm import gemm_cost

    h, v = head.hidden_size, head.draft_vocab_size
    lm_fc = lambda t: (gemm_cost(hw, b * t, v, h, hp.w("lm_head"), hp.compute).time_s  # noqa: E731
                       + gemm_cost(hw, b * t, h, 3 * h, hp.w("fc"), hp.compute).time_s)
    # the head's pass at q tokens beyond one at 1 token, less the LM head and fusion on the B (q - 1) extra rows:
    # logits at the B last positions only, the fusion priced by the drafter (issue 40)
    extend = (step_time(head, hw, 1, b, q, 1024, precision=hp).total_s
              - step_time(head, hw, 1, b, 1, 1024, precision=hp).total_s - (lm_fc(q) - lm_fc(1.0)))
    got = float(round_gpu_extra_s(m, hw, 1, RoundShape(b, d, q, 1024), "eagle3", (head, hp)))
    assert extend > 0 and got == pytest.approx(by_hand + extend, rel=1e-9)
    # nothing at D = 0
    assert float(round_gpu_extra_s(m, hw, 1, RoundShape(b, 0.0, 1.0, 1024), "eagle3", (head, hp))) == 0.0


def test_tree_verify_priced_through_masked_prefill_kernel():
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    eng = load_engine("vllm")
    acc = Acceptance.from_length(3.0, 4)
    kw = dict(batch=8, context_len=4096, draft_len=4, mechanism="eagle3", acceptance=acc, engine="vllm")
    tree = evaluate_kw(m, hw, tree_tokens=16, **kw)
    from specplan.profiles.engine import engine_hardware

    ehw = engine_hardware(hw, eng)
    pre = step_time(m, ehw, 1, 8, 16, 4096, precision=tree["precision"],
                    kernels=StepKernels(attention_family=load_kernel_family(eng.prefill_attention))).breakdown_s["attention"]
    dec = step_time(m, ehw, 1, 8, 16, 4096, precision=tree["precision"],
                    kernels=StepKernels(attention_family=load_kernel_family(eng.verify_attention))).breakdown_s["attention"]
    assert float(tree["verify_attention_s"]) == pytest.approx(float(pre), rel=1e-9)
    assert abs(float(pre) / float(dec) - 1.0) > 0.01  # the masked kernel prices differently from the decode kernel
    chain = evaluate_kw(m, hw, **kw)  # a chain (1 + D tokens) keeps the engine's verify family
    dec5 = step_time(m, ehw, 1, 8, 5, 4096, precision=chain["precision"],
                     kernels=StepKernels(attention_family=load_kernel_family(eng.verify_attention))).breakdown_s["attention"]
    assert float(chain["verify_attention_s"]) == pytest.approx(float(dec5), rel=1e-9)


def test_verify_tokens_inside_the_token_budget_and_prefill_interference():
    m, hw, eng = load_model("llama-3.1-8b"), load_hardware("h100-sxm"), load_engine("vllm")
    from specplan.costs.precision import resolve_precision

    prec = resolve_precision(m, hw, None, None)
    wl = Workload(isl=8192, osl=256, concurrency=1500.0)
    spec = StepOptions(Speculation("eagle3", np.array(3.0), Acceptance.from_length(2.5, 3)))
    tab = gpu_tables(m, hw, 1, wl, eng, spec, prec, 1500.0)
    base = gpu_tables(m, hw, 1, wl, eng, StepOptions(Speculation("none", np.array(0.0))), prec, 1500.0)
    i = int(np.argmin(np.abs(np.exp(tab.log_b) - 1500.0)))
    assert np.exp(tab.log_b[i]) == pytest.approx(1500.0)
    # 1500 verify rows of 4 tokens leave 8192 - 6000 = 2192 budget tokens: a prompt of 8192 takes 4 steps;
    # decode rows of 1 token leave 6692: 2 steps
    assert float(tab.n_chunks[i]) == 4.0 and float(base.n_chunks[i]) == 2.0
    # the first chunk's interference is priced with q = 4 rows: mixed step (4-token rows + 2192 prompt tokens)
    # minus the verify step alone
    fam = load_kernel_family(eng.decode_attention)
    with_chunk = mixed_step_s(m, hw, 1, StepMix(1500.0, wl.decode_context, 2192.0, 0, q_len=4.0), precision=prec,
                              engine=eng, decode_family=fam)
    alone = mixed_step_s(m, hw, 1, StepMix(1500.0, wl.decode_context, 0.0, 0, q_len=4.0), precision=prec, engine=eng,
                         decode_family=fam)
    assert float(tab.chunk_gpu_s[0][i]) == pytest.approx(float(with_chunk - alone), rel=1e-9)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("mech,d,extra", [("eagle3", 3, {}), ("external", 4, {"draft_model": "llama-3.2-1b"}),
                                          ("ngram", 5, {})])
def test_step_path_and_serving_path_agree_at_concurrency_one(engine, mech, d, extra):
    acc = Acceptance.from_length(2.5, d)
    wl = Workload(isl=128, osl=1024, concurrency=1)
    base = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine=engine), Speculation(), wl)
    spec = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine=engine), Speculation.of(mech, d, acc, **extra), wl)
    step = evaluate_kw("llama-3.1-8b", "h100-sxm", batch=1, context_len=wl.decode_context, draft_len=d, mechanism=mech,
                    acceptance=acc, engine=engine, **extra)
    serving = float(base["tpot_s"] / spec["tpot_s"])
    assert serving == pytest.approx(float(step["speedup"]), rel=0.02)


def _ridge_tokens(hw, dtype="bf16") -> float:
    """GEMM tokens at which a weight-streaming GEMM turns compute-bound: 1 FLOP per weight byte per token at bf16."""
    eff = hw.kernel_eff(dtype)
    return hw.peak(dtype) * eff.compute_max_fraction / (hw.mem_bandwidth_bytes_s * eff.mem_bw_fraction)


@settings(max_examples=4, deadline=None)
@given(d=st.integers(2, 5), frac=st.floats(0.3, 0.95), engine=st.sampled_from(["vllm", "sglang", "trtllm", "ideal"]))
def test_dense_speedup_does_not_rise_once_verify_is_compute_bound(d, frac, engine):
    al = 1.0 + frac * d
    # up to 128: TensorRT-LLM's decode graphs stop at 128 sequences, and beyond them its eager launches (a step-host
    # number issue 22 reworks) move baseline and speculative steps by different amounts
    conc = np.array([8.0, 16.0, 32.0, 48.0, 64.0, 96.0, 128.0])
    wl = Workload(isl=128, osl=1024, concurrency=conc)
    acc = Acceptance.from_length(al, d)
    # the launch sets its running cap (SGLang's 48 when speculating otherwise holds the speculative decode batch at
    # 48 while the baseline's grows, an admission effect, not the verify economics this property is about)
    engine = load_engine(engine).model_copy(update={"spec_max_num_seqs": None})
    base = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine=engine), Speculation(), wl)
    spec = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine=engine), Speculation("eagle3", d, acc), wl)
    s = np.asarray(base["tpot_s"] / spec["tpot_s"])
    ridge = _ridge_tokens(load_hardware("h100-sxm"))
    bound = np.asarray(spec["decode_batch"]) * (1 + d) >= ridge
    assert bound.sum() >= 2
    s_b = s[bound]
    assert np.all(np.diff(s_b) <= 1e-3), (d, al, engine, s)


def test_unfitted_round_numbers_are_said_in_one_line():
    assert unfitted_note(load_engine("ideal")) == []
    eng = _engine()
    note = unfitted_note(eng.model_copy(update={"sources": {k: v for k, v in SRC.items()
                                                            if k != "spec_host_per_seq_s"},
                                                "spec_host_per_seq_s": 0.0}))
    assert len(note) == 1 and "\n" not in note[0] and "not fitted" in note[0]
    r = evaluate(Deployment("llama-3.1-8b", "h100-sxm", engine=eng.model_copy(update={"sources": {
                     **SRC, "spec_host_per_seq_s": "fitted in-sample on one setup"}})),
                 Speculation(mechanism="eagle3", draft_len=3, acceptance=Acceptance.from_length(2.5, 3)), batch=4)
    assert any("in-sample" in n for n in r["notes"])
    # SGLang's step host numbers: no SGLang serving rows fit them, so the note names them too (issue 19)
    sg = unfitted_note(load_engine("sglang"))
    assert len(sg) == 1 and "host_step_s" in sg[0] and "host_per_seq_s" in sg[0]
    assert "host_step_s" not in unfitted_note(load_engine("vllm"))[0]  # fitted on the vLLM serving rows


def test_an_engine_that_turns_overlap_off_for_a_mechanism_prices_its_rounds_unoverlapped():
    """vLLM 0.14-0.17 schedule asynchronously but not with n-gram (spec_sync_mechanisms): an engine YAML with both
    overlaps on runs n-gram rounds additively, EAGLE-3 rounds overlapped, and D = 0 steps overlapped either way.
    By hand, 8 sequences, 5 ms GPU, host 1 ms + 8 x (20 + 50) us = 1.56 ms, graphed: 6.56 ms against 5 ms."""
    eng = _engine(overlap_scheduler=True, spec_overlap=True, spec_sync_mechanisms=["ngram"])
    ng, e3 = eng.for_mechanism("ngram"), eng.for_mechanism("eagle3")
    assert e3 is eng and ng is eng.for_mechanism("ngram") and not ng.spec_overlap
    assert float(round_s(ng, 5e-3, 8, 3, 4, 300, 0)) == pytest.approx(1e-3 + 8 * 7e-5 + 5e-3, rel=1e-12)
    assert float(round_s(e3, 5e-3, 8, 3, 4, 300, 0)) == pytest.approx(5e-3, rel=1e-12)
    assert float(round_s(ng, 5e-3, 8, 0, 1, 300, 0)) == pytest.approx(5e-3, rel=1e-12)  # the baseline step
    # the serving path resolves it at its entry: the same numbers as an engine whose rounds never overlap
    wl = Workload(isl=256, osl=256, concurrency=np.array([16.0, 64.0]))
    spec = Speculation("ngram", np.array([3.0]), Acceptance.from_length(2.5, 3))
    a = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine=eng), spec, wl)
    b = aggregated(Deployment("llama-3.1-8b", "h100-sxm",
                              engine=eng.model_copy(update={"spec_overlap": False, "spec_sync_mechanisms": []})),
                   spec, wl)
    c = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine=eng.model_copy(update={"spec_sync_mechanisms": []})),
                   spec, wl)
    np.testing.assert_allclose(a["tpot_s"], b["tpot_s"], rtol=1e-12)
    assert np.all(np.asarray(c["tpot_s"]) < np.asarray(a["tpot_s"]))  # overlapped n-gram rounds: faster
    with pytest.raises(ValueError, match="spec_sync_mechanisms: 'eagle' is not a speculative mechanism"):
        EngineProfile.model_validate({**load_engine("vllm").model_dump(), "spec_sync_mechanisms": ["eagle"]})
    from specplan.profiles.engine import SPEC_MECHANISMS
    from specplan.speculation.drafters import DRAFTERS

    assert set(SPEC_MECHANISMS) == set(DRAFTERS) - {"none"}  # the profile's list follows the drafters


def test_a_speculative_moe_answer_says_how_its_verify_experts_are_priced():
    """The MoE line comes with a speculative MoE target only, and what it claims holds by hand: gpt-oss-120b (128
    experts, top-4) at batch 1 and D = 3 verifies 4 tokens, which touch 128 (1 - (124/128)^4) = 15.27 experts, 3.82 x
    the 4 of a decode step (at most 1 + D = 4); at batch 256 a decode step touches 128 (1 - (124/128)^256) = 127.96
    and the verify all 128, a ratio of 1.0003."""
    from specplan.costs.moe import touched_experts, verify_expert_reuse
    from specplan.speculation.round import moe_verify_note

    kw = dict(hardware="h100-sxm", batch=1, context_len=1024, draft_len=3, acceptance=Acceptance.from_length(2.4, 3))
    moe = evaluate_kw(model="gpt-oss-120b", mechanism="eagle3", **kw)["notes"]
    assert [n for n in moe if n.startswith("MoE target")] == moe_verify_note()
    assert not [n for n in evaluate_kw(model="llama-3.1-8b", mechanism="eagle3", **kw)["notes"] if "MoE" in n]
    assert not [n for n in evaluate(Deployment("gpt-oss-120b", "h100-sxm"), Speculation(mechanism="none"), batch=1,
                                    context_len=1024)["notes"] if "MoE" in n]
    assert "independently" in moe_verify_note()[0]
    with verify_expert_reuse(0.5):
        assert "reusing experts at 0.5" in moe_verify_note()[0]
    r1 = touched_experts(4, 128, 4) / touched_experts(1, 128, 4)
    assert r1 == pytest.approx(128 * (1 - (124 / 128) ** 4) / 4) and r1 == pytest.approx(3.8164, abs=1e-3) and r1 <= 4
    r256 = touched_experts(1024, 128, 4) / touched_experts(256, 128, 4)
    assert r256 == pytest.approx(128 / (128 * (1 - (124 / 128) ** 256)), rel=1e-6) and r256 < 1.001


def test_recommend_carries_the_moe_line_once_on_both_paths():
    """recommend's step search (several mechanisms) and its serving search say the MoE line once for an MoE target
    and not for a dense one."""
    from specplan.planning.recommend import recommend
    from specplan.planning.recommend_serving import recommend_serving
    from specplan.speculation.round import moe_verify_note

    acc = {"eagle3": "0.7", "external": "0.7"}
    step = recommend("gpt-oss-120b", "h100-sxm", context_len=2048, draft_model="llama-3.2-1b",
                     drafts=DraftSearch(mechanisms=["eagle3", "external"], acceptance=acc, max_draft_len=32))
    assert step["notes"].count(moe_verify_note()[0]) == 1
    dense = recommend("llama-3.1-8b", "h100-sxm", context_len=2048,
                      drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": "0.7"}, max_draft_len=32))
    assert not [n for n in dense["notes"] if "MoE" in n]
    serv = recommend_serving("gpt-oss-120b", "h100-sxm", Workload(128, 1024, concurrency=1.0), engine="vllm",
                             drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": "0.7"}, max_draft_len=16),
                             sla=Sla(max_tpot_ms=30.0), grid=GridOptions(search_concurrency=True))
    assert serv["notes"].count(moe_verify_note()[0]) == 1

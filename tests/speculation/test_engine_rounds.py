"""The speculative round per engine version as the engines run it today (issue 40): one test per item of the issue,
each against a number counted by hand from the engine's source or a closed form, not taken from round.py."""

from __future__ import annotations

import numpy as np
import pytest

from specplan.costs.gemm import elementwise_cost, gemm_cost
from specplan.costs.precision import resolve_precision
from specplan.model.step import step_time
from specplan.profiles.registry import load_engine, load_hardware, load_model
from specplan.serving.aggregated import aggregated
from specplan.serving.workload import Workload
from specplan.speculation.round import RoundShape, round_draft_model, round_gpu_extra_s
from specplan.speculation.speedup import evaluate, evaluate_kw
from specplan.model.deployment import Deployment
from specplan.speculation.spec import Speculation

M, HW = "llama-3.1-8b", "h100-sxm"


def _head():
    m, hw = load_model(M), load_hardware(HW)
    head = round_draft_model(m, "eagle3")
    return m, hw, head, resolve_precision(head, hw, None, None)


# item 1: vLLM 0.34.0 as shipped (async scheduling with speculation, fused draft graph, no round overheads), the
# synchronous round of the older V1 releases selectable as vllm-0.10


def test_vllm_034_overlaps_its_round_and_has_no_stale_round_overheads():
    new, old = load_engine("vllm"), load_engine("vllm-0.10")
    assert new.version == "0.34.0" and new.overlap_scheduler and new.spec_overlap and not new.spec_sync_mechanisms
    assert new.spec_iteration_overhead_s == 0.0 and new.spec_draft_step_overhead_s == 0.0
    assert not old.overlap_scheduler and not old.spec_overlap and old.spec_iteration_overhead_s == 1.034e-3
    # at batch 1 the 8B round's GPU time (several ms) hides its host time (0.701 ms + 31.4 us) under 0.34: the
    # engine's round is the GPU's; the synchronous round adds host 0.7324 ms + 1.034 ms + 3 x 0.633 ms on top
    kw = dict(batch=1, context_len=1024, mechanism="eagle3", draft_len=3)
    r_new = evaluate_kw(M, HW, engine="vllm", **kw)
    r_old = evaluate_kw(M, HW, engine="vllm-0.10", **kw)
    gpu_new = float(r_new["iter_s"])
    assert float(r_new["engine_iter_s"]) < gpu_new * 1.05  # only the round's GPU extras (extend, rejection)
    host_old = 0.701e-3 + 31.4e-6 + 1.034e-3 + 3 * 0.633e-3
    assert float(r_old["engine_iter_s"]) - float(r_new["engine_iter_s"]) > 0.9 * host_old


def test_vllm_8b_eagle3_speedup_never_rises_with_concurrency():
    # issue 40 must-show 3: Llama-3.1-8B, EAGLE-3 D 3 with the shipped MT-Bench acceptance, ISL 128 / OSL 1024 on
    # one H100 under vLLM 0.34: the speedup (baseline TPOT / speculative TPOT) does not rise from concurrency 1 to
    # 8, 32, 64, 128 (public vLLM studies see it shrink with batch); the synchronous round rose 1.79 -> 1.84
    wl = Workload(isl=128, osl=1024, concurrency=np.array([1.0, 8.0, 32.0, 64.0, 128.0]))
    base = aggregated(Deployment(M, HW, engine="vllm"), Speculation(), wl)
    spec = aggregated(Deployment(M, HW, engine="vllm"), Speculation("eagle3", 3), wl)
    s = np.asarray(base["tpot_s"]) / np.asarray(spec["tpot_s"])
    assert np.all(np.diff(s) <= 1e-9), s


# item 2: TensorRT-LLM's context-step eager_step_s is not a decode round's cost; graphs at its captured sizes


def test_trtllm_decode_above_the_captured_sizes_pays_eager_launches_not_the_context_step():
    eng = load_engine("trtllm")
    m, hw = load_model(M), load_hardware(HW)
    r = evaluate(Deployment(M, HW, engine="trtllm"), batch=np.array([128.0, 129.0]), context_len=1024)
    k = float(step_time(m, hw, 1, 1, 1, 1024).kernels)
    # batch 129 > 128 runs eagerly: overlap scheduler, max(GPU, host 2.09 ms + 129 x 4.76 us + k x 7.46 us) + 0.459 ms
    host = 2.09e-3 + 129 * 4.76e-6 + k * 7.46e-6  # engine_profiles/trtllm.yaml
    step = float(r["engine_baseline_step_s"][1])
    assert step == pytest.approx(max(float(r["baseline_step_s"][1]), host) + 4.59e-4, rel=1e-9)
    assert step - float(r["engine_baseline_step_s"][0]) < 0.5 * eng.eager_step_s  # was +4.8 ms (14 ms eager step)


def test_trtllm_without_padding_replays_graphs_only_at_its_captured_sizes():
    # llm_args.py CudaGraphConfig without padding: list(range(1, 32)) + [32, 64, 128]; with padding any batch <= 128
    eng = load_engine("trtllm")
    unpadded = eng.model_copy(update={"graph_padding": False})
    b = np.array([1.0, 31.0, 32.0, 33.0, 48.0, 64.0, 80.0, 128.0, 129.0])
    assert list(eng.graphed(b)) == [True] * 8 + [False]
    assert list(unpadded.graphed(b)) == [True, True, True, False, False, True, False, True, False]


# item 3: the draft extend takes logits at the B last positions; EAGLE-3's 3h -> h fusion counted once


def test_eagle3_fusion_is_counted_once_over_the_verified_positions():
    m, hw, head, hp = _head()
    b, d = 16.0, 3.0
    q = 1.0 + d
    h = head.hidden_size
    fc = lambda rows: float(gemm_cost(hw, rows, h, 3 * h, hp.w("fc"), hp.compute).time_s)  # noqa: E731
    lm = lambda rows: float(gemm_cost(hw, rows, 32000, h, hp.w("lm_head"), hp.compute).time_s)  # noqa: E731
    one = lambda t, rows: float(step_time(head, hw, 1, b, t, 1024, precision=hp, logits_rows=rows).total_s)  # noqa
    # the extend at q tokens per sequence beyond the q = 1 pass: attention, MLP and qkv over B (q - 1) more rows,
    # logits at B rows both times, no fusion (the drafter's fc over B (1 + D) rows is the round's only one)
    by_hand = (one(q, b) - fc(b * q)) - (one(1.0, b) - fc(b))
    rej = float(round_gpu_extra_s(m, hw, 1, RoundShape(b, d, q, 1024), "ngram"))  # the rejection alone
    got = float(round_gpu_extra_s(m, hw, 1, RoundShape(b, d, q, 1024), "eagle3", (head, hp))) - rej
    assert got == pytest.approx(by_hand, rel=1e-9)
    old = float(step_time(head, hw, 1, b, q, 1024, precision=hp).total_s
                - step_time(head, hw, 1, b, 1, 1024, precision=hp).total_s)  # the price before issue 40
    assert old - got == pytest.approx(fc(b * q) - fc(b) + lm(b * q) - lm(b), rel=1e-9)


# item 4: SGLang tree drafts run topk tokens per request per draft step, top-k over the head's draft vocabulary


def test_sglang_tree_draft_steps_run_topk_tokens_over_the_draft_vocabulary():
    m, hw, head, hp = _head()
    b, d, q, k = 8.0, 3.0, 64.0, 8  # a 64-token tree of depth 3, --speculative-eagle-topk 8
    eng = load_engine("sglang").model_copy(update={"spec_topk": k})
    got = float(round_gpu_extra_s(m, hw, 1, RoundShape(b, d, q, 1024), "eagle3", (head, hp), eng=eng))
    h = head.hidden_size
    fc = lambda rows: float(gemm_cost(hw, rows, h, 3 * h, hp.w("fc"), hp.compute).time_s)  # noqa: E731
    one = lambda t, rows=None: float(step_time(head, hw, 1, b, t, 1024, precision=hp,  # noqa: E731
                                               logits_rows=rows).total_s)
    bw = hw.mem_bandwidth_bytes_s * hw.kernel_eff("default").mem_bw_fraction
    rejection = b * (q - 1) * m.vocab_size * 4 * 4 / bw + hw.kernel_overhead_s
    extend = (one(q, b) - fc(b * q)) - (one(1.0, b) - fc(b))
    steps = (d - 1) * (one(float(k)) - one(1.0) - (fc(b * k) - fc(b)))  # 8 candidates, not ceil(63 / 3) = 21
    topk = d * float(elementwise_cost(hw, b * k * 32000 * 4).time_s)  # 32,000 draft columns, not 128,256
    # issue 40 item 8 (sglang.yaml tree_mask_full, tree_draft_prefix_per_candidate): the full tree mask, 8 x 64 x
    # (1024 + 64) bools, written, bit-packed (read + 1/8 written), its bits read by 32 layers x 8 KV heads; the 2
    # draft steps after the first re-read each sequence's 1024-token head KV (1 layer x 2 x 8 heads x 128 x 2 bytes)
    # for 7 more candidates
    mask = 8 * 64 * (1024 + 64)
    masked = float(elementwise_cost(hw, mask * 2.125).time_s) + mask / 8 * 32 * 8 / bw
    reread = (d - 1) * 7 * b * 1024 * (2 * 8 * 128 * 2) / bw
    assert got == pytest.approx(rejection + extend + steps + topk + masked + reread, rel=1e-9)


# item 5: D = 0 inside a speculative deployment still runs the draft extend (vLLM 0.34, SGLang 0.5.23)


def test_zero_draft_length_still_runs_the_draft_extend_where_the_engine_keeps_it_warm():
    m, hw, head, hp = _head()
    b = 32.0
    warm = float(step_time(head, hw, 1, b, 1, 1024, precision=hp, logits_rows=0).total_s)  # no draft logits
    for eng_id, expect in (("vllm", warm), ("sglang", warm), ("trtllm", 0.0)):
        eng = load_engine(eng_id)
        got = float(round_gpu_extra_s(m, hw, 1, RoundShape(b, 0.0, 1.0, 1024), "eagle3", (head, hp), eng=eng))
        assert got == pytest.approx(expect, rel=1e-12, abs=1e-15), eng_id
    # a D schedule's D = 0 band is slower than no drafter at all
    wl = Workload(isl=1024, osl=256, concurrency=64.0)
    base = aggregated(Deployment(M, HW, engine="vllm"), Speculation(), wl)
    zero = aggregated(Deployment(M, HW, engine="vllm"), Speculation("eagle3", np.array([0.0, 3.0])), wl)
    assert float(zero["tpot_s"][0]) > float(base["tpot_s"]) * 1.01


# item 6: per-hardware engine defaults resolved from the hardware profile


@pytest.mark.parametrize("engine, hw, tokens, seqs, verify_tokens", [
    ("vllm", "h100-sxm", 8192, 1024, 512),  # >= 70 GiB, not A100: API server 8192 / 1024
    ("vllm", "a100-sxm-80gb", 2048, 256, 512),  # 'a100' in the name: the default tier 2048 / 256
    ("vllm", "b200", 16384, 1024, 8192),  # >= 160 GiB: 16384 / 1024; SM100 decode graphs to 8192 tokens
    ("vllm", "mi300x", 16384, 1024, 512),
    ("sglang", "h100-sxm", 8192, 1024, 0),  # memory_hook: 60-160 GiB chunked prefill 8192
    ("sglang", "b200", 16384, 1024, 0),  # >= 160 GiB: 16384
])
def test_engine_defaults_follow_the_gpu(engine, hw, tokens, seqs, verify_tokens):
    e = load_engine(engine).for_hardware(load_hardware(hw))
    assert (e.max_num_batched_tokens, e.max_num_seqs, e.verify_graph_max_tokens) == (tokens, seqs, verify_tokens)


def test_an_explicit_engine_value_wins_over_the_hardware_defaults():
    mine = load_engine("vllm").model_copy(update={"max_num_batched_tokens": 1})
    assert mine.for_hardware(load_hardware("b200")).max_num_batched_tokens == 1


def test_vllm_on_a100_runs_at_most_256_requests_and_a_callers_value_is_kept():
    wl = Workload(isl=256, osl=256, concurrency=400.0)
    r = aggregated(Deployment("llama-3.1-8b", "a100-sxm-80gb", engine="vllm"), Speculation(), wl)
    assert float(r["decode_batch"]) <= 256.0 + 1e-9
    mine = load_engine("vllm").model_copy(update={"max_num_seqs": 100})
    assert mine.for_hardware(load_hardware("a100-sxm-80gb")).max_num_seqs == 100


# item 7: per-version overlap; TensorRT-LLM verifies by exact match unless rejection sampling is asked for


def test_sglang_versions_overlap_as_their_server_args_say():
    new, v12, v55 = (load_engine(e) for e in ("sglang", "sglang-0.5.12", "sglang-0.5.5"))
    tree = lambda e: e.model_copy(update={"spec_topk": 4})  # noqa: E731
    assert new.for_mechanism("dflash").spec_overlap and tree(new).for_mechanism("eagle3").spec_overlap
    assert not v12.for_mechanism("dflash").spec_overlap and v12.for_mechanism("eagle3").spec_overlap
    assert not tree(v12).for_mechanism("eagle3").spec_overlap  # topk > 1: no overlap up to 0.5.12
    assert not v55.for_mechanism("eagle3").spec_overlap and v55.overlap_scheduler  # the baseline keeps it


def test_trtllm_rejection_is_priced_as_exact_match():
    m, hw = load_model(M), load_hardware(HW)
    b, q = 16.0, 4.0
    bw = hw.mem_bandwidth_bytes_s * hw.kernel_eff("default").mem_bw_fraction
    one_pass = 16 * 3 * 128256 * 4 / bw + hw.kernel_overhead_s  # argmax over the B (q - 1) extra fp32 rows
    got = float(round_gpu_extra_s(m, hw, 1, RoundShape(b, 3.0, q, 1024), "ngram", eng=load_engine("trtllm")))
    assert got == pytest.approx(one_pass, rel=1e-9)
    four = float(round_gpu_extra_s(m, hw, 1, RoundShape(b, 3.0, q, 1024), "ngram", eng=load_engine("vllm")))
    assert four == pytest.approx(16 * 3 * 128256 * 4 * 4 / bw + hw.kernel_overhead_s, rel=1e-9)


@pytest.mark.parametrize("text, words", [
    ("id: bad\nhardware_defaults:\n  - {set: {foo: 1}, source: x}\n", "'foo' is not a per-hardware engine field"),
    ("extends: nope\nid: bad\n", "extends: 'nope' is not another built-in engine id"),
    ("id: bad\ngraph_batch_sizes: [0, 2]\nsources: {graph_batch_sizes: x}\n", "graph_batch_sizes: batch sizes in 1"),
])
def test_bad_engine_version_fields_are_one_line(tmp_path, text, words):
    from specplan.core.errors import SpecplanError

    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(SpecplanError) as e:
        load_engine(str(p))
    assert words in str(e.value) and "\n" not in str(e.value)

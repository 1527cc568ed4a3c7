"""Issue 40 item 8: round work that was not priced. SGLang's round launches outside its graphs (counted in 0.5.5's
EAGLE worker), the full tree mask and the draft's per-candidate prefix reads of a wide tree, and an external draft
run at the target's TP. Each test checks a number counted by hand from the engines' code or a closed form."""

from __future__ import annotations

import numpy as np
import pytest

from specplan.costs.precision import resolve_precision
from specplan.model.memory import kv_bytes_per_token
from specplan.model.step import step_time
from specplan.profiles.registry import load_engine, load_hardware, load_model
from specplan.speculation.drafters import DraftInput, draft_external
from specplan.speculation.round import (RoundShape, mask_read_rows, prefix_reread_s, round_draft_model,
                                        round_gpu_extra_s, round_s, tree_mask_bytes)

HW = "h100-sxm"
EAGER_LAUNCH_S = 7.46e-6  # engine_profiles/vllm.yaml eager_launch_s, the price per launch
# launches of one SGLang 0.5.5 EAGLE round outside its graphs, stage by stage as read in eagle_worker.py,
# eagle_info.py, eagle_utils.py, the two draft graph runners, cuda_graph_runner.py and flashinfer_backend.py
# (engine_profiles/sglang-0.5.5.yaml spec_round_host_s): draft preprocess, draft replay, draft attention metadata,
# build tree, prepare_for_verify, verify replay, verify attention metadata, EagleVerifyInput.verify, post-verify
# gathers, draft extend
SGLANG_055_ROUND_LAUNCHES = [4, 8, 2, 4, 2, 6, 10, 22, 2, 25]


def test_sglang_055_round_adds_its_counted_launches_only_without_overlap():
    eng = load_engine("sglang-0.5.5")
    host = sum(SGLANG_055_ROUND_LAUNCHES) * EAGER_LAUNCH_S  # 85 launches
    assert eng.spec_round_host_s == pytest.approx(host, rel=1e-3)
    b, gpu = np.array([1.0, 64.0]), np.array([5e-3, 20e-3])
    # no overlap (spec v2 off in 0.5.5): host + max(GPU, launches) with SGLang's scheduler host numbers at 0
    got = round_s(eng, gpu, b, 3.0, 4.0, 0.0, 0.0)
    assert np.allclose(got, gpu + eng.spec_round_host_s, rtol=1e-12)
    # D = 0: a decode step, no round work; the overlapped round (0.5.23's spec v2) hides it behind the GPU
    assert np.allclose(round_s(eng, gpu, b, 0.0, 1.0, 0.0, 0.0), gpu, rtol=1e-12)
    v2 = load_engine("sglang").model_copy(update={"spec_round_host_s": eng.spec_round_host_s})
    assert np.allclose(round_s(v2, gpu, b, 3.0, 4.0, 0.0, 0.0), gpu, rtol=1e-12)
    assert float(round_s(v2, 1e-4, 1.0, 3.0, 4.0, 0.0, 0.0)) == pytest.approx(eng.spec_round_host_s, rel=1e-12)


# launches of one SGLang 0.5.12 DFlash round outside its graphs (engine_profiles/sglang-0.5.12.yaml): empty draft KV
# append, draft block preparation, draft replay, greedy draft tokens from the LM head, draft token copies,
# prepare_for_verify, verify replay, DFlashVerifyInput.verify, draft KV append of the committed tokens (5 layers)
SGLANG_0512_DFLASH_LAUNCHES = [1, 10, 12, 5, 2, 2, 11, 24, 29]


def test_sglang_0512_prices_the_dflash_workers_launches_for_dflash_rounds_only():
    eng = load_engine("sglang-0.5.12")
    dflash, eagle = eng.for_mechanism("dflash"), eng.for_mechanism("eagle3")
    assert dflash.spec_round_host_s == pytest.approx(sum(SGLANG_0512_DFLASH_LAUNCHES) * EAGER_LAUNCH_S, rel=1e-3)
    assert not dflash.spec_overlap  # server_args.py: DFLASH disables the overlap scheduler
    assert eagle.spec_round_host_s == 0.0 and eagle.spec_overlap  # spec v2 EAGLE rounds: not counted, overlapped
    gpu = np.array([8e-3])
    assert np.allclose(round_s(dflash, gpu, 8.0, 9.0, 10.0, 0.0, 0.0), gpu + 96 * EAGER_LAUNCH_S, rtol=1e-3)


def test_full_tree_mask_bytes_and_reads_by_hand():
    # build_tree_kernel_efficient: seq_lens_sum x q + q x q x bs bools; 2 sequences of 100 tokens, a 16-token tree
    assert float(tree_mask_bytes(2.0, 16.0, 100.0)) == 2 * 100 * 16 + 16 * 16 * 2
    # the packed mask is read once per attention layer and KV head on a device: Llama-3.1-8B 32 layers x 8 heads
    # at TP 1, x 1 head at TP 8 (8 KV heads over 8 GPUs); Llama-3.3-70B at TP 8: 80 x 1; DeepSeek-V3's MLA: 61 x 1
    assert mask_read_rows(load_model("llama-3.1-8b"), 1) == 32 * 8
    assert mask_read_rows(load_model("llama-3.1-8b"), 8) == 32
    assert mask_read_rows(load_model("llama-3.3-70b"), 8) == 80
    assert mask_read_rows(load_model("deepseek-v3"), 8) == 61


def test_wide_tree_prefix_rereads_grow_with_width_and_context():
    # a 64-token tree on Llama-3.3-70B (TP 8) with topk 8 over depth 8 (7 draft steps after the first), under
    # SGLang's flashinfer draft backend: each draft step reads a sequence's head KV once per candidate; against the
    # target verify's KV read (80 layers, one pass) the extra is (8 - 1) candidates x 7 steps x 1 head layer / 80
    m, hw = load_model("llama-3.3-70b"), load_hardware(HW)
    head = round_draft_model(m, "eagle3")
    hp = resolve_precision(head, hw, None, None)
    b, ctx = 32.0, 32768.0
    extra = 7 * float(prefix_reread_s(head, hw, 8, b, 8.0, ctx, hp))
    bw = hw.mem_bandwidth_bytes_s * hw.kernel_eff("default").mem_bw_fraction
    target_kv_read = b * ctx * kv_bytes_per_token(m, 8, hp.kv) / bw
    assert extra / target_kv_read == pytest.approx(7 * 7 * 1 / 80, rel=1e-9)
    # in the round: the 64-token tree's GPU extras at 32k context exceed those at 1k by more than the re-reads'
    # growth (the mask grows with context too); the engine without the per-candidate reads grows less
    eng = load_engine("sglang").model_copy(update={"spec_topk": 8})
    flat = eng.model_copy(update={"tree_draft_prefix_per_candidate": False, "tree_mask_full": False})

    def extras(e, c):
        return float(round_gpu_extra_s(m, hw, 8, RoundShape(b, 8.0, 64.0, c), "eagle3", (head, hp), eng=e))

    grow = extras(eng, ctx) - extras(eng, 1024.0)
    rereads = 7 * float(prefix_reread_s(head, hw, 8, b, 8.0, ctx, hp) - prefix_reread_s(head, hw, 8, b, 8.0, 1024.0, hp))
    assert grow - (extras(flat, ctx) - extras(flat, 1024.0)) > rereads


def test_external_draft_runs_at_the_target_tp():
    # SGLang builds the draft worker with the target's tp_rank / tp group (srt/speculative/standalone_worker.py),
    # vLLM 0.34 defaults draft_tensor_parallel_size to the target's (config/speculative.py _verify_and_get_draft_tp),
    # TensorRT-LLM's two-model path gives the draft engine the target's mapping (py_executor_creator.py): Llama-3.2-1B
    # (16 layers, 8 KV heads of 64) at TP 8 holds 16 x 2 x 1 x 64 x 2 bytes per cached token per GPU
    target, dm, hw = load_model("llama-3.3-70b"), load_model("llama-3.2-1b"), load_hardware(HW)
    assert kv_bytes_per_token(dm, 8, "bf16") == 16 * 2 * 1 * 64 * 2
    d, b, ctx = np.array([4.0]), np.array([16.0]), np.array([32768.0])
    prec = resolve_precision(dm, hw, None, None)
    cost = draft_external(DraftInput(model=target, hw=hw, tp=8, prec=resolve_precision(target, hw, None, None),
                                     batch=b, draft_len=d, context_len=ctx, draft_model=dm))
    one = float(step_time(dm, hw, 8, 16.0, 1, 32768.0, precision=prec).total_s)
    assert float(cost.time_s[0]) == pytest.approx(4 * one, rel=1e-9)
    assert float(step_time(dm, hw, 1, 16.0, 1, 32768.0, precision=prec).total_s) > 3 * one  # TP 1 would be slower

"""Fixed points and closed forms of the serving model (issue 44, survivors of the seed-44 mutation sample in
serving/aggregated.py and serving/disaggregated.py): Little's law in each path, the open loop's B = λ·N_d·τ(B),
a single client's deterministic TTFT, the speculative running cap and a prompt's chunk steps priced by hand."""

from __future__ import annotations

import numpy as np
import pytest

from specplan.profiles.registry import load_engine
from specplan.serving.aggregated import aggregated, prompt_step_s, running_cap
from specplan.serving.disaggregated import disaggregated
from specplan.serving.workload import Workload
from specplan.model.deployment import Deployment
from specplan.speculation.spec import Speculation


def test_open_loop_decode_batch_is_its_fixed_point():
    """Open loop, no speculation: B = λ × (OSL − 1) × τ(B) at every rate below saturation (255 decode iterations a
    request for OSL 256), to the bisection's precision, and the TTFT quantiles are finite and ordered."""
    lam = np.array([1.0, 5.0, 20.0])
    r = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="vllm"), Speculation(),
                   Workload(1024, 256, request_rate=lam))
    assert np.all(r["stable"])
    np.testing.assert_allclose(r["decode_batch"], lam * 255.0 * r["iteration_s"], rtol=1e-6)
    assert np.all(np.isfinite(r["ttft_p90_s"])) and np.all(r["ttft_p90_s"] >= r["ttft_p50_s"])
    assert float(r["ttft_p90_s"][-1]) > float(r["ttft_p50_s"][-1])  # at 20 requests/s prompts do queue


def test_a_single_client_never_queues_behind_another_prompt():
    """C = 1: no other request can be ahead of a prompt, so its TTFT has no queue part: p50 = p90 = the mean."""
    r = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="vllm"), Speculation(),
                   Workload(1024, 256, concurrency=1.0))
    assert float(r["ttft_p90_s"]) == float(r["ttft_p50_s"]) == float(r["ttft_s"])


def test_sglang_speculative_running_cap_applies_where_d_is_positive():
    """SGLang runs at most max_num_seqs = 1024 requests, 48 where it speculates (its engine profile)."""
    sg = load_engine("sglang")
    assert (sg.max_num_seqs, sg.spec_max_num_seqs) == (1024, 48)
    cap = running_cap(sg, Workload(1024, 256, concurrency=8), None, np.array([0.0, 3.0]))
    np.testing.assert_array_equal(cap, [1024.0, 48.0])


def test_mixed_prefill_chunks_run_with_the_prompt_as_one_more_request():
    """A mixed-prefill engine without overlap, no launches: a chunk's step costs host_step + (B + 1) x per-request
    host + tokens x per-token host + the GPU seconds (the prompt itself is one more running request). B = 10 decode
    rows, decode GPU 5 ms, decode step 7 ms; chunks of 2 ms / 512 tokens and 1 ms / 256 tokens (and an empty one):
    (1 + 1.1 + 0.512 + 5 + 2 - 7) + (1 + 1.1 + 0.256 + 5 + 1 - 7) = 3.968 ms."""
    eng = load_engine("vllm").model_copy(update=dict(
        mixed_prefill=True, overlap_scheduler=False, host_step_s=1e-3, host_per_seq_s=1e-4, prefill_tokens_s=1e-6,
        step_gap_s=0.0, eager_step_s=0.0))
    chunks, tokens = [np.array(2e-3), np.array(1e-3), np.array(0.0)], [512.0, 256.0, 0.0]
    got = prompt_step_s(None, eng, 5e-3, chunks, 10.0, 7e-3, (0.0, 1.0, 0.0, 0.0), tokens)
    assert float(got) == pytest.approx(3.968e-3, rel=1e-12)


def test_disaggregated_little_law_holds_through_admission():
    """1P1D closed loop: X × latency = C, and the concurrency reported is the C given, also at C = 10^5 where most
    requests wait for admission; 8 requests (far below the running cap of 1024 and the KV cache's room) never
    wait for admission."""
    c = np.array([8.0, 1e5])
    r = disaggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="vllm"), Speculation(),
                      Workload(1024, 256, concurrency=c, mode="disagg"))
    np.testing.assert_allclose(r["concurrency"], c, rtol=1e-12)
    np.testing.assert_allclose(r["requests_per_s"] * r["request_latency_s"], c, rtol=1e-6)
    assert float(r["admission_wait_s"][-1]) > 0.0 and float(r["admission_wait_s"][0]) == 0.0


def test_mla_prefill_chunk_decompresses_the_context_and_the_chunk():
    """DeepSeek-V3 (61 MLA layers), a 2048-token chunk after 4096 cached tokens at TP 8: per layer the MHA prefill
    attention over a mean of 4096 + 2049 / 2 keys plus kv_b_proj over the 4096 + 2048 = 6144 latents it attends to
    (less the absorbed BMMs), and one KV-cache write of the chunk."""
    from specplan.costs.gemm import elementwise_cost
    from specplan.costs.precision import resolve_precision
    from specplan.model.memory import kv_bytes_per_token
    from specplan.profiles.registry import load_hardware, load_model
    from specplan.serving.prefill import mla_prefill_attention_cost, mla_prefill_swap_s, prefill_attention_s

    m, hw = load_model("deepseek-v3"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw)
    n, c0 = 2048.0, 4096.0
    layer = (mla_prefill_attention_cost(m, hw, 8, n, c0 + (n + 1) / 2, prec).time_s
             + mla_prefill_swap_s(m, hw, 8, n, 6144.0, prec))
    write = n * (kv_bytes_per_token(m, 8, prec.kv, "full") + kv_bytes_per_token(m, 8, prec.kv, "sliding"))
    want = 61 * layer + elementwise_cost(hw, write + n * 7168 * 2.0).time_s
    assert float(prefill_attention_s(m, hw, 8, n, c0, prec)) == pytest.approx(float(want), rel=1e-12)


def test_tables_are_priced_per_distinct_d_only_when_nothing_else_varies():
    """only_draft_len_varies: a grid of D alone (scalars beside it) may be priced per distinct D; an array of tree
    sizes (or any other array) beside it may not."""
    from specplan.serving.aggregated import StepOptions, only_draft_len_varies
    from specplan.speculation.spec import Speculation

    d = np.array([1.0, 3.0, 3.0])
    assert only_draft_len_varies(StepOptions(Speculation("eagle3", d, tree_tokens=8.0)))
    assert not only_draft_len_varies(StepOptions(Speculation("eagle3", d, tree_tokens=np.array([4.0, 8.0, 8.0]))))
    assert not only_draft_len_varies(StepOptions(Speculation(acceptance=np.array([0.6, 0.7]), draft_len=d)))


def test_mamba_prefill_chunk_updates_each_layers_state_by_hand():
    """A chunk of 2048 prompt tokens through 23 Mamba-2 layers alone (Nemotron-3.5-Lightning's, 64 heads of 64,
    d_state 128: 524,288 fp32 state elements a layer, 6 FLOPs each a token, the state read and written once, no
    checkpoints), plus the chunk's one activation write (2048 x h x 2 bytes; no KV cache without attention)."""
    from specplan.costs.attention import recurrent_state_cost
    from specplan.costs.gemm import elementwise_cost
    from specplan.costs.precision import resolve_precision
    from specplan.profiles.model import LayerGroup
    from specplan.profiles.registry import load_hardware, load_model
    from specplan.serving.prefill import prefill_attention_s

    m, hw = load_model("nemotron-3.5-lightning-30b-a3b"), load_hardware("h100-sxm")
    only = m.model_copy(update={"layer_groups": [LayerGroup(mixer="mamba", ffn="none", count=23)]})
    elems = 64 * 64 * 128
    layer = recurrent_state_cost(hw, 1, 2048.0, elems * 4.0, 6.0 * elems, checkpoint=False).time_s
    want = 23 * layer + elementwise_cost(hw, 2048.0 * m.hidden_size * 2.0).time_s
    got = prefill_attention_s(only, hw, 1, 2048.0, 0.0, resolve_precision(m, hw))
    assert float(got) == pytest.approx(float(want), rel=1e-12)

"""Hand counts of the step and memory model (issue 44, survivors of the seed-44 mutation sample in model/memory.py,
model/step.py and model/parallel.py): each expected number is written out from the architecture, not read back
from the code under test."""

from __future__ import annotations

from pathlib import Path

import pytest

from specplan.core.errors import SpecplanError
from specplan.costs.precision import resolve_precision
from specplan.model.memory import activation_bytes, mtp_weight_bytes, state_bytes_per_seq, weight_bytes
from specplan.model.parallel import Layout, as_layout
from specplan.model.step import step_time
from specplan.profiles.hf_import import import_hf_config
from specplan.profiles.model import MTP
from specplan.profiles.registry import load_hardware, load_kernel_family, load_model
from specplan.model.step import StepKernels

HF = Path(__file__).resolve().parents[1] / "profiles" / "hf_configs"


def test_tied_llama_1b_weights_by_hand():
    """Llama-3.2-1B (h 2048, 16 layers, 32 q / 8 KV heads of 64, FFN 8192, vocab 128256, embedding tied to the LM
    head) in bf16: 16 x (3072 x 2048 + 2048 x 2048 + 3 x 8192 x 2048) + 128256 x 2048 = 1,235,746,816 parameters, the
    tied embedding counted once (Meta's card: 1.23 B), exactly 2 bytes each."""
    m, hw = load_model("llama-3.2-1b"), load_hardware("h100-sxm")
    params = 16 * (3072 * 2048 + 2048 * 2048 + 3 * 8192 * 2048) + 128256 * 2048
    assert params == 1_235_746_816
    assert weight_bytes(m, 1, resolve_precision(m, hw)) == 2.0 * params


def test_mtp_module_weights_by_hand():
    """Qwen3-Next-80B-A3B's MTP layer in bf16 (h 2048; gated attention of 16 q heads and 2 KV heads of 256; 512
    experts and one shared expert of FFN 512) plus its 2h -> h projection of 2 x 2048 x 2048; and a dense MTP layer
    on Llama-3.1-8B (no experts): attention, the gated MLP and the projection only."""
    hw = load_hardware("h100-sxm")
    m = load_model("qwen3-next-80b-a3b")
    h = 2048
    attn = (16 * 256 * 2 + 2 * 2 * 256) * h + h * 16 * 256
    moe = 512 * h + 3 * 512 * h + 512 * 3 * h * 512  # router, shared expert, routed experts
    assert mtp_weight_bytes(m, 1, resolve_precision(m, hw)) == 2.0 * (attn + moe + 2 * h * h)
    dense = load_model("llama-3.1-8b").model_copy(update={"mtp": MTP(num_layers=1, mixer="full", ffn="dense")})
    h = 4096
    want = 2.0 * (6144 * h + h * h + 3 * 14336 * h + 2 * h * h)
    assert mtp_weight_bytes(dense, 1, resolve_precision(dense, hw)) == want


def test_mamba_state_per_sequence_by_hand():
    """Nemotron-3.5-Lightning's 23 Mamba-2 layers (64 heads of 64, d_state 128, 8 groups, conv kernel 4), fp32 SSM
    state and a bf16 conv state of 3 x (64 x 64 + 2 x 8 x 128) channels: 23 x (2,097,152 + 36,864) bytes."""
    m = load_model("nemotron-3.5-lightning-30b-a3b")
    assert state_bytes_per_seq(m, 1) == 23 * (64 * 64 * 128 * 4 + 3 * (64 * 64 + 2 * 8 * 128) * 2)


def test_activation_buffers_by_hand():
    """10 tokens of Llama-3.1-8B at TP 1: four bf16 hidden buffers (8 h bytes), three of the widest FFN (6 x 14336)
    and fp32 logits (4 x 128256): 10 x 631,808 bytes."""
    assert float(activation_bytes(load_model("llama-3.1-8b"), 1, 10)) == 10 * (8 * 4096 + 6 * 14336 + 4 * 128256)


def test_elementwise_bytes_of_a_dense_step_by_hand():
    """Llama-3.1-8B decode, 8 tokens, TP 1: per layer RoPE (2 x 2 h bytes a token), the SwiGLU activation (3 x FFN
    x 2) and two norm + residual kernels (3 x h x 2 each); the embedding and final norm 2 x 3 x h x 2: all read at
    the memory bandwidth of an element-wise kernel."""
    hw = load_hardware("h100-sxm")
    t, h, f = 8, 4096, 14336
    nbytes = t * (32 * (2 * 2 * h + 3 * f * 2 + 2 * 3 * h * 2) + 2 * 3 * h * 2)
    want = nbytes / (hw.mem_bandwidth_bytes_s * hw.kernel_eff("default").mem_bw_fraction)
    r = step_time("llama-3.1-8b", hw, 1, batch=8, q_len=1, context_len=1024)
    assert float(r.breakdown_s["elementwise"]) == pytest.approx(want, rel=1e-12)


def test_tp_adds_one_allreduce_per_mixer_and_ffn_and_one_logits_gather():
    """Going from TP 1 to TP 2 adds only collectives: an all-reduce after each mixer and each FFN that a layer has,
    and one all-gather of the logits. Llama-3.1-8B: 32 x 2 + 1 = 65. Nemotron-3.5-Lightning has one part a layer
    (23 Mamba-only, 23 MoE-only, 6 attention-only layers): 52 + 1 = 53."""
    hw = load_hardware("h100-sxm")
    for name, extra in (("llama-3.1-8b", 65), ("nemotron-3.5-lightning-30b-a3b", 53)):
        one, two = step_time(name, hw, 1, batch=8), step_time(name, hw, 2, batch=8)
        assert two.kernels - one.kernels == extra, name


def test_a_negative_context_is_refused():
    with pytest.raises(SpecplanError, match="context_len: must be >= 0"):
        step_time("llama-3.1-8b", "h100-sxm", 1, batch=1, q_len=1, context_len=-1)


def test_pipeline_hop_of_a_small_batch_is_latency_bound():
    """PP 2 on one H100 node, 8 decode tokens: the only collective is the stage hop of 8 x 4096 x 2 = 64 KiB, a
    fraction of a microsecond over NVLink against its fixed latency: the communication regime is 'latency'."""
    r = step_time("llama-3.1-8b", "h100-sxm", batch=8, q_len=1, context_len=1024, layout="pp2")
    assert r.regime("communication").item() == "latency"


def test_deepseek_v4_attention_ignores_the_dense_attention_family():
    """DeepSeek-V4's compressed attention is a latent (MLA-style) kernel in every layer: the dense attention kernel
    family (FA3 here) applies to none of its layers and must not move its step time."""
    m = import_hf_config(HF / "deepseek-ai--DeepSeek-V4-Flash-Base_config.json")
    base = step_time(m, "h100-sxm", 8, batch=16, q_len=1, context_len=8192)
    fa3 = step_time(m, "h100-sxm", 8, batch=16, q_len=1, context_len=8192,
                    kernels=StepKernels(attention_family=load_kernel_family("fa3")))
    assert float(fa3.total_s) == float(base.total_s)


def test_a_layout_of_none_is_tp_only():
    """as_layout's documented default: no layout is TP only, at the TP given (1 when none is)."""
    assert as_layout(None) == Layout(tp=1)
    assert as_layout(None, tp=4) == Layout(tp=4)


def test_pipeline_micro_batches_of_an_odd_batch_route_fractional_tokens():
    """Mixtral-8x7B on PP 2: a batch of 3 runs as 2 micro-batches of 1.5 sequences on average, so its experts see
    1.5 tokens a micro-batch, strictly between batch 2 (1 token) and batch 4 (2 tokens): expected touched experts
    grow strictly with the tokens."""
    moe = {b: float(step_time("mixtral-8x7b", "h100-sxm", batch=b, q_len=1, context_len=1024,
                              layout="pp2").breakdown_s["moe"]) for b in (2, 3, 4)}
    assert moe[2] < moe[3] < moe[4]


def test_mamba_decode_state_traffic_by_hand():
    """Nemotron-3.5-Lightning decode, 4 sequences, TP 1: each of its 23 Mamba-2 layers reads and writes its conv
    state (3 x (64 x 64 + 2 x 8 x 128) bf16 values) and its SSM state (64 x 64 x 128 fp32 values) once a step; both
    kernels are memory-bound, so the 'state' class is those bytes at the attention kernels' memory bandwidth."""
    hw = load_hardware("h100-sxm")
    conv = 3 * (64 * 64 + 2 * 8 * 128) * 2
    ssm = 64 * 64 * 128 * 4
    want = 23 * 4 * 2 * (conv + ssm) / (hw.mem_bandwidth_bytes_s * hw.attention.mem_bw_fraction)
    r = step_time("nemotron-3.5-lightning-30b-a3b", hw, 1, batch=4, q_len=1, context_len=1024)
    assert float(r.breakdown_s["state"]) == pytest.approx(want, rel=1e-12)


def test_skewed_routing_slows_the_expert_all_to_all():
    """DeepSeek-V3 on DP 8 x EP 8: the slowest rank's all-to-all carries skew x the mean traffic; skew:4 costs more
    communication than the balanced EPLB placement (skew 1)."""
    kw = dict(batch=256, q_len=1, context_len=1024, layout="dp8ep8")
    skew = step_time("deepseek-v3", "h100-sxm", kernels=StepKernels(routing="skew:4"), **kw).breakdown_s["communication"]
    even = step_time("deepseek-v3", "h100-sxm", kernels=StepKernels(routing="eplb"), **kw).breakdown_s["communication"]
    assert float(skew) > float(even)

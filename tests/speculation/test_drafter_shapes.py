"""Drafter shapes by hand (issue 26): a target-shaped EAGLE-3 head on an MoE target, and DFlash's projections of
the verified positions' hidden states."""

import numpy as np
import pytest

from specplan.costs.gemm import gemm_cost
from specplan.costs.precision import resolve_precision
from specplan.model.parallel import Layout
from specplan.model.step import step_time
from specplan.profiles.registry import load_hardware, load_model
from specplan.speculation.drafters import DFLASH_FUSED_LAYERS, DraftInput, dflash_model, draft_dflash, eagle3_head


def test_eagle3_head_of_an_moe_target_has_the_active_experts_ffn():
    """No EAGLE-3 head profile for Qwen3-30B-A3B: the head is target-shaped with a dense FFN of the active experts'
    width, 8 (top-k) x 768 (expert FFN) = 6144 (its config's unused intermediate_size, too)."""
    head = eagle3_head(load_model("qwen3-30b-a3b"))
    assert head.ffn_size == 8 * 768 == 6144 and head.moe is None and head.num_layers == 1


def test_dflash_time_by_parts_at_a_compute_bound_batch():
    """DFlash at B = 512, D = 3 on Llama-3.1-8B / H100: five dense layers once at q_len D + 1, plus two GEMMs over
    the B·(1 + D) = 2048 hidden states of the verified positions: the fusion 5h -> h (K = 5 x 4096) and the K/V
    projection of every draft layer (N = 5 layers x 2 x 8 KV heads x 128). At M = 2048 both are compute-bound, so
    M = B·D (1536) would be 25 % cheaper."""
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    b, d, ctx, h = 512.0, 3.0, 2048.0, 4096
    five = dflash_model(m)
    assert five.num_layers == 5 and DFLASH_FUSED_LAYERS == 5
    layers = step_time(five, hw, 1, b, d + 1, ctx, precision=prec, layout=Layout(tp=1)).total_s
    m_rows = b * (1 + d)
    w = prec.w("attention")
    fuse = gemm_cost(hw, m_rows, h, 5 * h, w, prec.compute).time_s
    kv = gemm_cost(hw, m_rows, 5 * 2 * 8 * 128, h, w, prec.compute).time_s
    got = draft_dflash(DraftInput(m, hw, 1, prec, np.array(b), np.array(d), np.array(ctx))).time_s
    assert float(got) == pytest.approx(float(layers + fuse + kv), rel=1e-9)
    short = gemm_cost(hw, b * d, h, 5 * h, w, prec.compute).time_s
    assert float(short) < 0.85 * float(fuse)  # the GEMM M matters here (compute-bound)


def test_dflash_fixed_bytes_by_hand():
    """DFlash's own weights: its five layers without an LM head (it shares the target's), plus the fusion
    projection 5h -> h (5 h^2) and each draft layer's K/V projection of the target's hidden states
    (5 layers x 2 x 8 KV heads x 128 x h), bf16 (2 bytes), TP 1."""
    from specplan.model.memory import weight_bytes
    from specplan.costs.shapes import lm_head_gemm

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    h = 4096
    five = dflash_model(m)
    lm = lm_head_gemm(five, 1)
    own = float(weight_bytes(five, 1, prec)) - lm.n * lm.k * 2
    extra = (5 * h * h + 5 * 2 * 8 * 128 * h) * 2
    got = draft_dflash(DraftInput(m, hw, 1, prec, np.array(8.0), np.array(3.0), np.array(2048.0))).fixed_bytes
    assert float(got) == pytest.approx(own + extra, rel=1e-12)


@pytest.mark.parametrize("tp", [1, 2])
def test_dspark_adds_the_markov_heads_weights_to_dflash(tp):
    """DSpark = DFlash + a Markov head of MARKOV_HEAD_GEMMS (2) h x h GEMMs, split over TP: 2 x 4096^2 / TP x 2 bytes
    more fixed weight bytes than DFlash on Llama-3.1-8B (bf16)."""
    from specplan.speculation.drafters import MARKOV_HEAD_GEMMS, draft_dspark

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    inp = DraftInput(m, hw, tp, prec, np.array(8.0), np.array(3.0), np.array(2048.0))
    assert MARKOV_HEAD_GEMMS == 2
    diff = float(draft_dspark(inp).fixed_bytes) - float(draft_dflash(inp).fixed_bytes)
    assert diff == pytest.approx(2 * 4096 ** 2 / tp * 2, rel=1e-12)


def test_eagle3_draft_time_by_parts():
    """EAGLE-3 on Llama-3.1-8B / H100, B = 64, D = 4: D one-layer head steps at q_len 1, each without the 3h -> h
    fusion, plus the fusion once over the B·(1 + D) = 320 verified positions' hidden states."""
    from specplan.speculation.drafters import draft_eagle3

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    head = eagle3_head(m)
    ph = resolve_precision(head, hw, None, None)
    b, d, ctx, h = 64.0, 4.0, 2048.0, 4096
    fc = lambda rows: gemm_cost(hw, rows, h, 3 * h, ph.w("fc"), ph.compute).time_s  # noqa: E731
    step = step_time(head, hw, 1, b, 1, ctx, precision=ph, layout=Layout(tp=1)).total_s - fc(b)
    got = draft_eagle3(DraftInput(m, hw, 1, prec, np.array(b), np.array(d), np.array(ctx))).time_s
    assert float(got) == pytest.approx(float(d * step + fc(b * (1 + d))), rel=1e-9)

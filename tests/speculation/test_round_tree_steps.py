"""A tree draft's round (issue 44, a mutant that survived): EAGLE-3 / MTP / external drafts with --tree-tokens above
1 + D draft D levels; the first is the draft extend over the verified positions, the other D - 1 run `width`
candidates per sequence each. The round's extra GPU seconds counted by hand, step by step."""

import pytest

from specplan.costs.gemm import elementwise_cost, gemm_cost
from specplan.costs.precision import resolve_precision
from specplan.model.step import step_time
from specplan.profiles.registry import load_hardware, load_model
from specplan.speculation.round import RoundShape, round_draft_model, round_gpu_extra_s


@pytest.mark.parametrize("d", [1.0, 2.0, 4.0])
def test_a_tree_of_d_levels_runs_d_minus_one_widened_draft_steps(d):
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    head = round_draft_model(m, "eagle3")
    hp = resolve_precision(head, hw, None, None)
    b, width, ctx = 16.0, 4.0, 1024.0
    q = 1.0 + d * width  # tree tokens: width candidates at each of D levels, past 1 + D (a chain)

    def draft_s(tokens):  # one pass of the head at `tokens` per sequence
        return float(step_time(head, hw, 1, b, tokens, ctx, precision=hp).total_s)

    bw = hw.mem_bandwidth_bytes_s * hw.kernel_eff("default").mem_bw_fraction
    rejection = b * (q - 1.0) * m.vocab_size * 4 * 4 / bw + hw.kernel_overhead_s  # 4 fp32 passes (probabilistic)
    h, v = head.hidden_size, head.draft_vocab_size  # 4096; the head's LM head covers 32,000 draft tokens

    def gemm(rows, n, k, w):
        return float(gemm_cost(hw, rows, n, k, hp.w(w), hp.compute).time_s)

    fc = lambda t: gemm(b * t, h, 3 * h, "fc")  # noqa: E731  the 3h -> h fusion at t positions per sequence
    lm = lambda t: gemm(b * t, v, h, "lm_head")  # noqa: E731
    # the first level: the extend over the q verified positions, logits at each request's last position only
    # (issue 40), its fusion priced once by the drafter (fc over B x (1 + D))
    extend = (draft_s(q) - lm(q) - fc(q)) - (draft_s(1.0) - lm(1.0) - fc(1.0))
    # levels 2 ... D: width candidates each, with their logits, on the head's own hidden state (no fusion)
    widened = (d - 1.0) * (draft_s(width) - draft_s(1.0) - (fc(width) - fc(1.0)))
    topk = d * float(elementwise_cost(hw, b * width * v * 4).time_s)  # a top-k read per level over 32,000 columns
    got = float(round_gpu_extra_s(m, hw, 1, RoundShape(b, d, q, ctx), "eagle3", (head, hp)))
    assert got == pytest.approx(rejection + extend + widened + topk, rel=1e-9)

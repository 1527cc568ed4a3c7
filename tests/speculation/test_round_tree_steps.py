"""A tree draft's round (issue 44, a mutant that survived): EAGLE-3 / MTP / external drafts with --tree-tokens above
1 + D draft D levels; the first is the draft extend over the verified positions, the other D - 1 run `width`
candidates per sequence each. The round's extra GPU seconds counted by hand, step by step."""

import pytest

from specplan.costs.gemm import elementwise_cost
from specplan.costs.precision import resolve_precision
from specplan.model.step import step_time
from specplan.profiles.registry import load_hardware, load_model
from specplan.speculation.round import round_draft_model, round_gpu_extra_s


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
    extend = draft_s(q) - draft_s(1.0)  # the first level: the extend over the q verified positions
    widened = (d - 1.0) * (draft_s(width) - draft_s(1.0))  # levels 2 ... D: width candidates each, by hand D - 1
    topk = d * float(elementwise_cost(hw, b * width * head.vocab_size * 4).time_s)  # a top-k read per level
    got = float(round_gpu_extra_s(m, hw, 1, b, d, q, ctx, "eagle3", (head, hp)))
    assert got == pytest.approx(rejection + extend + widened + topk, rel=1e-9)

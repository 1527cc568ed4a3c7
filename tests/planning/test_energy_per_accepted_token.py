"""J/token of a speculative answer (issue 44, a mutant that survived): one verify step of B sequences x (1 + D)
tokens yields B x AL output tokens, so the decode work per output token is the step's work / (B x AL), and the
utilization and the power follow at a given tokens/s/GPU; the power model's line by hand from the profile."""

import pytest

from specplan.costs.precision import resolve_precision
from specplan.model.parallel import Layout
from specplan.planning.cost import point_energy, step_work, utilization
from specplan.profiles.registry import load_hardware, load_model
from specplan.planning.cost import OperatingPoint

B, D, CTX, RATE = 32.0, 3.0, 2048.0, 1000.0


@pytest.mark.parametrize("al", [1.0, 2.5, 4.0])
def test_decode_work_per_output_token_is_the_step_over_b_times_al(al):
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    flops, nbytes = (float(x) for x in step_work(m, hw, prec, Layout(tp=1), B, 1.0 + D, CTX))  # one verify step
    uc, um = utilization(m, hw, prec, Layout(tp=1),
                         OperatingPoint(tokens_per_s_per_gpu=RATE, batch=B, context_len=CTX, draft_len=D, acceptance_length=al))
    uc_hand = RATE * flops / (B * al) / hw.peak(prec.compute)
    um_hand = RATE * nbytes / (B * al) / hw.mem_bandwidth_bytes_s
    assert (float(uc), float(um)) == pytest.approx((uc_hand, um_hand), rel=1e-12)
    # the power line: idle + (TDP - idle) x clip(floor + compute x u_c + memory x u_m); J/token = W / (tokens/s)
    p = hw.power
    w = p.idle_w + (p.tdp_w - p.idle_w) * min(1.0, max(0.0, p.active_floor + p.compute * uc_hand
                                                        + p.memory * um_hand))
    e = point_energy(m, hw, prec, Layout(tp=1),
                     OperatingPoint(tokens_per_s_per_gpu=RATE, batch=B, context_len=CTX, draft_len=D, acceptance_length=al))
    assert float(e["joules_per_token"]) == pytest.approx(w / RATE, rel=1e-12)

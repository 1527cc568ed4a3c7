"""Adaptive simulator: a new request starts decoding at output position 1 (its first token came from the
prefill), so its acceptance draws are those of output tokens 1 ... OSL - 1 and it takes exactly the decode steps a
hand walk over the same uniforms gives."""

import numpy as np
import pytest

from specplan.adaptive import build_workload
from specplan.adaptive.costs import CostGrid, build_costs, graphs_for
from specplan.adaptive.policies import make_policy
from specplan.adaptive.simulator import simulate, token_uniforms

M, H = "llama-3.1-8b", "h100-sxm"


@pytest.fixture(scope="module")
def costs():
    return build_costs(M, H, CostGrid(d_max=4, ctx_min=256, ctx_max=1024, b_max=4, mean_isl=512, prefill_budget=8192))


def _hand_steps(u, off0, osl, d, alpha_of):
    """Decode steps of one request alone, walked by hand: position 1 after the prefill, each step accepts the
    leading run of drafts k = 0 .. d-1 whose uniform u[off0 + pos + k] is below alpha(pos + k), and emits
    min(accepted + 1, tokens left)."""
    pos, left, steps, emitted = 1, osl - 1, 0, []
    while left > 0:
        acc = 0
        while acc < d and pos + acc < osl and u[off0 + pos + acc] < alpha_of(pos + acc):
            acc += 1
        e = min(acc + 1, left)
        pos, left, steps = pos + e, left - e, steps + 1
        emitted.append(e)
    return steps, emitted


@pytest.mark.parametrize("d, drift", [(0, None), (2, None), (4, None), (3, "-0.6")])
def test_new_request_starts_at_output_position_one(costs, d, drift):
    osl = 120
    wl = build_workload(np.zeros(1), [512], [osl], dist="0.6", drift=drift)
    res = simulate(wl, costs, make_policy(f"fixed:{d}", 4), graphs_for([d], 4), seed=3)
    off, u = token_uniforms(wl, 3)
    span = osl - 1
    a0, dr = float(wl.alpha[0]), float(wl.drift)
    steps, emitted = _hand_steps(u, int(off[0]), osl, d, lambda j: min(max(a0 + dr * j / span, 0.0), 1.0))
    s = res["series"]
    decode = s["batch"] > 0
    assert int(decode.sum()) == steps  # one decode step per hand step, none for the prefill's token
    np.testing.assert_allclose(s["al"][decode], emitted)  # tokens each step emitted, step by step
    assert sum(emitted) == osl - 1  # the first of the OSL tokens came from the prefill
    if d == 0:
        assert steps == osl - 1

"""Speculation with a draft prefill, hand-solved (issue 26): the EAGLE-3 head runs over the prompt too, and that
time is part of every prompt's prefill work and of its TTFT.

Llama-3.1-8B, H100, ideal engine, ISL 512 / OSL 65, one client, EAGLE-3 at D = 3, α = 0.7:
AL = (1 − 0.7⁴) / 0.3 = 2.533, decode iterations per request N_d = 64 / AL. T = the speculative iteration at batch 1
(evaluate), dP = the 512-token chunk added to a decode step + the draft head's own prefill of the 512 tokens.
As for one client without speculation (test_littles_law.py): no prompt shares its decode steps (its own comes after
it finishes), so τ = T; X = B / (N_d τ); the engine is idle when its prompt arrives: TTFT = max(τ, T + dP); and
1 = B + X·TTFT; TPOT = τ / AL.
"""

import numpy as np
import pytest
from scipy.optimize import brentq

from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_hardware, load_model
from specplan.serving.aggregated import aggregated
from specplan.serving.prefill import mixed_step_s, StepMix, prefill_s
from specplan.serving.workload import Workload
from specplan.speculation.acceptance import Acceptance
from specplan.speculation.drafters import eagle3_head
from specplan.speculation.speedup import evaluate
from specplan.model.deployment import Deployment
from specplan.speculation.spec import Speculation


def _solve(t, dp, n_d):
    def parts(b):
        tau = t
        x = b / (n_d * tau)
        return tau, x, max(tau, t + dp)

    b = brentq(lambda b: b + parts(b)[1] * parts(b)[2] - 1.0, 1e-6, 1.0, xtol=1e-13)
    return (b, *parts(b))


def test_single_client_eagle3_ttft_carries_the_draft_prefill():
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    isl, osl, d, a = 512, 65, 3, 0.7
    al = (1 - a ** (d + 1)) / (1 - a)
    assert al == pytest.approx(2.533)
    ctx, n_d, acc = isl + osl // 2, (osl - 1) / al, Acceptance.from_rate(a)
    t = float(evaluate(Deployment(m, hw, engine="ideal"),
                       Speculation(mechanism="eagle3", draft_len=d,
                                   acceptance=acc), batch=1, context_len=ctx)["iter_s"])
    # the prompt's chunk on top of the decode row, which verifies 1 + D tokens in the mixed step (issue 19)
    chunk = float(mixed_step_s(m, hw, 1, StepMix(1.0, ctx, isl, 0, q_len=1 + d), precision=prec, engine="ideal")
                  - mixed_step_s(m, hw, 1, StepMix(1.0, ctx, 0, 0, q_len=1 + d), precision=prec, engine="ideal"))
    draft = float(prefill_s(eagle3_head(m), hw, 1, isl, precision=prec, engine="ideal"))
    assert 0 < draft < chunk  # one head layer over the prompt: a small share of the target's 32
    b, tau, x, ttft = _solve(t, chunk + draft, n_d)
    r = aggregated(Deployment(m, hw, engine="ideal"), Speculation("eagle3", d, acc), Workload(isl, osl, concurrency=1))
    got = {k: float(np.asarray(r[k]).ravel()[0]) for k in ("decode_batch", "ttft_s", "tpot_s", "requests_per_s")}
    # rel 2e-3, not 1e-6: since issue 19 the prompt-carrying step is priced as a speculative round run eagerly
    # (round.round_s: the rejection-sampling kernel and the draft's extend pass ride on it), a term this closed
    # form leaves out (5e-4 of TTFT here, 3e-5 of the batch); the draft prefill it checks moves TTFT by ~4 %.
    assert got["decode_batch"] == pytest.approx(b, rel=2e-3)
    assert got["ttft_s"] == pytest.approx(ttft, rel=2e-3)
    assert got["tpot_s"] == pytest.approx(tau / al, rel=2e-3)
    assert got["requests_per_s"] == pytest.approx(x, rel=2e-3)
    # without the draft's prefill the TTFT would be ~4 % lower: far outside the tolerance above
    assert _solve(t, chunk, n_d)[3] < 0.97 * ttft

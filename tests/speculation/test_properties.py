"""Property tests (hypothesis) of invariants the model must keep for every input, not only the hand-picked ones.

- acceptance length AL(α, D) lies in [1, 1 + D] and never decreases with D or with α (closed form and
  per-position products);
- speedup = baseline step · AL / iteration time, and speedup <= AL whenever an iteration costs at least
  one baseline step;
- more memory bandwidth never makes a decode step slower;
- frontier points are non-dominated, and every other point is dominated by (or equal to) one of them.

`max_examples` is modest so that the file runs in a few seconds; the profiles are loaded once. The long mode
(`python scripts/fuzz.py`, which sets SPECPLAN_PROPERTY_EXAMPLES=100000) spreads that many examples over the six
tests, no example database, no shrinking deadline.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specplan.planning.frontier import frontier_indices, frontier_mask
from specplan.profiles.registry import load_hardware, load_model
from specplan.speculation import Acceptance, evaluate
from specplan.speculation.acceptance import al_from_per_position, al_from_rate
from specplan.model.step import step_time
from specplan.model.deployment import Deployment
from specplan.speculation.spec import Speculation

_LONG = int(os.environ.get("SPECPLAN_PROPERTY_EXAMPLES", "0"))  # examples over all six tests (long mode)
FAST = settings(max_examples=-(-_LONG // 6) if _LONG else 60, deadline=None, database=None if _LONG else
                settings.default.database, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=-(-_LONG // 6) if _LONG else 20, deadline=None, database=None if _LONG else
                settings.default.database, suppress_health_check=[HealthCheck.too_slow])

alphas = st.floats(0.0, 1.0, allow_nan=False)
draft_lens = st.integers(0, 32)

MODELS = {m: load_model(m) for m in ("llama-3.1-8b", "qwen3.5-122b-a10b", "deepseek-v3")}
HARDWARE = {h: load_hardware(h) for h in ("h100-sxm", "b200", "mi300x", "a100-sxm-80gb", "groq-3-lpu")}


# --- acceptance length --------------------------------------------------------------------------------------

@FAST
@given(alpha=alphas, d=draft_lens)
def test_al_of_rate_within_one_and_one_plus_d(alpha, d):
    al = float(al_from_rate(alpha, d))
    assert 1.0 - 1e-9 <= al <= 1.0 + d + 1e-9
    assert float(Acceptance.from_rate(alpha).al(d)) == pytest.approx(al)


@FAST
@given(a1=alphas, a2=alphas, d1=draft_lens, d2=draft_lens)
def test_al_of_rate_non_decreasing_in_d_and_alpha(a1, a2, d1, d2):
    (lo_a, hi_a), (lo_d, hi_d) = sorted((a1, a2)), sorted((d1, d2))
    tol = 1e-9 * (1 + hi_d)
    assert al_from_rate(lo_a, hi_d) <= al_from_rate(hi_a, hi_d) + tol
    assert al_from_rate(lo_a, lo_d) <= al_from_rate(lo_a, hi_d) + tol


@FAST
@given(probs=st.lists(alphas, min_size=1, max_size=12), d1=draft_lens, d2=draft_lens)
def test_al_of_per_position_bounded_and_non_decreasing(probs, d1, d2):
    lo, hi = sorted((d1, d2))
    a_lo, a_hi = float(al_from_per_position(probs, lo)), float(al_from_per_position(probs, hi))
    for d, al in ((lo, a_lo), (hi, a_hi)):
        assert 1.0 - 1e-9 <= al <= 1.0 + d + 1e-9
    assert a_lo <= a_hi + 1e-9


# --- speedup ------------------------------------------------------------------------------------------------

@SLOW
@given(model=st.sampled_from(["llama-3.1-8b", "qwen3.5-122b-a10b"]),
       hw=st.sampled_from(["h100-sxm", "b200", "mi300x"]),
       mechanism=st.sampled_from(["eagle3", "ngram", "mtp"]),
       alpha=st.floats(0.05, 0.99), batch=st.integers(1, 256), ctx=st.integers(0, 65536), d=st.integers(1, 12))
def test_speedup_is_baseline_times_al_over_iteration(model, hw, mechanism, alpha, batch, ctx, d):
    if mechanism == "mtp" and MODELS[model].mtp is None:
        mechanism = "eagle3"
    r = evaluate(Deployment(MODELS[model], HARDWARE[hw]),
                 Speculation(mechanism=mechanism, draft_len=d, acceptance=Acceptance.from_rate(alpha)), batch=batch,
                 context_len=ctx)
    base, al, it, sp = (float(r[k]) for k in ("baseline_step_s", "acceptance_length", "iter_s", "speedup"))
    assert 1.0 <= al <= 1.0 + d + 1e-9
    assert sp == pytest.approx(base * al / it, rel=1e-12)
    if it >= base:
        assert sp <= al * (1 + 1e-12)


# --- step time ----------------------------------------------------------------------------------------------

@SLOW
@given(model=st.sampled_from(sorted(MODELS)), hw=st.sampled_from(sorted(HARDWARE)),
       batch=st.integers(1, 512), q_len=st.integers(1, 33), ctx=st.integers(0, 131072),
       factor=st.floats(1.0, 8.0))
def test_more_bandwidth_never_slower(model, hw, batch, q_len, ctx, factor):
    h = HARDWARE[hw]
    fast = h.model_copy(update={"mem_bandwidth_bytes_s": h.mem_bandwidth_bytes_s * factor})
    tp = 8 if model == "deepseek-v3" and h.kind != "lpu" else 1
    slow_s = float(step_time(MODELS[model], h, tp, batch, q_len, ctx).total_s)
    fast_s = float(step_time(MODELS[model], fast, tp, batch, q_len, ctx).total_s)
    assert fast_s <= slow_s * (1 + 1e-12)


# --- frontier -----------------------------------------------------------------------------------------------

points = st.lists(st.tuples(st.integers(1, 20), st.integers(1, 20)), min_size=1, max_size=60)


@FAST
@given(pts=points, scale=st.floats(0.1, 1e4))
def test_frontier_points_non_dominated(pts, scale):
    """Small integer grids (many ties and duplicates), scaled to real-looking magnitudes."""
    u = np.array([p[0] for p in pts], dtype=float) * scale
    g = np.array([p[1] for p in pts], dtype=float) / scale
    idx = frontier_indices(u, g)
    assert np.all(np.diff(u[idx]) > 0)  # increasing interactivity, one point per tie
    for i in idx:
        dominated = (u >= u[i]) & (g >= g[i]) & ((u > u[i]) | (g > g[i]))
        assert not dominated.any()
    mask = frontier_mask(u, g)
    assert set(np.flatnonzero(mask)) == set(idx)
    for j in np.flatnonzero(~mask):
        assert np.any((u[idx] >= u[j]) & (g[idx] >= g[j]))

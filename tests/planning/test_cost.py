"""Power, energy and $/token: bounds, monotonicity in batch, closed forms checked by hand."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specplan.core.errors import SpecplanError
from specplan.model.parallel import Layout
from specplan.planning.cost import (energy_metrics, objective_value, point_energy, power_w, prices_for,
                                    step_work, utilization)
from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_hardware, load_model
from specplan.speculation.speedup import evaluate
from specplan.planning.cost import OperatingPoint
from specplan.model.deployment import Deployment
from specplan.speculation.spec import Speculation

DEVICES = ["h100-sxm", "h200-sxm", "b200", "gb200", "a100-sxm-80gb", "mi300x"]
MODELS = ["llama-3.1-8b", "qwen3-32b", "qwen3-30b-a3b", "llama-3.3-70b", "gpt-oss-20b", "deepseek-v3"]


def test_power_closed_form_h100():
    spec = load_hardware("h100-sxm").power
    # idle + (TDP - idle) x (floor + c u_c + m u_m), by hand
    want = spec.idle_w + (spec.tdp_w - spec.idle_w) * (spec.active_floor + spec.compute * 0.1 + spec.memory * 0.5)
    assert float(power_w(spec, 0.1, 0.5)) == pytest.approx(want)
    assert float(power_w(spec, 1.0, 1.0)) == spec.tdp_w  # capped
    assert float(power_w(spec, 0.0, 0.0)) == pytest.approx(spec.idle_w + (spec.tdp_w - spec.idle_w) * spec.active_floor)


@settings(max_examples=60, deadline=None)
@given(hw=st.sampled_from(DEVICES), model=st.sampled_from(MODELS), batch=st.integers(1, 4096),
       d=st.integers(0, 8), ctx=st.integers(16, 65536), rate=st.floats(0.0, 1e7),
       al=st.floats(1.0, 9.0), tp=st.sampled_from([1, 2, 4, 8]))
def test_power_within_idle_and_tdp_over_random_configurations(hw, model, batch, d, ctx, rate, al, tp):
    h, m = load_hardware(hw), load_model(model)
    prec = resolve_precision(m, h)
    uc, um = utilization(m, h, prec, Layout(tp=tp),
                         OperatingPoint(tokens_per_s_per_gpu=rate, batch=batch, context_len=ctx, draft_len=d, acceptance_length=min(al, 1 + d), isl=ctx, osl=max(1, ctx // 4)))
    p = float(power_w(h.power, uc, um))
    assert h.power.idle_w <= p <= h.power.tdp_w


@pytest.mark.parametrize("model,hw,d,mech", [("llama-3.1-8b", "h100-sxm", 0, "none"),
                                             ("llama-3.1-8b", "h100-sxm", 4, "eagle3"),
                                             ("qwen3-32b", "h200-sxm", 3, "eagle3"),
                                             ("llama-3.3-70b", "b200", 0, "none")])
def test_energy_per_token_does_not_rise_with_batch_at_fixed_d(model, hw, d, mech):
    m, h = load_model(model), load_hardware(hw)
    batch = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512], dtype=float)
    acc = {"eagle3": "0.8"} if mech != "none" else None
    from specplan.speculation.acceptance_spec import parse_acceptance

    r = evaluate(Deployment(m, h),
                 Speculation(mechanism=mech, draft_len=d, acceptance=None if acc is None else parse_acceptance(acc["eagle3"])),
                 batch=batch, context_len=2048)
    rate = np.asarray(r["tokens_per_s_per_gpu"], dtype=float).reshape(-1)
    fits = np.asarray(r["fits"]).reshape(-1)
    e = point_energy(m, h, r["precision"], None,
                     OperatingPoint(tokens_per_s_per_gpu=rate, batch=batch, context_len=2048, draft_len=d, acceptance_length=np.asarray(r["acceptance_length"]).reshape(-1)))
    j = np.asarray(e["joules_per_token"])[fits]
    assert len(j) >= 5
    assert np.all(np.diff(j) <= 1e-9 * j[:-1]), j


def test_rejected_tokens_are_priced():
    """At the same rate and AL, verifying 1 + D tokens per step costs D more tokens' FLOPs per output token."""
    m, h = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, h)
    f0, _ = step_work(m, h, prec, None, 64, 1, 1024)
    f4, _ = step_work(m, h, prec, None, 64, 5, 1024)
    params = 8.03e9  # Llama-3.1-8B parameters (GEMM weights ~ 7.5e9 + LM head 0.5e9): 2 FLOPs each per token
    assert f0 / 64 == pytest.approx(2 * params, rel=0.1)
    assert f4 / f0 == pytest.approx(5.0, rel=0.05)
    u0 = utilization(m, h, prec, None, OperatingPoint(tokens_per_s_per_gpu=5000.0, batch=64, context_len=1024))[0]
    u4 = utilization(m, h, prec, None,
                     OperatingPoint(tokens_per_s_per_gpu=5000.0, batch=64, context_len=1024, draft_len=4, acceptance_length=1.0))[0]
    assert float(u4 / u0) == pytest.approx(float(f4 / f0), rel=1e-9)


def test_dollars_and_megawatts_by_hand():
    h = load_hardware("h100-sxm")
    e = energy_metrics(h, 600.0, 1000.0)
    # InferenceX: $/Mtok = $/GPU-hr / (tok/s/GPU x 3600 / 1e6); H100 hyperscaler $1.30
    assert float(e["usd_per_mtok"]) == pytest.approx(1.30 / (1000 * 3600 / 1e6))
    assert float(e["joules_per_token"]) == pytest.approx(0.6)
    assert float(e["tokens_per_s_per_mw"]) == pytest.approx(1000 * 1e6 / (600 * 1.3))  # PUE 1.3 air-cooled
    e2 = energy_metrics(h, 600.0, 1000.0, gpu_hour_usd=1.0, kwh_usd=0.10)
    # energy added only for a price without power: 0.6 J/tok x 1.3 x $0.10/kWh x 1e6 / 3.6e6
    assert float(e2["usd_per_mtok"]) == pytest.approx(1.0 / 3.6 + 0.6 * 1.3 * 0.10 / 3.6)
    with pytest.raises(SpecplanError, match="gpu-hour-usd"):
        energy_metrics(h, 600.0, 1000.0, kwh_usd=0.10)
    assert prices_for("gb200")["pue"] == 1.1  # direct liquid cooling


def test_objective_values():
    from types import SimpleNamespace

    row = SimpleNamespace(tokens_per_s_per_gpu=100.0, usd_per_mtok=2.0, joules_per_token=0.5)
    assert objective_value("tokens-per-gpu", row) == 100.0
    assert objective_value("cost", row) == -2.0 and objective_value("energy", row) == -0.5
    with pytest.raises(SpecplanError):
        objective_value("speed", row)


def test_sliding_window_layers_attend_their_window_in_the_power_model():
    """gpt-oss-120b: 18 sliding layers (window 128) and 18 full ones, 64 heads of 64 dims. Doubling the context
    from 4096 to 8192 at batch 64, q = 1 adds attention FLOPs on the full layers only: 4 x 18 x 64 x 64 x 4096 x 64
    = 4.95e10 (it counted the sliding layers over the whole context too, 2 x that); below the window (50 -> 100
    tokens) every layer adds: 4 x 36 x 64 x 64 x 50 x 64 = 1.89e9."""
    m, hw = load_model("gpt-oss-120b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    f = lambda c: float(step_work(m, hw, prec, None, 64, 1, c)[0])  # noqa: E731
    assert f(8192) - f(4096) == pytest.approx(4 * 18 * 64 * 64 * 4096 * 64, rel=1e-9)
    assert f(100) - f(50) == pytest.approx(4 * 36 * 64 * 64 * 50 * 64, rel=1e-9)
    dense = load_model("llama-3.1-8b")  # 32 full layers, 32 heads of 128: every layer over the whole context
    pd_ = resolve_precision(dense, hw, None, None)
    g = lambda c: float(step_work(dense, hw, pd_, None, 8, 1, c)[0])  # noqa: E731
    assert g(8192) - g(4096) == pytest.approx(4 * 32 * 32 * 128 * 4096 * 8, rel=1e-9)

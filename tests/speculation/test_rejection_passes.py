"""The verify's sampling as the engine's code runs it (EngineProfile.rejection_passes): full-vocabulary fp32 passes per
verified row and per request, counted in SGLang 0.5.12's EAGLE (spec v2) and DFlash verify paths, instead of the
generic REJECTION_PASSES rule."""

import numpy as np
import pytest

from specplan.costs.gemm import elementwise_cost
from specplan.profiles.engine import EngineProfile
from specplan.profiles.registry import load_engine, load_hardware, load_model
from specplan.speculation.round import REJECTION_PASSES, RoundShape, rejection_s, round_gpu_extra_s

V = 201088  # gpt-oss-120b vocabulary (model_profiles)


def test_counted_passes_by_hand():
    """64 sequences, q = 4 (EAGLE-3 D 3), gpt-oss's 201,088-token vocabulary: SGLang 0.5.12's spec v2 sample runs
    12.5 passes per verified row and -5.5 per request (the final sample 3 less the plain sampler's 8.5):
    64 x (4 x 12.5 - 5.5) = 64 x 44.5 rows of 4 V bytes; the generic rule prices 64 x 3 x 4 rows."""
    hw = load_hardware("h100-sxm")
    got = rejection_s(hw, 64, 4, V, sampling="probabilistic", passes=(12.5, -5.5))
    assert float(got) == pytest.approx(float(elementwise_cost(hw, 64 * 44.5 * V * 4.0).time_s), rel=1e-12)
    generic = rejection_s(hw, 64, 4, V, sampling="probabilistic")
    assert REJECTION_PASSES["probabilistic"] == 4.0
    assert float(generic) == pytest.approx(float(elementwise_cost(hw, 64 * 3 * 4.0 * V * 4.0).time_s), rel=1e-12)
    # DFlash block 10 (no renormalization at the sampling defaults): 6.5 x 10 - 5.5 = 59.5 rows per request
    dfl = rejection_s(hw, 8, 10, V, passes=(6.5, -5.5))
    assert float(dfl) == pytest.approx(float(elementwise_cost(hw, 8 * 59.5 * V * 4.0).time_s), rel=1e-12)
    # a decode step (q = 1) has no verify sampling beyond the plain sampler
    assert float(rejection_s(hw, 64, 1, V, passes=(12.5, -5.5))) == 0.0


def test_sglang_0_5_12_passes_per_mechanism():
    eng = load_engine("sglang-0.5.12")
    assert eng.for_mechanism("eagle3").rejection_passes == {"probabilistic": [12.5, -5.5]}
    assert eng.for_mechanism("dflash").rejection_passes == {"probabilistic": [6.5, -5.5]}
    assert load_engine("sglang").rejection_passes == {}  # 0.5.23 not counted: the generic rule
    d = eng.model_dump()
    with pytest.raises(ValueError, match="rejection_passes.probabilistic: needs"):
        EngineProfile.model_validate({**d, "rejection_passes": {"probabilistic": [1.0, -2.0]}})
    with pytest.raises(ValueError, match="rejection_passes.sampled: a rejection mode"):
        EngineProfile.model_validate({**d, "rejection_passes": {"sampled": [1.0, 0.0]}})
    with pytest.raises(ValueError, match="missing for rejection_passes"):
        EngineProfile.model_validate({**d, "sources": {k: v for k, v in d["sources"].items()
                                                      if k != "rejection_passes"}})


def test_round_prices_the_engines_counted_passes():
    """gpt-oss-120b on one H100, 64 sequences, EAGLE-3 D 3 (q 4), probabilistic: the round's GPU extra with SGLang
    0.5.12's counted passes exceeds the generic rule's by the difference of the two sampling costs (the round's
    other terms are the same for both engines)."""
    m, hw = load_model("gpt-oss-120b"), load_hardware("h100-sxm")
    shape = RoundShape(np.array([64.0]), np.array([3.0]), np.array([4.0]), np.array([1000.0]))
    old = load_engine("sglang-0.5.12").for_mechanism("eagle3")
    generic = old.model_copy(update={"rejection_passes": {}})
    a = round_gpu_extra_s(m, hw, 1, shape, "eagle3", None, "probabilistic", old)
    b = round_gpu_extra_s(m, hw, 1, shape, "eagle3", None, "probabilistic", generic)
    hand = (float(elementwise_cost(hw, 64 * 44.5 * V * 4.0).time_s)
            - float(elementwise_cost(hw, 64 * 12.0 * V * 4.0).time_s))
    assert float(a[0] - b[0]) == pytest.approx(hand, rel=1e-9)
    assert hand > 0.4e-3  # about half a millisecond at batch 64: 2.3 GB against 0.62 GB at 3.35 TB/s

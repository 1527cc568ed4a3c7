"""SGLang 0.5.23's adaptive rule (sglang/srt/speculative/adaptive_spec_params.py) against hand-traced sequences."""

import json

import pytest

from specplan.adaptive.sglang_policy import AdaptiveSpeculativeParams, load_config
from specplan.core.errors import SpecplanError


def _params(tmp_path, cfg, initial=None, bs=None):
    p = tmp_path / "adaptive.json"
    p.write_text(json.dumps(cfg))
    return AdaptiveSpeculativeParams(initial, str(p), bs)


def _run(params, averages, batch=1):
    """Steps used for each batch, feeding batch averages (one request per batch carries the average)."""
    used = []
    for a in averages:
        used.append(params.get_steps_for_batch(batch))
        params.on_verify_complete([a], batch)
    return used


CFG = {"ema_alpha": 0.5, "warmup_batches": 2, "update_interval": 2,
       "1": {"candidate_steps": [1, 3, 5, 7], "down_hysteresis": -0.25, "up_hysteresis": 0.0}}
AVERAGES = [3, 3, 3, 3, 1, 1, 2.4, 3.2, 2.3, 2.3, 2.3]


def test_hand_traced_warmup_interval_hysteresis(tmp_path):
    # EMA starts at steps - 1 = 2.0; EMA_k = 0.5 EMA + 0.5 avg.
    # b1, b2: warm-up (count <= 2), EMA 2.5, 2.75. b3: count 3, (3 - 2) % 2 = 1: no update, EMA 2.875.
    # b4: EMA 2.9375 > 3 - 0.5 (rise), not > 4.5: 3 -> 5, used from b5.
    # b5 (avg 1 at D = 5): EMA 1.96875, off-interval. b6: EMA 1.484375 <= 3 - 0.5 - 0.25 = 2.25: drop to 3;
    # not <= 1 - 0.5 - 0.25: stay at 3.  b7: EMA 1.9421875. b8: EMA 2.57109375 > 2.5: 3 -> 5.
    # b9: EMA 2.435546875. b10: EMA 2.3677734375: above the hysteresis threshold 2.25 (below 2.5): stays 5.
    used = _run(_params(tmp_path, CFG, initial=3), AVERAGES)
    assert used == [3, 3, 3, 3, 5, 5, 3, 3, 5, 5, 5]


def test_without_down_hysteresis_the_same_ema_drops(tmp_path):
    cfg = json.loads(json.dumps(CFG))
    cfg["1"]["down_hysteresis"] = 0.0
    used = _run(_params(tmp_path, cfg, initial=3), AVERAGES)
    # b6: 1.484375 <= 2.5 -> 3; b10: 2.3677734375 <= 2.5 -> 3 (used from b11).
    assert used == [3, 3, 3, 3, 5, 5, 3, 3, 5, 5, 3]


def test_zero_step_probe_and_neutral_ema(tmp_path):
    # Slot [0, 1, 3] started at 0: EMA -1, not updated at 0 steps; the first recompute probes 1, EMA := 0.
    p = _params(tmp_path, {"8": {"candidate_steps": [0, 1, 3], "warmup_batches": 0, "update_interval": 1}},
                initial=0)
    assert _run(p, [0], batch=8) == [0]
    assert p.get_steps_for_batch(8) == 1
    assert p._route(8).ema_accept_len == 0.0


def test_default_config_routing_and_initial_steps():
    # Union of the default candidates [0, 1, 3, 5, 7]: initial steps = the middle one, 3. Slots: 1 -> 3,
    # 8 -> 3, 32 -> [0, 1] does not hold 3 -> its middle 1, 64 -> 0.
    bs = list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
    p = AdaptiveSpeculativeParams(None, None, bs)
    assert p.initial_steps == 3
    assert [p.get_steps_for_batch(b) for b in (1, 7, 8, 30, 32, 63, 64, 300)] == [3, 3, 3, 3, 1, 0, 0, 0]
    # Batch 31 pads to the captured 32 and so uses the slot of 32 (SGLang's _pad_to_cuda_graph_bs).
    assert p.get_steps_for_batch(31) == 1
    # Without CUDA graphs, 31 stays in the slot of 8.
    assert AdaptiveSpeculativeParams(None, None, None).get_steps_for_batch(31) == 3


def test_config_errors_are_one_line(tmp_path):
    bad = {"1": {"candidate_steps": [3, -1]}}
    with pytest.raises(SpecplanError, match=r"BS 1: candidate_steps must be a list of non-negative ints"):
        _params(tmp_path, bad)
    with pytest.raises(SpecplanError, match="at least one integer-string BS key"):
        _params(tmp_path, {"ema_alpha": 0.3})
    with pytest.raises(SpecplanError, match="unknown field 'candidates'"):
        _params(tmp_path, {"1": {"candidate_steps": [1], "candidates": [2]}})
    with pytest.raises(SpecplanError, match="no such file"):
        load_config(str(tmp_path / "missing.json"))
    with pytest.raises(SpecplanError, match="initial steps 2 is not in"):
        _params(tmp_path, CFG, initial=2)

"""All-reduce and MoE routing closed forms."""

import numpy as np
import pytest

from specplan.costs.comm import allreduce_time_s, custom_allreduce_s, nccl_allreduce_s
from specplan.costs.moe import per_expert_m, touched_experts
from specplan.core.errors import SpecplanError
from specplan.profiles.registry import load_hardware


@pytest.fixture(scope="module")
def h100():
    return load_hardware("h100-sxm")


def test_tp1_is_free(h100):
    assert allreduce_time_s(h100, 1e6, 1) == 0


def test_nccl_ring_formula(h100):
    """100 MB runs NCCL's Simple protocol: the floor + NCCL's Simple-minus-LL latency (8.4 - 6.6 us base, 3.4 - 0.6 us
    per NVLink step, 2 (tp - 1) steps) + 2 (tp-1)/tp x bytes / (450 GB/s x the Simple fraction)."""
    p = h100.allreduce
    for tp in (2, 4, 8):
        by_hand = (p.nccl_latency_s + (tp - 1) * p.nccl_latency_per_peer_s + (1.8 + 2 * (tp - 1) * 2.8) * 1e-6
                   + 2 * (tp - 1) / tp * 1e8 / (450e9 * p.nccl_bw_fraction))
        assert nccl_allreduce_s(h100, 1e8, tp, nvls_ok=False) == pytest.approx(by_hand)  # int8: rings only


def test_nccl_one_ring_without_the_ll_cap():
    """A profile without NCCL's LL cap (RCCL on MI300X) keeps one ring at nccl_bw_fraction; 7 mesh links of
    1/7 each: link to a TP-4 group = 3/7 of the per-direction figure."""
    hw = load_hardware("mi300x")
    p = hw.allreduce
    assert p.nccl_ll_max_bw_bytes_s is None
    by_hand = (p.nccl_latency_s + 3 * p.nccl_latency_per_peer_s
               + 1.5 * 1e8 / (hw.scaleup_bandwidth_bytes_s * 3 / 7 * p.nccl_bw_fraction))
    assert nccl_allreduce_s(hw, 1e8, 4) == pytest.approx(by_hand)


def test_custom_one_shot_scales_with_bytes_and_tp(h100):
    p = h100.allreduce
    small = 8192.0
    for tp in (2, 4, 8):
        by_hand = p.custom_latency_s + (tp - 1) * small / (450e9 * p.custom_bw_fraction)
        assert custom_allreduce_s(h100, small, tp) == pytest.approx(by_hand)
    # Beyond the one-shot limit it falls back to the ring.
    big = p.custom_max_bytes * 4
    assert custom_allreduce_s(h100, big, 8) == pytest.approx(nccl_allreduce_s(h100, big, 8))
    # Time grows with bytes and with TP.
    b = np.array([1e3, 1e5, 1e7])
    assert np.all(np.diff(allreduce_time_s(h100, b, 8)) > 0)
    assert allreduce_time_s(h100, 1e6, 8) > allreduce_time_s(h100, 1e6, 2)


def test_small_message_latency_matches_measured_range(h100):
    # Measured: custom all-reduce 3-4 us at 8 KB on 2-8 H100s; NCCL 7-16 us.
    assert 2e-6 < allreduce_time_s(h100, 8192, 8, "custom") < 5e-6
    assert 5e-6 < allreduce_time_s(h100, 8192, 2, "nccl") < 17e-6


def test_tp_beyond_domain_is_an_error(h100):
    with pytest.raises(SpecplanError, match="scale-up domain"):
        allreduce_time_s(h100, 1e6, 16)


def test_touched_experts_closed_forms():
    e, k = 128, 8
    assert touched_experts(1, e, k) == pytest.approx(8.0)
    assert touched_experts(2, e, k) == pytest.approx(128 * (1 - (1 - 8 / 128) ** 2))
    assert touched_experts(1000, e, k) == pytest.approx(128.0, rel=1e-6)
    assert touched_experts(4, e, k, "balanced") == 32
    assert touched_experts(100, e, k, "balanced") == 128
    assert per_expert_m(100, e, k, "balanced") == pytest.approx(100 * 8 / 128)


@pytest.mark.parametrize("tp", [2, 4, 8])
@pytest.mark.parametrize("algo", ["custom", "nccl"])
def test_allreduce_never_cheaper_for_a_larger_message(h100, tp, algo):
    b = np.geomspace(1e2, 1e9, 3000)
    assert np.all(np.diff(allreduce_time_s(h100, b, tp, algo)) >= 0)


def test_custom_picks_the_cheaper_of_one_shot_and_two_shot(h100):
    p = h100.allreduce
    bw = 450e9 * p.custom_bw_fraction
    b = 4e6  # inside the buffer; two-shot is cheaper at TP 8 by hand
    one = p.custom_latency_s + 7 * b / bw
    two = 2 * p.custom_latency_s + 2 * 7 / 8 * b / bw
    assert two < one
    assert custom_allreduce_s(h100, b, 8) == pytest.approx(two)


def test_mesh_topology_uses_only_the_groups_links():
    from specplan.costs.comm import link_bandwidth_bytes_s

    mi = load_hardware("mi300x")
    assert mi.scaleup_topology == "mesh"
    assert link_bandwidth_bytes_s(mi, 2) == pytest.approx(mi.scaleup_bandwidth_bytes_s / 7)
    assert link_bandwidth_bytes_s(mi, 8) == pytest.approx(mi.scaleup_bandwidth_bytes_s)
    h = load_hardware("h100-sxm")
    assert link_bandwidth_bytes_s(h, 2) == h.scaleup_bandwidth_bytes_s


def test_cpu_tp_beyond_its_domain_is_an_error():
    cpu = load_hardware("cpu-generic")
    with pytest.raises(SpecplanError, match="scale-up domain"):
        allreduce_time_s(cpu, 1e6, 8)


# --- all-reduce family per engine (issue 22): TensorRT-LLM one-shot up to ~1 MB, vLLM / SGLang custom two-shot


def _measured_us(kernel: str, tp: int, elems: int) -> float:
    import pandas as pd
    from pathlib import Path

    d = pd.read_csv(Path(__file__).resolve().parents[2] / "reference" / "measured" / "allreduce_h100_a100.csv.gz")
    d = d[(d.device == "h100-sxm") & (d.kernel == kernel) & (d.num_gpus == tp) & (d.message_elems == elems)
          & (d.dtype == "bfloat16")]
    return float(d["time_us"].median())


@pytest.mark.parametrize("engine, kernel", [("trtllm", "TRTLLM"), ("vllm", "vLLM_custom_graph"),
                                            ("sglang", "SGLang_CustomAllReduce_graph")])
def test_engine_allreduce_family_follows_its_rows_at_1mb_tp8(h100, engine, kernel):
    from specplan.profiles.engine import engine_hardware
    from specplan.profiles.registry import load_engine

    hw = engine_hardware(h100, load_engine(engine))
    measured = _measured_us(kernel, 8, 524288)  # 1 MiB of bf16
    predicted = float(allreduce_time_s(hw, 524288 * 2, 8)) * 1e6
    # within 28 %: the custom family's bandwidth is fitted on the TRT-LLM rows, so the vLLM / SGLang rows stay held
    # out (their two-stage kernel is 13.5-17.5 us here, the model 12.6: SGLang's 17.35 us is 27 % above it); before
    # issue 22 TRT-LLM was priced 12.5 too. custom_bw_fraction is fitted on TRT-LLM's one-shot rows alone (0.635);
    # session 19's joint fit with the NCCL rows gave 0.689 and 12.1 us here (SGLang 30 % above)
    assert predicted == pytest.approx(measured, rel=0.28), (engine, measured, predicted)


def test_oneshot_family_by_hand(h100):
    p = h100.allreduce
    bw = 450e9 * p.custom_bw_fraction
    b = 1e6  # under oneshot_max_bytes: one-shot, not the cheaper two-shot
    assert allreduce_time_s(h100, b, 8, "oneshot") == pytest.approx(p.custom_latency_s + 7 * b / bw)
    assert allreduce_time_s(h100, b, 8, "oneshot") > 2 * allreduce_time_s(h100, b, 8, "custom")
    big = 64e6  # beyond: the NCCL ring
    assert allreduce_time_s(h100, big, 8, "oneshot") == pytest.approx(nccl_allreduce_s(h100, big, 8))
    sizes = np.geomspace(1e3, 1e8, 200)  # never faster for a larger message
    assert np.all(np.diff(allreduce_time_s(h100, sizes, 8, "oneshot")) >= 0)

"""NCCL all-reduce priced as NCCL picks its ring protocol (costs/comm.py nccl_terms), each term by hand. The messages
are priced as int8 (nvls_ok=False), which NCCL keeps on the rings (NVLS: tests/costs/test_nvls.py).

Constants by hand from NVIDIA/nccl at 1fc949c5: src/tuning/cost_model.cc (Ring baseLat LL 6.6 / LL128 14.0 /
Simple 8.4 us; NVLink hwLat 0.6 / 1.9 / 3.4 us per step; llMaxBws Hopper one node 141.0 GB/s, Ampere 87.7) and
src/tuning/ring.cc (LL busBw = min(llMaxBw, 0.5 x busBw); LL128 = 0.92 x busBw)."""

import numpy as np
import pytest

from specplan.costs import comm
from specplan.profiles.registry import load_hardware

MIB = 2.0 ** 20


@pytest.fixture(scope="module")
def h100():
    return load_hardware("h100-sxm")


def test_simple_at_512_mib_tp8_by_hand(h100):
    p = h100.allreduce
    floor = p.nccl_latency_s + 7 * p.nccl_latency_per_peer_s  # the LL floor, 4.36 + 7 x 1.60 us
    lat = floor + ((8.4 - 6.6) + 14 * (3.4 - 0.6)) * 1e-6  # + 1.8 + 39.2 us
    xfer = 2 * 7 / 8 * 512 * MIB / (450e9 * p.nccl_bw_fraction)
    assert comm.nccl_protocol(h100, 512 * MIB, 8) == "Simple"
    assert float(comm.nccl_allreduce_s(h100, 512 * MIB, 8, nvls_ok=False)) == pytest.approx(lat + xfer, rel=1e-12)
    assert lat == pytest.approx(56.56e-6, abs=0.05e-6)  # 15.56 + 41.0 us


def test_ll_at_8_kib_and_its_cap(h100):
    """8 KiB at TP 8 is LL: the measured floor + 1.75 x 8192 B over min(141 GB/s, 0.5 x Simple's rate)."""
    p = h100.allreduce
    assert comm.nccl_protocol(h100, 8192, 8) == "LL"
    ll_bw = min(141.0e9, 0.5 * 450e9 * p.nccl_bw_fraction)
    assert ll_bw == 141.0e9  # the cap binds on H100 (0.5 x 450 x 0.771 = 173 GB/s)
    want = p.nccl_latency_s + 7 * p.nccl_latency_per_peer_s + 1.75 * 8192 / ll_bw
    assert float(comm.nccl_allreduce_s(h100, 8192, 8)) == pytest.approx(want, rel=1e-12)


def test_ll128_in_between_by_hand(h100):
    """8 MiB at TP 8 is LL128: floor + (14.0 - 6.6) + 14 x (1.9 - 0.6) us + 1.75 x bytes / (0.92 x Simple's)."""
    p = h100.allreduce
    b = 8 * MIB
    assert comm.nccl_protocol(h100, b, 8) == "LL128"
    want = (p.nccl_latency_s + 7 * p.nccl_latency_per_peer_s + (7.4 + 14 * 1.3) * 1e-6
            + 1.75 * b / (0.92 * 450e9 * p.nccl_bw_fraction))
    assert float(comm.nccl_allreduce_s(h100, b, 8, nvls_ok=False)) == pytest.approx(want, rel=1e-12)


def test_protocol_is_the_cheapest_and_time_grows(h100):
    b = np.geomspace(512, 512 * MIB, 41)
    for tp in (2, 4, 8):
        t = comm.nccl_allreduce_s(h100, b, tp, nvls_ok=False)
        each = [comm.nccl_protocol_latency_s(h100, tp, q)
                + 2 * (tp - 1) / tp * b / comm.nccl_protocol_bus_bw_bytes_s(h100, tp, q) for q in comm.NCCL_PROTOCOLS]
        assert np.allclose(t, np.min(each, axis=0), rtol=1e-12)
        assert np.all(np.diff(t) > 0)
        names = list(comm.nccl_protocol(h100, b, tp))
        # LL first, Simple last, never back: NCCL's order as messages grow
        order = [comm.NCCL_PROTOCOLS.index(n) for n in names]
        assert order == sorted(order) and names[0] == "LL" and names[-1] == "Simple"


def test_a100_uses_amperes_ll_cap():
    a100 = load_hardware("a100-sxm-80gb")
    p = a100.allreduce
    assert p.nccl_ll_max_bw_bytes_s == 87.7e9
    bw = float(comm.nccl_protocol_bus_bw_bytes_s(a100, 8, "LL"))
    assert bw == min(87.7e9, 0.5 * 300e9 * p.nccl_bw_fraction) == 87.7e9


@pytest.mark.parametrize("hw_id", ["b200", "gb200", "b300", "gb300"])
def test_blackwell_uses_its_ll_cap_and_prices_ll_at_1_mib_by_hand(hw_id):
    """NCCL's Blackwell llMaxBws (2 x Hopper's 141 GB/s, cost_model.cc) caps LL below half of Simple's bus bandwidth on
    NVLink 5 (900 GB/s per direction x 0.771 / 2 = 347 GB/s): at 1 MiB over 8 GPUs LL costs its floor
    (4.36 + 7 x 1.60 us) + 2 x 7/8 x 1 MiB / 282 GB/s = 15.56 + 6.51 = 22.07 us."""
    hw = load_hardware(hw_id)
    assert hw.allreduce.nccl_ll_max_bw_bytes_s == 282e9
    assert float(comm.nccl_protocol_bus_bw_bytes_s(hw, 8, "LL")) == 282e9
    by_hand = 4.36e-6 + 7 * 1.60e-6 + 2 * 7 / 8 * MIB / 282e9
    assert float(comm.nccl_allreduce_s(hw, MIB, 8)) == pytest.approx(by_hand, rel=1e-9)


def test_array_gpu_counts_match_scalar_calls(h100):
    """predict_allreduce prices rows of mixed GPU counts in one call: the same numbers as one call per count."""
    b = np.array([8192.0, 4 * MIB, 256 * MIB, 8192.0, 4 * MIB, 256 * MIB])
    tp = np.array([2, 2, 2, 8, 8, 8])
    got = comm.nccl_allreduce_s(h100, b, tp)
    want = np.concatenate([comm.nccl_allreduce_s(h100, b[:3], 2), comm.nccl_allreduce_s(h100, b[3:], 8)])
    assert np.allclose(got, want, rtol=1e-12)


def test_custom_and_oneshot_fall_back_to_the_protocol_price(h100):
    """Beyond their buffers the custom and oneshot families pay NCCL's protocol price (never less than the
    two-shot / one-shot time at the limit)."""
    p = h100.allreduce
    big = 4 * p.custom_max_bytes
    nccl = float(comm.nccl_allreduce_s(h100, big, 8))
    two_at_limit = 2 * p.custom_latency_s + 1.75 * p.custom_max_bytes / (450e9 * p.custom_bw_fraction)
    assert nccl > two_at_limit  # 32 MB over 8 H100s: NCCL's Simple ring, above the two-shot time at 8 MB
    assert float(comm.custom_allreduce_s(h100, big, 8)) == pytest.approx(nccl, rel=1e-12)
    assert float(comm.oneshot_allreduce_s(h100, big, 8)) == pytest.approx(nccl, rel=1e-12)

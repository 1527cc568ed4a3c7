"""Tensor-parallel all-reduce and chip-to-chip hops.

Algorithms, selectable per hardware profile (`allreduce.algorithm`):
- `custom` (the serving engines' custom all-reduce kernels, vLLM / SGLang / TRT-LLM): the cheaper of
  one-shot (every device reads the other TP-1 buffers: latency + (TP-1) * bytes / (link * fraction)) and
  two-shot (reduce-scatter + all-gather: 2 * latency + 2 (TP-1)/TP * bytes / (link * fraction)), up to
  `custom_max_bytes` (the kernel's buffer); beyond it the engines call NCCL, priced as NCCL (below), its time
  never below the custom kernel's at the buffer's limit, so that time never falls as messages grow (as `oneshot`).
  custom_bw_fraction is the custom kernel's own: fitted on rows the kernel carries, never on those beyond it.
- `oneshot` (TensorRT-LLM's custom kernels, its AUTO strategy): one-shot up to `oneshot_max_bytes` (1 MB on H100:
  the TRT-LLM rows of reference/measured/allreduce_h100_a100.csv.gz follow the one-shot line there, 22.8-26 us at
  TP 8 and 1 MB, where two-shot would be 12.5 us), the NCCL ring beyond (never below the one-shot time at the limit).
- `nccl`: NCCL's ring all-reduce, priced as NCCL picks its protocol (profiles with `nccl_ll_max_bw_bytes_s`):
  the cheapest of LL, LL128 and Simple, each latency_p + 2 (TP-1)/TP * bytes / busBw_p, with
      busBw_Simple = link * nccl_fraction   (the one fitted number),
      busBw_LL128  = 0.92 * busBw_Simple,   busBw_LL = min(llMaxBw, 0.5 * busBw_Simple)
  (NVIDIA/nccl src/tuning/ring.cc and src/tuning/cost_model.cc at 1fc949c5: ncclTuningRingModelInit), and
  latency_LL = the measured floor nccl_latency + (TP-1) * nccl_latency_per_peer, the other protocols' the floor plus
  NCCL's own modelled difference to LL (baseLat + 2 (TP-1) hwLat over NVLink, below). Profiles without the LL cap
  (RCCL on MI300X-class meshes, where NCCL's constants are not the library's) keep one ring:
  nccl_latency + (TP-1) * nccl_latency_per_peer + 2 (TP-1)/TP * bytes / (link * nccl_fraction).
  On profiles with `allreduce.nvls` (NVSwitch with multicast) above 2 GPUs, for the dtypes NVLS reduces, the NCCL
  all-reduce is the cheaper of those rings and NVLink SHARP (nvls_terms): nvls_latency + (1 + 1/TP) * bytes /
  (link * nccl_fraction * nvls_efficiency * 15/16) (src/tuning/nvls.cc, src/transport/nvls.cc).
The family is the engine's (`EngineProfile.allreduce_algorithm`: trtllm oneshot, vLLM / SGLang custom), else the
hardware profile's.
`link` is the per-direction scale-up bandwidth a device can use for a TP group: the full figure behind a switch
(NVSwitch), (TP-1)/(domain-1) of it on a full mesh of point-to-point links (MI300X Infinity Fabric).
Each algorithm is a latency term plus a transfer term; the step reports which dominates.

Expert-parallel all-to-all (dispatch / combine, DeepEP-style): each GPU sends `bytes` to the other GPUs of a
group; inside the scale-up domain they go over NVLink at `alltoall.scaleup_bw_fraction` of the link, and when
the group spans nodes the share bound for other nodes, (group - domain) / (group - 1), goes over the GPU's NIC
(`scaleout_bandwidth_bytes_s` at `alltoall.scaleout_bw_fraction`), the two fabrics in parallel:
    time = latency (scale-up or scale-out) + max(NVLink bytes / NVLink rate, NIC bytes / NIC rate)
Pipeline stage hops (p2p) use the same fabrics: latency + bytes / rate.

DeepEP's two kernel sets (issue 22; DeepEP docs/legacy.md, V1, "Performance"), chosen per step by tokens per GPU:
- low-latency (decode, at most `LL_MAX_TOKENS_PER_RANK` tokens per GPU: SGLang's default
  SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK 128): one copy per (token, expert), local ones included, at the
  README's logical bandwidth for the EP size (H800 + ConnectX-7 400 Gb/s, 128 tokens, hidden 7168, top-8, fp8
  dispatch / bf16 combine: 77 / 114 us at EP 8 ... 194 / 360 us at EP 256), scaled by the device's NIC over the
  README's 50 GB/s (pure RDMA kernels: HGX H100 / H200 nodes carry the same 400 Gb/s ConnectX-7 per GPU, so their
  figures are the README's); never below the fabric latency. At the README's configuration it returns the README.
- normal (prefill): inter-node traffic is one copy per distinct remote NODE (RDMA to the peer GPU of the same
  local index, then NVLink forwarding inside the node), NVLink traffic one copy per distinct remote rank:
      time = latency + max(rank copies / NVLink rate, node copies / NIC rate).
"""

from __future__ import annotations

import numpy as np

from specplan.costs.roofline import KernelCost, roofline
from specplan.core.errors import SpecplanError
from specplan.profiles.hardware import HardwareProfile


def link_bandwidth_bytes_s(hw: HardwareProfile, tp: int) -> float:
    """Per-direction bytes/s one device can use towards a TP group of `tp` devices."""
    if hw.scaleup_topology == "mesh" and hw.scaleup_domain > 1:
        return hw.scaleup_bandwidth_bytes_s * (tp - 1) / (hw.scaleup_domain - 1)
    return hw.scaleup_bandwidth_bytes_s


# NCCL's own latency model, the one it picks algorithms and protocols with (NVIDIA/nccl src/graph/tuning.cc at
# b6475625: `baseLat` per algorithm and protocol, `hwLat[NCCL_HW_NVLINK]` per step over NVLink, microseconds): a
# ring all-reduce over n ranks on one node costs baseLat + 2 (n - 1) hwLat. NCCL keys hwLat by link type (NVLink,
# PCI, network), not by NVLink generation: its Blackwell entries (NCCL_BLACKWELL_COMPCAP_IDX, later versions) are
# per-channel bandwidth caps (llMaxBws, perChMax*), so NVLink 5 / NVSwitch (B200, GB200, B300, GB300) small-message
# latency is priced by NCCL as NVLink 4's; their faster links shorten the transfer term only.
NCCL_RING_BASE_LAT_US = {"LL": 6.6, "LL128": 14.0, "Simple": 8.4}
NCCL_RING_NVLINK_HW_LAT_US = {"LL": 0.6, "LL128": 1.9, "Simple": 3.4}


def nccl_model_allreduce_latency_s(ranks: int, protocol: str = "LL") -> float:
    """NCCL's modelled latency (s) of a single-node ring all-reduce over NVLink with `protocol` (LL, LL128,
    Simple): baseLat[Ring][p] + 2 (ranks - 1) x hwLat[NVLink][Ring][p] (src/graph/tuning.cc)."""
    if protocol not in NCCL_RING_BASE_LAT_US:
        raise SpecplanError(f"nccl protocol: must be one of {', '.join(NCCL_RING_BASE_LAT_US)}, got '{protocol}'")
    steps = 2 * (max(int(ranks), 1) - 1)
    return (NCCL_RING_BASE_LAT_US[protocol] + steps * NCCL_RING_NVLINK_HW_LAT_US[protocol]) * 1e-6


# NCCL's ring bus-bandwidth factors relative to Simple (NVIDIA/nccl src/tuning/ring.cc at 1fc949c5,
# ncclTuningRingModelInit: LL busBw = min(llMaxBw, 0.5 x busBw); LL128 busBw = min(0.92 x busBw, nChannels x
# perChMaxRingLL128Bw)). The LL128 per-channel cap (36.7 GB/s Hopper, 20.0 Ampere, src/tuning/cost_model.cc
# perChMaxRingLL128Bws) is left out: it needs NCCL's channel count, and at the 12+ ring channels NCCL builds on an
# HGX NVSwitch board it lies above 0.92 x the link.
NCCL_PROTOCOLS = ("LL", "LL128", "Simple")
NCCL_RING_BW_FACTOR = {"LL": 0.5, "LL128": 0.92, "Simple": 1.0}


def nccl_protocol_latency_s(hw: HardwareProfile, tp, protocol: str) -> np.ndarray:
    """Latency (s) of NCCL's ring all-reduce with `protocol` over `tp` devices: the profile's measured floor
    (nccl_latency_s + (tp-1) nccl_latency_per_peer_s, the LL protocol's) plus NCCL's modelled difference between
    `protocol` and LL (nccl_model_allreduce_latency_s)."""
    p = hw.allreduce
    tp = np.asarray(tp, dtype=float)
    floor = p.nccl_latency_s + (tp - 1) * p.nccl_latency_per_peer_s
    extra_us = (NCCL_RING_BASE_LAT_US[protocol] - NCCL_RING_BASE_LAT_US["LL"]
                + 2 * (tp - 1) * (NCCL_RING_NVLINK_HW_LAT_US[protocol] - NCCL_RING_NVLINK_HW_LAT_US["LL"]))
    return floor + extra_us * 1e-6


def nccl_protocol_bus_bw_bytes_s(hw: HardwareProfile, tp, protocol: str) -> np.ndarray:
    """Bus bandwidth (bytes/s) of NCCL's ring all-reduce with `protocol`: link x nccl_bw_fraction for Simple,
    0.92 x that for LL128, min(llMaxBw, 0.5 x that) for LL (src/tuning/ring.cc)."""
    p = hw.allreduce
    simple = link_bandwidth_bytes_s(hw, tp) * p.nccl_bw_fraction
    bw = NCCL_RING_BW_FACTOR[protocol] * np.asarray(simple, dtype=float)
    if protocol == "LL":
        bw = np.minimum(bw, p.nccl_ll_max_bw_bytes_s)
    return bw


def nccl_cheapest_protocol(hw: HardwareProfile, wire_bytes, tp) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(latency s, transfer s, protocol index into NCCL_PROTOCOLS) of a ring collective whose devices each move
    `wire_bytes` along the ring, at the protocol NCCL's cost model picks: the least latency + wire_bytes / busBw
    over LL, LL128, Simple (the ring's protocol bandwidths, src/tuning/ring.cc, hold for every ring collective)."""
    wire_bytes = np.asarray(wire_bytes, dtype=float)
    tp = np.asarray(tp, dtype=float)
    lat = np.stack([np.broadcast_to(nccl_protocol_latency_s(hw, tp, q), wire_bytes.shape) for q in NCCL_PROTOCOLS])
    xfer = np.stack([np.broadcast_to(wire_bytes / nccl_protocol_bus_bw_bytes_s(hw, tp, q), wire_bytes.shape)
                     for q in NCCL_PROTOCOLS])
    pick = np.argmin(lat + xfer, axis=0)
    take = lambda a: np.take_along_axis(a, pick[None], axis=0)[0]  # noqa: E731
    return take(lat), take(xfer), pick


def nccl_protocol_terms(hw: HardwareProfile, nbytes, tp) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(latency s, transfer s, protocol index into NCCL_PROTOCOLS) of NCCL's ring all-reduce of `nbytes`: each
    device moves 2 (tp-1)/tp x bytes (nccl_cheapest_protocol)."""
    tp = np.asarray(tp, dtype=float)
    return nccl_cheapest_protocol(hw, 2.0 * (tp - 1) / tp * np.asarray(nbytes, dtype=float), tp)


def nccl_algorithm(hw: HardwareProfile, nbytes, tp, nvls_ok=True) -> np.ndarray:
    """Name of what NCCL's all-reduce runs, as priced by nccl_terms: NVLS, else the ring protocol (nccl_protocol)."""
    take = nvls_taken(hw, nbytes, tp, nvls_ok, sum(nccl_ring_terms(hw, nbytes, tp)))
    return np.where(take, "NVLS", nccl_protocol(hw, nbytes, tp))


def nccl_protocol(hw: HardwareProfile, nbytes, tp) -> np.ndarray:
    """Name of the protocol (LL, LL128, Simple) NCCL's cost model picks for each message (profiles with the LL cap)."""
    return np.asarray(NCCL_PROTOCOLS)[nccl_protocol_terms(hw, nbytes, tp)[2]]


# NCCL's NVLink SHARP (NVLS) all-reduce (NVIDIA/nccl src/transport/nvls.cc ncclNvlsInit: enabled when the device
# reports multicast support, i.e. an NVSwitch of the Hopper generation or later, and the node has more than two
# GPUs; src/include/device.h ncclNvlsSupported: sum over float16 / bfloat16 / float32 / float64 / int32 / int64
# only, so int8 and fp8 messages stay on the rings). Each device reduce-scatters through the switch
# (multimem.ld_reduce: it sends its whole buffer, receives 1/n reduced) and all-gathers through it (multimem.st:
# it sends 1/n, receives the whole buffer): (1 + 1/n) x bytes each way, against the ring's 2 (n - 1)/n.
NCCL_NVLS_DTYPES = ("fp32", "bf16", "fp16")  # the canonical dtypes (core/dtypes.py) among ncclNvlsSupported's
NCCL_NVLS_CHANNELS = 16  # src/transport/nvls.cc NCCL_NVLS_NCHANNELS default; NCCL prices NVLS at (nCh - 1)/nCh


def nvls_active(hw: HardwareProfile, tp, nvls_ok=True) -> np.ndarray:
    """Whether NCCL may run NVLS for an all-reduce over `tp` devices: the profile's `nvls`, more than two devices,
    and `nvls_ok` (the message's dtype is one NVLS reduces)."""
    return np.asarray(bool(hw.allreduce.nvls) & (np.asarray(tp, dtype=float) > 2) & np.asarray(nvls_ok, dtype=bool))


def nvls_reaches(hw: HardwareProfile, nbytes) -> np.ndarray:
    """Whether a message of `nbytes` is large enough for NCCL to pick NVLS (allreduce.nvls_min_bytes, as measured)."""
    return np.asarray(nbytes, dtype=float) >= hw.allreduce.nvls_min_bytes


def nvls_taken(hw: HardwareProfile, nbytes, tp, nvls_ok, ring_s) -> np.ndarray:
    """Where NCCL runs NVLS: it may (nvls_active), the message reaches nvls_min_bytes, and NVLS is cheaper than
    the rings' `ring_s` seconds."""
    return nvls_active(hw, tp, nvls_ok) & nvls_reaches(hw, nbytes) & (sum(nvls_terms(hw, nbytes, tp)) < ring_s)


def nvls_bus_bw_bytes_s(hw: HardwareProfile, tp) -> np.ndarray:
    """Per-device bytes/s of NCCL's NVLS all-reduce: link x nccl_bw_fraction x nvls_efficiency x (nCh - 1)/nCh
    (src/tuning/nvls.cc at 1fc949c5: the NVLS graph bandwidth x nvlsEfficiency x (nChannels - 1)/nChannels)."""
    p = hw.allreduce
    return (link_bandwidth_bytes_s(hw, np.asarray(tp, dtype=float)) * p.nccl_bw_fraction * p.nvls_efficiency
            * (NCCL_NVLS_CHANNELS - 1) / NCCL_NVLS_CHANNELS)


def nvls_terms(hw: HardwareProfile, nbytes, tp) -> tuple[np.ndarray, np.ndarray]:
    """(latency s, transfer s) of NCCL's NVLS all-reduce: nvls_latency_s plus (1 + 1/tp) x bytes at
    nvls_bus_bw_bytes_s."""
    nbytes = np.asarray(nbytes, dtype=float)
    tp = np.asarray(tp, dtype=float)
    xfer = (1.0 + 1.0 / tp) * nbytes / nvls_bus_bw_bytes_s(hw, tp)
    return np.full(np.shape(xfer), hw.allreduce.nvls_latency_s), xfer


def nccl_ring_terms(hw: HardwareProfile, nbytes, tp) -> tuple[np.ndarray, np.ndarray]:
    """(latency s, transfer s) of NCCL's ring all-reduce: the cheapest protocol when the profile has NCCL's LL
    cap, else one ring at nccl_bw_fraction."""
    p = hw.allreduce
    nbytes = np.asarray(nbytes, dtype=float)
    if p.nccl_ll_max_bw_bytes_s is not None:
        lat, xfer, _ = nccl_protocol_terms(hw, nbytes, tp)
        return lat, xfer
    lat = np.broadcast_to(p.nccl_latency_s + (np.asarray(tp, dtype=float) - 1) * p.nccl_latency_per_peer_s,
                          nbytes.shape).astype(float)
    return lat, 2.0 * (tp - 1) / tp * nbytes / (link_bandwidth_bytes_s(hw, tp) * p.nccl_bw_fraction)


def nccl_terms(hw: HardwareProfile, nbytes, tp, nvls_ok=True) -> tuple[np.ndarray, np.ndarray]:
    """(latency s, transfer s) of NCCL's all-reduce: the rings (nccl_ring_terms), or NVLS where NCCL may run it
    (nvls_active) and it is the cheaper."""
    lat, xfer = nccl_ring_terms(hw, nbytes, tp)
    use = nvls_active(hw, tp, nvls_ok)
    if not use.any():
        return lat, xfer
    nv_lat, nv_xfer = nvls_terms(hw, nbytes, tp)
    take = nvls_taken(hw, nbytes, tp, nvls_ok, lat + xfer)
    # below nvls_min_bytes NCCL stays on its rings, but a message is never priced above a larger one: at most NVLS's
    # price at the threshold (as the custom kernels beyond their buffer, custom_terms)
    t_lat, t_xfer = nvls_terms(hw, hw.allreduce.nvls_min_bytes, tp)
    cap = use & ~nvls_reaches(hw, nbytes) & (t_lat + t_xfer < lat + xfer)
    lat, xfer = np.where(cap, t_lat, lat), np.where(cap, t_xfer, xfer)
    return np.where(take, nv_lat, lat), np.where(take, nv_xfer, xfer)


def custom_terms(hw: HardwareProfile, nbytes, tp: int, nvls_ok=True) -> tuple[np.ndarray, np.ndarray]:
    """(latency s, transfer s) of the engines' custom all-reduce: the cheaper of one-shot and two-shot up to
    custom_max_bytes, NCCL beyond (its transfer raised, where needed, to the custom time at the limit)."""
    p = hw.allreduce
    nbytes = np.asarray(nbytes, dtype=float)
    bw = link_bandwidth_bytes_s(hw, tp) * p.custom_bw_fraction

    def one_or_two(b):
        one = (np.full(np.shape(b), p.custom_latency_s), (tp - 1) * b / bw)
        two = (np.full(np.shape(b), 2.0 * p.custom_latency_s), 2.0 * (tp - 1) / tp * b / bw)
        use_one = one[0] + one[1] <= two[0] + two[1]
        return tuple(np.where(use_one, a, c) for a, c in zip(one, two))

    small = one_or_two(nbytes)
    at_limit = sum(one_or_two(np.asarray(p.custom_max_bytes, dtype=float)))
    ring_lat, ring_xfer = nccl_terms(hw, nbytes, tp, nvls_ok)
    ring_xfer = np.maximum(ring_xfer, at_limit - ring_lat)
    fits_buffer = nbytes <= p.custom_max_bytes
    return np.where(fits_buffer, small[0], ring_lat), np.where(fits_buffer, small[1], ring_xfer)


def oneshot_terms(hw: HardwareProfile, nbytes, tp: int, nvls_ok=True) -> tuple[np.ndarray, np.ndarray]:
    """(latency s, transfer s) of TensorRT-LLM's all-reduce: one-shot up to oneshot_max_bytes, then the NCCL ring
    (its transfer raised, where needed, to the one-shot transfer at the limit, so time never falls as bytes grow)."""
    p = hw.allreduce
    nbytes = np.asarray(nbytes, dtype=float)
    bw = link_bandwidth_bytes_s(hw, tp) * p.custom_bw_fraction
    one = (np.full(nbytes.shape, p.custom_latency_s), (tp - 1) * nbytes / bw)
    ring_lat, ring_xfer = nccl_terms(hw, nbytes, tp, nvls_ok)
    at_limit = p.custom_latency_s + (tp - 1) * p.oneshot_max_bytes / bw
    ring_xfer = np.maximum(ring_xfer, at_limit - ring_lat)
    small = nbytes <= p.oneshot_max_bytes
    return np.where(small, one[0], ring_lat), np.where(small, one[1], ring_xfer)


def nccl_allreduce_s(hw: HardwareProfile, nbytes, tp: int, nvls_ok=True) -> np.ndarray:
    """NCCL all-reduce seconds for a message of `nbytes` over `tp` devices (nccl_terms)."""
    return sum(nccl_terms(hw, nbytes, tp, nvls_ok))


def oneshot_allreduce_s(hw: HardwareProfile, nbytes, tp: int) -> np.ndarray:
    """TensorRT-LLM all-reduce seconds (one-shot up to oneshot_max_bytes, NCCL ring beyond)."""
    return sum(oneshot_terms(hw, nbytes, tp))


def custom_allreduce_s(hw: HardwareProfile, nbytes, tp: int, nvls_ok=True) -> np.ndarray:
    """Custom all-reduce seconds (one-shot or two-shot; NCCL beyond `custom_max_bytes`)."""
    return sum(custom_terms(hw, nbytes, tp, nvls_ok))


def _check_tp(hw: HardwareProfile, tp: int) -> None:
    if tp > hw.scaleup_domain and hw.kind != "lpu":
        raise SpecplanError(f"tp: {tp} exceeds the scale-up domain of {hw.id} ({hw.scaleup_domain} devices)")


def allreduce_terms(hw: HardwareProfile, nbytes, tp: int, algorithm: str | None = None, nvls_ok=True):
    """(latency s, transfer s) of one all-reduce; zeros when tp == 1. `algorithm` overrides the profile's."""
    nbytes = np.asarray(nbytes, dtype=float)
    if tp == 1:
        return np.zeros_like(nbytes), np.zeros_like(nbytes)
    _check_tp(hw, tp)
    algo = algorithm or hw.allreduce.algorithm
    if algo == "custom":
        return custom_terms(hw, nbytes, tp, nvls_ok)
    if algo == "nccl":
        return nccl_terms(hw, nbytes, tp, nvls_ok)
    if algo == "oneshot":
        return oneshot_terms(hw, nbytes, tp, nvls_ok)
    raise SpecplanError(f"allreduce algorithm: must be 'custom', 'oneshot' or 'nccl', got '{algo}'")


def allreduce_time_s(hw: HardwareProfile, nbytes, tp: int, algorithm: str | None = None,
                     nvls_ok=True) -> np.ndarray:
    """All-reduce seconds; 0 when tp == 1."""
    return sum(allreduce_terms(hw, nbytes, tp, algorithm, nvls_ok))


def allreduce_cost(hw: HardwareProfile, nbytes, tp: int, count: float = 1.0, algorithm: str | None = None) -> KernelCost:
    """`count` all-reduces as a KernelCost: transfer time as the memory term, latency as the fixed term."""
    lat, xfer = allreduce_terms(hw, nbytes, tp, algorithm)
    return roofline(np.zeros_like(xfer), xfer, lat).scaled(count)


def eager_allreduce_s(hw: HardwareProfile, nbytes, tp: int, algorithm: str | None, dispatch_s: float,
                      nvls_ok=True) -> np.ndarray:
    """Seconds of one all-reduce issued outside a CUDA graph: the host's dispatch of the call (`dispatch_s`, an
    engine's EngineProfile.allreduce_eager_s: the custom op's Python/C++ dispatch, the copy's and the kernel's
    launches) or the GPU's side, whichever is longer (the host runs ahead of the GPU once the GPU is the slower).
    The GPU's side is the graphed time plus, for the `custom` family, the copy of the message into the registered
    IPC buffer (read + write at the HBM fraction): outside a graph vLLM's and SGLang's custom all-reduce cannot
    use the caller's tensor in place (vllm csrc/custom_all_reduce.cu all_reduce: cudaMemcpyAsync into reg_buffer
    when the input is not registered; inside a graph the captured buffers are registered). 0 when tp == 1."""
    nbytes = np.asarray(nbytes, dtype=float)
    if tp == 1:
        return np.zeros_like(nbytes)
    algo = algorithm or hw.allreduce.algorithm
    gpu = allreduce_time_s(hw, nbytes, tp, algo, nvls_ok)
    if algo == "custom":
        gpu = gpu + 2.0 * nbytes / (hw.mem_bandwidth_bytes_s * hw.kernel_eff("default").mem_bw_fraction)
    return np.maximum(float(dispatch_s), gpu)


def hop_latency_s(hw: HardwareProfile, stages: int) -> float:
    """Pipeline hop latency of a step through `stages` chips (LPU): (stages - 1) x hop."""
    return max(0, stages - 1) * hw.chip_hop_latency_s


def alltoall_terms(hw: HardwareProfile, bytes_per_gpu, group_gpus: int) -> tuple[np.ndarray, np.ndarray]:
    """(latency s, transfer s) of one all-to-all in which each GPU sends `bytes_per_gpu` to the others of a group
    of `group_gpus` GPUs (the share for other nodes over the NIC when the group spans nodes)."""
    nbytes = np.asarray(bytes_per_gpu, dtype=float)
    p = hw.alltoall
    if group_gpus <= 1:
        return np.zeros_like(nbytes), np.zeros_like(nbytes)
    domain = max(1, hw.scaleup_domain)
    off = max(0, group_gpus - domain) / (group_gpus - 1)  # share of the destinations on other nodes
    nv = (1.0 - off) * nbytes / (link_bandwidth_bytes_s(hw, min(group_gpus, domain)) * p.scaleup_bw_fraction)
    nic = off * nbytes / (hw.scaleout_bandwidth_bytes_s * p.scaleout_bw_fraction)
    lat = p.scaleout_latency_s if off > 0 else p.latency_s
    return np.full(nbytes.shape, lat), np.maximum(nv, nic)


def alltoall_cost(hw: HardwareProfile, bytes_per_gpu, group_gpus: int, count: float = 1.0) -> KernelCost:
    """`count` all-to-alls as a KernelCost: transfer time as the memory term, latency as the fixed term."""
    lat, xfer = alltoall_terms(hw, bytes_per_gpu, group_gpus)
    return roofline(np.zeros_like(xfer), xfer, lat).scaled(count)


# DeepEP V1 low-latency kernels (docs/legacy.md, "Low-latency kernels with pure RDMA", H800 + CX7 400 Gb/s, 128
# tokens per batch, hidden 7168, top-8, fp8 dispatch, bf16 combine): EP -> (dispatch us, GB/s, combine us, GB/s)
DEEPEP_LL = {8: (77, 98, 114, 127), 16: (118, 63, 195, 74), 32: (155, 48, 273, 53), 64: (173, 43, 314, 46),
             128: (192, 39, 369, 39), 256: (194, 39, 360, 40)}
DEEPEP_README_NIC_BYTES_S = 50e9  # the README's ConnectX-7 400 Gb/s
LL_MAX_TOKENS_PER_RANK = 128  # SGLang SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK default: decode uses LL up to it


def deepep_ll_bandwidth_bytes_s(hw: HardwareProfile, ep: int, combine: bool) -> float:
    """DeepEP low-latency logical bandwidth at `ep` GPUs (README figures, log-interpolated in EP, held at the ends),
    scaled by the device's NIC over the README's 50 GB/s."""
    eps = np.array(sorted(DEEPEP_LL), dtype=float)
    gbs = np.array([DEEPEP_LL[e][3 if combine else 1] for e in sorted(DEEPEP_LL)], dtype=float)
    bw = float(np.interp(np.log2(max(ep, 2)), np.log2(eps), gbs)) * 1e9
    return bw * hw.scaleout_bandwidth_bytes_s / DEEPEP_README_NIC_BYTES_S


def deepep_ll_cost(hw: HardwareProfile, copies_bytes_per_gpu, ep: int, combine: bool = False,
                   count: float = 1.0) -> KernelCost:
    """`count` DeepEP low-latency dispatches (or combines) of `copies_bytes_per_gpu` (one copy per (token, expert),
    local included) per GPU over `ep` GPUs: bytes / README bandwidth, never below the fabric latency."""
    nbytes = np.asarray(copies_bytes_per_gpu, dtype=float)
    if ep <= 1:
        return roofline(np.zeros_like(nbytes), np.zeros_like(nbytes), np.zeros_like(nbytes))
    lat = hw.alltoall.scaleout_latency_s if ep > max(1, hw.scaleup_domain) else hw.alltoall.latency_s
    xfer = nbytes / deepep_ll_bandwidth_bytes_s(hw, ep, combine)
    return roofline(np.zeros_like(xfer), np.maximum(xfer - lat, 0.0), np.full(nbytes.shape, lat)).scaled(count)


def deepep_normal_cost(hw: HardwareProfile, rank_bytes_per_gpu, node_bytes_per_gpu, group_gpus: int,
                       count: float = 1.0) -> KernelCost:
    """`count` DeepEP normal-kernel dispatches (or combines): `rank_bytes_per_gpu` to distinct remote ranks over
    NVLink (direct or forwarded), `node_bytes_per_gpu` to distinct remote nodes over the NIC, in parallel."""
    rank_b = np.asarray(rank_bytes_per_gpu, dtype=float)
    node_b = np.asarray(node_bytes_per_gpu, dtype=float)
    p = hw.alltoall
    if group_gpus <= 1:
        return roofline(np.zeros_like(rank_b), np.zeros_like(rank_b), np.zeros_like(rank_b))
    domain = max(1, hw.scaleup_domain)
    nv = rank_b / (link_bandwidth_bytes_s(hw, min(group_gpus, domain)) * p.scaleup_bw_fraction)
    nic = node_b / (hw.scaleout_bandwidth_bytes_s * p.scaleout_bw_fraction)
    lat = p.scaleout_latency_s if group_gpus > domain else p.latency_s
    xfer = np.maximum(nv, nic)
    return roofline(np.zeros_like(xfer), xfer, np.full(xfer.shape, lat)).scaled(count)


def p2p_cost(hw: HardwareProfile, nbytes, scaleout: bool = False) -> KernelCost:
    """One point-to-point send (a pipeline stage hop): NVLink latency + bytes / link, or the NIC's when the
    stages sit on different nodes."""
    nbytes = np.asarray(nbytes, dtype=float)
    p = hw.alltoall
    if scaleout:
        lat, bw = p.scaleout_latency_s, hw.scaleout_bandwidth_bytes_s * p.scaleout_bw_fraction
    else:
        lat, bw = hw.scaleup_latency_s, hw.scaleup_bandwidth_bytes_s * p.scaleup_bw_fraction
    return roofline(np.zeros_like(nbytes), nbytes / bw, np.full(nbytes.shape, lat))


def allgather_cost(hw: HardwareProfile, shard_bytes, tp: int) -> KernelCost:
    """One NCCL ring all-gather of `shard_bytes` per device (each device receives the other TP-1 shards):
    latency = the ring all-reduce's (an upper bound for a one-pass ring), transfer = (TP-1) x shard / busBw; zero
    when tp == 1. Where the profile has NCCL's LL cap, at the protocol NCCL picks (the least latency + transfer over
    LL, LL128, Simple: nccl_cheapest_protocol); else one ring at link x nccl_bw_fraction.

    Used for the vocabulary-parallel LM head: vLLM 0.33.0 LogitsProcessor._gather_logits calls
    tensor_model_parallel_all_gather (Platform.use_all_gather() is True and the CUDA platform keeps it), so every
    rank receives all B·q_len·vocab logits in the LM head's output dtype (the activation dtype by default)."""
    shard = np.asarray(shard_bytes, dtype=float)
    if tp == 1:
        return roofline(np.zeros_like(shard), np.zeros_like(shard), np.zeros_like(shard))
    _check_tp(hw, tp)
    p = hw.allreduce
    if p.nccl_ll_max_bw_bytes_s is None:
        lat = np.full(shard.shape, p.nccl_latency_s + (tp - 1) * p.nccl_latency_per_peer_s)
        xfer = (tp - 1) * shard / (link_bandwidth_bytes_s(hw, tp) * p.nccl_bw_fraction)
        return roofline(np.zeros_like(xfer), xfer, lat)
    lat, xfer, _ = nccl_cheapest_protocol(hw, (tp - 1) * shard, tp)
    return roofline(np.zeros_like(xfer), xfer, lat)

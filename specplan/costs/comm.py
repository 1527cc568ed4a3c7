"""Tensor-parallel all-reduce and chip-to-chip hops.

Two algorithms, selectable per hardware profile (`allreduce.algorithm`):
- `custom` (one-shot, as vLLM / SGLang / TRT-LLM custom all-reduce kernels): every device reads the other
  TP-1 buffers over its link: t = custom_latency + (TP-1) * bytes / (link_bw * custom_bw_fraction).
  Used up to `custom_max_bytes`; larger messages fall back to the ring.
- `nccl` (ring): t = nccl_latency + (TP-1) * nccl_latency_per_peer + 2 (TP-1)/TP * bytes / (link_bw * nccl_bw_fraction).
"""

from __future__ import annotations

import numpy as np

from specplan.costs.roofline import KernelCost, roofline
from specplan.errors import SpecplanError
from specplan.profiles.hardware import HardwareProfile


def nccl_allreduce_s(hw: HardwareProfile, nbytes, tp: int) -> np.ndarray:
    """Ring all-reduce seconds for a message of `nbytes` over `tp` devices."""
    p = hw.allreduce
    nbytes = np.asarray(nbytes, dtype=float)
    lat = p.nccl_latency_s + (tp - 1) * p.nccl_latency_per_peer_s
    return lat + 2.0 * (tp - 1) / tp * nbytes / (hw.scaleup_bandwidth_bytes_s * p.nccl_bw_fraction)


def custom_allreduce_s(hw: HardwareProfile, nbytes, tp: int) -> np.ndarray:
    """One-shot custom all-reduce seconds (ring beyond `custom_max_bytes`)."""
    p = hw.allreduce
    nbytes = np.asarray(nbytes, dtype=float)
    one_shot = p.custom_latency_s + (tp - 1) * nbytes / (hw.scaleup_bandwidth_bytes_s * p.custom_bw_fraction)
    return np.where(nbytes <= p.custom_max_bytes, one_shot, nccl_allreduce_s(hw, nbytes, tp))


def allreduce_time_s(hw: HardwareProfile, nbytes, tp: int, algorithm: str | None = None) -> np.ndarray:
    """All-reduce seconds; 0 when tp == 1. `algorithm` overrides the profile's choice."""
    nbytes = np.asarray(nbytes, dtype=float)
    if tp == 1:
        return np.zeros_like(nbytes)
    if tp > hw.scaleup_domain and hw.kind == "gpu":
        raise SpecplanError(f"tp: {tp} exceeds the scale-up domain of {hw.id} ({hw.scaleup_domain} devices)")
    algo = algorithm or hw.allreduce.algorithm
    if algo == "custom":
        return custom_allreduce_s(hw, nbytes, tp)
    if algo == "nccl":
        return nccl_allreduce_s(hw, nbytes, tp)
    raise SpecplanError(f"allreduce algorithm: must be 'custom' or 'nccl', got '{algo}'")


def allreduce_cost(hw: HardwareProfile, nbytes, tp: int, count: float = 1.0, algorithm: str | None = None) -> KernelCost:
    """`count` all-reduces as a KernelCost (all time counted as latency/link time, no fixed launch term)."""
    t = allreduce_time_s(hw, nbytes, tp, algorithm)
    return roofline(np.zeros_like(t), t, 0.0).scaled(count)


def hop_latency_s(hw: HardwareProfile, stages: int) -> float:
    """Pipeline hop latency of a step through `stages` chips (LPU): (stages - 1) x hop."""
    return max(0, stages - 1) * hw.chip_hop_latency_s

"""GEMM roofline: FLOPs = 2MNK, bytes = MK*b_act + NK*b_w + MN*b_out, compute efficiency rising with size,
optionally a soft roofline corner and a per-K latency (KernelEfficiency)."""

from __future__ import annotations

import numpy as np

from specplan.costs.roofline import KernelCost, roofline
from specplan.core.dtypes import canonical_dtype, dtype_bytes, math_dtype
from specplan.profiles.hardware import HardwareProfile

LOW_PRECISION = {"fp8", "fp4", "int8", "int4"}
ACT_QUANT_READ_BYTES = 2.0  # the 16-bit activation an fp4 GEMM's quantization reads (issue 22)


def gemm_flops(m, n, k) -> np.ndarray:
    """FLOPs of y[M,N] = x[M,K] * W[N,K]^T."""
    return 2.0 * np.asarray(m, dtype=float) * n * k


def gemm_bytes(m, n, k, b_act: float, b_w: float, b_out: float) -> np.ndarray:
    """Bytes moved by one GEMM: activations in, weights, activations out."""
    m = np.asarray(m, dtype=float)
    return m * k * b_act + np.asarray(n, dtype=float) * k * b_w + m * n * b_out


def compute_dtype_for(hw: HardwareProfile, weight_dtype: str, compute_dtype: str) -> str:
    """Math dtype of a GEMM: the weight format if the device computes in it, else the activation dtype."""
    w = math_dtype(weight_dtype)
    return w if w in hw.peak_flops else canonical_dtype(compute_dtype)


def gemm_cost(
    hw: HardwareProfile,
    m,
    n,
    k,
    weight_dtype: str = "bf16",
    compute_dtype: str = "bf16",
    out_dtype: str = "bf16",
    count: float = 1.0,
    activation_quant: bool = False,
) -> KernelCost:
    """Roofline cost of `count` GEMMs of shape (M, N, K); M may be an array (tokens).

    The math runs in the weight format when the device supports it (FP8, NVFP4), else weights are
    up-converted in the kernel (weight-only quantization such as W4A16) and the math runs in `compute_dtype`.
    A GEMM computing in fp4 moves its activation quantization's bytes (the 16-bit input read, fp4 + scales
    written) with its own: NVFP4 needs per-16 scales computed from each GEMM's input (assumption: not fused away).
    With `activation_quant` a low-precision GEMM also pays the profile's separate activation-quantization cost,
    as a framework's stand-alone fp8 linear op does (validation); by default it is fused into the preceding
    norm / activation kernel, as serving engines do in a decode step.
    """
    c = compute_dtype_for(hw, weight_dtype, compute_dtype)
    peak = hw.peak(c)
    eff = hw.kernel_eff(c)
    flops = gemm_flops(m, n, k)
    nbytes = gemm_bytes(m, n, k, dtype_bytes(c), dtype_bytes(weight_dtype), dtype_bytes(out_dtype))
    if c == "fp4":  # 4-bit activations (the device's format): quantized per GEMM (16-bit read, fp4 + scales written)
        nbytes = nbytes + np.asarray(m, dtype=float) * k * (ACT_QUANT_READ_BYTES + dtype_bytes(hw.fp4_format))
    # eff_c = max * f / (f + half)  =>  t_c = (f + half) / (peak * max); zero-size GEMMs cost nothing.
    compute_s = np.where(flops > 0, (flops + eff.compute_half_flops) / (peak * eff.compute_max_fraction), 0.0)
    if eff.compute_half_n:  # an engine's kernels slower at few output columns (EngineProfile.gemm_compute_half_n)
        compute_s = compute_s * (1.0 + eff.compute_half_n / np.maximum(np.asarray(n, dtype=float), 1.0))
    if eff.large_tile_min_m:  # the engine's larger-tile kernel at large M and K (EngineProfile.gemm_large_tile)
        compute_s = compute_s / large_tile_factor(m, k, eff)
    memory_s = nbytes / (hw.mem_bandwidth_bytes_s * eff.mem_bw_fraction)
    compute_s, memory_s = soft_corner(compute_s, memory_s, eff.roofline_sharpness)
    k_lat = np.where(flops > 0, eff.k_latency_s * np.asarray(k, dtype=float), 0.0)
    quant = eff.quant_overhead_s if (activation_quant and c in LOW_PRECISION) else 0.0
    overhead = hw.kernel_overhead_s + quant + k_lat
    return roofline(compute_s, memory_s, overhead).scaled(count)


def large_tile_factor(m, k, eff) -> np.ndarray:
    """Compute-rate multiplier of each GEMM: eff.large_tile_compute_scale where M >= large_tile_min_m and
    K >= large_tile_min_k (the kernel the engine dispatches there), else 1."""
    big = (np.asarray(m, dtype=float) >= eff.large_tile_min_m) & (np.asarray(k, dtype=float) >= eff.large_tile_min_k)
    return np.where(big, eff.large_tile_compute_scale, 1.0)


def gemm_costs(hw: HardwareProfile, m, nk, weight_dtypes, compute_dtype: str = "bf16",
               count: float = 1.0) -> list[KernelCost]:
    """gemm_cost of each (N, K) in `nk` (weights in weight_dtypes[i]) at the same M (tokens, an array), in one
    vectorized gemm_cost per weight dtype over a leading axis of the shapes: each entry is what
    gemm_cost(hw, m, n_i, k_i, weight_dtypes[i], compute_dtype, count=count) returns, element by element (the
    same operations on the same numbers), for the GEMMs of a layer priced together."""
    m = np.asarray(m, dtype=float)
    lead = (1,) * m.ndim
    out: list = [None] * len(nk)
    for w in dict.fromkeys(weight_dtypes):
        idx = [i for i, wd in enumerate(weight_dtypes) if wd == w]
        n = np.array([float(nk[i][0]) for i in idx]).reshape((-1,) + lead)
        k = np.array([float(nk[i][1]) for i in idx]).reshape((-1,) + lead)
        c = gemm_cost(hw, m, n, k, w, compute_dtype, count=count)
        over = np.broadcast_to(c.overhead_s, np.shape(c.compute_s))
        for j, i in enumerate(idx):
            out[i] = KernelCost(c.compute_s[j], c.memory_s[j], over[j])
    return out


def soft_corner(compute_s, memory_s, p: float):
    """(compute, memory) with the binding one raised to (compute^p + memory^p)^(1/p): near the ridge the two
    overlap imperfectly; far from it the smaller term vanishes. p = 0 keeps the hard max (terms unchanged)."""
    if not p:
        return compute_s, memory_s
    c, m = np.broadcast_arrays(np.asarray(compute_s, dtype=float), np.asarray(memory_s, dtype=float))
    hi = np.maximum(c, m)
    lo = np.minimum(c, m)
    ratio = lo / np.where(hi > 0, hi, 1.0)  # the binding term's own ratio is 1: hi * (1 + ratio^p)^(1/p)
    busy = hi * (1.0 + ratio ** p) ** (1.0 / p)
    return np.where(c > m, busy, c), np.where(c > m, m, busy)


def gemm_time_s(hw: HardwareProfile, m, n, k, weight_dtype="bf16", compute_dtype="bf16", out_dtype="bf16"):
    """Seconds of one GEMM (array over M, N, K)."""
    return gemm_cost(hw, m, n, k, weight_dtype, compute_dtype, out_dtype).time_s


def elementwise_cost(hw: HardwareProfile, nbytes, count: float = 1.0) -> KernelCost:
    """A memory-speed kernel (norm, activation, residual, RoPE) moving `nbytes`."""
    eff = hw.kernel_eff("default")
    memory_s = np.asarray(nbytes, dtype=float) / (hw.mem_bandwidth_bytes_s * eff.mem_bw_fraction)
    return roofline(np.zeros_like(memory_s), memory_s, hw.kernel_overhead_s).scaled(count)

"""MoE expert routing: experts touched by N tokens and the per-expert GEMM-M.

- `random` routing: N tokens x top-k choices touch E * (1 - (1 - k/E)^N) experts in expectation.
- `balanced` routing (how the measured MoE table was collected): min(E, N * k).
Each touched expert's weights are read once; per-expert GEMM-M = N * k / touched.
"""

from __future__ import annotations

import numpy as np

from specplan.costs.gemm import compute_dtype_for, gemm_flops, soft_corner
from specplan.costs.roofline import KernelCost, roofline
from specplan.dtypes import dtype_bytes
from specplan.errors import SpecplanError
from specplan.profiles.hardware import HardwareProfile


def touched_experts(tokens, num_experts: int, top_k: int, routing: str = "random") -> np.ndarray:
    """Expected number of distinct experts hit by `tokens` tokens."""
    n = np.asarray(tokens, dtype=float)
    if routing == "random":
        return num_experts * (1.0 - (1.0 - top_k / num_experts) ** n)
    if routing == "balanced":
        return np.minimum(float(num_experts), n * top_k)
    raise SpecplanError(f"moe routing: must be 'random' or 'balanced', got '{routing}'")


def per_expert_m(tokens, num_experts: int, top_k: int, routing: str = "random") -> np.ndarray:
    """Per-expert GEMM-M = tokens * top_k / touched experts."""
    t = touched_experts(tokens, num_experts, top_k, routing)
    return np.asarray(tokens, dtype=float) * top_k / np.maximum(t, 1e-30)


def moe_experts_cost(
    hw: HardwareProfile,
    tokens,
    hidden: int,
    expert_ffn: int,
    num_experts: int,
    top_k: int,
    weight_dtype: str = "bf16",
    compute_dtype: str = "bf16",
    routing: str = "random",
    tp: int = 1,
    ep: int = 1,
    gated: bool = True,
) -> KernelCost:
    """Fused grouped-GEMM MoE layer (gate+up and down of every touched expert; TP splits each expert's FFN).

    Two kernels (gate_up, down) plus routing/permutation at memory speed; compute efficiency is that of a
    per-expert GEMM of M = tokens * k / touched rows.
    """
    c = compute_dtype_for(hw, weight_dtype, compute_dtype)
    eff = hw.kernel_eff(c)
    f = expert_ffn / tp
    mats = 3.0 if gated else 2.0  # gate, up, down (or up, down)
    touched = touched_experts(tokens, num_experts, top_k, routing) / ep
    m_e = per_expert_m(tokens, num_experts, top_k, routing)
    n_rows = np.asarray(tokens, dtype=float) * top_k / ep
    w_bytes = touched * mats * hidden * f * dtype_bytes(weight_dtype)
    a_bytes = n_rows * (hidden * dtype_bytes(c) * 2 + mats * f * 2.0) + n_rows * hidden * 2.0
    flops = gemm_flops(n_rows, mats * f, hidden)
    # Grouped GEMMs: the experts run side by side in two kernels (gate_up, down), so the small-GEMM term
    # (compute_half_flops, see costs/gemm.py) is paid once per kernel, not once per expert.
    compute_s = np.where(flops > 0, (flops + 2.0 * eff.compute_half_flops) / (hw.peak(c) * eff.compute_max_fraction), 0.0)
    memory_s = (w_bytes + a_bytes) / (hw.mem_bandwidth_bytes_s * eff.mem_bw_fraction)
    compute_s, memory_s = soft_corner(compute_s, memory_s, eff.roofline_sharpness)
    # routing/permute, gate_up, down; each GEMM kernel's serial K loop (K = hidden, then f)
    overhead = 3.0 * hw.kernel_overhead_s + np.where(flops > 0, eff.k_latency_s * (hidden + f), 0.0)
    return roofline(compute_s, memory_s, overhead)

"""Decode/verify attention roofline: G_dev * q_len query rows per KV head, processed in 128-row tiles.

Model assumption (see docs/cost_model.md): the query block of one KV head has G_dev * q_len rows; rows are
processed in tiles of `tile_rows` (128) and a partly filled tile costs a full one.
- `shared` (default): one pass over K and V serves all row tiles:
      time = max(KV read time, tiles * one tile's compute time) + overhead
- `reread`: each row tile streams K and V again, a fraction `l2_hit_fraction` of the re-reads served by L2.
Either way the runtime is flat while G_dev * q_len <= 128 and steps up at multiples of 128 once compute binds.

Per-CTA work: the kernel runs one CTA per (sequence, KV head, row tile); each has a fixed cost
`attention.cta_overhead_s` (load Q, the first KV tile, write O) whatever kv_len is, and `sm_count` run at a
time, so the memory term gets ceil(CTAs / sm_count) x cta_overhead_s. It sets the time of short-KV,
large-batch decode (many CTAs, few bytes each) and gives few-CTA batch-1 kernels a one-wave floor.
It does not depend on q_len within a tile, so the 128-row rule above is unchanged.

Kernel family (specplan.profiles.engine.KernelFamily, passed down by the caller; None = the hardware
profile's attention block, i.e. the behaviour above): its `tile_rows` and efficiency overrides replace the
hardware's; `packing: per_head` tiles each query head's q_len rows on its own (G_dev * ceil(q_len / tile_rows)
tiles per KV head) and re-reads K/V per tile (the `reread` style), instead of packing G_dev * q_len rows.
"""

from __future__ import annotations

import numpy as np

from specplan.core.records import record
from specplan.costs.roofline import KernelCost, roofline
from specplan.core.dtypes import canonical_dtype, dtype_bytes
from specplan.profiles.hardware import HardwareProfile


# MLA decode runs the latent attention as a split-KV kernel plus the combine kernel that merges the splits
# (FlashMLA / TRT-LLM's MLA generation kernels); its RoPE + KV-cache append kernel is costed by the caller
# (step.py adds it as an element-wise kernel), and the absorb BMMs are GEMMs (shapes.mixer_gemms).
MLA_ATTENTION_KERNELS = 2


def attention_flops(batch, q_len, kv_len, n_q_heads, head_dim_qk, head_dim_v=None) -> np.ndarray:
    """Useful FLOPs: 2*B*H*q*kv*(d_qk + d_v) (= 4*B*H*q*kv*d when d_qk = d_v)."""
    dv = head_dim_qk if head_dim_v is None else head_dim_v
    return 2.0 * np.asarray(batch, dtype=float) * n_q_heads * q_len * kv_len * (head_dim_qk + dv)


def row_tiles(g_dev, q_len, tile_rows: int = 128) -> np.ndarray:
    """Number of row tiles per KV head: ceil(G_dev * q_len / tile_rows)."""
    return np.ceil(np.asarray(g_dev, dtype=float) * q_len / tile_rows)


def attention_math_dtype(hw: HardwareProfile, kv_dtype: str, compute_dtype: str) -> str:
    """Math dtype of the attention kernel: the KV format if the device computes in it (FP8 KV), else compute."""
    kv = canonical_dtype(kv_dtype)
    return kv if kv in hw.peak_flops else canonical_dtype(compute_dtype)


@record
class AttentionHeads:
    """The heads one attention kernel runs on one device: query heads, KV heads, the K head width (MLA: the latent
    + rope width), the V width (None: as K's), and whether the KV is MLA's latent (one shared KV head, K and V views
    of one cached vector). Counts may be arrays (a kernel table's rows)."""

    n_q: object
    n_kv: object
    head_dim: object
    head_dim_v: object = None
    latent: bool = False


def attention_cost(
    hw: HardwareProfile,
    batch,
    q_len,
    kv_len,
    heads: AttentionHeads,
    kv_dtype: str = "bf16",
    compute_dtype: str = "bf16",
    style: str = "shared",
    family=None,
) -> KernelCost:
    """One attention kernel over `batch` sequences with `q_len` new tokens each attending to `kv_len` keys.

    `heads` are per device. For MLA set `heads.latent`: all query heads share one latent KV head (n_kv = 1), K is
    the `head_dim`-wide latent (+rope) and V its first `head_dim_v` columns, read once, by MLA_ATTENTION_KERNELS
    launches (split-KV attention + combine). `family` is a KernelFamily whose tile height, packing and
    efficiencies override the hardware's (None = the hardware's).
    """
    n_q_heads, n_kv_heads, head_dim = heads.n_q, heads.n_kv, heads.head_dim
    head_dim_v, latent = heads.head_dim_v, heads.latent
    if style not in ("shared", "reread"):
        from specplan.core.errors import SpecplanError

        raise SpecplanError(f"attention style: must be 'shared' or 'reread', got '{style}'")
    att = family_efficiency(hw, family)
    dv = head_dim if head_dim_v is None else head_dim_v
    b = np.asarray(batch, dtype=float)
    q = np.asarray(q_len, dtype=float)
    kv = np.asarray(kv_len, dtype=float)
    g = n_q_heads / n_kv_heads
    if family is not None and family.packing == "per_head":
        tiles = g * row_tiles(1, q, att.tile_rows)
        style = "reread"
    else:
        tiles = row_tiles(g, q, att.tile_rows)
    b_kv = dtype_bytes(kv_dtype)
    kv_width = head_dim if latent else head_dim + dv  # latent: K and V are views of one cached vector
    kv_bytes = b * n_kv_heads * kv * kv_width * b_kv
    qo_bytes = b * n_q_heads * q * (head_dim + dv) * 2.0  # Q in, O out (16-bit)
    if style == "reread":
        kv_bytes = kv_bytes * (1.0 + (tiles - 1.0) * (1.0 - att.l2_hit_fraction))
    math = attention_math_dtype(hw, kv_dtype, compute_dtype)
    tile_flops = 2.0 * att.tile_rows * kv * (head_dim + dv)
    padded_flops = b * n_kv_heads * tiles * tile_flops
    compute_s = padded_flops / (hw.peak(math) * att.compute_fraction)
    memory_s = (kv_bytes + qo_bytes) / (hw.mem_bandwidth_bytes_s * att.bw_fraction(kv_dtype))
    launches = MLA_ATTENTION_KERNELS if latent else 1
    return roofline(compute_s, memory_s + cta_time_s(hw, b * n_kv_heads * tiles, att.cta_overhead_s),
                    launches * hw.kernel_overhead_s)


def family_efficiency(hw: HardwareProfile, family=None):
    """The hardware's attention efficiencies with a kernel family's overrides applied (None: unchanged)."""
    att = hw.attention
    if family is None:
        return att
    upd = {k: getattr(family, k) for k in ("tile_rows", "mem_bw_fraction", "compute_fraction", "cta_overhead_s",
                                          "l2_hit_fraction") if getattr(family, k) is not None}
    if family.kv_mem_bw_fraction:
        upd = {**upd, "kv_mem_bw_fraction": {**att.kv_mem_bw_fraction, **family.kv_mem_bw_fraction}}
    elif "mem_bw_fraction" in upd:
        upd = {**upd, "kv_mem_bw_fraction": {}}
    return att.model_copy(update=upd) if upd else att


def cta_time_s(hw: HardwareProfile, ctas, cta_overhead_s: float | None = None) -> np.ndarray:
    """Fixed per-CTA work of an attention kernel: ceil(CTAs / sm_count) waves x cta_overhead_s (0 if unknown)."""
    ctas = np.asarray(ctas, dtype=float)
    per_cta = hw.attention.cta_overhead_s if cta_overhead_s is None else cta_overhead_s
    if not hw.sm_count or not per_cta:
        return np.zeros_like(ctas)
    return np.ceil(ctas / hw.sm_count) * per_cta


def attention_time_s(hw: HardwareProfile, batch, q_len, kv_len, n_q_heads, n_kv_heads, head_dim, **kw):
    """Seconds of one decode/verify attention kernel (arrays broadcast)."""
    heads = AttentionHeads(n_q_heads, n_kv_heads, head_dim, kw.pop("head_dim_v", None), kw.pop("latent", False))
    return attention_cost(hw, batch, q_len, kv_len, heads, **kw).time_s


def recurrent_state_cost(
    hw: HardwareProfile, batch, q_len, state_bytes_per_seq: float, flops_per_token: float, checkpoint: bool = True
) -> KernelCost:
    """Linear-attention / Mamba decode kernel: read the state once, update it q_len times in registers, write it.

    With `checkpoint` (speculative verification, q_len > 1) the state after every position is written so
    that a rejected suffix can be rolled back: write traffic = q_len x state (a documented assumption).
    """
    b = np.asarray(batch, dtype=float)
    q = np.asarray(q_len, dtype=float)
    writes = np.where(checkpoint & (q > 1), q, 1.0)
    nbytes = b * state_bytes_per_seq * (1.0 + writes)
    compute_s = b * q * flops_per_token / (hw.peak("fp32" if "fp32" in hw.peak_flops else next(iter(hw.peak_flops))) * 0.5)
    memory_s = nbytes / (hw.mem_bandwidth_bytes_s * hw.attention.mem_bw_fraction)
    return roofline(compute_s, memory_s, hw.kernel_overhead_s)

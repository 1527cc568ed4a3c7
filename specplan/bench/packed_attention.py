"""Decode attention that packs the G * q_len query rows of one KV head into row tiles.

This is the kernel shape that the "128 / G - 1" rule of speculative decoding is about:
with grouped-query attention (G = n_q_heads / n_kv_heads) and q_len new tokens per sequence
(the verification step), the G * q_len query rows that share one KV head are packed into
row tiles of ``BLOCK_M`` (128) rows.  Each tile streams the whole KV of its head once, so
while G * q_len <= 128 the KV traffic is that of a single decode token, and it steps up when
the rows spill into a second tile.

Two implementations of the same function:

* :func:`torch_packed_attention` -- pure torch (reshape, one matmul with K^T, mask, softmax,
  matmul with V).  Runs anywhere, used on CPU and as the fallback when Triton is missing.
* :class:`TritonPackedAttention` -- a small Triton kernel.  Grid (row_tile, batch * kv_head,
  kv_split); rows = G * q_len packed, row r is query head ``kv_head * G + r // q_len`` at
  position ``r % q_len``; loop over KV blocks with an online softmax; causal mask by position.
  When batch * n_kv_heads is too small to fill the GPU the KV range is split
  (flash-decoding) and a second small kernel combines the partial results.  The number of
  splits depends on batch * n_kv_heads and kv_len only, not on the number of row tiles, so a
  second row tile doubles the number of programs (and the work), which is the effect measured.

Layouts: q and the output are ``[batch, n_q_heads, q_len, head_dim]``, k and v are
``[batch, n_kv_heads, kv_len, head_dim]`` (any strides with a contiguous last dim for the
Triton kernel).  Query head h uses KV head ``h // G`` (the grouping of
``scaled_dot_product_attention(..., enable_gqa=True)``).

Mask (aligned to the END of the KV): query i of q_len may attend KV positions
``j <= kv_len - q_len + i`` -- each new token sees the whole cache and the earlier new tokens.

This module imports torch lazily and Triton optionally; it does not need pydantic.
"""

from __future__ import annotations

import math

try:  # Triton is optional: absent on CPU-only installs.
    import triton
    import triton.language as tl

    HAVE_TRITON = True
except Exception:  # pragma: no cover - depends on the environment
    triton = None
    tl = None
    HAVE_TRITON = False

BLOCK_M_DEFAULT = 128

__all__ = [
    "BLOCK_M_DEFAULT",
    "HAVE_TRITON",
    "TritonPackedAttention",
    "end_aligned_causal_mask",
    "packed_causal_mask",
    "reference_attention",
    "torch_packed_attention",
    "triton_packed_attention",
]


# --------------------------------------------------------------------------------------------
# pure torch
# --------------------------------------------------------------------------------------------
def end_aligned_causal_mask(q_len: int, kv_len: int, device=None):
    """Boolean mask [q_len, kv_len], True where query i may attend key j (j <= kv_len - q_len + i)."""
    import torch

    i = torch.arange(q_len, device=device).unsqueeze(1)
    j = torch.arange(kv_len, device=device).unsqueeze(0)
    return j <= (kv_len - q_len + i)


def packed_causal_mask(group: int, q_len: int, kv_len: int, device=None):
    """Boolean mask [group * q_len, kv_len] for packed rows (row r is position r % q_len)."""
    return end_aligned_causal_mask(q_len, kv_len, device).repeat(group, 1)


def torch_packed_attention(q, k, v, scale: float | None = None, mask=None):
    """Packed decode attention in plain torch.

    q: [B, Hq, L, d]; k, v: [B, Hkv, S, d]; returns [B, Hq, L, d] in q's dtype.
    ``mask`` may be a precomputed :func:`packed_causal_mask` (bool [G*L, S]) to keep its
    construction out of a timed region.
    """
    import torch

    b, hq, q_len, d = q.shape
    hkv, kv_len = k.shape[1], k.shape[2]
    if hq % hkv:
        raise ValueError(f"n_q_heads {hq} is not a multiple of n_kv_heads {hkv}")
    if kv_len < q_len:
        raise ValueError(f"kv_len {kv_len} < q_len {q_len}")
    group = hq // hkv
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    rows = group * q_len
    qp = q.reshape(b, hkv, rows, d)  # heads kv_head*G .. kv_head*G+G-1 are contiguous
    if mask is None:
        mask = packed_causal_mask(group, q_len, kv_len, q.device)
    scores = torch.matmul(qp, k.transpose(-1, -2)) * scale  # [B, Hkv, R, S]
    scores = scores.masked_fill(~mask, float("-inf"))
    sm_dtype = torch.float32 if scores.dtype in (torch.bfloat16, torch.float16) else scores.dtype
    probs = torch.softmax(scores, dim=-1, dtype=sm_dtype).to(v.dtype)
    out = torch.matmul(probs, v)  # [B, Hkv, R, d]
    return out.reshape(b, hq, q_len, d)


def reference_attention(q, k, v, scale: float | None = None):
    """Unpacked float64 reference: expand KV per query head, explicit end-aligned mask."""
    import torch

    b, hq, q_len, d = q.shape
    hkv, kv_len = k.shape[1], k.shape[2]
    group = hq // hkv
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    qd, kd, vd = (t.double() for t in (q, k, v))
    kd = kd.repeat_interleave(group, dim=1)
    vd = vd.repeat_interleave(group, dim=1)
    scores = torch.matmul(qd, kd.transpose(-1, -2)) * scale
    mask = end_aligned_causal_mask(q_len, kv_len, q.device)
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), vd)


# --------------------------------------------------------------------------------------------
# Triton
# --------------------------------------------------------------------------------------------
_DNS = [
    "stride_qb", "stride_qh", "stride_ql",
    "stride_kb", "stride_kh",
    "stride_vb", "stride_vh",
    "stride_ob", "stride_oh", "stride_ol",
    "H_KV", "G", "L", "S", "R", "R_PAD", "chunk", "n_splits",
]

if HAVE_TRITON:

    @triton.jit(do_not_specialize=_DNS)
    def _packed_attn_fwd(
        Q, K, V, O, OP, MP, LP, qk_scale,
        stride_qb, stride_qh, stride_ql,
        stride_kb, stride_kh, stride_ks,
        stride_vb, stride_vh, stride_vs,
        stride_ob, stride_oh, stride_ol,
        H_KV, G, L, S, R, R_PAD, chunk, n_splits,
        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
        SPLIT: tl.constexpr,
    ):
        tile = tl.program_id(0)
        bh = tl.program_id(1)
        split = tl.program_id(2)
        b = (bh // H_KV).to(tl.int64)
        kvh = bh % H_KV

        rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        row_ok = rows < R
        g = rows // L
        pos = rows - g * L
        qh = kvh * G + g
        offs_d = tl.arange(0, HEAD_DIM)

        q_ptrs = (Q + b * stride_qb + qh.to(tl.int64)[:, None] * stride_qh
                  + pos[:, None] * stride_ql + offs_d[None, :])
        q = tl.load(q_ptrs, mask=row_ok[:, None], other=0.0)
        limit = S - L + pos  # last KV position each row may see

        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)

        k_base = K + b * stride_kb + kvh.to(tl.int64) * stride_kh
        v_base = V + b * stride_vb + kvh.to(tl.int64) * stride_vh
        start = split * chunk
        end = tl.minimum(start + chunk, S)
        for n0 in range(start, end, BLOCK_N):
            offs_n = n0 + tl.arange(0, BLOCK_N)
            n_ok = offs_n < end
            k = tl.load(k_base + offs_n[None, :] * stride_ks + offs_d[:, None],
                        mask=n_ok[None, :], other=0.0)
            qk = tl.dot(q, k) * qk_scale
            ok = n_ok[None, :] & (offs_n[None, :] <= limit[:, None])
            qk = tl.where(ok, qk, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(qk, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp2(m_i - m_safe)
            p = tl.exp2(qk - m_safe[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(v_base + offs_n[:, None] * stride_vs + offs_d[None, :],
                        mask=n_ok[:, None], other=0.0)
            acc = acc * alpha[:, None]
            acc = tl.dot(p.to(v.dtype), v, acc)
            m_i = m_new

        if SPLIT:
            base = (bh * n_splits + split).to(tl.int64) * R_PAD + rows
            tl.store(MP + base, m_i)
            tl.store(LP + base, l_i)
            tl.store(OP + base[:, None] * HEAD_DIM + offs_d[None, :], acc)
        else:
            out = acc / l_i[:, None]
            o_ptrs = (O + b * stride_ob + qh.to(tl.int64)[:, None] * stride_oh
                      + pos[:, None] * stride_ol + offs_d[None, :])
            tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=row_ok[:, None])

    @triton.jit(do_not_specialize=_DNS)
    def _packed_attn_combine(
        O, OP, MP, LP,
        stride_ob, stride_oh, stride_ol,
        H_KV, G, L, R, R_PAD, n_splits,
        BLOCK_M: tl.constexpr, HEAD_DIM: tl.constexpr,
    ):
        tile = tl.program_id(0)
        bh = tl.program_id(1)
        b = (bh // H_KV).to(tl.int64)
        kvh = bh % H_KV
        rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
        row_ok = rows < R
        g = rows // L
        pos = rows - g * L
        qh = kvh * G + g
        offs_d = tl.arange(0, HEAD_DIM)

        m = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
        for s in range(0, n_splits):
            base = (bh * n_splits + s).to(tl.int64) * R_PAD + rows
            m_s = tl.load(MP + base)
            l_s = tl.load(LP + base)
            a_s = tl.load(OP + base[:, None] * HEAD_DIM + offs_d[None, :])
            m_new = tl.maximum(m, m_s)
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp2(m - m_safe)
            beta = tl.exp2(m_s - m_safe)
            acc = acc * alpha[:, None] + a_s * beta[:, None]
            l = l * alpha + l_s * beta
            m = m_new
        out = acc / l[:, None]
        o_ptrs = (O + b * stride_ob + qh.to(tl.int64)[:, None] * stride_oh
                  + pos[:, None] * stride_ol + offs_d[None, :])
        tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=row_ok[:, None])


def _launch_config(head_dim: int) -> tuple[int, int, int]:
    """(BLOCK_N, num_warps, num_stages) for a head_dim with BLOCK_M = 128."""
    if head_dim <= 64:
        return 64, 4, 3
    if head_dim <= 128:
        return 64, 8, 3
    return 32, 8, 2


def _num_sms(device) -> int:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 1


def choose_splits(batch: int, n_kv_heads: int, kv_len: int, n_sms: int,
                  block_n: int = 64, min_chunk: int = 256) -> tuple[int, int]:
    """Number of KV splits and the chunk length (a multiple of block_n).

    Aims at about two programs per SM for ONE row tile; independent of the number of row
    tiles, so that a second row tile doubles the work rather than being hidden.
    """
    base = max(1, batch * n_kv_heads)
    want = max(1, -(-2 * n_sms // base))
    max_splits = max(1, kv_len // min_chunk)
    splits = min(want, max_splits)
    chunk = -(-kv_len // splits)
    chunk = -(-chunk // block_n) * block_n
    splits = -(-kv_len // chunk)
    return splits, chunk


class TritonPackedAttention:
    """Prepared launch of the packed Triton kernel for fixed tensors (no allocation per call).

    ``fn = TritonPackedAttention(q, k, v); out = fn()`` -- the output buffer and the split
    buffers are allocated once, so the call can be timed or captured in a CUDA graph.
    """

    def __init__(self, q, k, v, scale: float | None = None, block_m: int = BLOCK_M_DEFAULT,
                 num_splits: int | None = None, out=None, launch: tuple[int, int, int] | None = None):
        import torch

        if not HAVE_TRITON:
            raise RuntimeError("Triton is not importable; use torch_packed_attention")
        b, hq, q_len, d = q.shape
        hkv, kv_len = k.shape[1], k.shape[2]
        if hq % hkv:
            raise ValueError(f"n_q_heads {hq} is not a multiple of n_kv_heads {hkv}")
        if kv_len < q_len:
            raise ValueError(f"kv_len {kv_len} < q_len {q_len}")
        if d not in (16, 32, 64, 128, 256):
            raise ValueError(f"head_dim {d} not supported by the Triton kernel")
        for t, name in ((q, "q"), (k, "k"), (v, "v")):
            if t.stride(-1) != 1:
                raise ValueError(f"{name} must have a contiguous last dimension")
        self.q, self.k, self.v = q, k, v
        self.group = hq // hkv
        self.rows = self.group * q_len
        self.block_m = block_m
        self.n_tiles = -(-self.rows // block_m)
        self.r_pad = self.n_tiles * block_m
        self.block_n, self.num_warps, self.num_stages = launch or _launch_config(d)
        if num_splits is None:
            self.n_splits, self.chunk = choose_splits(b, hkv, kv_len, _num_sms(q.device), self.block_n)
        else:
            self.n_splits = max(1, int(num_splits))
            chunk = -(-kv_len // self.n_splits)
            self.chunk = -(-chunk // self.block_n) * self.block_n
            self.n_splits = -(-kv_len // self.chunk)
        scale = (1.0 / math.sqrt(d)) if scale is None else scale
        self.qk_scale = scale * 1.4426950408889634  # log2(e): the kernel uses exp2
        self.out = torch.empty_like(q) if out is None else out
        if self.n_splits > 1:
            n = b * hkv * self.n_splits * self.r_pad
            self.op = torch.empty((n, d), device=q.device, dtype=torch.float32)
            self.mp = torch.empty((n,), device=q.device, dtype=torch.float32)
            self.lp = torch.empty((n,), device=q.device, dtype=torch.float32)
        else:
            self.op = self.mp = self.lp = self.out  # unused placeholders
        self.b, self.hkv, self.q_len, self.kv_len, self.d = b, hkv, q_len, kv_len, d

    def __call__(self):
        q, k, v, o = self.q, self.k, self.v, self.out
        split = self.n_splits > 1
        grid = (self.n_tiles, self.b * self.hkv, self.n_splits)
        _packed_attn_fwd[grid](
            q, k, v, o, self.op, self.mp, self.lp, self.qk_scale,
            q.stride(0), q.stride(1), q.stride(2),
            k.stride(0), k.stride(1), k.stride(2),
            v.stride(0), v.stride(1), v.stride(2),
            o.stride(0), o.stride(1), o.stride(2),
            self.hkv, self.group, self.q_len, self.kv_len, self.rows, self.r_pad,
            self.chunk, self.n_splits,
            BLOCK_M=self.block_m, BLOCK_N=self.block_n, HEAD_DIM=self.d, SPLIT=split,
            num_warps=self.num_warps, num_stages=self.num_stages,
        )
        if split:
            _packed_attn_combine[(self.n_tiles, self.b * self.hkv)](
                o, self.op, self.mp, self.lp,
                o.stride(0), o.stride(1), o.stride(2),
                self.hkv, self.group, self.q_len, self.rows, self.r_pad, self.n_splits,
                BLOCK_M=self.block_m, HEAD_DIM=self.d,
                num_warps=self.num_warps,
            )
        return o


def triton_packed_attention(q, k, v, scale: float | None = None, block_m: int = BLOCK_M_DEFAULT,
                            num_splits: int | None = None):
    """One-shot call of the packed Triton kernel; q [B,Hq,L,d], k/v [B,Hkv,S,d] -> [B,Hq,L,d]."""
    return TritonPackedAttention(q, k, v, scale=scale, block_m=block_m, num_splits=num_splits)()

"""MoE expert routing: experts touched by N tokens, the per-expert GEMM-M, and expert parallelism (EP).

- `random` routing: N tokens x top-k choices touch E * (1 - (1 - k/E)^N) experts in expectation.
- `balanced` routing (how the measured MoE table was collected): min(E, N * k).
Each touched expert's weights are read once; per-expert GEMM-M = N * k / touched.

Expert parallelism: experts are placed contiguously, E / EP per rank (group-limited routing: whole groups per
rank when EP <= n_group). Under `random` routing each token picks top-k experts uniformly (within topk_group
uniformly chosen groups when the model has group-limited routing). The step waits for the slowest rank, so the
per-rank touched experts and rows are the EXPECTED MAXIMUM over the EP ranks: mean + sd * e(EP), with the exact
mean and variance of one rank (closed forms over expert pairs) and e(n) the expected maximum of n standard normals
(Blom's approximation), capped at the rank's experts / rows. `balanced` routing has no imbalance.

Expert-load imbalance input (issue 22), the `routing` spelling: `random` (default: EPLB off, i.i.d. uniform routing,
the slowest rank's expected maximum above), `eplb` (EPLB on: redundant experts level the ranks, the slowest rank
computes the mean N*k/EP rows, its touched experts as under random routing), `skew:F` (measured or assumed skew:
the slowest rank computes F x the mean rows, F >= 1, and receives F x the mean all-to-all copies).

Distinct destinations under DeepSeek's group selection (`grouped_destinations`): groups are ranked by the sum of
their top-2 expert scores and the top-k experts taken inside the topk_group best groups; with i.i.d. scores each
chosen group tends to keep its top-2, so the k experts spread over more groups (and ranks) than k uniform draws
from the chosen groups: DeepSeek-V3 at EP 8 (one group per rank) 3.95 ranks against 3.63 (+9 %).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from functools import lru_cache
from statistics import NormalDist

import numpy as np

from specplan.core.records import record
from specplan.costs.gemm import compute_dtype_for, gemm_flops, soft_corner
from specplan.costs.roofline import KernelCost, roofline
from specplan.core.dtypes import dtype_bytes
from specplan.core.errors import SpecplanError
from specplan.profiles.hardware import MOE_BLOCK_M_RULES, HardwareProfile  # noqa: F401 (re-exported)


# Sequence locality of expert choices in a verify step (issue 19): the q = 1 + D tokens one sequence verifies are
# consecutive positions of one text, and consecutive tokens pick the same experts far more often than independent
# tokens do (Mixtral of Experts, arXiv 2401.04088, Sec. 5 "Routing analysis": repeated consecutive assignments well
# above the random rate). A sequence's q tokens touch experts like 1 + (q - 1)(1 - VERIFY_EXPERT_REUSE)
# independent tokens (their rows and FLOPs stay q). The value is fitted by `specplan validate-speculation` with whole
# setups left out (docs/validation/speculation_load.md); 0 = independent (uniformly random) tokens.
VERIFY_EXPERT_REUSE = 0.0
# Kernels of one MoE layer besides the router GEMM where the serving engine's MoE path is not counted
# (EngineProfile.moe_kernels): routing / permutation, gate_up and down. An assumption and a floor: the engines'
# counted paths launch 7-13 (engine_profiles/*.yaml moe_kernels), and the measured fused-MoE ops of
# reference/measured/moe_h100_a100.csv.gz at <= 8 tokens take a median 9-18 us more than this count prices
# (TensorRT-LLM's gated cutlass 9-14, vLLM's Triton 16-18).
MOE_KERNELS = 3


# Row-tile rules of engines' MoE kernels that pick their tile from the batch (EngineProfile.moe_block_m,
# profiles/hardware.py MOE_BLOCK_M_RULES): "triton_kernels": triton_kernels_block_m.


def triton_kernels_block_m(rows, num_experts: int) -> np.ndarray:
    """Rows per tile (block_m) triton_kernels' matmul_ogs picks on NVIDIA GPUs for a ragged (routed) MoE GEMM of
    `rows` token-expert rows over `num_experts` experts (triton-lang/triton python/triton_kernels/triton_kernels/
    matmul_ogs_details/opt_flags.py make_default_opt_flags_nvidia, the version that reads routing_data.expt_hist,
    the RoutingData SGLang 0.5.12 builds: srt/layers/moe/topk.py, 'triton_kernels 3.6.0'): tokens per expert
    t = max(1, rows // num_experts); t <= 64 (ragged, 'likely memory bound'): max(16, min(next_pow2(2 t), 64)),
    else max(16, min(next_pow2(t), 128))."""
    t = np.maximum(1.0, np.floor(np.asarray(rows, dtype=float) / float(num_experts)))
    ragged = np.clip(2.0 ** np.ceil(np.log2(2.0 * t)), 16.0, 64.0)
    dense = np.clip(2.0 ** np.ceil(np.log2(t)), 16.0, 128.0)
    return np.where(t <= 64.0, ragged, dense)


@contextmanager
def verify_expert_reuse(value: float):
    """Price verify steps with another VERIFY_EXPERT_REUSE inside the block (used by the validation's fit)."""
    global VERIFY_EXPERT_REUSE
    old, VERIFY_EXPERT_REUSE = VERIFY_EXPERT_REUSE, float(value)
    try:
        yield
    finally:
        VERIFY_EXPERT_REUSE = old


def distinct_tokens(batch, q_len):
    """Tokens that choose experts independently in a step of `batch` sequences x `q_len` tokens (VERIFY_EXPERT_REUSE)."""
    q = np.asarray(q_len, dtype=float)
    return np.asarray(batch, dtype=float) * (1.0 + np.maximum(q - 1.0, 0.0) * (1.0 - VERIFY_EXPERT_REUSE))


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


@record
class RankRouting:
    """One token's routing seen from one EP rank (exact, under uniformly random routing)."""

    experts: int  # experts on the rank (E / EP)
    miss: float  # P(the token picks none of the rank's experts)
    mean_rows: float  # expected experts the token picks on the rank (k / EP)
    var_rows: float  # variance of that count
    pair_miss_same: float  # P(the token picks neither of two given experts of one group)
    pair_miss_diff: float  # ... of two experts in different groups
    same_pairs: float  # ordered expert pairs on the rank within one group
    diff_pairs: float  # ordered expert pairs on the rank in different groups
    skew_rows: float = 0.0  # skewness of that count (one token)


def _hyper_pmf(pool: int, marked: int, k: int) -> np.ndarray:
    """P(x of the k draws without replacement from `pool` are among `marked` items), x = 0 ... k."""
    x = np.arange(k + 1)
    c = [math.comb(marked, int(i)) * math.comb(pool - marked, k - int(i)) for i in x]
    return np.asarray(c, dtype=float) / math.comb(pool, k)


@lru_cache(maxsize=256)
def rank_routing(num_experts: int, top_k: int, ep: int, n_group: int = 1, topk_group: int = 1) -> RankRouting:
    """Exact routing statistics of one EP rank for one token (group-limited when topk_group < n_group and groups
    sit whole on ranks or ranks inside groups; otherwise unrestricted top-k)."""
    e, k = num_experts, top_k
    n_r = e // ep
    grouped = n_group > 1 and topk_group < n_group and (n_group % ep == 0 or ep % n_group == 0)
    if not grouped:
        pm2 = (e - k) * (e - k - 1) / (e * (e - 1)) if e > 1 else 0.0
        pmf, same, diff, sp, dp = _hyper_pmf(e, n_r, k), pm2, pm2, n_r * (n_r - 1), 0.0
    else:
        ng, tg = n_group, topk_group
        size = e // ng  # experts per group
        pool = tg * size  # experts a token can pick from
        a = tg / ng  # P(a given group is chosen)
        both = tg * (tg - 1) / (ng * (ng - 1))  # P(two given groups are both chosen)
        miss1 = (pool - k) / pool  # P(a given expert of a chosen group is not picked)
        miss2 = (pool - k) * (pool - k - 1) / (pool * (pool - 1))
        same = (1.0 - a) + a * miss2
        diff = (1.0 - 2.0 * a + both) + 2.0 * (a - both) * miss1 + both * miss2
        if ep <= ng:  # h whole groups per rank; j of them chosen ~ hypergeometric(ng, h, tg)
            h = ng // ep
            pmf = np.zeros(k + 1)
            for j in range(0, min(h, tg) + 1):
                pj = math.comb(h, j) * math.comb(ng - h, tg - j) / math.comb(ng, tg)
                pmf += pj * _hyper_pmf(pool, j * size, k)
            sp = h * size * (size - 1)
            dp = n_r * (n_r - 1) - sp
        else:  # EP > n_group: the rank holds n_r experts of one group
            pmf = a * _hyper_pmf(pool, n_r, k)
            pmf[0] += 1.0 - a
            sp, dp = n_r * (n_r - 1), 0.0
    x = np.arange(k + 1)
    mean = float(pmf @ x)
    var = float(pmf @ (x - mean) ** 2)
    skew = float(pmf @ (x - mean) ** 3) / var ** 1.5 if var > 0 else 0.0
    return RankRouting(n_r, float(pmf[0]), mean, var, same, diff, sp, dp, skew)


def expected_max_normal(n: int) -> float:
    """Expected maximum of n independent standard normals (Blom: Phi^-1((n - 0.375) / (n + 0.25))); 0 for n = 1."""
    if n <= 1:
        return 0.0
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def _max_quantile(ep: int, skew) -> np.ndarray:
    """Standardized expected maximum of `ep` ranks with a Cornish-Fisher skewness correction z + (z^2 - 1) g / 6."""
    z = expected_max_normal(ep)
    return z + (z * z - 1.0) * np.asarray(skew, dtype=float) / 6.0


def parse_routing(routing: str) -> tuple[str, float | None]:
    """(kind, skew) of a routing spelling: random -> ('random', None); balanced -> ('balanced', 1); eplb ->
    ('eplb', 1); skew:F -> ('skew', F); else a one-line error."""
    r = str(routing).strip().lower()
    if r in ("random", "balanced", "eplb"):
        return r, (None if r == "random" else 1.0)
    if r.startswith("skew:"):
        try:
            f = float(r[5:])
        except ValueError:
            f = float("nan")
        if not (1.0 <= f <= 64.0):
            raise SpecplanError(f"routing: skew factor must be a number in [1, 64], got '{routing[5:]}'")
        return "skew", f
    raise SpecplanError(f"routing: must be 'random', 'balanced', 'eplb' or 'skew:F' (F >= 1), got '{routing}'")


@lru_cache(maxsize=8)
def _grouped_choices(num_experts: int, top_k: int, n_group: int, topk_group: int, samples: int) -> np.ndarray:
    """The experts (samples x top_k) of `samples` tokens under DeepSeek's group-limited selection with i.i.d.
    scores: a seeded draw, the same for every EP size (cached, read-only)."""
    rng = np.random.default_rng(12345)
    size = num_experts // n_group
    scores = rng.random((samples, n_group, size))
    top2 = np.sort(scores, axis=2)[:, :, -2:].sum(axis=2)
    keep = np.argsort(-top2, axis=1)[:, :topk_group]
    mask = np.zeros((samples, n_group), dtype=bool)
    np.put_along_axis(mask, keep, True, axis=1)
    flat = np.where(mask[:, :, None], scores, -1.0).reshape(samples, num_experts)
    chosen = np.argpartition(-flat, top_k - 1, axis=1)[:, :top_k]
    chosen.setflags(write=False)
    return chosen


@lru_cache(maxsize=64)
def grouped_destinations(num_experts: int, top_k: int, ep: int, n_group: int, topk_group: int,
                         ranks_per_node: int, samples: int = 8000) -> tuple[float, float]:
    """(distinct EP ranks, distinct nodes of `ranks_per_node` ranks) one token's top-k experts live on, under
    DeepSeek's group-limited selection with i.i.d. scores (groups by the sum of their top-2 scores, then the top-k
    experts of the chosen groups), contiguous placement; a seeded Monte Carlo over `samples` tokens (one draw for
    every EP size, cached)."""
    chosen = _grouped_choices(num_experts, top_k, n_group, topk_group, samples)
    ranks = chosen // (num_experts // ep)
    hit = np.zeros((samples, ep), dtype=bool)
    np.put_along_axis(hit, ranks, True, axis=1)
    nodes = hit.reshape(samples, -1, ranks_per_node).any(axis=2) if ep % ranks_per_node == 0 else hit
    return float(hit.sum(axis=1).mean()), float(nodes.sum(axis=1).mean())


def destination_ranks(num_experts: int, top_k: int, ep: int, n_group: int = 1, topk_group: int = 1) -> float:
    """Expected distinct EP ranks one token's top-k experts live on: EP * (1 - P(a rank is missed))."""
    if ep <= 1:
        return 1.0
    return ep * (1.0 - rank_routing(num_experts, top_k, ep, n_group, topk_group).miss)


def rank_touched_experts(tokens, num_experts: int, top_k: int, ep: int = 1, routing: str = "random",
                         n_group: int = 1, topk_group: int = 1, stat: str = "max") -> np.ndarray:
    """Distinct experts `tokens` tokens touch on one EP rank: the mean, or the expected maximum over ranks."""
    n = np.asarray(tokens, dtype=float)
    if routing == "balanced":
        return np.minimum(float(num_experts // ep), n * top_k / ep)
    if routing != "random":
        raise SpecplanError(f"moe routing: must be 'random' or 'balanced', got '{routing}'")
    r = rank_routing(num_experts, top_k, ep, n_group, topk_group)
    q1 = 1.0 - top_k / num_experts  # a token misses one given expert
    miss = q1 ** n
    mean = r.experts * (1.0 - miss)
    if ep <= 1 or stat == "mean":
        return mean
    cov_same = r.pair_miss_same ** n - miss * miss
    cov_diff = r.pair_miss_diff ** n - miss * miss
    var = r.experts * miss * (1.0 - miss) + r.same_pairs * cov_same + r.diff_pairs * cov_diff
    g = r.skew_rows / np.sqrt(np.maximum(n, 1.0))  # a sum of N tokens' counts: skewness / sqrt(N)
    return np.minimum(float(r.experts), mean + _max_quantile(ep, g) * np.sqrt(np.maximum(var, 0.0)))


def rank_rows(tokens, num_experts: int, top_k: int, ep: int = 1, routing: str = "random", n_group: int = 1,
              topk_group: int = 1, stat: str = "max") -> np.ndarray:
    """Token-expert rows one EP rank computes: N * k / EP on average, or the expected maximum over ranks."""
    n = np.asarray(tokens, dtype=float)
    mean = n * top_k / ep
    if routing == "balanced" or ep <= 1 or stat == "mean":
        return mean
    r = rank_routing(num_experts, top_k, ep, n_group, topk_group)
    g = r.skew_rows / np.sqrt(np.maximum(n, 1.0))
    return np.minimum(n * min(top_k, r.experts), mean + _max_quantile(ep, g) * np.sqrt(n * r.var_rows))


def grouped_gemm_compute_s(hw: HardwareProfile, dtype: str, fraction: float, experts, rows, *gemms,
                           tile_rows=None) -> np.ndarray:
    """Compute seconds of a fused MoE layer's grouped GEMMs on one rank: `experts` touched experts share `rows`
    token-expert rows (rows per expert m = rows / experts); each GEMM (N outputs, K reduction) cuts every expert's
    m x N output into ceil(m / r) x ceil(N / c) tiles of r x c outputs, which run in waves of one tile per SM, each
    full tile at `fraction` of the SM's share of the dense peak, at the faster of the tile shapes the profile lists
    (hw.moe.tile_rows x tile_cols: the kernels' autotuned tactics):
        t = sum over GEMMs of min over (r, c) of ceil(tiles / SMs) x 2 r c K / (peak / SMs x fraction).
    Few rows per expert pay for a whole tile (padding) and few experts per rank leave SMs idle (the last wave):
    the grouped GEMM's own efficiency curve in rows per expert and experts per rank. `tile_rows`: the rows per tile
    the engine's kernel picks (an array that broadcasts with `rows`, MoeKernel.block_m) instead of hw.moe.tile_rows."""
    e = np.asarray(experts, dtype=float)
    m = np.asarray(rows, dtype=float) / np.maximum(e, 1e-30)
    g = hw.moe
    sms = float(hw.sm_count or 1)
    per_sm = hw.peak(dtype) / sms * fraction
    rows_choices = g.tile_rows if tile_rows is None else [np.asarray(tile_rows, dtype=float)]
    out = np.zeros(np.broadcast(e, m, *rows_choices).shape)
    for n_out, k in gemms:  # each GEMM at the faster of the tile shapes (the kernels' autotuned tactics)
        best = np.full(out.shape, np.inf)
        for tr in rows_choices:
            for tc in g.tile_cols:
                tiles = e * np.ceil(m / tr) * math.ceil(n_out / tc)
                best = np.minimum(best, np.ceil(tiles / sms) * 2.0 * tr * tc * k / per_sm)
        out = out + best
    return np.where(np.asarray(rows, dtype=float) > 0, out, 0.0)


def tile_fraction(hw: HardwareProfile, key: str, triton: bool) -> float | None:
    """The full grouped-GEMM tile's fraction of the dense peak for MoE format `key`: a Triton kernel's
    (hw.moe.triton_compute_fraction, fitted on Triton fused-MoE rows) where `triton` and the profile has one, else
    hw.moe.compute_fraction's (TensorRT-LLM's cutlass rows); None: the dense-GEMM rule."""
    if triton and key in hw.moe.triton_compute_fraction:
        return float(hw.moe.triton_compute_fraction[key])
    return hw.moe.compute_fraction.get(key)


@record
class ExpertLayer:
    """A routed-expert layer's shape: hidden size in, each expert's FFN size, experts, experts per token, gated
    (gate, up, down: three matrices) or not, DeepSeek's group limit (n_group groups, topk_group of them per token)."""

    hidden: int
    expert_ffn: int
    num_experts: int
    top_k: int
    gated: bool = True
    n_group: int = 1
    topk_group: int = 1


@record
class MoeKernel:
    """How an engine runs the MoE layer: its kernel launches (None: MOE_KERNELS), fp8 block-scaled weights (a
    DeepSeek-style checkpoint: the profile's fp8_block fraction) and the row-tile rule of its grouped GEMM."""

    kernels: int | None = None
    block_scaled: bool = False
    block_m: str | None = None  # the kernel's row-tile rule (MOE_BLOCK_M_RULES); None: hw.moe.tile_rows


def moe_experts_cost(
    hw: HardwareProfile,
    tokens,
    layer: ExpertLayer,
    weight_dtype: str = "bf16",
    compute_dtype: str = "bf16",
    routing: str = "random",
    tp: int = 1,
    ep: int = 1,
    distinct=None,
    kernel: MoeKernel = MoeKernel(),
) -> KernelCost:
    """Fused grouped-GEMM MoE layer on the slowest EP rank (gate+up and down of its touched experts; `tp` is the
    expert-TP that splits each expert's FFN; `tokens` are all tokens the layer sees, over every DP rank).

    Two kernels (gate_up, down) plus routing/permutation at memory speed; the slowest rank's expected maximum
    touched experts and rows (module doc) set the bytes and FLOPs. `distinct`: the tokens that pick experts
    independently (default `tokens`; a verify step's are fewer, `distinct_tokens`).
    """
    hidden, num_experts, top_k = layer.hidden, layer.num_experts, layer.top_k
    n_group, topk_group, gated = layer.n_group, layer.topk_group, layer.gated
    kernels, block_scaled = kernel.kernels, kernel.block_scaled
    expert_ffn = layer.expert_ffn
    c = compute_dtype_for(hw, weight_dtype, compute_dtype)
    eff = hw.kernel_eff(c)
    f = expert_ffn / tp
    mats = 3.0 if gated else 2.0  # gate, up, down (or up, down)
    kind, skew = parse_routing(routing)
    base = routing if kind in ("random", "balanced") else "random"
    touched = rank_touched_experts(tokens if distinct is None else distinct, num_experts, top_k, ep, base,
                                   n_group, topk_group)
    n_rows = rank_rows(tokens, num_experts, top_k, ep, base, n_group, topk_group)
    if kind in ("eplb", "skew"):  # the slowest rank at skew x the mean rows (EPLB: the mean)
        n_rows = np.minimum(np.asarray(tokens, dtype=float) * top_k, np.asarray(tokens, dtype=float) * top_k / ep * skew)
    w_bytes = touched * mats * hidden * f * dtype_bytes(weight_dtype)
    a_bytes = n_rows * (hidden * dtype_bytes(c) * 2 + mats * f * 2.0) + n_rows * hidden * 2.0
    flops = gemm_flops(n_rows, mats * f, hidden)
    key = "fp8_block" if block_scaled and c == "fp8" else c
    # matmul_ogs picks its block_m from the layer's tokens x top-k rows (SGLang runs triton_kernels only at ep_size
    # 1: srt/server_args.py; other EP layouts another path)
    tk = kernel.block_m == "triton_kernels" and ep == 1
    frac = tile_fraction(hw, key, tk)
    if frac is not None:  # the profile's grouped-GEMM block: tiles per expert, waves over the SMs
        tile_rows = None
        if tk:
            tile_rows = triton_kernels_block_m(np.asarray(tokens, dtype=float) * top_k, num_experts)
        compute_s = grouped_gemm_compute_s(hw, c, frac, touched, n_rows, ((mats - 1.0) * f, hidden), (hidden, f),
                                           tile_rows=tile_rows)
    else:
        # Grouped GEMMs: the experts run side by side in two kernels (gate_up, down), so the small-GEMM term
        # (compute_half_flops, see costs/gemm.py) is paid once per kernel, not once per expert.
        compute_s = np.where(flops > 0, (flops + 2.0 * eff.compute_half_flops) / (hw.peak(c) * eff.compute_max_fraction), 0.0)
    memory_s = (w_bytes + a_bytes) / (hw.mem_bandwidth_bytes_s * eff.mem_bw_fraction)
    compute_s, memory_s = soft_corner(compute_s, memory_s, eff.roofline_sharpness)
    # `kernels` launches (default MOE_KERNELS: routing/permute, gate_up, down); each GEMM kernel's serial K loop
    # (K = hidden, then f)
    n_k = MOE_KERNELS if kernels is None else kernels
    overhead = n_k * hw.kernel_overhead_s + np.where(flops > 0, eff.k_latency_s * (hidden + f), 0.0)
    return roofline(compute_s, memory_s, overhead)

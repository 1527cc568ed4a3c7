"""One decode (or verify) step of a model on a device: the sum of its kernel costs, by kernel class.

`step_time` is vectorized: batch, q_len and context_len broadcast together (arrays of any shape).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from specplan.core.records import record
from specplan.costs.attention import AttentionHeads, attention_cost, recurrent_state_cost
from specplan.costs.comm import allgather_cost, allreduce_cost, p2p_cost
from specplan.costs.gemm import elementwise_cost, gemm_cost, gemm_costs
from specplan.costs import moe as _moe_costs
from specplan.costs.moe import (MOE_KERNELS, ExpertLayer, MoeKernel, distinct_tokens, moe_experts_cost,
                                parse_routing)
from specplan.costs.roofline import COMPUTE, MEMORY, OVERHEAD, REGIME_NAMES, KernelCost
from specplan.core.dtypes import dtype_bytes
from specplan.core.errors import SpecplanError
from specplan.model.parallel import Layout, layout_for, moe_alltoall_costs
from specplan.costs.precision import Dtypes, Precision, as_precision
from specplan.profiles.hardware import HardwareProfile
from specplan.profiles.model import ATTENTION_MIXERS, LayerGroup, ModelProfile
from specplan.profiles.registry import load_hardware, load_kernel_family, load_model
from specplan.costs.shapes import layer_gemms, lm_head_gemm

CLASSES = ("gemm", "attention", "state", "moe", "elementwise", "communication", "overhead")
# "state": the recurrent-state kernels of linear-attention / Mamba layers (conv-state and state update, with the
# per-position checkpoint writes of verification); "attention" is softmax attention only (full, sliding, MLA).
ACT_BYTES = 2.0  # activations between kernels are 16-bit
LOGITS_BYTES = ACT_BYTES  # logits leave the LM head in the activation dtype (vLLM 0.33.0 LogitsProcessor._apply_head)


@record
class StepKernels:
    """How a step's kernels are chosen: attention over a shared prefix ('shared') or re-read per query
    ('reread'), MoE routing (random | balanced | eplb | skew:F), the all-reduce algorithm (None: the hardware's
    choice), the GQA and MLA attention KernelFamily (an engine's decode or verify family; None: the hardware
    profile's block and the built-in mla-latent family), and an LPU's chip count (None: as many as the bytes need)."""

    attention_style: str = "shared"
    routing: str = "random"
    allreduce: str | None = None
    attention_family: object = None
    mla_family: object = None
    lpu_chips: int | None = None


@record
class _StepAt:
    """One step's shape on one GPU: the model, the device, the layout, the precision, the DP rank's sequences `b`,
    tokens per sequence `q`, context `ctx`, and the sequences of every DP rank `b_moe` (the routed experts')."""

    model: ModelProfile
    hw: HardwareProfile
    lay: Layout
    prec: Precision
    b: object
    q: object
    ctx: object
    b_moe: object


@dataclass
class StepResult:
    """Seconds of one step per point, broken down by kernel class, with each class's regime."""

    total_s: np.ndarray
    breakdown_s: dict[str, np.ndarray]
    regime_codes: dict[str, np.ndarray]
    kernels: int
    devices: np.ndarray | int  # target devices (LPU: chips, which may vary with batch and context)
    precision: Precision
    extra: dict = field(default_factory=dict)

    def regime(self, cls: str) -> np.ndarray:
        """Regime names ('memory', 'compute', 'overhead', 'latency', 'bandwidth', '-') of one class."""
        codes = self.regime_codes[cls]
        if cls == "communication":
            names = {MEMORY: "bandwidth", COMPUTE: "bandwidth", OVERHEAD: "latency", -1: "-"}
        else:
            names = {**REGIME_NAMES, -1: "-"}
        return np.vectorize(names.get, otypes=[object])(codes)


class _Acc:
    """Accumulates kernel costs per class: busy time split into compute-/memory-bound, plus overheads."""

    def __init__(self, shape):
        self.busy = {c: np.zeros(shape) for c in CLASSES}
        self.comp = {c: np.zeros(shape) for c in CLASSES}  # busy time of the compute-bound kernels
        self.overhead = np.zeros(shape)
        self.comm_latency = np.zeros(shape)
        self.kernels = 0

    @property
    def mem(self) -> dict[str, np.ndarray]:
        """Busy time of the memory-bound kernels per class."""
        return {c: self.busy[c] - self.comp[c] for c in CLASSES}

    def add(self, cls: str, cost: KernelCost, launches: float) -> None:
        busy = np.maximum(cost.compute_s, cost.memory_s)
        self.busy[cls] += busy  # in place: the accumulators already have the grid's full shape
        self.comp[cls] += np.where(cost.compute_s > cost.memory_s, busy, 0.0)
        if cls == "communication":
            self.comm_latency += cost.overhead_s
        else:
            self.overhead += cost.overhead_s
        self.kernels += int(round(launches))


def _regimes(acc: _Acc) -> dict[str, np.ndarray]:
    out = {}
    for c in CLASSES:
        if c == "overhead":
            out[c] = np.where(acc.overhead > 0, OVERHEAD, -1)
            continue
        if c == "communication":
            out[c] = np.where(acc.busy[c] + acc.comm_latency <= 0, -1,
                              np.where(acc.comm_latency >= acc.busy[c], OVERHEAD, MEMORY))
            continue
        out[c] = np.where(acc.busy[c] <= 0, -1, np.where(2.0 * acc.comp[c] > acc.busy[c], COMPUTE, MEMORY))
    return out


INDEXER_KEY_DTYPE = "fp8"  # DSA lightning-indexer keys are scored in fp8 (DeepSeek's fp8_index kernel)


def attended_keys(model, mixer: str, ctx, q) -> np.ndarray:
    """Keys one attention kernel of a `mixer` layer reads per sequence for `q` new tokens after `ctx` cached ones:
    the whole context (full), the window (sliding) or the chunk (chunked), read like a window (attended_kv_len);
    with an MLA indexer (DSA) at most the union of q top-k sets; DeepSeek-V4 reads its window plus the compressed
    entries (hca: all; csa: at most q top-k of them)."""
    ctx = np.asarray(ctx, dtype=float)
    q = np.asarray(q, dtype=float)
    if model.compressed_attention is not None:
        ca = model.compressed_attention
        kv = attended_kv_len(ctx, q, model.sliding_window)
        if mixer in ("csa", "hca"):
            entries = np.floor((ctx + q) / (ca.csa_rate if mixer == "csa" else ca.hca_rate))
            kv = kv + (np.minimum(entries, q * model.indexer.topk) if mixer == "csa" else entries)
        return kv
    window = {"sliding": model.sliding_window, "chunked": model.chunk_size}.get(mixer)
    kv = attended_kv_len(ctx, q, window)
    if model.mla is not None and model.indexer is not None:
        kv = np.minimum(kv, q * model.indexer.topk)
    return kv


def attention_kernels(model, hw, g: LayerGroup, tp, prec, b, q, ctx, style="shared", fam=(None, None)) -> list:
    """KernelCosts of the attention kernels of one layer of group `g` on one device (empty for other mixers).

    A layer reads its whole context (full), its window (sliding) or at most one chunk (chunked: the worst position,
    plus q - 1 tokens when the q new tokens cross a chunk boundary; see attended_kv_len); DSA (DeepSeek-V3.2) scans
    every indexer key, then reads the union of up to q top-k sets; DeepSeek-V4 reads its window plus the compressed
    entries (hca: all; csa: the indexer's top-k after its scan)."""
    if g.mixer not in ATTENTION_MIXERS:
        return []
    out = []
    kv_len = attended_keys(model, g.mixer, ctx, q)
    if model.compressed_attention is not None:
        if g.mixer == "csa":  # the indexer scores every compressed entry before its top-k is read
            rate = model.compressed_attention.csa_rate
            out.append(_indexer_scan(model, hw, prec, b, q, np.floor((ctx + q) / rate), style, fam[1]))
        out.append(attention_cost(hw, b, q, kv_len,
                                  AttentionHeads(model.num_q_heads // tp, 1, model.head_dim, latent=True), prec.kv,
                                  prec.compute, style, family=fam[1]))
        return out
    if model.mla is not None:
        a = model.mla
        if model.indexer is not None:  # DSA: the indexer scores every cached key
            out.append(_indexer_scan(model, hw, prec, b, q, ctx + q, style, fam[1]))
        heads = AttentionHeads(model.num_q_heads // tp, 1, a.kv_lora_rank + a.qk_rope_head_dim,
                               head_dim_v=a.kv_lora_rank, latent=True)
        out.append(attention_cost(hw, b, q, kv_len, heads, prec.kv, prec.compute, style, family=fam[1]))
    else:
        qh, kvh = model.heads_per_device(tp, model.kv_heads_of(g))
        out.append(attention_cost(hw, b, q, kv_len, AttentionHeads(qh, kvh, model.head_dim_of(g)), prec.kv,
                                  prec.compute, style, family=fam[0]))
    return out


def _indexer_scan(model, hw, prec, b, q, entries, style, family=None):
    """DSA lightning indexer: its heads score every cached key (one fp8 key of index_head_dim per entry)."""
    ix = model.indexer
    return attention_cost(hw, b, q, entries, AttentionHeads(ix.num_heads, 1, ix.head_dim, head_dim_v=0, latent=True),
                          INDEXER_KEY_DTYPE, prec.compute, style, family=family)


def _mixer(acc, at: _StepAt, g: LayerGroup, style, fam=(None, None)):
    """Attention / recurrent kernel of one layer group (the projections are added with the GEMMs)."""
    model, hw, tp, prec, b, q, ctx = at.model, at.hw, at.lay.tp, at.prec, at.b, at.q, at.ctx
    n = g.count
    tokens = b * q
    if g.mixer in ATTENTION_MIXERS:
        for cost in attention_kernels(model, hw, g, tp, prec, b, q, ctx, style, fam):
            acc.add("attention", cost.scaled(n), n)
        acc.add("elementwise", elementwise_cost(hw, tokens * model.hidden_size * ACT_BYTES * 2, n), n)  # RoPE
    elif g.mixer == "linear":  # two kernels: causal-conv1d update (bf16 conv state), gated-delta recurrent update
        la = model.linear_attention
        nv = la.num_v_heads / tp
        conv_dim = (2 * la.num_k_heads * la.head_k_dim + la.num_v_heads * la.head_v_dim) / tp
        _conv_and_state(acc, hw, b, q, n, conv_dim, la.conv_kernel, nv * la.head_k_dim * la.head_v_dim, prec.state)
    elif g.mixer == "mamba":  # two kernels: causal-conv1d update, selective-state (SSM) update
        m = model.mamba
        nh = m.num_heads / tp
        conv_dim = (m.num_heads * m.head_dim + 2 * m.n_groups * m.d_state) / tp
        _conv_and_state(acc, hw, b, q, n, conv_dim, m.conv_kernel, nh * m.head_dim * m.d_state, prec.state)


def attended_kv_len(context_len, q_len, window: int | None = None) -> np.ndarray:
    """Keys one verify/decode attention kernel reads per sequence: context + q_len, or for a sliding-window
    layer min(context + q_len, window + q_len - 1) (query i of q_len sees the window ending at its own position,
    so the q_len queries together span window + q_len - 1 keys)."""
    kv = np.asarray(context_len, dtype=float) + np.asarray(q_len, dtype=float)
    if window is None:
        return kv
    return np.minimum(kv, window + np.asarray(q_len, dtype=float) - 1.0)


def _conv_and_state(acc, hw, b, q, n, conv_dim, conv_kernel, state_elems, state_dtype="fp32"):
    """A linear-attention / Mamba mixer's two decode kernels, booked as class "state": the conv-state update
    (16-bit, 2 FLOPs per weight) and the recurrent-state update (state in `state_dtype`, 6 FLOPs per state
    element per token)."""
    conv = recurrent_state_cost(hw, b, q, (conv_kernel - 1) * conv_dim * ACT_BYTES, 2.0 * conv_dim * conv_kernel)
    rec = recurrent_state_cost(hw, b, q, state_elems * dtype_bytes(state_dtype), 6.0 * state_elems)
    acc.add("state", conv.scaled(n), n)
    acc.add("state", rec.scaled(n), n)


def _layer_group(acc, at: _StepAt, g: LayerGroup, k: StepKernels, fam):
    """One layer group on one GPU: dense parts at the DP rank's `at.b` sequences (heads split over TP), routed
    experts over the `at.b_moe` sequences of every DP rank on the slowest EP rank."""
    model, hw, lay, prec, b, q = at.model, at.hw, at.lay, at.prec, at.b, at.q
    n = g.count
    tp = lay.tp
    tokens = b * q
    h = model.hidden_size
    shapes = layer_gemms(model, g, tp)  # the layer's GEMMs priced together (gemm_costs), booked one by one
    for cost in gemm_costs(hw, tokens, [(s.n, s.k) for s in shapes], [prec.w(s.module) for s in shapes],
                           prec.compute, count=n):
        acc.add("gemm", cost, n)
    _mixer(acc, at, g, k.attention_style, fam)
    if g.ffn == "dense":
        acc.add("elementwise", elementwise_cost(hw, tokens * 3 * model.ffn_size_of(g) / tp * ACT_BYTES, n), n)  # act.
    elif g.ffn == "moe":
        moe = model.moe
        n_k = hw.moe_kernels.get(prec.w("moe"), MOE_KERNELS)  # the engine's MoE path, counted (profiles/engine.py)
        layer = ExpertLayer(moe.latent_size or h, moe.expert_ffn_size, moe.num_experts, moe.top_k, model.gated_ffn,
                            moe.n_group, moe.topk_group)
        cost = moe_experts_cost(hw, at.b_moe * q, layer, prec.w("moe"), prec.compute, k.routing, lay.expert_tp,
                                lay.ep, distinct=distinct_tokens(at.b_moe, q),
                                kernel=MoeKernel(n_k, block_m=hw.moe_block_m.get(prec.w("moe"))))
        acc.add("moe", cost.scaled(n), n_k * n)
        if lay.dp > 1:  # DP attention: tokens reach their experts' EP ranks and come back by all-to-all
            disp, comb = moe_alltoall_costs(model, hw, lay, tokens / tp, n, k.routing)
            acc.add("communication", disp, n)
            acc.add("communication", comb, n)
    parts = (g.mixer != "none") + (g.ffn != "none")
    acc.add("elementwise", elementwise_cost(hw, tokens * h * ACT_BYTES * 3, parts * n), parts * n)  # norm+residual
    if tp > 1:
        acc.add("communication", tp_allreduce_cost(hw, tokens * h * ACT_BYTES, tp, parts * n, k.allreduce), parts * n)


def _scaleout_terms(hw, bytes_per_gpu, nodes: int):
    """(latency s, transfer s) of the inter-node leg of a TP collective over `nodes` nodes: each GPU's share over its
    NIC (scaleout_bandwidth_bytes_s at alltoall.scaleout_bw_fraction, the RDMA round trip scaleout_latency_s:
    the hardware profile's named all-to-all assumptions, docs/parallel.md)."""
    p = hw.alltoall
    return p.scaleout_latency_s, np.asarray(bytes_per_gpu, dtype=float) / (hw.scaleout_bandwidth_bytes_s
                                                                           * p.scaleout_bw_fraction) * (nodes > 1)


def tp_allreduce_cost(hw, nbytes, tp: int, count: float = 1.0, algorithm=None):
    """`count` TP all-reduces of `nbytes`: costs/comm.allreduce_cost inside one scale-up domain; a TP group spanning
    n nodes (TP 16 on two 8-GPU H100 nodes, as InferenceX's TP-16 workers run) as NCCL runs it hierarchically: the
    all-reduce inside each node over NVLink, plus an inter-node all-reduce of each GPU's 1/domain share over its NIC
    (2 (n - 1) / n of it sent) and one RDMA latency."""
    dom = max(1, hw.scaleup_domain)
    if tp <= dom or hw.kind == "lpu":
        return allreduce_cost(hw, nbytes, tp, count, algorithm)
    nodes = -(-tp // dom)
    intra = allreduce_cost(hw, nbytes, dom, 1.0, algorithm)
    lat, xfer = _scaleout_terms(hw, 2.0 * (nodes - 1) / nodes * np.asarray(nbytes, dtype=float) / dom, nodes)
    return KernelCost(intra.compute_s, intra.memory_s + xfer, intra.overhead_s + lat).scaled(count)


def tp_allgather_cost(hw, shard_bytes, tp: int):
    """One TP all-gather of `shard_bytes` per GPU: costs/comm.allgather_cost inside one scale-up domain; across n
    nodes the node's gather over NVLink plus the other nodes' (tp - domain) shards over the NIC."""
    dom = max(1, hw.scaleup_domain)
    if tp <= dom or hw.kind == "lpu":
        return allgather_cost(hw, shard_bytes, tp)
    intra = allgather_cost(hw, shard_bytes, dom)
    lat, xfer = _scaleout_terms(hw, (tp - dom) * np.asarray(shard_bytes, dtype=float), -(-tp // dom))
    return KernelCost(intra.compute_s, intra.memory_s + xfer, intra.overhead_s + lat)


def _lpu_pipeline(model, hw, prec, b, q, ctx, lpu_chips):
    """LPU: chips = ceil((weights + KV + state) / SRAM per chip); layers pipelined over them.

    Each layer's weights are spread over chips / layers chips that stream them from their own SRAM in
    parallel; no launch overhead (statically scheduled); a step pays (chips - 1) hop latencies.
    """
    from specplan.model.memory import memory_usage, weight_bytes

    if lpu_chips is None:
        total = memory_usage(model, hw, 1, b, ctx, prec, q_len=q, reserve=0.0).total_bytes
        chips = np.maximum(1.0, np.ceil(total / hw.mem_capacity_bytes))
    else:
        chips = np.asarray(float(lpu_chips))
    per_layer = max(1.0, math.ceil(weight_bytes(model, 1, prec) / hw.mem_capacity_bytes) / (model.num_layers + 1))
    fast = hw.model_copy(update={
        "peak_flops": {k: v * per_layer for k, v in hw.peak_flops.items()},
        "mem_bandwidth_bytes_s": hw.mem_bandwidth_bytes_s * per_layer,
        "kernel_overhead_s": 0.0,
    })
    return fast, chips, (chips - 1.0) * hw.chip_hop_latency_s


class StepCache:
    """step_time's answers by _cache_key, least recently used first, up to `max_points` grid points in all (15
    arrays of 8 bytes each: 60 MB at 500k points; a search for issue 38 asks about 300k distinct points)."""

    def __init__(self, max_points: int = 500_000):
        self.entries: OrderedDict = OrderedDict()
        self.points = 0
        self.max_points = max_points

    def get(self, key):
        """The cached StepResult of `key`, or None."""
        hit = self.entries.get(key)
        if hit is None:
            return None
        self.entries.move_to_end(key)
        return hit[1]

    def put(self, key, args, res) -> None:
        """Keep `res` (and `args`, so that the objects whose id() is in the key stay alive), dropping the least
        recently used answers beyond max_points."""
        n = int(np.size(res.total_s))
        self.entries[key] = (args, res, n)
        self.points += n
        while len(self.entries) > 1 and self.points > self.max_points:
            self.points -= self.entries.popitem(last=False)[1][2]

    def clear(self) -> None:
        """Forget every answer."""
        self.entries.clear()
        self.points = 0


STEP_CACHE = StepCache()


def _arr_key(x):
    """A hashable stand-in for an array argument: its float values and shape (None stays None)."""
    if x is None:
        return None
    a = np.asarray(x, dtype=float)
    return a.shape, a.tobytes()


def _cache_key(model, hw, tp, batch, q_len, context_len, precision, layout, kernels, logits_rows):
    """STEP_CACHE's key of a step_time call (profiles and kernel families by identity: they are frozen and the
    cache entry holds them; the MoE verify reuse a fit may set, costs/moe.verify_expert_reuse), or None when an
    argument has no such form (the call is then not cached)."""
    try:
        if isinstance(precision, Precision):
            precision = (precision.compute, precision.kv, tuple(sorted(precision.weights.items())), precision.state)
        k = kernels if kernels is None else (kernels.attention_style, kernels.routing, kernels.allreduce,
                                             id(kernels.attention_family), id(kernels.mla_family), kernels.lpu_chips)
        key = (id(model), id(hw), tp, _arr_key(batch), _arr_key(q_len), _arr_key(context_len), precision, layout, k,
               _arr_key(logits_rows), _moe_costs.VERIFY_EXPERT_REUSE)  # a fit may change the reuse (verify_expert_reuse)
        hash(key)
    except (TypeError, ValueError):
        return None
    return key


def _frozen(res: StepResult) -> StepResult:
    """`res` with its arrays made read-only (a cached answer is shared by every caller that asks again)."""
    for arr in (res.total_s, *res.breakdown_s.values(), *res.regime_codes.values(), res.devices):
        if isinstance(arr, np.ndarray):
            arr.flags.writeable = False
    return res


def step_time(
    model: ModelProfile | str,
    hardware: HardwareProfile | str,
    tp: int = 1,
    batch=1,
    q_len=1,
    context_len=1024,
    precision: Precision | Dtypes | None = None,
    layout: Layout | str | None = None,
    kernels: StepKernels | None = None,
    logits_rows=None,
) -> StepResult:
    """Seconds of one decode step (`_step_time`, which documents every argument), computed once per distinct
    call: a serving search prices one step shape from several places (the prefill chunks and the decode steps of
    each pool split, the draft extend of each D), so a repeat is answered from STEP_CACHE, its arrays read-only."""
    model = load_model(model)
    hw = load_hardware(hardware)
    args = (model, hw, tp, batch, q_len, context_len, precision, layout, kernels, logits_rows)
    key = _cache_key(*args)
    if key is None:
        return _step_time(*args)
    res = STEP_CACHE.get(key)
    if res is None:
        res = _frozen(_step_time(*args))
        if np.size(res.total_s) <= STEP_CACHE.max_points // 8:  # a larger grid would push out the rest: not kept
            STEP_CACHE.put(key, args, res)
    return res


def _step_time(
    model: ModelProfile | str,
    hardware: HardwareProfile | str,
    tp: int = 1,
    batch=1,
    q_len=1,
    context_len=1024,
    precision: Precision | Dtypes | None = None,
    layout: Layout | str | None = None,
    kernels: StepKernels | None = None,
    logits_rows=None,
) -> StepResult:
    """Seconds of one decode step with `q_len` new tokens per sequence (q_len = 1 + D when verifying).

    Sums every layer (projections, attention or recurrent mixer, FFN or MoE, norms and element-wise kernels,
    all-reduces, expert all-to-alls), the final norm and the LM head. `batch` is the instance's sequences over
    all DP ranks; `layout` (TP, DP, EP, PP; default TP only) places them (specplan.model.parallel). With PP the
    batch runs as m = min(PP, ceil(B / DP)) micro-batches: a sequence sees max(m, PP) / PP of the whole model's
    step at one micro-batch, plus PP stage-to-stage hops. On an LPU the model is pipelined over
    `kernels.lpu_chips` chips (default: as many as its weights need), statically scheduled (no launch overhead),
    plus (chips - 1) hop latencies. `precision`: a resolved Precision, or Dtypes as a user names them (None: the
    checkpoint's). `kernels` (StepKernels) chooses the attention style, MoE routing, all-reduce algorithm and the
    GQA and MLA kernel families (an engine's decode or verify family; None = the hardware profile's attention
    block for GQA and the built-in `mla-latent` family for MLA). `logits_rows` (default: every token) is the number of
    rows per rank the LM head and its logits all-gather run on: a prefill chunk needs logits at each prompt's last
    position only (vLLM V1 GPUModelRunner._prepare_inputs: logits_indices = query_start_loc[1:] - 1, a partial
    chunk's row included; TensorRT-LLM with gather_context_logits False: the last context token of each request),
    a decode or verify row at every token.
    """
    model = load_model(model)
    hw = load_hardware(hardware)
    lay = layout_for(tp, layout)
    lay.check(model, hw)  # TP must split the query heads and split or replicate the KV heads; EP the experts
    tp = lay.tp
    k = kernels if kernels is not None else StepKernels()
    parse_routing(k.routing)  # random | balanced | eplb | skew:F, else a one-line error
    if k.attention_style not in ("shared", "reread"):
        raise SpecplanError(f"attention style: must be 'shared' or 'reread', got '{k.attention_style}'")
    b = np.asarray(batch, dtype=float)
    q = np.asarray(q_len, dtype=float)
    ctx = np.asarray(context_len, dtype=float)
    for name, arr, low in (("batch", b, 1), ("q_len", q, 1), ("context_len", ctx, 0)):
        if arr.size and (not np.all(np.isfinite(arr)) or np.min(arr) < low):
            raise SpecplanError(f"{name}: must be >= {low}, got {np.min(arr):g}")
    prec = as_precision(model, hw, precision)
    devices = lay.gpus
    hops = 0.0
    if hw.kind == "lpu":
        if tp != 1:
            raise SpecplanError(f"tp: LPU {hw.id} pipelines layers over chips; use tp 1, got {tp}")
        hw, devices, hops = _lpu_pipeline(model, hw, prec, b, q, ctx, k.lpu_chips)
    b_all = b
    b_rank = lay.per_rank_batch(b)
    micro = np.minimum(float(lay.pp), b_rank)  # PP micro-batches
    if lay.pp > 1:
        b_rank = np.ceil(b_rank / micro)
        b_all = b / micro
    shape = np.broadcast(b, q, ctx).shape
    acc = _Acc(shape)
    latent = model.mla is not None or model.compressed_attention is not None
    fam = (k.attention_family, k.mla_family if k.mla_family is not None or not latent
           else load_kernel_family("mla-latent"))
    at = _StepAt(model, hw, lay, prec, b_rank, q, ctx, b_all)
    for g in model.groups():
        _layer_group(acc, at, g, k, fam)
    b = b_rank
    tokens = b * q
    acc.add("elementwise", elementwise_cost(hw, tokens * model.hidden_size * ACT_BYTES * 3, 2), 2)  # embed, final norm
    lm = lm_head_gemm(model, tp)
    rows = tokens if logits_rows is None else np.minimum(np.asarray(logits_rows, dtype=float), tokens)
    acc.add("gemm", gemm_cost(hw, rows, lm.n, lm.k, prec.w("lm_head"), prec.compute), 1)
    if tp > 1:  # vocabulary-parallel LM head: each rank holds vocab/TP logits per token, all-gathered to every
        # rank (vLLM 0.33.0 LogitsProcessor._gather_logits -> tensor_model_parallel_all_gather; costs.comm)
        acc.add("communication", tp_allgather_cost(hw, rows * lm.n * LOGITS_BYTES, tp), 1)
    breakdown = {c: acc.busy[c] for c in CLASSES if c not in ("overhead", "communication")}
    breakdown["communication"] = acc.busy["communication"] + acc.comm_latency
    breakdown["overhead"] = acc.overhead + hops
    acc.overhead = acc.overhead + hops  # so that the overhead class reports its regime on an LPU too
    if lay.pp > 1:  # stages run one micro-batch each; a sequence waits max(m, PP) stage times, PP hops a cycle
        scale = np.maximum(micro, lay.pp) / lay.pp
        breakdown = {k: v * scale for k, v in breakdown.items()}
        hop = p2p_cost(hw, tokens * model.hidden_size * ACT_BYTES, lay.gpus > hw.scaleup_domain).scaled(lay.pp)
        breakdown["communication"] = breakdown["communication"] + hop.time_s
        acc.comm_latency = acc.comm_latency + hop.overhead_s
        acc.busy["communication"] = acc.busy["communication"] + np.maximum(hop.compute_s, hop.memory_s)
    total = sum(breakdown.values())
    shape = np.broadcast(total, *breakdown.values()).shape
    return StepResult(
        total_s=np.broadcast_to(total, shape).astype(float),
        breakdown_s={k: np.broadcast_to(v, shape).astype(float) for k, v in breakdown.items()},
        regime_codes=_regimes(acc),
        kernels=acc.kernels,
        devices=devices,
        precision=prec,
    )

"""A deployment layout: attention tensor parallelism (TP), data-parallel attention (DP), expert parallelism (EP)
and pipeline stages (PP), with the per-rank shares the step and memory models use.

    GPUs of one instance = TP x DP x PP;   expert-TP = TP x DP / EP (each expert's FFN split over expert-TP GPUs)

- Attention (and every dense part: projections, dense FFN layers, shared experts, LM head) runs per DP rank on
  ceil(B / DP) of the instance's B sequences, its heads split over TP; each DP rank holds its own sequences' KV
  (an MLA latent once per sequence per DP rank).
- Routed experts: E / EP experts per EP rank; the MoE layer sees the tokens of all DP ranks. With DP = 1 the
  hidden states are already on every GPU after the attention all-reduce (TRT-LLM / vLLM attention-TP + EP): the
  experts' partial outputs are summed by the usual all-reduce. With DP > 1 tokens travel by a dispatch all-to-all
  (fp8) to the EP ranks of their experts and back by a combine all-to-all (bf16), as DeepEP / SGLang do.
- PP: the layers are split over PP stages; a step of B sequences runs as m = min(PP, B) micro-batches.

Engine flags (read in their sources: SGLang 0.5.23 srt/arg_groups/fields/parallel.py and parallel_hook.py, vLLM
0.33.0 vllm/config/parallel.py; TensorRT-LLM from its LLM-API argument names and the DeepSeek-R1 B200 blog the
published rows cite, wheel not read; docs/parallel.md has the details):

| specplan | SGLang (0.5.23) | vLLM (0.33) | TensorRT-LLM |
|---|---|---|---|
| --tp 8 | --tp 8 | -tp 8 | tensor_parallel_size 8 |
| --tp 8 --ep 8 | --tp 8 --ep 8 | -tp 8 --enable-expert-parallel | tp 8, moe_expert_parallel_size 8 |
| --tp 8 --ep 4 (expert-TP 2) | --tp 8 --ep 4 (MoE TP = tp / ep) | (no: EP = TP x DP) | tp 8, moe_expert_parallel_size 4, moe_tensor_parallel_size 2 |
| --dp 8 --tp 1 --ep 8 | --tp 8 --attn-dp-size 8 --ep 8 (older: --tp 8 --dp 8 --enable-dp-attention --ep 8) | -dp 8 -tp 1 --enable-expert-parallel | tp 8, enable_attention_dp, moe_expert_parallel_size 8 |
| --dp 8 --tp 1 (expert-TP 8) | --tp 8 --attn-dp-size 8 | -dp 8 -tp 1 (MoE TP over DP x TP) | tp 8, enable_attention_dp, moe_tensor_parallel_size 8 |
| --tp 8 --pp 2 | --tp 8 --pp 2 | -tp 8 -pp 2 | tp 8, pipeline_parallel_size 2 |

SGLang's --tp counts every GPU of a pipeline stage (attention TP = tp / attn-dp-size); here TP is the attention TP
inside one DP rank. Dense layers and the LM head per DP rank correspond to SGLang's --moe-dense-tp-size 1 and
--enable-dp-lm-head (the large-EP recipes' settings).
"""

from __future__ import annotations

import math
import re

from specplan.core.records import record
from specplan.core.errors import SpecplanError

AXES = ("tp", "dp", "ep", "pp")


@record
class Layout:
    """TP within one DP rank, DP attention ranks, EP expert ranks, PP stages (all >= 1)."""

    tp: int = 1
    dp: int = 1
    ep: int = 1
    pp: int = 1

    def __post_init__(self):
        for a in AXES:
            v = getattr(self, a)
            if isinstance(v, bool) or int(v) != v or v < 1:
                raise SpecplanError(f"layout: --{a} must be an integer >= 1, got {v}")
            object.__setattr__(self, a, int(v))
        if (self.tp * self.dp) % self.ep:
            raise SpecplanError(f"layout: --ep {self.ep} does not divide TP x DP = {self.tp} x {self.dp} = "
                                f"{self.tp * self.dp} GPUs (expert-TP = TP x DP / EP must be whole)")

    @property
    def gpus(self) -> int:
        """GPUs of one instance: TP x DP x PP."""
        return self.tp * self.dp * self.pp

    @property
    def moe_gpus(self) -> int:
        """GPUs that share one MoE layer's experts (one pipeline stage): TP x DP."""
        return self.tp * self.dp

    @property
    def expert_tp(self) -> int:
        """GPUs each expert's FFN is split over: TP x DP / EP."""
        return self.tp * self.dp // self.ep

    @property
    def name(self) -> str:
        """Compact spelling, e.g. 'tp8', 'dp8ep8', 'tp2dp4ep8pp2' (axes at 1 omitted, TP kept when alone)."""
        parts = [f"{a}{getattr(self, a)}" for a in AXES if getattr(self, a) > 1]
        return "".join(parts) or "tp1"

    def per_rank_batch(self, batch):
        """Sequences on the busiest DP rank: ceil(B / DP) (numpy arrays broadcast)."""
        import numpy as np

        b = np.asarray(batch, dtype=float)
        return b if self.dp == 1 else np.ceil(b / self.dp)

    def check(self, model, hw=None) -> None:
        """One-line errors for a layout the model or device cannot take."""
        model.heads_per_device(self.tp)
        moe = model.moe
        if self.ep > 1 and moe is None:
            raise SpecplanError(f"layout: --ep {self.ep} needs an MoE model; {model.id} has no experts")
        if moe is not None:
            if moe.num_experts % self.ep:
                raise SpecplanError(f"layout: --ep {self.ep} does not divide the {moe.num_experts} experts of "
                                    f"{model.id}")
            if moe.expert_ffn_size % self.expert_tp:
                raise SpecplanError(f"layout: expert-TP {self.expert_tp} (TP x DP / EP) does not divide the expert "
                                    f"FFN size {moe.expert_ffn_size} of {model.id}")
        if self.pp > model.num_layers:
            raise SpecplanError(f"layout: --pp {self.pp} exceeds the {model.num_layers} layers of {model.id}")
        if hw is not None and hw.kind == "lpu" and (self.dp > 1 or self.ep > 1 or self.pp > 1):
            raise SpecplanError(f"layout: {hw.id} is an LPU (it pipelines layers over chips); use tp 1 and no "
                                f"--dp/--ep/--pp, got {self.name}")

    def nodes(self, domain: int) -> int:
        """Nodes (scale-up domains of `domain` GPUs) one instance spans."""
        return math.ceil(self.gpus / max(1, domain))


DISPATCH_BYTES_PER_ELEM = 1.0 + 4.0 / 128  # fp8 e4m3 + one fp32 scale per 128 elements (DeepEP dispatch)
COMBINE_BYTES_PER_ELEM = 2.0  # bf16


def destination_gpus(model, lay: Layout) -> float:
    """Expected GPUs one token is dispatched to: distinct EP ranks of its top-k experts x expert-TP GPUs each."""
    from specplan.costs.moe import destination_ranks

    moe = model.moe
    return destination_ranks(moe.num_experts, moe.top_k, lay.ep, moe.n_group, moe.topk_group) * lay.expert_tp


def destinations(model, lay: Layout, domain: int) -> tuple[float, float]:
    """(distinct EP ranks, distinct nodes of `domain` GPUs) one token is dispatched to: DeepSeek's group selection
    (costs/moe.grouped_destinations) for a group-limited model, the closed form otherwise; ranks x expert-TP GPUs."""
    from specplan.costs.moe import destination_ranks, grouped_destinations, rank_routing

    moe = model.moe
    ranks_per_node = max(1, domain // lay.expert_tp)
    nodes = max(1, math.ceil(lay.ep / ranks_per_node))
    if moe.n_group > 1 and moe.topk_group < moe.n_group and lay.ep > 1:
        r, n = grouped_destinations(moe.num_experts, moe.top_k, lay.ep, moe.n_group, moe.topk_group,
                                    min(ranks_per_node, lay.ep))
        return r * lay.expert_tp, n
    r = destination_ranks(moe.num_experts, moe.top_k, lay.ep)
    n = 1.0 if nodes <= 1 else nodes * (1.0 - rank_routing(moe.num_experts, moe.top_k, nodes).miss)
    return r * lay.expert_tp, n


def moe_alltoall_costs(model, hw, lay: Layout, tokens_per_gpu, count: float = 1.0, routing: str = "random"):
    """(dispatch, combine) KernelCosts of one MoE layer's DeepEP all-to-alls for `count` layers: low-latency
    kernels (one copy per (token, expert)) at most LL_MAX_TOKENS_PER_RANK tokens per GPU (decode), normal kernels
    beyond (prefill: one copy per distinct remote rank over NVLink, per distinct remote node over the NIC);
    costs/comm.py. A `skew:F` routing multiplies the copies the slowest rank receives by F."""
    import numpy as np

    from specplan.costs.comm import LL_MAX_TOKENS_PER_RANK, deepep_ll_cost, deepep_normal_cost
    from specplan.costs.moe import parse_routing
    from specplan.costs.roofline import KernelCost

    moe = model.moe
    g = lay.moe_gpus
    kind, skew = parse_routing(routing)
    f = skew if kind == "skew" else 1.0
    t = np.asarray(tokens_per_gpu, dtype=float)
    h = model.hidden_size
    domain = max(1, hw.scaleup_domain)
    ranks, nodes = destinations(model, lay, domain)
    n_nodes = max(1, math.ceil(g / domain))
    copies = t * moe.top_k * lay.expert_tp * h * f
    rank_remote = t * ranks * (g - 1) / g * h * f
    node_remote = t * nodes * (n_nodes - 1) / n_nodes * h * f
    out = []
    for per_elem, combine in ((DISPATCH_BYTES_PER_ELEM, False), (COMBINE_BYTES_PER_ELEM, True)):
        ll = deepep_ll_cost(hw, copies * per_elem, g, combine, count)
        normal = deepep_normal_cost(hw, rank_remote * per_elem, node_remote * per_elem, g, count)
        use_ll = t <= LL_MAX_TOKENS_PER_RANK
        out.append(KernelCost(*(np.where(use_ll, a, b) for a, b in zip(
            np.broadcast_arrays(ll.compute_s, ll.memory_s, ll.overhead_s),
            np.broadcast_arrays(normal.compute_s, normal.memory_s, normal.overhead_s)))))
    return out[0], out[1]


def moe_alltoall_bytes(model, lay: Layout, tokens_per_gpu):
    """(dispatch, combine) bytes one GPU sends to OTHER GPUs per MoE layer: its tokens x expected remote
    destination GPUs (all destinations x (G - 1) / G of a G-GPU MoE group) x hidden x bytes per element
    (dispatch fp8 with per-128 scales, combine bf16)."""
    g = lay.moe_gpus
    remote = destination_gpus(model, lay) * (g - 1) / g
    per_token = remote * model.hidden_size
    t = tokens_per_gpu
    return t * per_token * DISPATCH_BYTES_PER_ELEM, t * per_token * COMBINE_BYTES_PER_ELEM


def as_layout(value=None, tp: int = 1) -> Layout:
    """A Layout from a Layout, a spelling ('dp8ep8', 'tp8', 'tp2dp4ep8pp2'), or None (TP only, = Layout(tp))."""
    if value is None:
        return Layout(tp=tp)
    if isinstance(value, Layout):
        return value
    if isinstance(value, dict):
        bad = sorted(set(value) - set(AXES))
        if bad:
            raise SpecplanError(f"layout: unknown axis '{bad[0]}' (axes: {', '.join(AXES)})")
        return Layout(**{k: int(v) for k, v in value.items()})
    return parse_layout(str(value))


_TOKEN = re.compile(r"(tp|dp|ep|pp)(\d+)")


def parse_layout(text: str) -> Layout:
    """'dp8ep8' -> Layout(dp=8, ep=8); a one-line error naming the text otherwise."""
    s = text.strip().lower().replace("-", "").replace("_", "").replace(" ", "")
    pos, got = 0, {}
    for m in _TOKEN.finditer(s):
        if m.start() != pos or m.group(1) in got:
            break
        got[m.group(1)] = int(m.group(2))
        pos = m.end()
    if not got or pos != len(s):
        raise SpecplanError(f"layout: cannot read '{text}' (expected axes like tp8, dp8ep8 or tp2dp4ep8pp2)")
    return Layout(**got)


def layout_for(tp: int = 1, layout: Layout | str | None = None) -> Layout:
    """The layout of a call that takes both `tp` and `layout`: `layout` when given (a `tp` other than 1 must
    agree with it), else TP only."""
    if layout is None:
        return Layout(tp=tp)
    lay = as_layout(layout)
    if tp not in (1, lay.tp):
        raise SpecplanError(f"layout: tp {tp} disagrees with the layout's tp {lay.tp} ({lay.name})")
    return lay


def serving_parallelism(tp) -> "int | Layout":
    """What the serving model takes as `tp`: an int (TP only), or a Layout with DP or EP beyond 1 (priced per DP
    rank, the engine's scheduling unit); Layout(tp=N) reads as N, so TP-only calls price exactly as before. PP is
    refused in one line (the serving model has no pipeline stages)."""
    if not isinstance(tp, Layout):
        return tp
    if tp.pp > 1:
        raise SpecplanError(f"layout: the serving model (--isl/--osl) prices no pipeline stages; got {tp.name} "
                            f"(drop --pp)")
    return tp.tp if (tp.dp, tp.ep) == (1, 1) else tp


def attention_tp(tp) -> int:
    """Attention TP of a serving call's `tp` (an int, or a Layout's TP inside one DP rank)."""
    return tp.tp if isinstance(tp, Layout) else tp


def dp_ranks(tp) -> int:
    """Data-parallel attention ranks of a serving call's `tp` (1 for an int)."""
    return tp.dp if isinstance(tp, Layout) else 1


def instance_call(tp, batch):
    """(TP, {'layout': Layout} or {}, batch) to price a serving quantity of one DP rank with the instance-level
    step and memory functions: a Layout's per-rank `batch` becomes the instance's DP x batch (every rank carrying
    the same load: the symmetric steady state), an int passes through unchanged."""
    if isinstance(tp, Layout):
        import numpy as np

        return tp.tp, {"layout": tp}, np.asarray(batch, dtype=float) * tp.dp
    return tp, {}, batch


def draft_parallelism(draft_model, tp) -> "int | Layout":
    """Where a drafter's own passes run for a serving call's `tp`: an int as before (its TP when it splits the
    draft's heads, else 1); under a Layout the target's attention TP and DP, and its EP for an MoE draft (an MTP
    module), as engines place MTP / EAGLE heads (speculation/drafters.DraftInput.draft_layout)."""
    if not isinstance(tp, Layout):
        return tp if draft_model.num_q_heads % tp == 0 else 1
    t = tp.tp if draft_model.num_q_heads % tp.tp == 0 else 1
    ep = tp.ep if draft_model.moe is not None and (t * tp.dp) % tp.ep == 0 else 1
    lay = Layout(tp=t, dp=tp.dp, ep=ep)
    return lay if (lay.dp, lay.ep) != (1, 1) else lay.tp

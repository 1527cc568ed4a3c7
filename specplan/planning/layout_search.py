"""`recommend --gpus N` for MoE models: the layouts large MoE deployments run (issue 38), searched beside the TP
ones of recommend_serving.search_deployment.

Families of one instance (model/parallel.Layout; docs/parallel.md):
- TEP: attention TP t with the experts over EP t (t = the node's GPUs, at most 8: SGLang --tp 8 --ep 8,
  TensorRT-LLM moe_expert_parallel_size);
- DEP n: data-parallel attention over n GPUs (TP 1 per rank) with the experts over EP n (SGLang --attn-dp-size n
  --ep n with DeepEP; TensorRT-LLM enable_attention_dp), n = 8, 16, 32, ... dividing the experts, up to the budget:
  inside the scale-up domain (GB200 NVL72: 16-64 GPUs on NVLink) or across nodes over RDMA (DeepEP's internode
  kernels; the hardware profile's NIC).
Aggregated: k = N // n replicas of one layout. Disaggregated: x prefill instances of layout P and y decode
instances of layout D with x·|P| + y·|D| <= N.

Pruned rather than enumerated: each candidate is priced once on the concurrency grid without the refinement pass;
prefill layouts are cut to the two best (fewest GPU-seconds per prompt, and fastest prompt), each (P, D) pair to
the splits that fill the budget with decode instances after x = 1, 2, 3 prefill instances, and one decode pricing
serves every prefill layout and split of it (serving/disaggregated.disaggregated_pools); a DEP family stops at the
first instance size that serves fewer tokens/s/GPU than the size before it; no refinement between grid
concurrencies (GRID_NOTE).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from specplan.core.records import Record, record
from specplan.model.parallel import Layout
from specplan.serving.workload import Workload
from specplan.planning.options import GridOptions, Ranking

MAX_PREFILL_LAYOUTS = 2
PREFILL_COUNTS = (1, 2, 3)
GRID_NOTE = ("TEP / DEP rows: the concurrency is the best of the 41-point grid (points up to 19 % apart), not refined "
             "between them as the TP rows are (their CPU cost)")


def family(lay) -> str:
    """TP, TEP or DEP: the family a layout belongs to."""
    if not isinstance(lay, Layout) or (lay.dp, lay.ep) == (1, 1):
        return "TP"
    return "DEP" if lay.dp > 1 else "TEP"


def moe_layouts(model, hw, gpus: int) -> list[Layout]:
    """TEP and DEP instance layouts of an MoE model within `gpus` GPUs (experts divisible, heads split)."""
    e = model.moe.num_experts
    out = []
    t = min(8, int(hw.scaleup_domain), gpus)
    while t > 1 and (e % t or model.num_q_heads % t):
        t //= 2
    if t > 1:
        out.append(Layout(tp=t, ep=t))
    n = min(8, int(hw.scaleup_domain))
    while n <= gpus:
        if e % n == 0:
            out.append(Layout(dp=n, ep=n))
        n *= 2
    return [lay for lay in out if _checks(lay, model, hw)]


def _checks(lay: Layout, model, hw) -> bool:
    from specplan.core.errors import SpecplanError

    try:
        lay.check(model, hw)
    except SpecplanError:
        return False
    return True


def _fits(model, hw, lay, isl, osl, prec) -> bool:
    """One request of ISL + OSL tokens fits beside the weights on every GPU of the layout."""
    from specplan.model.memory import memory_usage

    return float(memory_usage(model, hw, lay.tp, 1, isl + osl, prec, layout=lay).max_batch) >= 1


def _prefill_gpu_s(model, hw, lay, isl, eng, prec) -> float:
    """Seconds one prefill rank spends per prompt (disaggregated.prefill_instance_s at the rank's engine limits)."""
    from specplan.model.parallel import dp_ranks, serving_parallelism
    from specplan.serving.disaggregated import prefill_instance_s

    t = serving_parallelism(lay)
    return prefill_instance_s(model, hw, t, isl, eng.per_dp_rank(dp_ranks(t)), prec)


def best_prefill_layouts(model, hw, lays, isl, eng, prec, seen=None) -> list[Layout]:
    """The prefill layouts kept: fewest GPU-seconds per prompt (s x GPUs / DP ranks) and lowest seconds per prompt
    (`seen`: seconds per prompt already priced, by layout, filled in)."""
    from specplan.model.parallel import dp_ranks

    seen = {} if seen is None else seen
    for lay in lays:
        if lay not in seen:
            seen[lay] = _prefill_gpu_s(model, hw, lay, isl, eng, prec)
    s = seen
    eff = sorted(lays, key=lambda lay: s[lay] * lay.gpus / dp_ranks(lay))
    fast = min(lays, key=lambda lay: s[lay])
    keep = [eff[0]] + ([fast] if fast != eff[0] else [])
    return (keep + [x for x in eff if x not in keep])[:MAX_PREFILL_LAYOUTS]


def _splits(gpus: int, p: Layout, d: Layout) -> list[tuple[int, int, str]]:
    """(x, y, prefill layout) pool splits of a pair: y = the decode instances left after x prefill instances."""
    out = []
    for x in PREFILL_COUNTS:
        y = (gpus - x * p.gpus) // d.gpus
        if y >= 1:
            out.append((x, y, p.name))
    return out


@record
class MoeDeploymentRow(Record):
    """A search_deployment row of a TEP / DEP layout: mode, dtype, TP, family, its best unit (a ServingRow whose
    pools drop the prefill layout; None: nothing meets the SLA), notes, why it has no point; the aggregated
    instance's layout, or the decode layout with (for a best unit) the prefill layout and pools; the unit's
    replicas on the budget (unit, used and idle GPUs, total concurrency, output tokens/s); its label, and the
    verdict against the overall best."""

    mode: str
    dtype: str
    tp: int
    family: str
    fits: bool
    best: object
    notes: list
    why: str
    layout: str | None = None
    decode_layout: str | None = None
    prefill_layout: str | None = None
    pools: str | None = None
    replicas: int | None = None
    unit_gpus: int | None = None
    gpus_used: int | None = None
    idle_gpus: int | None = None
    total_concurrency: float | None = None
    tokens_per_s: float | None = None
    label: str | None = None
    verdict: str | None = None

    OPTIONAL = ("layout", "decode_layout", "prefill_layout", "pools", "replicas", "unit_gpus", "gpus_used",
                "idle_gpus", "total_concurrency", "tokens_per_s", "verdict")


def _row(mode, dtype, lay, best, notes, why, gpus) -> MoeDeploymentRow:
    """A search_deployment row for a layout of this module (layouts in the --layouts grammar), its unit (one
    instance, or one xPyD split) replicated over the budget as recommend_serving.fill_budget does for TP rows."""
    from specplan.model.parallel import parse_layout

    row = MoeDeploymentRow(mode, dtype, lay.tp, family(lay), True, best, notes, why, label=lay.name)
    if mode == "agg":
        row, unit = replace(row, layout=lay.name), lay.gpus
    else:
        row = replace(row, decode_layout=lay.name)
        if best is None:
            return row
        pools, pre = best.pools.split("@")
        x, y = (int(v) for v in pools[:-1].split("P"))
        unit = x * parse_layout(pre).gpus + y * lay.gpus
        best = replace(best, pools=pools)
        row = replace(row, best=best, prefill_layout=pre, pools=pools, label=f"{pools}: {x} x {pre} + {y} x {lay.name}")
    if best is None:
        return row
    k = gpus // unit
    return replace(row, replicas=k, unit_gpus=unit, gpus_used=k * unit, idle_gpus=gpus - k * unit,
                   total_concurrency=best.concurrency * k, tokens_per_s=best.tokens_per_s_per_gpu * k * unit,
                   label=f"{k} x {row.label}" if mode == "agg" or k > 1 else row.label)


def moe_layout_rows(model, hw, isl, osl, *, gpus, modes, engine, sla, drafts, options) -> list[MoeDeploymentRow]:
    """search_deployment rows of the TEP / DEP layouts (aggregated replicas, and disaggregated pools of their own
    prefill and decode layouts) that fit in `gpus` GPUs, each at its best grid concurrency under `sla` (Sla);
    `drafts`: the speculation priced; `options`: the deployment's other options (ServingOptions: dtype, ...)."""
    from specplan.costs.precision import resolve_precision
    from specplan.planning.recommend_serving import CONCURRENCIES, serving_search

    prec = resolve_precision(model, hw, options.dtype, options.kv_dtype)
    lays = [lay for lay in moe_layouts(model, hw, gpus) if _fits(model, hw, lay, isl, osl, prec)]
    if not lays:
        return []
    tps = sorted({t for t in (1, 2, 4, 8) if t <= min(gpus, hw.scaleup_domain) and model.num_q_heads % t == 0
                  and _fits(model, hw, Layout(tp=t), isl, osl, prec)})
    prefill_all = lays + ([Layout(tp=max(tps))] if tps else [])

    def run(mode, lay, pools=None):
        # the concurrency grid per DP rank (1 ... 1024 requests each; a disaggregated column's times its decode
        # instances), not per instance: a DEP-64 instance would otherwise stop at 16 requests a rank
        scale = lay.dp * (1 if pools is None else max(p[1] for p in pools))
        wl = Workload(isl, osl, concurrency=CONCURRENCIES * scale, mode=mode)
        return serving_search(model, hw, wl, tp=lay, engine=engine, drafts=drafts,
                              sla=sla, ranking=Ranking(top=1),
                              grid=GridOptions(search_concurrency=False, pools=pools, d_by_load=False),
                              options=options)

    cands = []  # (mode, layout, pools, recommend result) priced on the grid
    if "agg" in modes:
        cands += _unimodal([(lay, None) for lay in lays], lambda lay, pools: run("agg", lay), "agg")
    if "disagg" in modes:
        from specplan.profiles.registry import load_engine

        eng, seen = load_engine(engine), {}
        pairs = []
        for d in lays:
            room = [p for p in prefill_all if p.gpus + d.gpus <= gpus]
            if room:
                pre = best_prefill_layouts(model, hw, room, isl, eng, prec, seen)
                pools = [s for p in pre for s in _splits(gpus, p, d)]
                if pools:
                    pairs.append((d, pools))
        cands += _unimodal(pairs, lambda d, pools: run("disagg", d, pools), "disagg")
    return [_row(mode, prec.compute, lay, r.best, r.notes + [GRID_NOTE], r.infeasible or "", gpus)
            for mode, lay, pools, r in cands]


def _unimodal(items, price, mode) -> list:
    """Price (layout, pools) items family by family in increasing instance size, stopping a DEP family at the first
    size whose best tokens/s/GPU falls below the previous size's (tokens/s/GPU is taken as unimodal in the DEP
    size: the all-to-all grows with it while the per-rank weights shrink); [(mode, layout, pools, result)]."""
    out, prev = [], None
    for lay, pools in sorted(items, key=lambda it: (family(it[0]), it[0].gpus)):
        if family(lay) == "DEP" and prev is not None and prev[0] == "DEP" and prev[1] == "stop":
            continue
        r = price(lay, pools)
        v = r.best.tokens_per_s_per_gpu if r.best is not None else -1.0
        if family(lay) == "DEP":
            prev = ("DEP", "stop" if prev is not None and prev[0] == "DEP" and v < prev[2] else "go", v)
        out.append((mode, lay, pools, r))
    return out


def search_note(model) -> str:
    """The assumptions line of a search that included this module's layouts."""
    return ("agg replicas identical (tokens/s/GPU over the GPUs used); TP rows: the same TP for prefill and decode; "
            f"{model.id} is MoE: TEP and DEP (data-parallel attention + expert parallelism) layouts searched too, "
            "disaggregated pools with their own prefill and decode layouts (pruned: planning/layout_search.py)")

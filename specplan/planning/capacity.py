"""GPUs for a load: the smallest GPU count (whole nodes) whose best layout, mechanism, D and batch meet a total
output rate (tokens/s) and a per-user rate (tokens/s/user).

Steady-state model (a named assumption, docs/parallel.md "GPUs for a load"):
- Decode pool: n identical instances of one layout, each serving B concurrent sequences at context ISL + OSL / 2
  (the mean context over a request's decode); a user sees AL / T_iter tokens/s; the pool delivers
  n x B x AL / T_iter tokens/s. Memory must fit B sequences at that mean context.
- Prefill pool (with --isl): requests arrive at target_tps / OSL per second; each needs the roofline prefill of
  ISL tokens (specplan.serving.prefill, chunks of the engine's token budget) on a TP-`node` group; the pool is the
  whole nodes whose M/D/1 wait keeps TTFT under --max-ttft-ms (default: the wait at most one prefill,
  utilization <= 2/3), not the pool at 100 % utilization (prefill_groups).
- Aggregated replicas (with --isl): the same load through the serving model (aggregated_answer: TP within the
  node, mechanism, D, concurrency under TPOT <= 1 / tokens/s/user and the TTFT target), reported beside.
- The total is decode GPUs + prefill GPUs, both whole nodes of `node` GPUs (the device's scale-up domain, 8).

`search` evaluates every (layout, mechanism, D, batch) once, vectorized over batch and D; the only loops are over
layouts and mechanisms.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from specplan.core.errors import SpecplanError
from specplan.core.records import Record, record
from specplan.core.limits import MAX_GPUS, check_int
from specplan.model.parallel import Layout, as_layout
from specplan.costs.precision import Dtypes
from specplan.planning.options import GridOptions, LoadTarget, Ranking, Sla
from specplan.speculation.spec import DraftSearch

BATCH_MAX = 4096  # largest decode batch per instance searched


@record
class AggregatedReplicas(Record):
    """GPUs for the load as identical aggregated replicas of one TP: GPUs, TP, replicas, the replica's mechanism,
    D, concurrency, output tokens/s, TPOT and TTFT (ms), tokens/s/user, whether they fit the GPU budget, J/token at
    the replica's operating point (None without a power model); why one GPU fewer fails."""

    mode: str
    gpus: int
    tp: int
    replicas: int
    mechanism: str
    draft_len: int
    concurrency_per_replica: float
    tokens_per_s_per_replica: float
    tpot_ms: float
    ttft_ms: float
    tokens_per_s_per_user: float
    fits_budget: bool
    joules_per_token: float | None
    smaller_fails: str | None = None


@record
class InstanceBest(Record):
    """The best instance of one layout: its GPUs, output tokens/s, whether any configuration meets the tokens/s/user
    target with its memory fitting, the most tokens/s/user that fits; for a feasible one its mechanism, D, batch,
    tokens/s/user, AL, iteration (ms) and memory (GB)."""

    gpus: int
    tps: float
    feasible: bool
    max_user: float
    mechanism: str | None = None
    draft_len: int | None = None
    batch: int | None = None
    tokens_per_s_per_user: float | None = None
    acceptance_length: float | None = None
    iter_ms: float | None = None
    memory_gb: float | None = None

    OPTIONAL = ("mechanism", "draft_len", "batch", "tokens_per_s_per_user", "acceptance_length", "iter_ms",
                "memory_gb")


@record
class CountRow(Record):
    """The best total output rate at one GPU count: its prefill and decode GPUs, whether it meets the target, the
    tokens/s; the decode layout, its instances and the instance's configuration (InstanceBest's); why (not) met."""

    gpus: int
    prefill_gpus: int
    decode_gpus: int
    meets: bool
    tps: float
    layout: str | None = None
    instances: int | None = None
    mechanism: str | None = None
    draft_len: int | None = None
    batch: int | None = None
    tokens_per_s_per_user: float | None = None
    acceptance_length: float | None = None
    iter_ms: float | None = None
    memory_gb: float | None = None
    why: str = ""

    OPTIONAL = ("layout", "instances", "mechanism", "draft_len", "batch", "tokens_per_s_per_user",
                "acceptance_length", "iter_ms", "memory_gb")


@record
class LoadAnswer(Record):
    """The GPU-count search's pick: the mode (agg: aggregated replicas; disagg: the pools) and its GPUs."""

    mode: str
    gpus: int


@record
class CapacityAnswer(Record):
    """GPUs for a load: the model, device, engine, the targets, the GPU counts searched (up to max_gpus, whole nodes
    of node_gpus), the lengths or context, the prefill pool (GPUs, s per request), each count's best (counts), each
    layout's best instance, the first count that meets the targets; with ISL the prefill's TTFT target (ms) and the
    aggregated replicas (None: no TP meets the targets); the answer; why the prefill cannot meet its target, why
    nothing meets the targets, or why one count fewer fails."""

    model: str
    hardware: str
    engine: str
    target_tps: float
    target_tps_per_user: float
    max_gpus: int
    isl: int | None
    osl: int | None
    context_len: int
    node_gpus: int
    prefill_gpus: int
    prefill_s_per_request: float
    counts: list
    layouts: dict
    best: CountRow | None
    prefill_ttft_target_ms: float | None
    aggregated: AggregatedReplicas | None
    answer: LoadAnswer | None
    prefill_unreachable: str | None = None
    infeasible: str | None = None
    smaller_fails: str | None = None

    OPTIONAL = ("prefill_unreachable", "infeasible", "smaller_fails")

    def _names(self) -> list[str]:
        names = super()._names()  # the prefill target and the aggregated replicas: with ISL only (None is an answer)
        return names if self.isl else [n for n in names if n not in ("prefill_ttft_target_ms", "aggregated")]


def candidate_layouts(model, node: int, max_gpus: int) -> list[Layout]:
    """Layouts of whole nodes up to `max_gpus`: per node count k, TP `node` (with and without EP over the node(s)
    for MoE), DP attention over all GPUs with EP over all (TP 1, and TP `node` per DP rank when k > 1), and
    pipeline stages of TP `node` (with EP within a stage)."""
    moe = model.moe is not None
    out = []
    k = 1
    while k * node <= max_gpus:
        g = k * node
        cands = []
        if k == 1:
            cands += [Layout(tp=node)] + ([Layout(tp=node, ep=node)] if moe else [])
        if moe:
            cands.append(Layout(tp=1, dp=g, ep=g))
            if k > 1:
                cands.append(Layout(tp=node, dp=k, ep=g))
        if k > 1:
            cands.append(Layout(tp=node, pp=k))
            if moe:
                cands.append(Layout(tp=node, ep=node, pp=k))
        for lay in cands:
            try:
                lay.check(model)
            except SpecplanError:
                continue
            if lay not in out:
                out.append(lay)
        k *= 2
    return out


def prefill_groups(rate_per_s: float, per_req_s: float, max_ttft_s=None) -> int:
    """Prefill groups that keep the TTFT of a Poisson stream at `rate_per_s` under `max_ttft_s`: the smallest g
    with per_req + M/D/1 wait (rho / (2 (1 - rho)) per_req, rho = rate per_req / g) <= max_ttft_s; without a
    target the wait is held to one prefill (TTFT <= 2 per_req, rho <= 2/3: a stated default). 0 if unreachable
    (the prefill alone exceeds the target)."""
    limit = 2.0 * per_req_s if max_ttft_s is None else float(max_ttft_s)
    if per_req_s > limit:
        return 0
    # per_req (1 + rho / (2 (1 - rho))) <= limit  <=>  rho <= 2 (k - 1) / (2k - 1), k = limit / per_req
    k = limit / per_req_s
    rho_max = 2.0 * (k - 1.0) / (2.0 * k - 1.0)
    if rho_max <= 0:
        return 0
    return max(1, math.ceil(rate_per_s * per_req_s / rho_max - 1e-12))


def prefill_gpus(model, hw, precision, isl, osl, target_tps, node: int, max_ttft_s=None) -> tuple[int, float]:
    """(GPUs of the prefill pool in whole nodes, prefill seconds per request on one TP-`node` group), the pool
    sized to the TTFT target (prefill_groups); 0 GPUs when the prefill alone misses the target."""
    if not isl:
        return 0, 0.0
    from specplan.serving.prefill import prefill_s

    n_seqs = 4  # a few prompts per prefill batch (the per-token cost is flat once compute-bound)
    per_req = float(prefill_s(model, hw, node, isl, precision=precision, n_seqs=n_seqs)) / n_seqs
    groups = prefill_groups(target_tps / osl, per_req, max_ttft_s)
    return groups * node, per_req


def aggregated_answer(model, hw, *, load: LoadTarget, max_gpus, node, drafts: DraftSearch, max_ttft_ms=None,
                      dtypes: Dtypes = Dtypes(), engine=None) -> AggregatedReplicas | None:
    """GPUs for the load as identical aggregated replicas, through the serving model: for each TP within the node,
    the best replica (recommend_serving: mechanism, D, concurrency with TPOT <= 1 / tokens/s/user and the TTFT
    target) and ceil(target / its tokens/s) replicas; the fewest GPUs, or None when no TP meets the targets."""
    from specplan.planning.recommend_serving import recommend_serving, tp_candidates
    from specplan.serving.workload import Workload

    best, need = None, {}
    for tp in tp_candidates(model, max_gpus, node):
        r = recommend_serving(model, hw, Workload(load.isl, load.osl, concurrency=1.0), tp=tp, engine=engine,
                              drafts=dataclasses.replace(drafts, mechanisms=list(drafts.mechanisms or ()) or ["none"]),
                              sla=Sla(max_ttft_ms=max_ttft_ms, max_tpot_ms=1e3 / load.tps_per_user),
                              ranking=Ranking(top=1), grid=GridOptions(search_concurrency=True, d_by_load=False),
                              **{k: v for k, v in (("dtype", dtypes.dtype), ("kv_dtype", dtypes.kv_dtype))
                                 if v is not None})
        b = r.best
        if b is None:
            continue
        per = b.tokens_per_s_per_gpu * tp
        replicas = math.ceil(load.tps / per - 1e-12)
        row = AggregatedReplicas("agg", replicas * tp, tp, replicas, b.mechanism, b.draft_len, b.concurrency, per,
                                 b.tpot_ms, b.ttft_ms, b.tokens_per_s_per_user, replicas * tp <= max_gpus,
                                 b.joules_per_token)  # at a replica's operating point
        need[tp] = row.gpus
        if best is None or (row.gpus, -per) < (best.gpus, -best.tokens_per_s_per_replica):
            best = row
    if best is not None:  # why one GPU fewer fails: one replica fewer of the best TP, and what every TP needs
        k, tp, per = best.replicas - 1, best.tp, best.tokens_per_s_per_replica
        fewer = (f"{k * tp} GPUs = {k} x TP {tp} replicas serve {k * per:,.0f} tokens/s, below {load.tps:,.0f}"
                 if k else f"one TP {tp} replica is the smallest unit that meets {load.tps_per_user:g} tokens/s/user")
        best = dataclasses.replace(best, smaller_fails=fewer + "; GPUs each TP needs: "
                                   + ", ".join(f"TP {t} {g}" for t, g in need.items()))
    return best


def _best_per_layout(model, hw, lay, mechs, acceptance, max_d, context, target_user, common) -> InstanceBest:
    """Best instance: max tokens/s of one instance with tok/s/user >= target and memory fitting."""
    from specplan.speculation.speedup import evaluate, evaluate_kw

    b = np.arange(1, BATCH_MAX + 1, dtype=float)
    best, max_user = InstanceBest(lay.gpus, 0.0, False, 0.0), 0.0
    for mech in ["none", *mechs]:
        d = np.array([0]) if mech == "none" else np.arange(1, max_d + 1)
        r = evaluate_kw(model, hw, layout=lay, batch=b[:, None], context_len=context, draft_len=d[None, :],
                     mechanism=mech, acceptance=acceptance.get(mech), **common)
        fits = np.asarray(r.fits)
        user = np.asarray(r.tokens_per_s_per_user)
        tps = b[:, None] * user
        if fits.any():
            max_user = max(max_user, float(np.max(np.where(fits, user, 0.0))))
        ok = fits & (user >= target_user)
        if not ok.any():
            continue
        i, j = np.unravel_index(int(np.argmax(np.where(ok, tps, -1.0))), tps.shape)
        if tps[i, j] > best.tps:
            best = InstanceBest(lay.gpus, float(tps[i, j]), True, 0.0, mech, int(d[j]), int(b[i]), float(user[i, j]),
                                float(np.asarray(r.acceptance_length)[i, j]), 1e3 * float(np.asarray(r.iter_s)[i, j]),
                                float(np.asarray(r.memory_total_bytes)[i, j]) / 1e9)
    return dataclasses.replace(best, max_user=max_user)


DEFAULT_MAX_GPUS = 64  # --max-gpus default, raised to two nodes where a node is larger (GB200 NVL72: 144)


def search(model, hardware, *, load: LoadTarget, max_gpus: int | None = None, layouts=None,
           drafts: DraftSearch | None = None, dtypes: Dtypes = Dtypes(), max_ttft_ms=None,
           engine=None) -> CapacityAnswer:
    """Smallest GPU count (whole nodes, <= max_gpus) meeting both targets of `load`, its layout and configuration,
    and why the next smaller count fails. `layouts`: the candidates (default `candidate_layouts`); `drafts`: the
    speculation priced (default: none, D up to 8); `dtypes`: weights / KV as named (None: the checkpoint's)."""
    target_tps, target_tps_per_user = load.tps, load.tps_per_user
    isl, osl, context_len = load.isl, load.osl, load.context_len
    drafts = drafts if drafts is not None else DraftSearch(max_draft_len=8)
    mechanisms, acceptance, max_draft_len = drafts.mechanisms or (), drafts.acceptance, drafts.max_draft_len
    dtype, kv_dtype = dtypes.dtype, dtypes.kv_dtype
    from specplan.costs.precision import resolve_precision
    from specplan.profiles.registry import load_engine, load_hardware, load_model
    from specplan.planning.sweep import parse_acceptance

    if not (target_tps > 0):
        raise SpecplanError(f"target tokens/s (--target-tps): must be > 0, got {target_tps:g}")
    if not (target_tps_per_user > 0):
        raise SpecplanError(f"target tokens/s/user (--target-tps-per-user): must be > 0, got {target_tps_per_user:g}")
    if (isl is None) != (osl is None):
        raise SpecplanError("load: give both --isl and --osl (or --context alone)")
    if isl is not None and (isl < 1 or osl < 1):
        raise SpecplanError(f"load: --isl and --osl must be >= 1, got {isl} and {osl}")
    if isl is None and context_len is None:
        raise SpecplanError("load: give --isl and --osl, or --context")
    if max_gpus is not None:
        check_int(max_gpus, "--max-gpus", 1, MAX_GPUS)  # the GPU counts searched are a list: bounded
    m = load_model(model)
    if isl is not None:  # the same bounds and context check as every serving command
        from specplan.serving.workload import Workload

        Workload(isl, osl, concurrency=1.0).check(m)
    hw = load_hardware(hardware)
    if hw.kind == "lpu":
        raise SpecplanError(f"--target-tps: {hw.id} is an LPU; the GPU-count search needs GPUs")
    node = max(1, hw.scaleup_domain)
    if max_gpus is None:
        max_gpus = max(DEFAULT_MAX_GPUS, 2 * node)
    group = _instance_tp(m, node)
    if max_gpus < node:
        raise SpecplanError(f"--max-gpus: must be at least one node of {node} GPUs, got {max_gpus}")
    context = context_len if isl is None else isl + osl // 2
    acc = {k: parse_acceptance(v) for k, v in (acceptance or {}).items()}
    common = {"dtype": dtype, "kv_dtype": kv_dtype}
    prec = resolve_precision(m, hw, dtype, kv_dtype)
    lays = [as_layout(x) for x in layouts] if layouts else candidate_layouts(m, group, max_gpus)
    best = {lay: _best_per_layout(m, hw, lay, list(mechanisms), acc, max_draft_len, context, target_tps_per_user,
                                  common) for lay in lays}
    max_ttft_s = None if max_ttft_ms is None else max_ttft_ms / 1e3
    pre, per_req = prefill_gpus(m, hw, prec, isl, osl, target_tps, group, max_ttft_s) if isl else (0, 0.0)
    counts = list(range(node, max_gpus + 1, node))
    table = [_at_count(g, pre, best, target_tps, group) for g in counts]
    found = next((t for t in table if t.meets), None)
    agg = None
    if isl:
        agg = aggregated_answer(m, hw, load=load, max_gpus=max_gpus, node=node,
                                drafts=DraftSearch(mechanisms, acceptance, max_draft_len), max_ttft_ms=max_ttft_ms,
                                dtypes=dtypes, engine=engine)
    infeasible = smaller = None
    if found is None:
        infeasible = _why(table[-1] if table else None, best, target_tps, target_tps_per_user, max_gpus)
    else:
        i = table.index(found)
        smaller = (f"{table[i - 1].gpus} GPUs: {table[i - 1].why}" if i > 0 else
                   f"{found.gpus} GPUs is one node, the smallest count searched")
    return CapacityAnswer(
        m.id, hw.id, load_engine(engine).id, target_tps, target_tps_per_user, max_gpus, isl, osl, context, node, pre,
        per_req, table, {lay.name: b for lay, b in best.items()}, found,
        (max_ttft_ms if max_ttft_ms is not None else 2e3 * per_req) if isl else None, agg,
        # a decode pool without prefill GPUs (one prompt's prefill alone misses the TTFT target) is no deployment
        answer_of(found if not (isl and pre == 0) else None, agg),
        prefill_unreachable=(f"one prompt's prefill takes {1e3 * per_req:.0f} ms on a TP {group} group, over the "
                             f"TTFT target {max_ttft_ms:g} ms") if isl and pre == 0 else None,
        infeasible=infeasible, smaller_fails=smaller)


def answer_of(disagg: CountRow | None, agg: AggregatedReplicas | None) -> LoadAnswer | None:
    """The answer of the GPU-count search: the fewer GPUs of the disaggregated pools (`disagg`, its first count that
    meets the targets) and the aggregated replicas (`agg`, within the GPU budget); the disaggregated one on a tie
    (its count is whole nodes); None when neither meets the targets."""
    a = agg if agg is not None and agg.fits_budget else None
    if disagg is None and a is None:
        return None
    if a is not None and (disagg is None or a.gpus < disagg.gpus):
        return LoadAnswer("agg", a.gpus)
    return LoadAnswer("disagg", disagg.gpus)


def _instance_tp(model, node: int) -> int:
    """TP of one instance of the search: the largest power of two within the node that the model's heads allow."""
    from specplan.planning.recommend_serving import tp_candidates

    tps = tp_candidates(model, node, node)
    if not tps:
        raise SpecplanError(f"--target-tps: no TP up to the node's {node} GPUs splits {model.id}'s heads")
    return max(tps)


def _at_count(gpus: int, pre: int, best: dict, target_tps: float, group: int) -> CountRow:
    """The best total output rate at `gpus` GPUs (prefill pool first, decode pool of whole instances); the
    prefill pool comes in TP-`group` groups, so even a small load takes one."""
    dec = gpus - pre
    row = CountRow(gpus, pre, max(dec, 0), False, 0.0)
    if dec <= 0:
        return dataclasses.replace(row, why=(
            f"the prefill pool takes {pre} GPUs ({pre // group} TP {group} group{'s' if pre > group else ''}"
            f", its smallest unit), leaving none for decoding"))
    top = None
    for lay, b in best.items():
        if not b.feasible or dec % lay.gpus:
            continue
        tps = dec // lay.gpus * b.tps
        if top is None or tps > top[0]:
            top = (tps, lay, b)
    if top is None:
        return dataclasses.replace(row, why="no layout that fits these decode GPUs meets the tokens/s/user target")
    tps, lay, b = top
    n = dec // lay.gpus
    return dataclasses.replace(
        row, tps=tps, layout=lay.name, instances=n, meets=tps >= target_tps, mechanism=b.mechanism,
        draft_len=b.draft_len, batch=b.batch, tokens_per_s_per_user=b.tokens_per_s_per_user,
        acceptance_length=b.acceptance_length, iter_ms=b.iter_ms, memory_gb=b.memory_gb,
        why=(f"best {tps:,.0f} tokens/s < {target_tps:,.0f} ({n} x {lay.name}, {b.mechanism} D = {b.draft_len}, "
             f"batch {b.batch} per instance, {b.tokens_per_s_per_user:.1f} tokens/s/user)" if tps < target_tps
             else "meets both targets"))


def _why(last, best, target_tps, target_user, max_gpus) -> str:
    if not any(b.feasible for b in best.values()):
        top = max((b.max_user for b in best.values()), default=0.0)
        return (f"no layout reaches {target_user:g} tokens/s/user with its memory fitting (best {top:.1f}), at any "
                f"GPU count up to {max_gpus}")
    return f"{max_gpus} GPUs (--max-gpus) fall short: {last.why}"

"""`recommend` with a serving workload: the (mechanism, D, concurrency[, pools]) of most tokens/s/GPU whose
TTFT and TPOT meet the SLA (--max-ttft-ms, --max-tpot-ms), from the serving model (specplan.serving)."""

from __future__ import annotations

import dataclasses

import numpy as np

from specplan.core.errors import SpecplanError
from specplan.core.records import Record, record
from specplan.profiles.registry import load_engine, load_model
from specplan.speculation.acceptance_spec import parse_acceptance
from specplan.planning.recommend import _draft_range, _mechanisms
from specplan.serving.api import serve
from specplan.speculation.speedup import options_objects
from specplan.serving.disaggregated import disaggregated_grid
from specplan.serving.workload import Workload
from specplan.planning.options import DeploymentSpace, GridOptions, Ranking, ServingOptions, Sla
from specplan.speculation.spec import DraftSearch

CONCURRENCIES = np.unique(np.round(np.geomspace(1, 1024, 41)))  # searched when --concurrency is not given
REFINE_POINTS = 64  # each (pool, D) priced again between its best grid point's neighbours: every whole concurrency
# where they are at most 63 apart (the grid's neighbours are up to 42 % apart: 38-54, 64-91), else 0.3-0.6 % apart
POOL_SIZES = (1, 2, 3, 4)  # prefill and decode instances searched in disagg mode without --pools
UNIT_INSTANCES = 8  # recommend --gpus: most instances in one disaggregated unit (disagg_units: every xPyD with
# x + y <= 8, 28 units); the budget is filled with replicas of the best unit


@record
class ServingRow(Record):
    """One searched configuration (mechanism, D, pools) at its best concurrency under the SLA (or, where none meets
    it, its lowest TPOT): whether it meets the SLA, TPOT and TTFT (ms), tokens/s per user and per GPU, AL, the
    lowest TPOT and TTFT over its whole grid (ms), the decode batch; energy and cost where the device has a power
    model ($/Mtok with a price); a note (OSL 1); its tokens/s/GPU over the best row without speculation."""

    mechanism: str
    draft_len: int
    feasible: bool
    concurrency: float
    pools: str | None
    tpot_ms: float
    ttft_ms: float
    tokens_per_s_per_user: float
    tokens_per_s_per_gpu: float
    acceptance_length: float
    min_tpot_ms: float
    min_ttft_ms: float
    decode_batch: float
    power_w_per_gpu: float | None = None
    joules_per_token: float | None = None
    tokens_per_s_per_mw: float | None = None
    usd_per_mtok: float | None = None
    note: str | None = None
    speedup_vs_none: float | None = None

    OPTIONAL = ("power_w_per_gpu", "joules_per_token", "tokens_per_s_per_mw", "usd_per_mtok", "note")


@record
class ServingSearch(Record):
    """recommend_serving's answer: the search's inputs (model, engine, mode, ISL, OSL, TP or layout, the pools'
    own layouts, hardware, objective, SLA in ms), the ranked rows, notes, the best row and the best without
    speculation (None: none meets the SLA), the pareto grid's blocks (with keep_grid), the dtypes as given;
    why nothing qualifies, and the best D by load of the winner, when they apply."""

    model: str
    engine: str
    mode: str
    isl: int
    osl: int
    tp: int
    layout: str | None
    prefill_layout: str | None
    decode_layout: str | None
    hardware: str
    objective: str
    max_ttft_ms: float | None
    max_tpot_ms: float | None
    ranked: list
    notes: list
    best: ServingRow | None
    baseline: ServingRow | None
    grid: list
    dtype: str | None
    kv_dtype: str | None
    infeasible: str | None = None
    d_by_load: object = None

    OPTIONAL = ("layout", "prefill_layout", "decode_layout", "infeasible", "d_by_load")


@record
class AtBest(Record):
    """A recommendation's concurrency priced with the D its band gets (tokens/s/GPU, TPOT and TTFT in ms), beside
    its own fixed D's numbers."""

    concurrency: float
    draft_len: int
    tokens_per_s_per_gpu: float
    tpot_ms: float
    ttft_ms: float
    fixed_draft_len: int
    fixed_tokens_per_s_per_gpu: float
    fixed_tpot_ms: float


def _candidates(workload, search_concurrency: bool, pools=None):
    conc = CONCURRENCIES if search_concurrency else np.atleast_1d(np.asarray(workload.concurrency, dtype=float))
    if workload.mode != "disagg":
        return conc, [None]
    if workload.pools is not None:
        return conc, [workload.pools]
    return conc, list(pools) if pools is not None else [(x, y) for x in POOL_SIZES for y in POOL_SIZES]


# the options recommend_serving took one by one before they were grouped into DraftSearch, Sla, Ranking, GridOptions
LEGACY_OPTIONS = frozenset(("mechanisms", "acceptance", "max_draft_len", "extrapolate", "max_ttft_ms", "max_tpot_ms",
                            "search_concurrency", "top", "keep_grid", "pools", "objective", "price", "d_by_load",
                            "budget"))


def recommend_serving(model, hardware, workload, *, tp=1, engine=None, drafts: DraftSearch | None = None,
                      sla: Sla = Sla(), ranking: Ranking = Ranking(), grid: GridOptions = GridOptions(),
                      **kw) -> ServingSearch:
    """Rank (mechanism, D) of `drafts` by their best tokens/s/GPU (or lowest $/Mtok or J/token:
    `ranking.objective`) over the concurrency (and pools) grid under the SLA; disaggregated without workload.pools
    searches `grid.pools` (default every xPyD with x, y in POOL_SIZES); rows carry power, J/token, tokens/s/MW and
    $/Mtok (specplan.planning.cost; `ranking.price`: gpu_hour_usd, kwh_usd, pue, tier). `grid.d_by_load`: also the
    best D per concurrency band for the winner (aggregated, closed loop; off where only the best row is read).
    `grid.budget` (GPUs; recommend --gpus): only the rows whose replicas on the budget can still put out the most
    tokens/s are refined (_worth_refining). `kw`: the deployment's other options (dtype, kv_dtype, draft_model,
    prefill_layout, ...: ServingOptions), passed to the serving model."""
    legacy = sorted(set(kw) & LEGACY_OPTIONS)
    if legacy:  # a caller of the old signature: say where the options went, not a TypeError deep in serving
        raise TypeError(f"recommend_serving: {', '.join(legacy)} travel in drafts (DraftSearch), sla (Sla), "
                        f"ranking (Ranking) and grid (GridOptions)")
    return serving_search(model, hardware, workload, tp=tp, engine=engine, drafts=drafts, sla=sla, ranking=ranking,
                          grid=grid, options=ServingOptions(**kw))


def serving_search(model, hardware, workload, *, tp=1, engine=None, drafts: DraftSearch | None = None,
                   sla: Sla = Sla(), ranking: Ranking = Ranking(), grid: GridOptions = GridOptions(),
                   options: ServingOptions = ServingOptions()) -> ServingSearch:
    """recommend_serving with the deployment's other options as a ServingOptions."""
    from specplan.planning.cost import OBJECTIVES

    drafts = drafts if drafts is not None else DraftSearch()
    mechanisms, acceptance, max_draft_len, extrapolate = (drafts.mechanisms, drafts.acceptance, drafts.max_draft_len,
                                                          drafts.extrapolate)
    max_ttft_ms, max_tpot_ms = sla.max_ttft_ms, sla.max_tpot_ms
    objective, price, top = ranking.objective, ranking.price, ranking.top
    search_concurrency, keep_grid, pools, d_by_load, budget = (grid.search_concurrency, grid.keep_grid, grid.pools,
                                                               grid.d_by_load, grid.budget)

    if objective not in OBJECTIVES:
        raise SpecplanError(f"objective: must be one of {', '.join(OBJECTIVES)}, got '{objective}'")
    for name, v in (("max TTFT (--max-ttft-ms)", max_ttft_ms), ("max TPOT (--max-tpot-ms)", max_tpot_ms)):
        if v is not None and not (v > 0):
            raise SpecplanError(f"{name}: must be > 0 ms, got {v:g}")
    m = load_model(model)
    workload.check(m)  # a request beyond the model's context: refused before any pricing
    eng = load_engine(engine)
    acceptance = {k: parse_acceptance(v) for k, v in (acceptance or {}).items()}
    mechs, notes = _serving_mechanisms(m, mechanisms, acceptance)
    if search_concurrency is None:
        search_concurrency = workload.request_rate is None and workload.concurrency is None
    conc, pools = _candidates(workload, search_concurrency, pools)
    rows, grid, d_top = [], [], {}
    if any(x != "none" for x in mechs):  # issue 19: the round's numbers nothing fitted out of sample, in one line
        from specplan.speculation.round import moe_verify_note, spec_cap_note, unfitted_note

        notes += (moe_verify_note() if m.moe is not None else []) + unfitted_note(eng) + spec_cap_note(eng,
                                                                                                       launched=True)
    eng = eng.as_launched()  # priced as the launch files start it (SGLang: --max-running-requests = concurrency)
    sla = (max_ttft_ms, max_tpot_ms)
    ctx = _Ctx(m, hardware, workload, tp, eng, options, sla, objective, price)
    floor = 0.0  # with a budget: the most output tokens/s a feasible row's replicas reach so far
    for mech in mechs:
        acc = acceptance.get(mech)
        d = np.arange(0, 1) if mech == "none" else _draft_range(acc, max_draft_len, extrapolate, notes, mech)[1:]
        if d.size == 0:  # --max-draft-len 0: the baseline (mechanism none) is the only configuration
            note = "max draft length 0 (--max-draft-len): only the baseline (mechanism none, D = 0) is searched"
            notes += [] if note in notes else [note]
            continue
        d_top[mech] = int(d.max())
        cols = [(pool, dd) for pool in pools for dd in d]  # the search's columns: one per (pool, D)
        col_pools, col_d = [p for p, _ in cols], np.array([dd for _, dd in cols])
        # a searched concurrency is per decode instance: an xPyD column's grid is CONCURRENCIES x y in all
        scale = np.array([1.0 if p is None or not search_concurrency else float(p[1]) for p in col_pools])
        wl = workload if workload.request_rate is not None else dataclasses.replace(
            workload, concurrency=conc[:, None] * scale)
        r = _price(ctx, wl, col_pools, mech, col_d, acc)
        found: list = []
        _pool_rows(ctx, found, grid if keep_grid else None, (mech, col_d, col_pools), r, _energy(ctx, wl, r, col_d),
                   np.asarray(wl.concurrency if wl.concurrency is not None else conc))
        if search_concurrency and workload.request_rate is None:
            keep = None
            if budget is not None and workload.mode == "disagg" and not keep_grid and objective == "tokens-per-gpu":
                keep, floor = _worth_refining(found, col_pools, r, conc, scale, tp, budget, floor)
            found = _refine(ctx, found, grid if keep_grid else None, (mech, col_d, col_pools, acc), (conc, scale),
                            keep)
        rows += found
    rows, feasible, base, ranked = _rank(rows, objective, top)
    best = feasible[0] if feasible else None
    pre = options.prefill_layout
    d_sched = None
    if (d_by_load and best is not None and best.mechanism != "none" and workload.mode == "agg"
            and workload.request_rate is None):
        d_sched = serving_d_schedule(ctx, best, acceptance.get(best.mechanism), d_top[best.mechanism])
    return ServingSearch(
        model=m.id, engine=eng.id, mode=workload.mode, isl=workload.isl, osl=workload.osl, tp=getattr(tp, "tp", tp),
        layout=tp.name if hasattr(tp, "dp") else None,  # a Layout beyond TP
        prefill_layout=None if pre is None else getattr(pre, "name", pre),
        decode_layout=None if pre is None else getattr(tp, "name", f"tp{tp}"),
        hardware=getattr(hardware, "id", hardware), objective=objective, max_ttft_ms=max_ttft_ms,
        max_tpot_ms=max_tpot_ms, ranked=ranked, notes=notes, best=best, baseline=base, grid=grid,
        dtype=options.dtype, kv_dtype=options.kv_dtype,  # as given (None: the checkpoint's), for launch
        infeasible=None if feasible else _infeasible(rows, max_ttft_ms, max_tpot_ms), d_by_load=d_sched)


@record
class _Ctx:
    """One serving search's fixed inputs: the model and device (profiles or ids), the workload, the layout (a TP
    or a Layout), the engine profile, the deployment's other options (dtype, kv_dtype, ...), the SLA
    (max TTFT ms, max TPOT ms), the objective and the price options."""

    m: object
    hardware: object
    workload: Workload
    tp: object
    eng: object
    options: ServingOptions
    sla: tuple
    objective: str
    price: object


def _price(ctx: _Ctx, wl, pools, mech, d, acc) -> dict:
    """The serving result on a grid of columns, column k at pool pools[k] (aggregated: None) and draft length d[k],
    at `wl`'s loads (its concurrency: one row per load, or one load per row and column): one evaluation."""
    m, hardware, tp, eng, kw = ctx.m, ctx.hardware, ctx.tp, ctx.eng, ctx.options.given()
    if wl.mode == "disagg":
        dep, spec, _ = options_objects(m, hardware, tp=tp, engine=eng, mechanism=mech, draft_len=d[None, :],
                                       acceptance=acc, **kw)  # no admission rule in a disaggregated pool
        pre = ([p[2] if len(p) > 2 else None for p in pools]  # (x, y, prefill layout): pools of their own layouts
               if any(len(p) > 2 for p in pools) else None)
        return disaggregated_grid(dep, spec, wl, (np.array([float(p[0]) for p in pools]),
                                                  np.array([float(p[1]) for p in pools])), prefill_layouts=pre)
    return serve(m, hardware, wl, tp=tp, engine=eng, mechanism=mech, draft_len=d[None, :], acceptance=acc, **kw)


def _energy(ctx: _Ctx, workload, r, d):
    """serving_energy of a grid of columns at draft lengths `d` (it reads only the workload's lengths)."""
    from specplan.planning.cost import serving_energy

    return serving_energy(ctx.m, ctx.hardware, workload, r, d[None, :], tp=ctx.tp, dtype=ctx.options.dtype,
                          kv_dtype=ctx.options.kv_dtype, price=ctx.price)


def _fill(pool, tp: int, budget: int) -> int:
    """GPUs that replicas of one unit (a TP instance, or an xPyD unit of them) use on `budget` GPUs."""
    unit = tp if pool is None else (pool[0] + pool[1]) * tp
    return budget // unit * unit


def _worth_refining(found: list, pools: list, r: dict, conc, scale, tp: int, budget: int, floor: float):
    """(columns worth refining, the new floor): a column's refined point lies between its grid pick's neighbours,
    and throughput rises with concurrency in a closed loop, so it reaches at most the tokens/s/GPU of the upper
    neighbour; a column is refined only when its pick is feasible and that bound, times the GPUs its replicas use
    on the budget, reaches the most tokens/s a feasible pick (of any column and mechanism so far) puts out."""
    tps = np.broadcast_to(np.asarray(r.tokens_per_s_per_gpu, dtype=float), (conc.size, len(found)))
    up = np.minimum(np.searchsorted(conc, np.array([x.concurrency for x in found]) / scale) + 1, conc.size - 1)
    fill = np.array([_fill(p, tp, budget) for p in pools], dtype=float)
    lb = np.array([x.tokens_per_s_per_gpu if x.feasible else 0.0 for x in found]) * fill
    floor = max(floor, float(lb.max(initial=0.0)))
    ub = tps[up, np.arange(len(found))] * fill
    return [k for k, x in enumerate(found) if x.feasible and ub[k] >= floor], floor


def refined_concurrency(conc: np.ndarray, picked: np.ndarray, scale=1.0) -> np.ndarray:
    """(REFINE_POINTS, len(picked)) whole concurrencies, evenly spaced from each picked grid value's lower grid
    neighbour to its upper one (the picked value's own when it is the first or last): every whole concurrency
    between them when they are at most REFINE_POINTS - 1 apart (17 geometric points skipped some: 38-54 priced 49
    and 51 but not 50, the best of a brute force). `scale`: each column's grid is conc x scale."""
    i = np.searchsorted(conc, picked / scale)
    lo, hi = conc[np.maximum(i - 1, 0)] * scale, conc[np.minimum(i + 1, conc.size - 1)] * scale
    t = np.linspace(0.0, 1.0, REFINE_POINTS)[:, None]
    return np.round(lo + (hi - lo) * t)


def _refine(ctx: _Ctx, found: list, grid: list | None, cols: tuple, loads: tuple, keep=None) -> list:
    """Each column's row (pools[k], d[k]) re-searched around its grid pick (refined_concurrency; one more pricing,
    every column in it; `keep`: only these columns); a refined row replaces the grid's when it ranks higher
    (feasible first, then the objective). The lowest TPOT and TTFT a row reports stay the whole grid's. With
    `grid`, the refined points not already in it are added. `cols`: (mechanism, D per column, pools per column,
    acceptance); `loads`: (the concurrency grid, each column's scale of it)."""
    from specplan.planning.cost import objective_value

    mech, d, pools, acc = cols
    conc, scale = loads
    objective = ctx.objective

    keep = list(range(len(found))) if keep is None else list(keep)
    if not keep:
        return found
    c2 = refined_concurrency(conc, np.array([found[k].concurrency for k in keep]),
                             scale[keep])  # (REFINE_POINTS, columns)
    wl2 = dataclasses.replace(ctx.workload, concurrency=c2)
    pk, dk = [pools[k] for k in keep], d[keep]
    r2 = _price(ctx, wl2, pk, mech, dk, acc)
    fine, more = [], ([] if grid is not None else None)
    _pool_rows(ctx, fine, more, (mech, dk, pk), r2, _energy(ctx, wl2, r2, dk), c2, refined=True)
    if grid is not None:  # the refined points, each kept where no earlier point has its key (grid_frame)
        grid += more
    key = lambda x: (x.feasible, objective_value(objective, x) if x.feasible else -x.tpot_ms)  # noqa: E731
    out = list(found)
    for k, b in zip(keep, fine):
        a = found[k]
        out[k] = dataclasses.replace(b if a.feasible and key(b) > key(a) else a, min_tpot_ms=a.min_tpot_ms,
                                     min_ttft_ms=a.min_ttft_ms)
    return out


def serving_d_schedule(ctx: _Ctx, best: ServingRow, acc, max_d: int):
    """The best D per concurrency band for the winner's mechanism (serving/d_schedule.py: each band at its own
    steady state, tokens/s/GPU, no SLA) in the forms vLLM and TensorRT-LLM accept, and the winner's concurrency
    priced with the D its band gets (`at_best`, beside the fixed D's numbers): a DSchedule."""
    from specplan.serving.d_schedule import DEFAULT_EDGES, d_schedule

    m, hardware, workload, tp, eng, kw = ctx.m, ctx.hardware, ctx.workload, ctx.tp, ctx.eng, ctx.options.given()
    c = float(best.concurrency)
    edges = list(DEFAULT_EDGES)
    while edges[-1] < c:  # bands up to the winner's concurrency
        edges.append(2 * edges[-1])
    s = d_schedule(m, hardware, workload.isl, workload.osl, drafts=DraftSearch([best.mechanism],
                                                                              {best.mechanism: acc}, max_d),
                   edges=edges, tp=tp, engine=eng, **kw)
    k = next(kk for lo, hi, kk in s.vllm if c <= hi or hi == s.vllm[-1][1])
    fixed = int(best.draft_len)
    # one number per point: the answer's own D at its concurrency is the ranked answer itself (its numbers, not a
    # second pricing of the same point); only a band D that differs is priced here
    at = (float(best.tokens_per_s_per_gpu), float(best.tpot_ms), float(best.ttft_ms))
    if k != fixed:
        r = serve(m, hardware, Workload(workload.isl, workload.osl, concurrency=c), tp=tp, engine=eng,
                  mechanism=best.mechanism, draft_len=np.array([k]), acceptance=acc, **kw)
        at = (float(np.asarray(r.tokens_per_s_per_gpu, dtype=float)[0]),
              1e3 * float(np.asarray(r.tpot_s, dtype=float)[0]), 1e3 * float(np.asarray(r.ttft_s, dtype=float)[0]))
    at_best = AtBest(c, k, *at, fixed, float(best.tokens_per_s_per_gpu), float(best.tpot_ms))
    return dataclasses.replace(s, at_best=at_best, notes=s.notes + [
        "bands are ranked by tokens/s/GPU without the SLA (each band's TPOT and TTFT at its D beside)"])


def _serving_mechanisms(m, mechanisms, acceptance) -> tuple[list[str], list[str]]:
    """(mechanisms to price, "none" first; notes): without any acceptance data only the baseline, said once."""
    try:
        only_none = mechanisms is not None and list(mechanisms) == ["none"]  # the baseline alone, asked for
        mechs = ["none"] + ([] if only_none else [x for x in _mechanisms(m.id, mechanisms, acceptance) if x != "none"])
    except SpecplanError:
        if mechanisms:
            raise
        return ["none"], [f"no shipped acceptance profile for {m.id}: speculation not evaluated (give --acceptance "
                          f"MECH=RATE, e.g. eagle3=0.7, to price a mechanism)"]
    return mechs, []


def _pool_rows(ctx: _Ctx, rows: list, grid: list | None, cols: tuple, r, e, conc, refined: bool = False) -> None:
    """Append one ServingRow per column (`cols`: mechanism, draft length d[k], pool pools[k]: its best concurrency
    under the SLA by the objective) and, with `grid`, every point (`refined`: points of a refinement)."""
    from specplan.planning.cost import row_energy

    mech, d, pools = cols
    max_ttft_ms, max_tpot_ms = ctx.sla
    objective, hw_id = ctx.objective, getattr(ctx.hardware, "id", ctx.hardware)
    shape = np.broadcast(r.tpot_s, d[None, :]).shape
    pts = _GridPoints.of(r, shape)
    ok = np.broadcast_to(np.asarray(r.fits) & np.asarray(r.stable), shape)
    if max_ttft_ms is not None:
        ok = ok & (pts.ttft_s * 1e3 <= max_ttft_ms)
    if max_tpot_ms is not None:  # OSL 1 has no TPOT (nan): a TPOT limit does not bind there
        ok = ok & ~(pts.tpot_s * 1e3 > max_tpot_ms)
    if objective == "tokens-per-gpu":
        obj = np.where(ok, pts.tokens_per_s_per_gpu, -np.inf)
    else:
        key = "usd_per_mtok" if objective == "cost" else "joules_per_token"
        val = None if e is None else getattr(e, key)  # the energy array the objective ranks by
        if val is None:
            raise SpecplanError(f"objective {objective}: no {key} on {hw_id} (no power model or no "
                                f"default price: give --gpu-hour-usd)")
        val = np.broadcast_to(val, shape)
        obj = np.where(ok & np.isfinite(val), -val, -np.inf)
    pools_s = [None if p is None else f"{p[0]}P{p[1]}D" + (f"@{p[2]}" if len(p) > 2 else "") for p in pools]
    by_load = np.asarray(conc, dtype=float).reshape(len(conc), -1)  # the loads: one per row (or per row and column)
    cc = np.broadcast_to(np.asarray(r.concurrency if r.concurrency is not None else by_load, dtype=float), shape)
    if grid is not None:
        grid.append(_grid_block((mech, d, cc, pools_s), pts, (np.broadcast_to(np.asarray(r.stable), shape),
                                                            np.broadcast_to(np.asarray(r.fits), shape), ok), e,
                                refined))
    note = _osl_one_note(r)
    any_ok, best_i = np.any(ok, axis=0), np.argmax(obj, axis=0)
    low_i, min_tpot, min_ttft = np.argmin(pts.tpot_s, axis=0), np.min(pts.tpot_s, axis=0), np.min(pts.ttft_s, axis=0)
    for j, dd in enumerate(d):
        i = int(best_i[j]) if any_ok[j] else int(low_i[j])
        rows.append(ServingRow(
            mechanism=mech, draft_len=int(dd), feasible=bool(ok[i, j]), concurrency=float(cc[i, j]),
            pools=pools_s[j], tpot_ms=1e3 * float(pts.tpot_s[i, j]), ttft_ms=1e3 * float(pts.ttft_s[i, j]),
            tokens_per_s_per_user=float(pts.tokens_per_s_per_user[i, j]),
            tokens_per_s_per_gpu=float(pts.tokens_per_s_per_gpu[i, j]),
            acceptance_length=float(pts.acceptance_length[i, j]), min_tpot_ms=1e3 * float(min_tpot[j]),
            min_ttft_ms=1e3 * float(min_ttft[j]), decode_batch=float(pts.decode_batch[i, j]), note=note,
            **row_energy(e, i, j)))


@record
class _GridPoints:
    """The serving result's per-point fields a search reads, as float arrays over the grid's (loads, columns)."""

    tpot_s: np.ndarray
    ttft_s: np.ndarray
    tokens_per_s_per_user: np.ndarray
    tokens_per_s_per_gpu: np.ndarray
    acceptance_length: np.ndarray
    decode_batch: np.ndarray

    @classmethod
    def of(cls, r, shape: tuple) -> "_GridPoints":
        """The fields of ServingGrid `r` broadcast to `shape`."""
        grid = lambda v: np.broadcast_to(np.asarray(v, dtype=float), shape)  # noqa: E731
        return cls(grid(r.tpot_s), grid(r.ttft_s), grid(r.tokens_per_s_per_user), grid(r.tokens_per_s_per_gpu),
                   grid(r.acceptance_length), grid(r.decode_batch))


def _runs(keys: list) -> list[list[int]]:
    """Indices of `keys` grouped into runs of equal consecutive keys (a pool's columns: its grid rows together)."""
    out: list[list[int]] = []
    for j, k in enumerate(keys):
        if out and keys[out[-1][-1]] == k:
            out[-1].append(j)
        else:
            out.append([j])
    return out


GRID_KEY = ("mechanism", "draft_len", "concurrency", "pools")  # a grid point's identity (refined points: once)


def _grid_block(cols: tuple, pts: _GridPoints, flags: tuple, e, refined: bool = False) -> dict:
    """Every point of one pricing as grid columns (arrays), in the grid's row order: pool by pool (runs of equal
    consecutive pools), within one the loads, within a load the columns. An unstable open-loop point (arrivals over
    capacity: no steady state) keeps its mechanism, D and pools and `stable: false`, but no concurrency, TPOT,
    TTFT, throughput or energy (NaN: empty cells), as predict prints none. `cols`: (mechanism, D per column, the
    concurrency array, pools per column); `flags`: (stable, fits, meets the SLA) arrays; `e`: the energy arrays
    (None: no power model); `refined`: points of a refinement (kept only where no earlier point has their key)."""
    from specplan.planning.cost import ENERGY_KEYS

    mech, d, cc, pools_s = cols
    stable, fits, meets = flags
    n = cc.shape[0]
    runs = [np.asarray(js) for js in _runs(pools_s)]
    i = np.concatenate([np.repeat(np.arange(n), len(js)) for js in runs])
    j = np.concatenate([np.tile(js, n) for js in runs])
    st = np.asarray(stable[i, j], dtype=bool)
    num = lambda v: np.where(st, np.asarray(v, dtype=float)[i, j], np.nan)  # noqa: E731
    energy = {} if e is None else {k: num(np.broadcast_to(np.asarray(v, dtype=float), cc.shape))
                                   for k in ENERGY_KEYS if (v := getattr(e, k)) is not None}
    return {"mechanism": np.full(i.size, mech, dtype=object), "draft_len": np.asarray(d, dtype=float)[j].astype(int),
            "concurrency": num(cc), "pools": np.array(pools_s, dtype=object)[j],
            "tpot_ms": num(1e3 * pts.tpot_s), "ttft_ms": num(1e3 * pts.ttft_s),
            "tokens_per_s_per_user": num(pts.tokens_per_s_per_user),
            "tokens_per_s_per_gpu": num(pts.tokens_per_s_per_gpu), "stable": st,
            "fits": np.asarray(fits[i, j], dtype=bool), "meets_sla": np.asarray(meets[i, j], dtype=bool),
            **energy, "_refined": np.full(i.size, refined)}


def grid_frame(blocks: list):
    """The pareto grid (pandas) from its blocks in pricing order, a refined point dropped where an earlier point
    has its key (GRID_KEY)."""
    import pandas as pd

    if not blocks:
        return pd.DataFrame()
    df = pd.concat([pd.DataFrame(b) for b in blocks], ignore_index=True)
    drop = df.pop("_refined").to_numpy() & df.duplicated(subset=list(GRID_KEY), keep="first").to_numpy()
    return df.loc[~drop].reset_index(drop=True)


def _osl_one_note(r) -> str | None:
    """The note a row with no decode carries (OSL 1: no TPOT, no tokens/s/user), as the predict answer says it."""
    if np.all(np.isnan(np.asarray(r.tpot_s, dtype=float))):
        return "OSL 1: the prefill makes the only token, so there is no TPOT (nor tokens/s/user)"
    return None


def _rank(rows: list, objective: str, top: int):
    """(rows sorted by objective, feasible rows, the best no-speculation row, the top rows with it always shown);
    each row gets its throughput over that baseline (`speedup_vs_none`)."""
    from specplan.planning.cost import objective_value

    rows = sorted(rows, key=lambda x: (x.feasible, objective_value(objective, x) if x.feasible else -x.tpot_ms),
                  reverse=True)
    # the best configuration without speculation, and every row's throughput over it (the speedup a user buys)
    base = next((x for x in rows if x.feasible and x.mechanism == "none"), None)
    rows = [_with_speedup(x, base) for x in rows]
    feasible = [x for x in rows if x.feasible]
    base = next((x for x in feasible if x.mechanism == "none"), None)
    ranked = rows[:top]
    if base is not None and top and base not in ranked:
        ranked = ranked + [base]  # the no-speculation row is always shown
    return rows, feasible, base, ranked


def _with_speedup(x, base):
    """Row `x` with its throughput over the baseline row `base` (None: infeasible or no baseline); `x` itself
    where that is what it already says (most rows of a search: infeasible ones, rebuilt for nothing)."""
    s = x.tokens_per_s_per_gpu / base.tokens_per_s_per_gpu if base is not None and x.feasible else None
    return x if s is None and x.speedup_vs_none is None else dataclasses.replace(x, speedup_vs_none=s)


def _infeasible(rows: list, max_ttft_ms, max_tpot_ms) -> str:
    """Why nothing qualifies: the lowest TPOT and TTFT reachable against the SLA."""
    t = np.array([x.min_tpot_ms for x in rows], dtype=float)
    f = min(x.min_ttft_ms for x in rows)
    sla = ", ".join(x for x in (f"TTFT <= {max_ttft_ms:g} ms" if max_ttft_ms else "",
                                f"TPOT <= {max_tpot_ms:g} ms" if max_tpot_ms else "") if x)
    tpot = (f"the lowest TPOT reachable is {np.nanmin(t):.2f} ms" if np.isfinite(t).any() else
            "there is no TPOT (OSL 1: the prefill makes the only token)")
    return (f"no configuration fits{' and meets ' + sla if sla else ''}: {tpot} and the lowest TTFT {f:.1f} ms "
            f"(each at its own concurrency)")


def serving_grid(model, hardware, workload, *, tp=1, engine=None, drafts: DraftSearch | None = None,
                 sla: Sla = Sla(), grid: GridOptions = GridOptions(), **kw):
    """Every (mechanism, D, concurrency[, pools]) of the serving model as a DataFrame (the pareto grid); `drafts`
    default: D up to 8."""
    r = recommend_serving(model, hardware, workload, tp=tp, engine=engine,
                          drafts=drafts if drafts is not None else DraftSearch(max_draft_len=8), sla=sla,
                          ranking=Ranking(top=0), grid=dataclasses.replace(grid, keep_grid=True), **kw)
    return grid_frame(r.grid)


def tp_candidates(model, gpus: int, gpus_per_node: int) -> list[int]:
    """TP degrees a deployment of `gpus` GPUs can use: powers of two up to the node and the budget that split the
    model's query heads evenly (and divide or are a multiple of its KV heads, as the engines shard them)."""
    out = []
    tp = 1
    while tp <= min(gpus, gpus_per_node):
        try:
            model.heads_per_device(tp)
            out.append(tp)
        except SpecplanError:
            pass
        tp *= 2
    return out


@record
class DeploymentRow(Record):
    """One (mode, dtype, TP) of the deployment search: whether one request fits beside the weights, its best unit
    (a ServingRow; None: nothing meets the SLA), the search's notes, why it has no point; for a best unit, its
    replicas on the budget (unit, used and idle GPUs, total concurrency, output tokens/s of the budget); the
    layout's name, and the verdict against the overall best."""

    mode: str
    dtype: str
    tp: int
    fits: bool
    best: ServingRow | None
    notes: list | None = None
    why: str = ""
    replicas: int | None = None
    unit_gpus: int | None = None
    gpus_used: int | None = None
    idle_gpus: int | None = None
    total_concurrency: float | None = None
    tokens_per_s: float | None = None
    layout: str | None = None
    verdict: str | None = None

    OPTIONAL = ("notes", "replicas", "unit_gpus", "gpus_used", "idle_gpus", "total_concurrency", "tokens_per_s",
                "layout", "verdict")

    @property
    def family(self) -> str:
        """The layout family: TP (layout_search's rows: TEP, DEP)."""
        return "TP"


@record
class DeploymentSearch(Record):
    """search_deployment's answer: the model, device and engine, ISL and OSL, the GPU budget and GPUs per node,
    the SLA (ms), every layout row, the best row overall and per mode (and per layout family for an MoE model),
    and the search's assumptions."""

    model: str
    hardware: str
    engine: str
    isl: int
    osl: int
    gpus: int
    gpus_per_node: int
    max_ttft_ms: float | None
    max_tpot_ms: float | None
    layouts: list
    best: object
    best_by_mode: dict
    best_by_family: dict | None
    assumptions: str

    OPTIONAL = ("best_by_family",)


@record
class DeviceBest(Record):
    """One device's best serving point (None: none meets the SLA) and its search's notes."""

    hardware: object
    best: ServingRow | None
    notes: list


@record
class DeviceComparison(Record):
    """recommend over several devices: the model, the objective, the devices ranked (those without a point last),
    the best one."""

    model: object
    objective: str
    devices: list
    best: DeviceBest | None


def _why_lost(row, best) -> str:
    """One line: why a layout's best point lost to the overall best (output tokens/s of the whole budget)."""
    if row.fits is False:
        return row.why
    if row.best is None:
        return row.why
    if best is None or row.best is best.best:
        return "best" + _idle_note(row)
    a, b = row.tokens_per_s, best.tokens_per_s
    return f"{a:.0f} tok/s in all, {100 * (1 - a / b):.0f} % below the best" + _idle_note(row)


def _idle_note(row) -> str:
    """'' when the layout's replicas fill the budget, else how many units fit and how many GPUs stay idle."""
    if not row.idle_gpus:
        return ""
    return (f" ({row.replicas} unit{'s' if row.replicas > 1 else ''} of {row.unit_gpus} GPUs fit: "
            f"{row.idle_gpus} idle)")


def disagg_units(n: int) -> list[tuple[int, int]]:
    """The xPyD units searched on `n` instances: every split with x + y <= min(n, UNIT_INSTANCES), each replicated
    over the budget (fill_budget). Every prefill:decode ratio up to 7:1 and 1:7 is a unit; a larger pool of the
    same ratio, k·x P k·y D, runs at the same per-instance loads as k replicas of xPyD in this model (its
    closed-loop queue bound (kC - 1)·S / (k·x) and its KV link, the NIC once it leaves the scale-up domain, are no
    better; only its concurrency per replica is finer than a whole number), so the units, not every split of the
    budget, are searched: at most 28, whatever the budget."""
    top = min(int(n), UNIT_INSTANCES)
    return [(x, s - x) for s in range(2, top + 1) for x in range(1, s)]


def _best_unit(rows: list, gpus: int, tp: int) -> ServingRow:
    """The row (one per pool split; agg: the one row) whose replicas put out the most tokens/s on `gpus` GPUs:
    its tokens/s/GPU x the GPUs its floor(gpus / unit GPUs) replicas use (ties: the higher tokens/s/GPU)."""
    ok = [x for x in rows if x.feasible]
    return max(ok, key=lambda x: (x.tokens_per_s_per_gpu * _replicas(x, gpus, tp) * _unit_gpus(x, tp),
                                  x.tokens_per_s_per_gpu))


def _unit_gpus(row: ServingRow, tp: int) -> int:
    """GPUs of one unit: TP (agg) or (x + y)·TP (an xPyD unit)."""
    if row.pools is None:
        return tp
    x, y = (int(v) for v in row.pools[:-1].split("P"))
    return (x + y) * tp


def _replicas(row: ServingRow, gpus: int, tp: int) -> int:
    """Units of `row` the budget holds."""
    return gpus // _unit_gpus(row, tp)


def fill_budget(row: DeploymentRow, b: ServingRow, gpus: int, tp: int) -> DeploymentRow:
    """A layout row with its best unit `b` replicated over the budget: replicas, unit and used GPUs, idle GPUs,
    total concurrency and output tokens/s (the unit's tokens/s/GPU x the GPUs used), and the layout name."""
    unit, k = _unit_gpus(b, tp), _replicas(b, gpus, tp)
    name = f"TP {tp}" if b.pools is None else f"{b.pools} x TP {tp}"
    return dataclasses.replace(row, best=b, replicas=k, unit_gpus=unit, gpus_used=k * unit, idle_gpus=gpus - k * unit,
                               total_concurrency=b.concurrency * k, tokens_per_s=b.tokens_per_s_per_gpu * k * unit,
                               layout=f"{k} x {name}" if b.pools is None or k > 1 else name)


def _nodes_and_tps(m, hw, space: DeploymentSpace) -> tuple:
    """(GPUs per node, the TPs searched) of a budget on `hw`, each bad value refused in one line."""
    gpus, gpus_per_node, modes = space.gpus, space.gpus_per_node, space.modes
    domain = max(1, int(hw.scaleup_domain))
    node = domain if gpus_per_node is None else gpus_per_node
    if not (isinstance(node, (int, np.integer)) and 1 <= node <= domain):
        raise SpecplanError(f"GPUs per node (--gpus-per-node): must be a whole number 1 ... {domain} (the scale-up "
                            f"domain of {hw.id}: TP stays inside it), got {node}")
    tps = tp_candidates(m, gpus, int(node))
    if not tps:
        raise SpecplanError(f"--gpus {gpus}: no TP up to {min(gpus, node)} splits the {m.num_q_heads} query heads "
                            f"of {m.id}")
    if tuple(modes) == ("disagg",) and 2 * min(tps) > gpus:
        raise SpecplanError(f"--gpus {gpus}: disaggregated serving needs at least {2 * min(tps)} GPUs (one prefill "
                            f"and one decode instance of TP {min(tps)}, 1P1D); give more GPUs or --mode agg")
    return node, tps


def _best_layouts(layouts: list) -> tuple:
    """(the layouts with their verdicts, the best layout, the best of each mode, the best of each (mode, layout
    family)) by output tokens/s of the budget, then tokens/s/GPU; each layout's verdict says why it lost."""
    rank = lambda x: (x.tokens_per_s, x.best.tokens_per_s_per_gpu)  # noqa: E731
    ok = [x for x in layouts if x.best is not None]
    best = max(ok, key=rank) if ok else None
    layouts = [dataclasses.replace(x, verdict=_why_lost(x, best)) for x in layouts]
    ok = [x for x in layouts if x.best is not None]
    best = max(ok, key=rank) if ok else None
    by_mode = {}
    for x in ok:
        cur = by_mode.get(x.mode)
        if cur is None or rank(x) > rank(cur):
            by_mode[x.mode] = x
    by_family = {}  # the best of each (mode, layout family): TP, and for an MoE model TEP and DEP
    for x in ok:
        k = f"{x.mode} {x.family}"
        if k not in by_family or rank(x) > rank(by_family[k]):
            by_family[k] = x
    return layouts, best, by_mode, by_family


def _unfit_row(m, hw, base: DeploymentRow, one, tps: list, need_ctx: tuple) -> DeploymentRow:
    """The row of a TP whose weights leave no room for one request, saying which TP would fit."""
    from specplan.model.memory import memory_usage

    tokens, prec = need_ctx
    tp = base.tp
    need = float(one.weights_bytes) * tp / 1e9
    fit_tp = next((t for t in tps if float(memory_usage(m, hw, t, 1, tokens, prec).max_batch) >= 1), None)
    return dataclasses.replace(base, fits=False, why=(
        f"does not fit: the weights need {need:.0f} GB ({need / tp:.0f} GB per GPU at TP {tp}, "
        f"{float(one.capacity_bytes) / 1e9:.0f} GB usable per GPU)"
        + (f"; TP {fit_tp} fits" if fit_tp else f"; no TP up to {max(tps)} fits")))


def search_deployment(model, hardware, isl: int, osl: int, *, space: DeploymentSpace, engine=None,
                      drafts: DraftSearch | None = None, sla: Sla = Sla(), **kw) -> DeploymentSearch:
    """The deployment of `gpus` GPUs that serves the most output tokens/s under the SLA: replicas of one unit, a TP
    instance (agg; TP within a node, heads allowing) or an xPyD unit of TP instances (disagg: one per x:y ratio,
    disagg_units), filling the budget (fill_budget: floor(gpus / unit GPUs) replicas, the rest idle and said), with
    dtype, mechanism, D and concurrency. Each (mode, dtype, TP) is one vectorized serving search
    (recommend_serving, every unit in it), so the cost is bounded whatever the budget; the answer lists the best
    of each with why it lost. Same TP for prefill and decode instances (an assumption). `space`: the budget, the
    largest TP, the dtypes and modes searched; `drafts`: the speculation priced (default D up to 16); `kw`: the
    deployment's other options (ServingOptions)."""
    from specplan.model.memory import memory_usage
    from specplan.costs.precision import resolve_precision
    from specplan.profiles.registry import load_hardware

    gpus, dtypes, modes = space.gpus, space.dtypes, space.modes
    drafts = drafts if drafts is not None else DraftSearch()
    max_ttft_ms, max_tpot_ms = sla.max_ttft_ms, sla.max_tpot_ms
    if not (isinstance(gpus, (int, np.integer)) and 1 <= gpus <= 4096):
        raise SpecplanError(f"GPU budget (--gpus): must be a whole number 1 ... 4096, got {gpus}")
    options = ServingOptions(**kw)
    m = load_model(model)
    hw = load_hardware(hardware)
    eng = load_engine(engine)
    node, tps = _nodes_and_tps(m, hw, space)
    layouts = []
    for dt in (dtypes or [options.dtype]):
        opts = dataclasses.replace(options, dtype=dt)
        for tp in tps:
            prec = resolve_precision(m, hw, dt, opts.kv_dtype)
            one = memory_usage(m, hw, tp, 1, isl + osl, prec)
            for mode in modes:
                if mode == "disagg" and 2 * tp > gpus:
                    continue
                base = DeploymentRow(mode, prec.compute, tp, True, None)
                if float(one.max_batch) < 1:
                    layouts.append(_unfit_row(m, hw, base, one, tps, (isl + osl, prec)))
                    continue
                units = disagg_units(gpus // tp) if mode == "disagg" else None
                wl = Workload(isl, osl, concurrency=1.0, mode=mode)
                r = serving_search(m, hw, wl, tp=tp, engine=eng,
                                   drafts=drafts, sla=sla,
                                   ranking=Ranking(top=1 if units is None else 10 ** 9),
                                   grid=GridOptions(search_concurrency=True, pools=units, d_by_load=False, budget=gpus),
                                   options=opts)
                row = dataclasses.replace(base, best=r.best, notes=r.notes, why=r.infeasible or "")
                layouts.append(fill_budget(row, _best_unit(r.ranked, gpus, tp), gpus, tp) if r.best is not None
                               else dataclasses.replace(row, layout=f"TP {tp}"))
        if m.moe is not None:  # TEP / DEP layouts and pools of their own layouts (planning/layout_search.py)
            from specplan.planning.layout_search import moe_layout_rows

            layouts += moe_layout_rows(m, hw, isl, osl, gpus=gpus, modes=modes, engine=eng, sla=sla, drafts=drafts,
                                       options=opts)
    layouts, best, by_mode, by_family = _best_layouts(layouts)
    return DeploymentSearch(
        m.id, hw.id, eng.id, isl, osl, gpus, node, max_ttft_ms, max_tpot_ms, layouts, best, by_mode,
        by_family if m.moe is not None else None,
        "same TP for prefill and decode instances; the budget filled with identical replicas of one unit (agg: a TP "
        f"instance; disagg: an xPyD unit, x + y <= {UNIT_INSTANCES}), ranked by output tokens/s of the whole budget; "
        + ("MoE DP/EP layouts not searched here" if m.moe is None else
           __import__("specplan.planning.layout_search", fromlist=["x"]).search_note(m)))


def recommend_devices(model, hardware, workload, *, ranking: Ranking = Ranking(), **kw) -> DeviceComparison:
    """recommend over several devices: each device's best serving point (recommend_serving with `ranking` and
    `kw`), ranked by the objective, devices without a point meeting the SLA last; {model, objective, devices,
    best}."""
    from specplan.planning.cost import objective_value

    out = []
    for h in hardware:
        r = recommend_serving(model, h, workload, ranking=ranking, **kw)
        out.append(DeviceBest(h, r.best, r.notes))
    ok = [x for x in out if x.best is not None]
    ok.sort(key=lambda x: objective_value(ranking.objective, x.best), reverse=True)
    return DeviceComparison(model, ranking.objective, ok + [x for x in out if x.best is None], ok[0] if ok else None)

"""Disaggregated serving (xPyD): x prefill instances and y decode instances of TP GPUs each.

Model (docs/serving.md): the decode pool holds B requests per decode instance, decoding at mean context
ISL + OSL/2 in CUDA-graph steps with no prefill interference: TPOT = T_iter(B) / AL, T_iter the engine step
(host, launches) over the roofline iteration, and request throughput X = y·B / (N_d·T_iter(B)) (Little's law on
the decode stage, N_d = (OSL - 1) / AL iterations). The prefill pool serves prompts one step per budget chunk
(eager steps): S seconds per prompt on one instance, capacity x / S requests/s. TTFT = S + an M/D/1 wait at
prefill utilization ρ = X·S/x (in a closed loop at most the C - 1 other prompts wait ahead, x at a time) + the KV
transfer (ISL tokens of KV per rank, over NVLink when both pools fit in one scale-up domain, else over the NIC).
Closed loop: C = y·B + X·TTFT (requests in prefill count) solved for B by bisection, B at most the engine's
running cap (max_num_seqs, and what the KV cache holds); requests the loop cannot place wait for admission, their
wait from Little's law (TTFT = (C - y·B) / X when the prefill pool binds: finite). Open loop: B = λ·N_d·τ / y,
unstable when λ exceeds the saturation rate. tokens/s/GPU counts both pools: X·OSL / ((x + y)·TP).
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import numpy as np

from specplan.core.records import record
from specplan.model.deployment import Deployment
from specplan.model.memory import kv_bytes_per_token, memory_usage
from specplan.model.parallel import (Layout, as_layout, attention_tp, dp_ranks, draft_parallelism,
                                     serving_parallelism)
from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_engine, load_hardware, load_model
from specplan.serving.aggregated import (draft_prefill_model, kv_cap_requests, only_draft_len_varies, running_cap,
                                         spec_cap_applies, step_kernels, step_options, ttft_quantile_s)
from specplan.serving.grid import ServingGrid
from specplan.serving.prefill import prefill_s
from specplan.serving.workload import Workload
from specplan.speculation.round import RoundShape, round_gpu_extra_s, round_s
from specplan.profiles.engine import engine_hardware
from specplan.speculation.spec import Speculation

BISECTION_STEPS = 50


def prefill_instance_s(model, hw, tp, isl, eng, prec, draft=None) -> float:
    """Seconds one prefill instance spends on one prompt: its chunk steps (eager) + the draft's prefill."""
    gpu = prefill_s(model, hw, tp, isl, precision=prec, engine=eng)
    n_steps = np.ceil(isl / eng.max_num_batched_tokens)
    per = eng.step_s(gpu / n_steps, 1, step_kernels(model, hw, tp, eng, prec), False, isl / n_steps) * n_steps
    if draft is not None:
        dm, dprec = draft
        per = per + prefill_s(dm, hw, draft_parallelism(dm, tp), isl, precision=dprec, engine=eng)
    return float(per)


def kv_link_bytes_s(hw, gpus: int) -> float:
    """Bytes/s per GPU of the link that carries prefill -> decode KV: NVLink (scaleup_bandwidth_bytes_s) when all
    `gpus` of the deployment sit in one scale-up domain (hw.scaleup_domain), else the NIC
    (scaleout_bandwidth_bytes_s); bandwidths and their sources are in the hardware profile."""
    dom = getattr(hw, "scaleup_domain", None) or 1
    bw = np.where(np.asarray(gpus) <= dom, float(hw.scaleup_bandwidth_bytes_s), float(hw.scaleout_bandwidth_bytes_s))
    return float(bw) if bw.ndim == 0 else bw


def kv_transfer_s(model, hw, tp, isl, prec, gpus=None, decode_tp=None) -> float:
    """Seconds to move one prompt's KV cache (all layers, every TP rank in parallel) from a prefill to a decode
    instance, over the link kv_link_bytes_s picks for a deployment of `gpus` GPUs (default: one instance pair; an
    array of GPU counts gives an array). With another decode attention TP (`decode_tp`; pools of their own
    layouts) the busier side sets the time: each prefill GPU sends its TP share of the prompt's KV, each decode GPU
    of the receiving DP rank takes its own share (an MLA latent whole on every TP GPU of a rank)."""
    def per_gpu(t):
        return isl * (kv_bytes_per_token(model, t, prec.kv, "full") + kv_bytes_per_token(model, t, prec.kv, "sliding"))

    per_rank = per_gpu(tp) if decode_tp in (None, tp) else max(per_gpu(tp), per_gpu(decode_tp))
    s = per_rank / kv_link_bytes_s(hw, 2 * tp if gpus is None else gpus)
    return float(s) if np.ndim(s) == 0 else s


def _decode_tables(at_whole, b_top, shape):
    """GPU seconds of a decode iteration on whole batches 1..64 and geometric beyond up to b_top, for interpolation
    (the engine's round is applied at the batch itself: _Pricing.iteration), and the evaluate result."""
    top = max(float(np.ceil(b_top)), 2.0)
    grid = np.unique(np.concatenate([np.arange(1.0, min(top, 64.0) + 1.0),
                                     np.round(np.geomspace(min(top, 64.0), top, 40))]))
    b = grid.reshape((-1,) + (1,) * len(shape)) * np.ones((1,) + shape)
    gpu, _, r = at_whole(b)
    return grid, np.broadcast_to(gpu, b.shape), r


def disaggregated(dep: Deployment, spec: Speculation, workload: Workload) -> ServingGrid:
    """Steady-state xPyD serving of `dep` running `spec` (arrays over draft_len / concurrency): TPOT, TTFT, latency,
    tokens/s. `dep.tp` / `dep.layout` are the decode instances', `dep.prefill_layout` the prefill instances'
    (None: the same)."""
    return disaggregated_pools(dep, spec, workload, [workload.pools or (1, 1)])[0]


@record
class _Pricing:
    """What every pool split of one disaggregated evaluation shares: the model on its devices, the workload, the
    prefill seconds per prompt, the running cap and the decode iteration table (iteration s on whole batches)."""

    m: object
    hw: object
    tp: int
    workload: Workload
    prec: object
    d: np.ndarray
    conc: np.ndarray | None
    s_p: float
    cap: np.ndarray | float  # running cap per decode instance (per grid point: speculation may lower it)
    grid: np.ndarray
    gpu_table: np.ndarray  # (grid, columns): GPU seconds of an iteration on the grid's whole batches, per distinct D
    col: np.ndarray  # each grid point's column of gpu_table (int, shaped like d)
    al: np.ndarray
    fits_one: np.ndarray
    kv_cap: np.ndarray | float = np.inf  # requests whose whole KV (ISL + OSL) one decode instance's cache holds (per D)
    t_cap: np.ndarray | float = np.nan  # iteration seconds at the running cap (the decode pool's capacity)
    kv_cap_draft: bool = False  # kv_cap counts the draft's weights and KV (below the target's own)
    spec_cap: np.ndarray | bool = False  # the running cap is the engine's speculative one (spec_cap_applies)
    rnd: tuple = ()  # (engine, verify tokens q, target kernels, draft kernels) of the round, per grid point
    # pools of their own layouts (None: TP-only pools of one TP, priced as always): a decode instance is dp_d
    # DP-attention ranks of gpus_d GPUs (cap, kv_cap and the decode batch are one rank's); a prefill instance dp_p
    # ranks each prefilling its own prompts (s_p per rank), gpus_p GPUs, attention TP tp_p (arrays per column)
    layouts: PoolLayouts | None = None

    def iteration(self, b):
        """Iteration seconds at decode batch b (priced at max(b, 1)): GPU seconds linear between whole batches,
        then the engine's round at b itself, so that a graph's end (an eager step past graph_max_batch) falls at
        its batch and not across the table's interval that holds it (whose width depends on the loads asked)."""
        grid, flat, n_col = self.grid, self.gpu_table.ravel(), self.gpu_table.shape[1]
        bb = np.maximum(np.asarray(b, dtype=float), 1.0)
        bt = np.clip(bb, grid[0], grid[-1])
        i = np.clip(np.searchsorted(grid, bt) - 1, 0, len(grid) - 2)
        w = (bt - grid[i]) / (grid[i + 1] - grid[i])
        at = i * n_col + self.col
        lo, hi = flat[at], flat[at + n_col]
        eng, q, k_t, k_d = self.rnd
        return round_s(eng, lo + w * (hi - lo), bt, self.d, q, k_t, k_d)


def disaggregated_pools(dep: Deployment, spec: Speculation, workload: Workload, pools) -> list[ServingGrid]:
    """`disaggregated` for each (x, y) of `pools` (one list entry each), all in one evaluation: disaggregated_grid
    with a last axis over the pools."""
    pre = [p[2] if len(p) > 2 else None for p in pools]  # (x, y, prefill layout): a pool of its own layout
    pools = [(int(p[0]), int(p[1])) for p in pools]
    load = "request_rate" if workload.concurrency is None else "concurrency"
    wl = dataclasses.replace(workload, **{load: np.asarray(getattr(workload, load), dtype=float)[..., None]})
    r = disaggregated_grid(dep, replace(spec, draft_len=np.asarray(spec.draft_len, dtype=float)[..., None]), wl,
                           (np.array([float(x) for x, _ in pools]), np.array([float(y) for _, y in pools])),
                           prefill_layouts=pre if any(p is not None for p in pre) else None)
    shape = np.shape(r.tpot_s)
    per_pool = ("pools", "devices", "kv_transfer_s")  # one number per pool, not per grid point
    per_point = tuple(k for k in r if k not in per_pool)
    return [ServingGrid(**r.at(i, shape, per_point), pools=(x, y), devices=float(r.devices[i]),
                        kv_transfer_s=float(r.kv_transfer_s[i]))
            for i, (x, y) in enumerate(pools)]


def disaggregated_grid(dep: Deployment, spec: Speculation, workload: Workload, pools: tuple, *,
                       prefill_layouts=None) -> ServingGrid:
    """Steady-state xPyD serving on a grid: `pools` = (x_pools, y_pools) (prefill and decode instances, arrays),
    spec.draft_len and the workload's load broadcast together, one point each (a search's columns: (pool, D)
    pairs), the decode and prefill pricing and the loop's bisection shared. Arrays of that shape; `pools` is
    (x_pools, y_pools), `devices` and `kv_transfer_s` are shaped like them.

    The decode layout (`dep.tp` / `dep.layout`) and the prefill layout (`dep.prefill_layout`, None: the same), or
    one prefill layout per pool column (`prefill_layouts`, shaped like x_pools; None entries: dep.prefill_layout),
    may be Layouts: a pool with data-parallel attention is priced per DP rank as aggregated.rank_serving prices an
    instance (a decode rank holds B requests; a prefill rank prefills its own prompts, all ranks in the same steps),
    its engine limits per rank (EngineProfile.per_dp_rank), the KV moved between the pools' layouts
    (kv_transfer_s); one decode pricing serves every prefill layout."""
    model, hardware, engine, prefill_layout = dep.model, dep.hardware, dep.engine, dep.prefill_layout
    dtype, kv_dtype = dep.dtypes.dtype, dep.dtypes.kv_dtype
    mechanism, draft_model = spec.mechanism, spec.draft.model
    x_pools, y_pools = pools
    m = load_model(model)
    hw = load_hardware(hardware)
    tp = serving_parallelism(dep.instance())
    if isinstance(tp, Layout):
        tp.check(m, hw)
    dp_d = dp_ranks(tp)
    eng = load_engine(engine).for_hardware(hw, attention_tp(tp)).per_dp_rank(dp_d).for_mechanism(mechanism)
    workload.check(m)
    prec = resolve_precision(m, hw, dtype, kv_dtype)
    xs, ys = np.asarray(x_pools, dtype=float), np.asarray(y_pools, dtype=float)
    d = np.asarray(spec.draft_len, dtype=float)
    conc = None if workload.concurrency is None else np.asarray(workload.concurrency, dtype=float)
    load = np.asarray(workload.concurrency if conc is not None else workload.request_rate, dtype=float)
    d = d * np.ones(np.broadcast_shapes(d.shape, load.shape, xs.shape, ys.shape))  # one grid point per load, pool
    spec = step_options(dep, spec).with_draft_len(d)
    dpm = draft_prefill_model(m, mechanism, draft_model)
    draft = None if dpm is None or np.all(d == 0) else (dpm, resolve_precision(dpm, hw, dtype, kv_dtype))
    layouts = _pool_layouts(m, hw, tp, (prefill_layout, prefill_layouts), xs, (engine, eng), prec, draft, workload.isl)
    s_p = prefill_instance_s(m, hw, tp, workload.isl, eng, prec, draft) if layouts is None else layouts.s_p
    kernels = step_kernels(m, hw, tp, eng, prec)
    mem_one = memory_usage(m, hw, attention_tp(tp), 1, workload.isl + workload.osl, prec,
                           layout=tp if isinstance(tp, Layout) else None)
    one_max = mem_one.max_batch / dp_d  # one decode rank's requests (max_batch counts the instance)
    # the decode table depends on D, not on the concurrency: priced once per distinct D, spread back below
    spread = d.ndim >= 1 and only_draft_len_varies(spec)
    du, inv = np.unique(d, return_inverse=True) if spread else (d, None)
    spec_u = spec.with_draft_len(du)
    kv_cap_u = kv_cap_requests(m, hw, tp, workload, eng, spec_u, prec, one_max)  # the draft's memory too
    kv_cap = (np.asarray(kv_cap_u)[np.asarray(inv).reshape(d.shape)] if spread and np.ndim(kv_cap_u) else kv_cap_u)
    cap = running_cap(eng, workload, kv_cap, d) * np.ones(d.shape)  # decode batch per instance: engine, KV cache

    def at_whole(b):  # the engine's round as in aggregated serving: GPU extras (extend, rejection), round host
        # a Layout: b is one DP rank's, the instance holds DP x b (StepOptions.evaluate)
        r = spec_u.evaluate(m, hw, tp, eng, prec, batch=b, context_len=workload.decode_context)
        q = np.asarray(r.verify_tokens, dtype=float)
        gpu = np.asarray(r.iter_s) + round_gpu_extra_s(m, engine_hardware(hw, eng), tp,
                                                          RoundShape(b, du, q, workload.decode_context), mechanism,
                                                          draft, eng=eng)
        return gpu, round_s(eng, gpu, b, du, q, kernels, kernels * np.asarray(r.rho_d)), r

    b_top = float(np.max(conc)) / (dp_d * float(np.min(ys))) if conc is not None else float(np.max(cap))
    b_top = min(max(b_top, 1.0), float(np.max(cap)))
    grid, g_u, r_grid = _decode_tables(at_whole, b_top, du.shape)
    q_u = np.broadcast_to(np.asarray(r_grid.verify_tokens, dtype=float)[0], du.shape)
    kd_u = np.broadcast_to(kernels * np.asarray(r_grid.rho_d, dtype=float)[0], du.shape)
    al_u = np.broadcast_to(np.asarray(r_grid.acceptance_length)[0], du.shape)
    # the decode pool's capacity needs the iteration at the running cap, beyond the table's top when the loop's
    # concurrency is lower: priced there once, exactly (not clamped to the table)
    cap_u = np.ceil(running_cap(eng, workload, kv_cap_u, du)) * np.ones(du.shape)
    t_cap_u = at_whole(cap_u)[1] if workload.osl > 1 else np.full(du.shape, np.nan)
    if spread:
        idx = np.asarray(inv).reshape(d.shape)
        al, t_cap = al_u[idx], np.broadcast_to(t_cap_u, du.shape)[idx]
        q, kd = q_u[idx], kd_u[idx]
    else:
        idx = np.arange(d.size).reshape(d.shape)
        al, t_cap, q, kd = al_u, np.broadcast_to(t_cap_u, du.shape), q_u, kd_u
    table = np.ascontiguousarray(np.reshape(g_u, (len(grid), -1)))
    pr = _Pricing(m, hw, tp, workload, prec, d, conc, s_p, cap, grid, table, idx, al, np.asarray(kv_cap >= 1),
                  kv_cap, t_cap, bool(np.any(kv_cap < one_max)), spec_cap_applies(eng, workload, d, kv_cap),
                  (eng, q, kernels, kd), layouts)
    return _pool_split(pr, xs, ys)


def _ttft_of(pr: _Pricing, x, x_pools, kv_s):
    """(TTFT s, prefill queue wait s, prefill utilization) at request rate x: prompt + M/D/1 wait (a closed loop:
    at most the C - 1 other prompts ahead, x_pools at a time) + KV transfer."""
    s_p = pr.s_p
    rho = x * s_p / x_pools
    with np.errstate(divide="ignore"):  # the M/D/1 wait's own pole decides rho = 1: infinite there, no guard
        wait = np.where(rho < 1.0, rho * s_p / (2.0 * (1.0 - rho)), np.inf)
    if pr.conc is not None:
        others = np.maximum(pr.conc - 1.0, 0.0) * np.ones(pr.d.shape)
        wait = np.where(rho < 1.0, np.minimum(wait, others * s_p / x_pools), np.inf)
    return s_p + wait + kv_s, wait, rho


def _solve_loop(pr: _Pricing, x_pools, y_pools, n_d, kv_s):
    """(decode batch B, iteration s, request rate X) of the closed loop C = y·B + X·TTFT (bisection on B), the
    open loop B = λ·N_d·τ(B)/y, or with OSL 1 the prefill pool alone (C = X·TTFT)."""
    wl, d = pr.workload, pr.d

    def flows(b):
        tau = pr.iteration(b)
        if wl.osl == 1:
            return tau, np.zeros(d.shape)
        return tau, y_pools * np.asarray(b, dtype=float) / (n_d * tau)

    if wl.osl == 1:  # no decode: the loop is the prefill pool alone, C = X·TTFT
        if pr.conc is not None:
            c = pr.conc * np.ones(d.shape)
            lo, hi = np.zeros(d.shape), (x_pools / pr.s_p) * np.ones(d.shape)
            for _ in range(BISECTION_STEPS):
                mid = (lo + hi) / 2.0
                over = mid * np.nan_to_num(_ttft_of(pr, mid, x_pools, kv_s)[0], posinf=1e30) > c
                hi, lo = np.where(over, mid, hi), np.where(over, lo, mid)
            x = lo
        else:
            x = np.asarray(wl.request_rate, dtype=float) * np.ones(d.shape)
        return np.zeros(d.shape), np.full(d.shape, np.nan), x
    if pr.conc is not None:
        c = pr.conc * np.ones(d.shape)
        lo, hi = np.zeros(d.shape), np.minimum(c / y_pools, pr.cap)
        for _ in range(BISECTION_STEPS):  # C = y·B + X·TTFT, increasing in B
            mid = (lo + hi) / 2.0
            _, xm = flows(mid)
            over = y_pools * mid + xm * np.nan_to_num(_ttft_of(pr, xm, x_pools, kv_s)[0], posinf=1e30) > c
            hi, lo = np.where(over, mid, hi), np.where(over, lo, mid)
        tau, x = flows(lo)
        return lo, tau, x
    lam = np.asarray(wl.request_rate, dtype=float) * np.ones(d.shape)  # one rate, or one per grid point
    b = np.zeros(d.shape)
    for _ in range(BISECTION_STEPS):  # B = λ · N_d · τ(B) / y, increasing, iterated from below
        b = np.minimum(lam * n_d * pr.iteration(b) / y_pools, 2.0 * pr.cap)
    return b, pr.iteration(b), lam


def _pool_split(pr: _Pricing, x_pools, y_pools) -> ServingGrid:
    """xPyD splits (x_pools, y_pools: arrays broadcast with the grid): the loop solved, TTFT with admission waits,
    TPOT, latency, throughput and stability."""
    wl, d, al, cap = pr.workload, pr.d, pr.al, pr.cap
    lays, dp_d = pr.layouts, 1
    if lays is None:  # TP-only pools of one TP: as always
        devices = (x_pools + y_pools) * float(pr.tp)
        kv_s = kv_transfer_s(pr.m, pr.hw, pr.tp, wl.isl, pr.prec, devices)
    else:  # pools of their own layouts: instances become DP ranks (prompt servers, decode ranks)
        devices = x_pools * lays.gpus_p + y_pools * float(gpus_of(pr.tp))
        kv_s = lays.kv_bytes / kv_link_bytes_s(pr.hw, devices)
        dp_d = dp_ranks(pr.tp)
        x_inst, y_inst = x_pools, y_pools
        x_pools, y_pools = x_pools * lays.dp_p, y_pools * dp_d
    n_d = np.maximum((wl.osl - 1.0) / al, 1e-9) if wl.osl > 1 else np.zeros(np.shape(al))
    capacity = x_pools / pr.s_p  # requests/s the prefill pool can feed
    b, tau, x = _solve_loop(pr, x_pools, y_pools, n_d, kv_s)
    ttft, wait, rho = _ttft_of(pr, x, x_pools, kv_s)
    adm = np.zeros(d.shape)
    if pr.conc is not None:  # requests the loop cannot place (prefill saturated, running cap) wait for admission
        c = pr.conc * np.ones(d.shape)
        gap = np.maximum(c - y_pools * b - x * ttft, 0.0)
        adm = np.where(np.isfinite(ttft) & (gap > 1e-9 * c), gap / np.maximum(x, 1e-300), 0.0)
        ttft = np.where(np.isfinite(ttft), ttft + adm, c / np.maximum(x, 1e-300))
        stable = np.ones(d.shape, dtype=bool)
        load = c
    else:
        stable = np.isfinite(ttft) & (b <= cap)
        load = y_pools * b + x * np.where(np.isfinite(ttft), ttft, 0.0)
    decode_cap = y_pools * cap / (n_d * pr.t_cap) if wl.osl > 1 else np.full(d.shape, np.inf)
    tpot = tau / al
    lat = ttft + (0.0 if wl.osl == 1 else (wl.osl - 1.0) * tpot)
    w_ok = np.where(np.isfinite(wait), wait, 0.0)
    p90 = np.where(np.isfinite(ttft), ttft_quantile_s(ttft, w_ok, rho, 0.9), np.inf)
    p50 = np.where(np.isfinite(ttft), ttft_quantile_s(ttft, w_ok, rho, 0.5), np.inf)
    return ServingGrid(
        tpot_s=tpot, ttft_s=ttft, ttft_p50_s=p50, ttft_p90_s=p90, request_latency_s=lat,
        tokens_per_s_per_user=1.0 / tpot, tokens_per_s_per_gpu=x * wl.osl / devices,
        decode_batch=b * dp_d, iteration_s=tau, acceptance_length=al, requests_per_s=x,
        concurrency=load, prefill_s=pr.s_p, prefill_utilization=rho, kv_transfer_s=kv_s,
        pools=(x_pools, y_pools) if lays is None else (x_inst, y_inst), devices=devices,
        admission_wait_s=adm,
        fits=pr.fits_one & np.ones(d.shape, dtype=bool), stable=stable,
        prefill_bound=rho >= 0.95,  # (X >= 0.999 x capacity, once or-ed in, is rho >= 0.999: implied)
        saturation_requests_per_s=np.minimum(capacity, decode_cap),
        running_cap=cap * dp_d, kv_cap_requests=pr.kv_cap * dp_d, kv_cap_draft=pr.kv_cap_draft,
        spec_cap=pr.spec_cap,
    )


def gpus_of(tp) -> int:
    """GPUs of one instance of a serving call's `tp` (an int, or a Layout: TP x DP x PP)."""
    return tp.gpus if isinstance(tp, Layout) else int(tp)


@record
class PoolLayouts:
    """Per pool column (each shaped like x_pools), what a prefill layout of its own changes: seconds per prompt per
    prefill rank, prefill ranks, prefill GPUs per instance, KV bytes per GPU moved to the decode pool."""

    s_p: np.ndarray
    dp_p: np.ndarray
    gpus_p: np.ndarray
    kv_bytes: np.ndarray


def _pool_layouts(m, hw, tp, prefill: tuple, xs, engines: tuple, prec, draft, isl) -> PoolLayouts | None:
    """Per pool column, what a prefill layout of its own changes (None when every pool is TP-only at the decode
    TP: priced as always): seconds per prompt per prefill rank `s_p`, ranks `dp_p`, GPUs `gpus_p`, and the KV bytes
    per GPU moved to the decode pool (`kv_bytes`, the busier side of kv_transfer_s), each shaped like x_pools.
    `prefill`: (the prefill layout, one per pool column or None); `engines`: (the engine as given, the decode
    pool's resolved EngineProfile)."""
    prefill_layout, prefill_layouts = prefill
    engine, eng_d = engines
    xs = np.asarray(xs, dtype=float)
    given = [prefill_layout] * xs.size if prefill_layouts is None else [
        prefill_layout if p is None else p for p in np.asarray(prefill_layouts, dtype=object).ravel()]
    lays = [tp if p is None else serving_parallelism(as_layout(p)) for p in given]
    if not isinstance(tp, Layout) and all(p == tp and not isinstance(p, Layout) for p in lays):
        return None
    per = {}
    for p in set(lays):
        if isinstance(p, Layout):
            p.check(m, hw)
        dp_p = dp_ranks(p)
        e_p = eng_d if dp_p == dp_ranks(tp) else load_engine(engine).per_dp_rank(dp_p)
        kv = kv_transfer_s(m, hw, attention_tp(p), isl, prec, 1, decode_tp=attention_tp(tp)) * kv_link_bytes_s(hw, 1)
        per[p] = (prefill_instance_s(m, hw, p, isl, e_p, prec, draft), float(dp_p), float(gpus_of(p)), kv)
    cols = np.array([per[p] for p in lays], dtype=float).reshape(xs.shape + (4,))
    return PoolLayouts(*(cols[..., i] for i in range(4)))

"""Disaggregated serving (xPyD): x prefill instances and y decode instances of TP GPUs each.

Model (docs/serving.md): the decode pool holds the in-flight requests, C / y per decode instance (closed loop;
with a request rate λ, B = λ·N_d·τ / y), decoding at mean context ISL + OSL/2 in CUDA-graph steps with no
prefill interference: TPOT = T_iter(B) / AL, T_iter the engine step (host, launches) over the roofline
iteration. The prefill pool serves prompts one step per budget chunk (eager steps): S seconds per prompt on
one instance, capacity x / S requests/s. If the decode pool would complete more requests than the prefill
pool can feed, the prefill pool binds: X = x / S and the decode batch falls to X·N_d·τ / y. TTFT = S + an
M/D/1 wait at prefill utilization ρ = X·S/x + the KV transfer (ISL tokens of KV over the scale-up link,
an assumption: same node). tokens/s/GPU counts both pools: X·OSL / ((x + y)·TP).
"""

from __future__ import annotations

import numpy as np

from specplan.model.memory import kv_bytes_per_token, memory_usage
from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_engine, load_hardware, load_model
from specplan.serving.aggregated import decode_graphed, draft_prefill_model, step_kernels
from specplan.serving.prefill import prefill_s
from specplan.serving.workload import Workload
from specplan.speculation.speedup import evaluate

FIXED_POINT_STEPS = 60


def prefill_instance_s(model, hw, tp, isl, eng, prec, draft=None) -> float:
    """Seconds one prefill instance spends on one prompt: its chunk steps (eager) + the draft's prefill."""
    gpu = prefill_s(model, hw, tp, isl, precision=prec, engine=eng)
    n_steps = np.ceil(isl / eng.max_num_batched_tokens)
    per = eng.step_s(gpu / n_steps, 1, step_kernels(model, hw, tp), False) * n_steps
    if draft is not None:
        dm, dprec = draft
        per = per + prefill_s(dm, hw, tp if dm.num_q_heads % tp == 0 else 1, isl, precision=dprec, engine=eng)
    return float(per)


def kv_transfer_s(model, hw, tp, isl, prec) -> float:
    """Seconds to move one prompt's KV cache (all layers, every TP rank in parallel) over the scale-up link."""
    per_rank = isl * (kv_bytes_per_token(model, tp, prec.kv, "full") + kv_bytes_per_token(model, tp, prec.kv, "sliding"))
    return float(per_rank / hw.scaleup_bandwidth_bytes_s)


def disaggregated(model, hardware, workload: Workload, *, tp=1, engine=None, mechanism="none", draft_len=0,
                  acceptance=None, dtype=None, kv_dtype=None, draft_model=None, **spec_kw) -> dict:
    """Steady-state xPyD serving (arrays over draft_len / concurrency): TPOT, TTFT, latency, tokens/s."""
    m = load_model(model)
    hw = load_hardware(hardware)
    eng = load_engine(engine)
    workload.check(m)
    x_pools, y_pools = workload.pools
    prec = resolve_precision(m, hw, dtype, kv_dtype)
    d = np.asarray(draft_len, dtype=float)
    conc = None if workload.concurrency is None else np.asarray(workload.concurrency, dtype=float)
    if conc is not None:
        d = d * np.ones(np.broadcast(d, conc).shape)
    spec = dict(mechanism=mechanism, draft_len=d, acceptance=acceptance, draft_model=draft_model, **spec_kw)
    dpm = draft_prefill_model(m, mechanism, draft_model)
    draft = None if dpm is None or np.all(d == 0) else (dpm, resolve_precision(dpm, hw, dtype, kv_dtype))
    s_p = prefill_instance_s(m, hw, tp, workload.isl, eng, prec, draft)
    kernels = step_kernels(m, hw, tp)

    def at_whole(b):
        r = evaluate(m, hw, tp=tp, batch=b, context_len=workload.decode_context, engine=eng, dtype=prec.compute,
                     kv_dtype=prec.kv, **spec)
        k = kernels * (1.0 + np.asarray(r["rho_d"]))
        return eng.step_s(r["iter_s"], b, k, decode_graphed(eng, b)), r

    def iteration(b):
        """Iteration seconds at a decode batch b >= 1, linear between the whole batches around it."""
        lo = np.floor(b)
        t_lo, r = at_whole(lo)
        if np.all(b == lo):
            return t_lo, r
        t_hi, _ = at_whole(lo + 1.0)
        return t_lo + (b - lo) * (t_hi - t_lo), r

    capacity = x_pools / s_p  # requests/s the prefill pool can feed
    if conc is not None:
        b = conc / y_pools * np.ones(d.shape)
        tau, r = iteration(np.maximum(b, 1.0))
        n_d = np.maximum((workload.osl - 1.0) / r["acceptance_length"], 1e-9)
        x = y_pools * b / (n_d * tau)
        for _ in range(FIXED_POINT_STEPS):  # prefill-bound: the decode batch falls until X = capacity
            bound = x > capacity
            if not np.any(bound):
                break
            b = np.where(bound, b * capacity / x, b)
            tau, r = iteration(np.maximum(b, 1.0))
            x = np.minimum(y_pools * b / (n_d * tau), capacity)
    else:
        lam = float(workload.request_rate)
        b = np.ones(d.shape)
        for _ in range(FIXED_POINT_STEPS):  # B = λ · N_d · τ(B) / y
            tau, r = iteration(np.maximum(b, 1.0))
            n_d = np.maximum((workload.osl - 1.0) / r["acceptance_length"], 1e-9)
            b = np.minimum(lam * n_d * tau / y_pools, 1e7)
        x = np.full(d.shape, lam)
    tau, r = iteration(np.maximum(b, 1.0))
    al = r["acceptance_length"]
    rho = x * s_p / x_pools
    wait = np.where(rho < 1.0, rho / (2.0 * np.maximum(1.0 - rho, 1e-12)) * s_p, np.inf)
    ttft = s_p + wait + kv_transfer_s(m, hw, tp, workload.isl, prec)
    tpot = tau / al
    devices = float((x_pools + y_pools) * tp)
    mem = memory_usage(m, hw, tp, np.maximum(np.ceil(b), 1), workload.isl + workload.osl, prec)
    return {
        "tpot_s": tpot, "ttft_s": ttft, "request_latency_s": ttft + (workload.osl - 1.0) * tpot,
        "tokens_per_s_per_user": 1.0 / tpot, "tokens_per_s_per_gpu": x * workload.osl / devices,
        "decode_batch": b, "iteration_s": tau, "acceptance_length": al, "requests_per_s": x,
        "prefill_s": s_p, "prefill_utilization": rho, "pools": (x_pools, y_pools), "devices": devices,
        "fits": np.asarray(mem.fits) & np.asarray(r["fits"]), "stable": np.isfinite(ttft),
        "prefill_bound": x >= capacity * (1 - 1e-9),
    }

"""One serving configuration as plain numbers: baseline and speculative serving at the same load (CLI JSON)."""

from __future__ import annotations

import numpy as np

from specplan.serving.aggregated import aggregated
from specplan.serving.disaggregated import disaggregated
from specplan.serving.workload import Workload
from specplan.speculation.speedup import options_objects

NOTE_WAIT_S = 1e-3  # an admission wait from 1 ms up is named in the point's note
PREFILL_NOTE_UTIL = 0.9  # a disaggregated prefill pool this busy is named in the point's note (its queue dominates TTFT)
KEYS = ("tpot_ms", "ttft_ms", "request_latency_ms", "tokens_per_s_per_user", "tokens_per_s_per_gpu")


def serve(model, hardware, workload: Workload, **kw) -> dict:
    """Aggregated or disaggregated steady state (by workload.mode) from the options by name (options_objects; what
    is left: admission), a ServingGrid."""
    dep, spec, rest = options_objects(model, hardware, **kw)
    if workload.mode == "disagg":
        return disaggregated(dep, spec, workload)
    if dep.prefill_layout is not None:  # one layout serves prefill and decode in an aggregated instance
        from specplan.core.errors import SpecplanError

        raise SpecplanError("prefill layout (--prefill-layout): only with --mode disagg")
    return aggregated(dep, spec, workload, **rest)


def _at(v, i: int):
    """Entry i of a result array over the loads (a single value serves every i)."""
    a = np.asarray(v).reshape(-1)
    return a[i if a.size > 1 else 0]


def admission_note(r: dict, point: dict, wait_ms: float, i: int = 0) -> str:
    """Why a closed loop's requests wait before their prefill (load i): the running cap (the KV cache's room for
    ISL + OSL tokens per request beside the weights, max_num_seqs, or the engine's lower cap under speculation) or
    a saturated prefill; `wait_ms` of the TTFT."""
    cap = float(_at(r.running_cap, i))
    if point["decode_batch"] >= cap - 0.5:
        kv = float(_at(r.get("kv_cap_requests", np.inf), i))
        beside = "beside the target's and the draft's weights, with the draft's KV" if r.kv_cap_draft else \
            "beside the weights"
        if bool(_at(r.get("spec_cap", False), i)):
            why = ("the engine's cap when speculating, spec_max_num_seqs: SGLang's default unless "
                   "--max-running-requests is set, as specplan's launch files do")
        elif kv <= cap:
            why = f"the KV cache holds {cap:g} requests of ISL + OSL tokens {beside}"
        else:
            why = f"the engine's max_num_seqs is {cap:g}"
        where = " per decode instance" if "pools" in r else ""
        return (f"at most {cap:g} requests run at once{where} ({why}); the others wait for admission, "
                f"{wait_ms:.0f} ms of the TTFT")
    return f"the prefill is saturated: requests wait {wait_ms:.0f} ms for admission (part of the TTFT)"


def _point(r: dict, workload: Workload | None = None, i: int = 0) -> dict:
    """One configuration's numbers (ms, tokens/s) at load i of the result; TPOT is None for OSL 1 (no decode),
    TTFT None when unstable, with `note` saying why (open loop: arrivals exceed the saturation rate)."""
    def f(k):
        v = float(_at(r[k], i))
        return None if not np.isfinite(v) else v

    ms = lambda k: None if f(k) is None else 1e3 * f(k)  # noqa: E731
    stable = bool(_at(r.stable, i))
    out = {"tpot_ms": ms("tpot_s") if stable else None, "ttft_ms": ms("ttft_s") if stable else None,
           "ttft_p50_ms": ms("ttft_p50_s") if stable and "ttft_p50_s" in r else None,
           "ttft_p90_ms": ms("ttft_p90_s") if stable and "ttft_p90_s" in r else None,
           "request_latency_ms": ms("request_latency_s") if stable else None,
           "tokens_per_s_per_user": f("tokens_per_s_per_user") if stable else None,
           "tokens_per_s_per_gpu": f("tokens_per_s_per_gpu") if stable else None,
           "decode_batch": f("decode_batch"), "requests_per_s": f("requests_per_s"),
           "acceptance_length": f("acceptance_length"), "fits": bool(_at(r.fits, i)), "stable": stable}
    if "saturation_requests_per_s" in r:
        out["saturation_requests_per_s"] = f("saturation_requests_per_s")
    if workload is not None and workload.osl == 1:
        out["note"] = "OSL 1: the prefill makes the only token, so there is no TPOT"
    if not stable and "running_cap" in r:  # an overloaded engine runs at its cap (the open loop's B only bounds it)
        out["decode_batch"] = min(out["decode_batch"], float(_at(r.running_cap, i)))
    wait = f("admission_wait_s") if "admission_wait_s" in r else None
    if stable and wait and "running_cap" in r and out["fits"]:
        out["admission_wait_ms"] = 1e3 * wait
        if wait >= NOTE_WAIT_S:
            out["note"] = "; ".join(n for n in (out.get("note"), admission_note(r, out, 1e3 * wait, i)) if n)
    if stable and "prefill_utilization" in r:  # disaggregated: the prefill pool's busy fraction
        rho = f("prefill_utilization")
        out["prefill_utilization"] = rho
        if rho is not None and rho >= PREFILL_NOTE_UTIL:
            out["note"] = "; ".join(n for n in (out.get("note"), (
                f"the prefill pool is {100 * rho:.0f} % busy: most of the TTFT is the wait for it (more prefill "
                f"instances, --pools, would shorten it)")) if n)
    if not stable:
        sat = out.get("saturation_requests_per_s")
        out["note"] = (f"unstable: arrivals ({f('requests_per_s'):.4g} req/s) exceed capacity "
                       f"{sat:.4g} req/s" if sat is not None else "unstable: arrivals exceed capacity")
    if "pools" in r:
        out["pools"] = f"{r.pools[0]}P{r.pools[1]}D"
    return out


def _compare(base: dict, sp: dict) -> dict:
    """TPOT and throughput speedups of a speculative point over its baseline at the same load (None: undefined)."""
    ok = lambda k: base[k] is not None and sp[k] is not None  # noqa: E731
    return {"speedup_tpot": base["tpot_ms"] / sp["tpot_ms"] if ok("tpot_ms") else None,
            "speedup_throughput": (sp["tokens_per_s_per_gpu"] / base["tokens_per_s_per_gpu"]
                                   if ok("tokens_per_s_per_gpu") else None)}


def serving_summary(model, hardware, workload: Workload, *, mechanism="none", draft_len=0, acceptance=None,
                    **kw) -> dict:
    """{'mode', 'engine', 'isl', 'osl', 'concurrency' | 'request_rate', 'baseline': {...}, and with a mechanism
    'speculative': {...}, 'speedup_tpot', 'speedup_throughput'} (ms, tokens/s). With several concurrencies
    (an array workload.concurrency, priced in one vectorized pass): {'mode', 'engine', 'isl', 'osl', 'points':
    [that dict per concurrency]}."""
    from specplan.profiles.registry import load_engine

    rb = serve(model, hardware, workload, **kw)
    rs = None if mechanism == "none" else serve(model, hardware, workload, mechanism=mechanism, draft_len=draft_len,
                                                acceptance=acceptance, **kw)
    head = {"mode": workload.mode, "engine": load_engine(kw.get("engine")).id, "isl": workload.isl,
            "osl": workload.osl}
    loads = np.asarray(workload.concurrency if workload.concurrency is not None else workload.request_rate,
                       dtype=float).reshape(-1)
    points = []
    for i, load in enumerate(loads):  # one entry per load of the already priced arrays (formatting only)
        base = _point(rb, workload, i)
        out = dict(head, **({"concurrency": float(load)} if workload.concurrency is not None
                            else {"request_rate": float(load)}), baseline=base)
        if "pools" in base:
            out["pools"] = base.pop("pools")
        if rs is not None:
            out["speculative"] = _point(rs, workload, i)
            out.update(_compare(base, out["speculative"]))
        points.append(out)
    return points[0] if len(points) == 1 else dict(head, points=points)

"""One serving configuration as plain numbers: baseline and speculative serving at the same load (CLI JSON)."""

from __future__ import annotations

import numpy as np

from specplan.serving.aggregated import aggregated
from specplan.serving.disaggregated import disaggregated
from specplan.serving.workload import Workload

KEYS = ("tpot_ms", "ttft_ms", "request_latency_ms", "tokens_per_s_per_user", "tokens_per_s_per_gpu")


def serve(model, hardware, workload: Workload, **kw) -> dict:
    """Aggregated or disaggregated steady state (by workload.mode), arrays as `aggregated` returns them."""
    fn = disaggregated if workload.mode == "disagg" else aggregated
    if fn is disaggregated:
        kw.pop("admission", None)
    return fn(model, hardware, workload, **kw)


def _point(r: dict) -> dict:
    f = lambda k: float(np.asarray(r[k]).reshape(-1)[0])  # noqa: E731
    return {"tpot_ms": 1e3 * f("tpot_s"), "ttft_ms": 1e3 * f("ttft_s"), "request_latency_ms": 1e3 * f("request_latency_s"),
            "tokens_per_s_per_user": f("tokens_per_s_per_user"), "tokens_per_s_per_gpu": f("tokens_per_s_per_gpu"),
            "decode_batch": f("decode_batch"), "requests_per_s": f("requests_per_s"),
            "acceptance_length": f("acceptance_length"), "fits": bool(np.all(r["fits"])),
            "stable": bool(np.all(r["stable"]))}


def serving_summary(model, hardware, workload: Workload, *, mechanism="none", draft_len=0, acceptance=None,
                    **kw) -> dict:
    """{'mode', 'engine', 'isl', 'osl', 'concurrency' | 'request_rate', 'baseline': {...}, and with a mechanism
    'speculative': {...}, 'speedup_tpot', 'speedup_throughput'} (ms, tokens/s)."""
    from specplan.profiles.registry import load_engine

    base = _point(serve(model, hardware, workload, **kw))
    out = {"mode": workload.mode, "engine": load_engine(kw.get("engine")).id, "isl": workload.isl,
           "osl": workload.osl, "baseline": base}
    if workload.concurrency is not None:
        out["concurrency"] = float(np.asarray(workload.concurrency).reshape(-1)[0])
    else:
        out["request_rate"] = float(workload.request_rate)
    if workload.pools is not None:
        out["pools"] = f"{workload.pools[0]}P{workload.pools[1]}D"
    if mechanism != "none":
        sp = _point(serve(model, hardware, workload, mechanism=mechanism, draft_len=draft_len, acceptance=acceptance,
                          **kw))
        out["speculative"] = sp
        out["speedup_tpot"] = base["tpot_ms"] / sp["tpot_ms"]
        out["speedup_throughput"] = sp["tokens_per_s_per_gpu"] / base["tokens_per_s_per_gpu"]
    return out

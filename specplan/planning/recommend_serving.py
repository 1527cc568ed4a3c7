"""`recommend` with a serving workload: the (mechanism, D, concurrency[, pools]) of most tokens/s/GPU whose
TTFT and TPOT meet the SLA (--max-ttft-ms, --max-tpot-ms), from the serving model (specplan.serving)."""

from __future__ import annotations

import dataclasses

import numpy as np

from specplan.core.errors import SpecplanError
from specplan.profiles.registry import load_engine, load_model
from specplan.speculation.acceptance_spec import parse_acceptance
from specplan.planning.recommend import _draft_range, _mechanisms
from specplan.serving.api import serve

CONCURRENCIES = np.unique(np.round(np.geomspace(1, 1024, 41)))  # searched when --concurrency is not given
POOL_SIZES = (1, 2, 3, 4)  # prefill and decode instances searched in disagg mode without --pools


def _candidates(workload, search_concurrency: bool):
    conc = CONCURRENCIES if search_concurrency else np.atleast_1d(np.asarray(workload.concurrency, dtype=float))
    pools = [workload.pools] if workload.mode != "disagg" or workload.pools is not None else \
        [(x, y) for x in POOL_SIZES for y in POOL_SIZES]
    return conc, pools


def recommend_serving(model, hardware, workload, *, tp=1, engine=None, mechanisms=None, acceptance=None,
                      max_draft_len=16, extrapolate=False, max_ttft_ms=None, max_tpot_ms=None,
                      search_concurrency=None, top=10, keep_grid=False, **kw) -> dict:
    """Rank (mechanism, D) by their best tokens/s/GPU over the concurrency (and pools) grid under the SLA."""
    for name, v in (("max TTFT (--max-ttft-ms)", max_ttft_ms), ("max TPOT (--max-tpot-ms)", max_tpot_ms)):
        if v is not None and not (v > 0):
            raise SpecplanError(f"{name}: must be > 0 ms, got {v:g}")
    m = load_model(model)
    workload.check(m)  # a request beyond the model's context: refused before any pricing
    eng = load_engine(engine)
    acceptance = {k: parse_acceptance(v) for k, v in (acceptance or {}).items()}
    try:
        mechs = ["none"] + [x for x in _mechanisms(m.id, mechanisms, acceptance) if x != "none"]
    except SpecplanError:
        if mechanisms:
            raise
        mechs = ["none"]  # no mechanism has acceptance data: rank the baseline configurations only
    if search_concurrency is None:
        search_concurrency = workload.request_rate is None and workload.concurrency is None
    conc, pools = _candidates(workload, search_concurrency)
    notes, rows, grid = [], [], []
    for mech in mechs:
        acc = acceptance.get(mech)
        d = np.arange(0, 1) if mech == "none" else _draft_range(acc, max_draft_len, extrapolate, notes, mech)[1:]
        if d.size == 0:  # --max-draft-len 0: the baseline (mechanism none) is the only configuration
            note = "max draft length 0 (--max-draft-len): only the baseline (mechanism none, D = 0) is searched"
            notes += [] if note in notes else [note]
            continue
        for pool in pools:
            wl = dataclasses.replace(workload, pools=pool)
            if workload.request_rate is None:
                wl = dataclasses.replace(wl, concurrency=conc[:, None])
            r = serve(m, hardware, wl, tp=tp, engine=eng, mechanism=mech, draft_len=d[None, :], acceptance=acc, **kw)
            shape = np.broadcast(r["tpot_s"], d[None, :]).shape
            get = lambda k: np.broadcast_to(np.asarray(r[k], dtype=float), shape)  # noqa: E731
            ok = np.broadcast_to(np.asarray(r["fits"]) & np.asarray(r["stable"]), shape)
            if max_ttft_ms is not None:
                ok = ok & (get("ttft_s") * 1e3 <= max_ttft_ms)
            if max_tpot_ms is not None:
                ok = ok & (get("tpot_s") * 1e3 <= max_tpot_ms)
            obj = np.where(ok, get("tokens_per_s_per_gpu"), -np.inf)
            if keep_grid:
                cc = np.broadcast_to(np.asarray(r.get("concurrency", conc[:, None]), dtype=float), shape)
                grid += [{"mechanism": mech, "draft_len": int(d[j]), "concurrency": float(cc[i, j]),
                          "pools": None if pool is None else f"{pool[0]}P{pool[1]}D",
                          "tpot_ms": 1e3 * float(get("tpot_s")[i, j]), "ttft_ms": 1e3 * float(get("ttft_s")[i, j]),
                          "tokens_per_s_per_user": float(get("tokens_per_s_per_user")[i, j]),
                          "tokens_per_s_per_gpu": float(get("tokens_per_s_per_gpu")[i, j]),
                          "meets_sla": bool(ok[i, j])} for i in range(shape[0]) for j in range(len(d))]
            for j, dd in enumerate(d):
                i = int(np.argmax(obj[:, j])) if np.any(ok[:, j]) else int(np.argmin(get("tpot_s")[:, j]))
                rows.append({"mechanism": mech, "draft_len": int(dd), "feasible": bool(ok[i, j]),
                             "concurrency": float(np.broadcast_to(np.asarray(r["concurrency"] if "concurrency" in r
                                                                             else conc[:, None]), shape)[i, j]),
                             "pools": None if pool is None else f"{pool[0]}P{pool[1]}D",
                             "tpot_ms": 1e3 * float(get("tpot_s")[i, j]), "ttft_ms": 1e3 * float(get("ttft_s")[i, j]),
                             "tokens_per_s_per_user": float(get("tokens_per_s_per_user")[i, j]),
                             "tokens_per_s_per_gpu": float(get("tokens_per_s_per_gpu")[i, j]),
                             "acceptance_length": float(get("acceptance_length")[i, j]),
                             "min_tpot_ms": 1e3 * float(np.min(get("tpot_s")[:, j])),
                             "min_ttft_ms": 1e3 * float(np.min(get("ttft_s")[:, j]))})
    rows.sort(key=lambda x: (x["feasible"], x["tokens_per_s_per_gpu"] if x["feasible"] else -x["tpot_ms"]),
              reverse=True)
    feasible = [x for x in rows if x["feasible"]]
    out = {"model": m.id, "engine": eng.id, "mode": workload.mode, "isl": workload.isl, "osl": workload.osl,
           "tp": tp, "max_ttft_ms": max_ttft_ms, "max_tpot_ms": max_tpot_ms, "ranked": rows[:top], "notes": notes,
           "best": feasible[0] if feasible else None, "grid": grid}
    if not feasible:
        t = min(x["min_tpot_ms"] for x in rows)
        f = min(x["min_ttft_ms"] for x in rows)
        sla = ", ".join(x for x in (f"TTFT <= {max_ttft_ms:g} ms" if max_ttft_ms else "",
                                    f"TPOT <= {max_tpot_ms:g} ms" if max_tpot_ms else "") if x)
        out["infeasible"] = (f"no configuration fits{' and meets ' + sla if sla else ''}: the lowest TPOT reachable is "
                             f"{t:.2f} ms and the lowest TTFT {f:.1f} ms (each at its own concurrency)")
    return out


def serving_grid(model, hardware, workload, *, tp=1, engine=None, mechanisms=None, acceptance=None, max_draft_len=8,
                 **kw):
    """Every (mechanism, D, concurrency[, pools]) of the serving model as a DataFrame (the pareto grid)."""
    import pandas as pd

    r = recommend_serving(model, hardware, workload, tp=tp, engine=engine, mechanisms=mechanisms,
                          acceptance=acceptance, max_draft_len=max_draft_len, top=0, keep_grid=True, **kw)
    return pd.DataFrame(r["grid"])

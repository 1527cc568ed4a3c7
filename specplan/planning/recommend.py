"""`recommend` the best (mechanism, D) at a batch or under a tokens/s/user target: plain dicts for the CLI."""

from __future__ import annotations

import numpy as np

from specplan.speculation.acceptance_spec import parse_acceptance
from specplan.core.errors import SpecplanError
from specplan.core.limits import DRAFT_LEN_LIMIT, MAX_BATCH, MAX_CONTEXT, MAX_TP, check_int
from specplan.model.parallel import layout_for
from specplan.planning.predict import layout_dict, mla_tp_note
from specplan.profiles.registry import load_hardware, load_model
from specplan.speculation.acceptance import Acceptance, find_profile
from specplan.speculation.guidelines import StepCurve, binding_line, g1_sentence, mechanism_line
from specplan.speculation.spec import DraftSearch
from specplan.speculation.speedup import evaluate, evaluate_kw, mechanism_names
from specplan.planning.sweep import MAX_DRAFT_LEN

BATCH_MAX = 2048  # largest batch recommend searches (every integer batch 1 ... the largest that fits, up to this)


def default_mechanisms(model: str, acc: dict, draft_model) -> list[str]:
    """The mechanisms a search takes when none are named: those with acceptance data (shipped profiles or
    --acceptance), as every mode takes them; none (the D = 0 baseline alone) where the model has no data."""
    try:
        return _mechanisms(load_model(model).id, None, acc, draft_model)
    except SpecplanError:
        return []


def _mechanisms(model_id: str, mechanisms, acceptance: dict, draft_model=None) -> list[str]:
    """The mechanisms to search: the given ones, else those with acceptance data (an external draft only with
    a draft model, which the shipped external profiles need)."""
    known = mechanism_names()
    if mechanisms:
        for m in mechanisms:
            if m not in known:
                raise SpecplanError(f"unknown mechanism '{m}' (known: {', '.join(known)})")
        mechs = list(dict.fromkeys(m for m in mechanisms if m != "none"))
        if not mechs:
            raise SpecplanError(f"mechanisms: give at least one draft mechanism besides 'none' (the D = 0 baseline "
                                f"is always included; known: {', '.join(m for m in known if m != 'none')})")
        return mechs
    found = [m for m in known if m != "none" and (m in acceptance or find_profile(m, model_id))
             and (m != "external" or draft_model is not None)]
    if not found:
        raise SpecplanError(f"no mechanism has acceptance data for {model_id}: pass --acceptance mechanism=value")
    return found


def _draft_range(acc: Acceptance | None, max_d: int, extrapolate: bool, notes: list, mech: str) -> np.ndarray:
    top = max_d
    if acc is not None and acc.d_max is not None and not extrapolate and acc.d_max < max_d:
        top = int(acc.d_max)
        notes.append(f"{mech}: acceptance data cover D <= {top}; larger D not searched (--extrapolate to search)")
    return np.arange(0, top + 1)


def _checked(tp, batch, target_tps_per_user, context_len, max_draft_len) -> tuple:
    """recommend's options checked in one line each: (batch or None, largest D)."""
    if batch is not None and target_tps_per_user is not None:
        raise SpecplanError("recommend: give at most one of --batch or --target-tps-per-user")
    max_draft_len = check_int(max_draft_len, "max draft length", 0, DRAFT_LEN_LIMIT)
    if batch is not None:
        batch = check_int(batch, "batch", 1, MAX_BATCH)
    check_int(tp, "tp", 1, MAX_TP)
    check_int(context_len, "context", 0, MAX_CONTEXT)
    if target_tps_per_user is not None and not (target_tps_per_user > 0):  # also rejects NaN
        raise SpecplanError(f"target tokens/s/user (--target-tps-per-user): must be > 0, got {target_tps_per_user:g}")
    return batch, max_draft_len


def _engine_notes(engine, shown: list) -> list:
    """The engine's notes on the rows shown: its unfitted round numbers and its speculative running cap."""
    from specplan.profiles.registry import load_engine
    from specplan.speculation.round import spec_cap_note, unfitted_note

    eng = load_engine(engine)
    top_b = max((x["batch"] for x in shown if x["mechanism"] != "none"), default=None)
    return unfitted_note(eng) + ([] if top_b is None else spec_cap_note(eng, top_b))


def recommend(model, hardware, *, tp=1, batch=None, target_tps_per_user=None, context_len=1024,
              drafts: DraftSearch | None = None, top=10, **kw) -> dict:
    """Best (mechanism, D) of `drafts` (default: every mechanism with acceptance data, D up to MAX_DRAFT_LEN) by
    tokens/s/GPU at a batch, or over batch subject to tokens/s/user >= a target (neither given: over every batch
    that fits, i.e. the throughput end of the frontier); `kw`: evaluate's deployment options (dtype, engine, ...)."""
    drafts = drafts if drafts is not None else DraftSearch(max_draft_len=MAX_DRAFT_LEN)
    mechanisms, acceptance, max_draft_len, extrapolate = (drafts.mechanisms, drafts.acceptance, drafts.max_draft_len,
                                                          drafts.extrapolate)
    batch, max_draft_len = _checked(tp, batch, target_tps_per_user, context_len, max_draft_len)
    m = load_model(model)
    acceptance = {k: parse_acceptance(v) for k, v in (acceptance or {}).items()}
    mechs = _mechanisms(m.id, mechanisms, acceptance, kw.get("draft_model"))
    for k in acceptance:
        if k not in mechs:
            raise SpecplanError(f"acceptance: '{k}' is not among the mechanisms ({', '.join(mechs)})")
    hw = load_hardware(hardware)
    bs = np.array([batch], dtype=float) if batch is not None else batch_candidates(m, hw, tp, context_len, kw)
    notes, limits, rows, curves = [], [], [], {}
    for mech in mechs:
        acc = acceptance.get(mech)
        d = _draft_range(acc, max_draft_len, extrapolate, notes, mech)
        r = evaluate_kw(m, hardware, tp=tp, batch=bs[:, None], context_len=context_len, draft_len=d[None, :],
                     mechanism=mech, acceptance=acc, guidelines=True, **kw)
        if acc is None and r.acceptance_d_max is not None and not extrapolate:
            keep = d <= r.acceptance_d_max
            if not keep.all():
                notes.append(f"{mech}: shipped profile covers D <= {r.acceptance_d_max:g}; larger D not searched")
                d = d[keep]
                r = r.select(keep)
        curves[mech] = (d, r)
        limits += _memory_notes(mech, d, r, bs)
        notes += [n for n in r.notes if n.startswith("MoE target") and n not in notes]  # once, from evaluate
        ok = r.fits & (r.tokens_per_s_per_user >= (target_tps_per_user or 0.0))
        obj = np.where(ok, r.tokens_per_s_per_gpu, -np.inf)
        for j, dd in enumerate(d):
            i = int(np.argmax(obj[:, j]))
            rows.append(_row(mech if dd > 0 else "none", int(dd), r, i, j, bool(ok[i, j]), bs))
    rows = _dedupe(rows)
    rows.sort(key=lambda x: (x["feasible"], x["tokens_per_s_per_gpu"] if x["feasible"] else -1), reverse=True)
    feasible = [x for x in rows if x["feasible"]]
    if kw.get("engine") is not None and any(x != "none" for x in mechs):
        notes += _engine_notes(kw["engine"], rows[:top])
    out = {"model": m.id, "hardware": hw.id, "hardware_kind": hw.kind, "tp": tp,
           "layout": layout_dict(layout_for(tp, kw.get("layout"))), "context_len": context_len,
           "batch": batch, "target_tps_per_user": target_tps_per_user, "mechanisms": mechs,
           "ranked": rows[:top], "notes": notes, "memory_limits": limits,
           "best": feasible[0] if feasible else None}
    if not feasible:
        out["infeasible"] = _explain(rows, curves, target_tps_per_user)
        if not any(bool(np.any(r.fits)) for _, r in curves.values()):
            d0, r0 = next(iter(curves.values()))
            why = mla_tp_note(m, hw, tp, context_len, r0["precision"], kw.get("layout"))
            if why:
                out["infeasible"] += f"; {why}"
        return out
    best = feasible[0]
    mech = best["mechanism"] if best["mechanism"] != "none" else mechs[0]
    d, r = curves[mech]
    i = int(np.argmin(np.abs(bs - best["batch"])))
    step = StepCurve.of(r, i)
    shape = r.speedup.shape
    diag = {k: (np.broadcast_to(v, shape)[i, 0] if isinstance(v, np.ndarray) else v)
            for k, v in r.guidelines.items() if k not in ("tile_aligned", "gemm_regime", "moe_regime", "rho", "rho_d")}
    d_max = r.acceptance_d_max
    guideline, line = binding_line(best["draft_len"], step, diag, d_max, extrapolate)
    if best["draft_len"] == 0 and any(x["draft_len"] > 0 and not x["feasible"] for x in rows):
        guideline, line = "memory", "speculative configurations do not fit in memory at this batch (see the notes)"
    out["binding"] = {"guideline": guideline, "line": line}
    choice = mechanism_line(rows)  # G5: the choice of mechanism (None with one mechanism or speculation off)
    out["mechanism_choice"] = None if choice is None else {"guideline": choice[0], "line": choice[1]}
    out["guidelines"] = _summary(diag, best["batch"])
    out["near_best"] = near_best(feasible, best)
    out["per_mechanism"] = best_per_mechanism(feasible, best, mechs)
    shown = {(x["mechanism"], x["draft_len"]) for x in out["per_mechanism"]}
    out["runners_up"] = [x for x in feasible if (x["mechanism"], x["draft_len"]) not in shown][:5]
    out["notes"] = notes + point_notes(best, curves, bs, target_tps_per_user, batch is None)
    return out


def best_per_mechanism(feasible: list[dict], best: dict, mechs: list[str]) -> list[dict]:
    """The best feasible row of each mechanism (and of no speculation), best first, each with why it lost."""
    out = []
    for mech in [*mechs, "none"]:
        own = [x for x in feasible if x["mechanism"] == mech]
        if own:
            x = dict(own[0])  # `feasible` is sorted by tokens/s/GPU
            x["why_lost"] = "best" if x is best or own[0] is best else why_lost(x, best)
            out.append(x)
    return sorted(out, key=lambda x: -x["tokens_per_s_per_gpu"])


def why_lost(x: dict, best: dict) -> str:
    """Why row `x` has fewer tokens/s/GPU than `best`: tok/s/GPU = B x AL / iteration / devices, so the
    ratio splits into batch, AL, iteration time and device factors; the (at most two) factors that cost most."""
    pct = 100.0 * (1.0 - x["tokens_per_s_per_gpu"] / best["tokens_per_s_per_gpu"])
    if x["mechanism"] == "none":
        return f"-{pct:.1f}%: no speculation (AL 1 vs {best['acceptance_length']:.2f})"
    dev = lambda r: r["target_devices"]  # tok/s/GPU divides by the target devices  # noqa: E731
    factors = [
        (np.log(x["batch"] / best["batch"]), f"batch {x['batch']} vs {best['batch']}"),
        (np.log(x["acceptance_length"] / best["acceptance_length"]),
         f"AL {x['acceptance_length']:.2f} vs {best['acceptance_length']:.2f}"),
        (-np.log(x["iter_s"] / best["iter_s"]),
         f"iteration {1e3 * x['iter_s']:.2f} vs {1e3 * best['iter_s']:.2f} ms (draft {1e3 * x['draft_s']:.2f} vs "
         f"{1e3 * best['draft_s']:.2f})"),
        (-np.log(dev(x) / dev(best)), f"{dev(x)} vs {dev(best)} target devices"),
    ]
    hurt = sorted((f for f in factors[1:] if f[0] < -1e-3), key=lambda f: f[0])[:2]
    why = ", ".join(t for _, t in hurt)
    if factors[0][0] < -1e-3:  # a smaller batch: a consequence of the above under a tok/s/user target, or memory
        why = f"{why}; so {factors[0][1]}" if why else factors[0][1]
    why = why or "same throughput within rounding"
    return f"-{pct:.1f}%: {why}"


def gb_pair(a_bytes: float, b_bytes: float) -> tuple[str, str]:
    """Two byte counts in GB with just enough decimals (1 ... 4) that they print differently."""
    a, b = a_bytes / 1e9, b_bytes / 1e9
    for dec in range(1, 5):
        if f"{a:.{dec}f}" != f"{b:.{dec}f}":
            break
    return f"{a:.{dec}f}", f"{b:.{dec}f}"


def point_notes(best: dict, curves: dict, bs: np.ndarray, target, batch_free: bool) -> list[str]:
    """Notes about the chosen operating point: its memory, what stops a larger batch, and from which D each
    mechanism stops fitting at the chosen batch."""
    mech = best["mechanism"]
    d, r = curves[mech] if mech in curves else next(iter(curves.values()))
    i = int(np.argmin(np.abs(bs - best["batch"])))
    j = int(np.argmin(np.abs(d - best["draft_len"])))
    cap = float(np.asarray(r["memory_capacity_bytes"]).reshape(-1)[0])
    used, capt = gb_pair(best["memory_total_bytes"], cap)
    out = [f"chosen point: {mech} D = {best['draft_len']} at batch {best['batch']} uses {used} GB of {capt} GB "
           f"usable per device; iteration {1e3 * best['iter_s']:.2f} ms = draft {1e3 * best['draft_s']:.2f} + "
           f"verify {1e3 * best['verify_s']:.2f} ms, {best['tokens_per_s_per_user']:.2f} tok/s/user"]
    if batch_free and i + 1 < len(bs):
        nb = int(bs[i + 1])
        tps, fits = float(r["tokens_per_s_per_user"][i + 1, j]), bool(r["fits"][i + 1, j])
        if not fits:
            a, c = gb_pair(float(r["memory_total_bytes"][i + 1, j]), cap)
            out.append(f"batch {nb} would not fit ({a} GB > {c} GB)")
        elif target is not None and tps < target:
            out.append(f"batch {nb} would give {tps:.2f} tok/s/user < the {target:g} target")
    elif batch_free:
        out.append(f"batch {best['batch']} is the largest that fits at D = 0")
    for m, (dm, rm) in curves.items():
        bad = np.flatnonzero(~np.asarray(rm["fits"][i]) & (dm > 0))
        if bad.size:
            k = int(bad[0])
            a, c = gb_pair(float(rm["memory_total_bytes"][i, k]), cap)
            out.append(f"{m} at batch {best['batch']}: D >= {int(dm[k])} does not fit ({a} GB > {c} GB per device)")
    return out


def batch_candidates(m, hw, tp: int, context_len, kw: dict) -> np.ndarray:
    """Every integer batch from 1 to the largest that fits at D = 0 (at most BATCH_MAX; an LPU: BATCH_MAX).

    evaluate() is vectorized over batch, so searching all of them costs about as much as a coarse list and
    does not miss the optimum between two of its entries."""
    top = BATCH_MAX
    if hw.kind != "lpu":
        r = evaluate_kw(m, hw, tp=tp, batch=np.arange(1, BATCH_MAX + 1, dtype=float), context_len=context_len,
                     draft_len=0, mechanism="none", **{k: v for k, v in kw.items()
                                                 if k in ("dtype", "kv_dtype", "reserve", "attention_style", "routing", "layout")})
        ok = np.flatnonzero(np.asarray(r.fits).reshape(-1))
        top = int(ok[-1]) + 1 if ok.size else 1
    return np.arange(1, top + 1, dtype=float)


NEAR_BEST = 0.02  # configurations this close to the best are not separable at the model's accuracy


def near_best(feasible: list[dict], best: dict, within: float = NEAR_BEST) -> list[dict]:
    """Runners-up whose tokens/s/GPU is within `within` of the best (the model cannot rank them apart)."""
    top = best["tokens_per_s_per_gpu"]
    return [{"mechanism": x["mechanism"], "draft_len": x["draft_len"], "batch": x["batch"],
             "below_best_pct": 100.0 * (1.0 - x["tokens_per_s_per_gpu"] / top)}
            for x in feasible[1:] if x["tokens_per_s_per_gpu"] >= (1.0 - within) * top]


def _row(mech, d, r, i, j, feasible, bs) -> dict:
    return {"mechanism": mech, "draft_len": d, "batch": int(bs[i]), "feasible": feasible,
            **{k: float(r[k][i, j]) for k in ("acceptance_length", "speedup", "tokens_per_s_per_user",
                                              "tokens_per_s_per_gpu", "iter_s", "draft_s", "verify_s",
                                              "memory_total_bytes", "rho_d", "rho_time",
                                              "tokens_per_s_per_device")},
            "max_batch": None if not np.isfinite(float(r["max_batch"][i, j])) else int(min(float(r["max_batch"][i, j]), 1e9)),
            "target_devices": int(round(float(r["target_devices"][i, j]))),
            "draft_devices": int(round(float(r["draft_devices"][i, j])))}


def _memory_notes(mech: str, d: np.ndarray, r: dict, bs: np.ndarray) -> list[str]:
    """Where speculative configurations stop fitting from some D on (with the bytes): at most three batches,
    the smallest such batch, a middle one and the largest (every integer batch is searched)."""
    out = []
    cap = float(np.asarray(r["memory_capacity_bytes"]).reshape(-1)[0]) / 1e9
    hit = [i for i in range(len(bs)) if np.any(~r["fits"][i] & (d > 0)) and (len(bs) == 1 or r["fits"][i, 0])]
    for i in sorted({hit[0], hit[len(hit) // 2], hit[-1]}) if hit else []:
        j = np.nonzero(~r["fits"][i] & (d > 0))[0][0]
        state = float(r["memory_state_bytes"][i, j]) / 1e9
        extra = f", of which {state:.1f} GB recurrent-state checkpoints" if state > 0 else ""
        out.append(f"{mech}: at batch {int(bs[i])}, D >= {int(d[j])} does not fit: "
                   f"{float(r['memory_total_bytes'][i, j]) / 1e9:.1f} GB per device > {cap:.1f} GB usable{extra}")
    return out


def _dedupe(rows: list[dict]) -> list[dict]:
    """One D = 0 baseline row (identical for every mechanism); batches filled in from the index."""
    out, seen = [], False
    for x in rows:
        if x["mechanism"] == "none":
            if seen:
                continue
            seen = True
        out.append(x)
    return out


def _explain(rows, curves, target) -> str:
    """Why nothing qualified: memory, or the tokens/s/user target out of reach."""
    any_fit = any(bool(np.any(r["fits"])) for _, r in curves.values())
    if not any_fit:
        mech, (d, r) = next(iter(curves.items()))
        need = float(np.min(r["memory_total_bytes"])) / 1e9
        cap = float(r["memory_capacity_bytes"].reshape(-1)[0]) / 1e9
        return f"nothing fits in memory: the smallest configuration needs {need:.1f} GB per device > {cap:.1f} GB usable"
    best = max(float(np.max(np.where(r["fits"], r["tokens_per_s_per_user"], 0))) for _, r in curves.values())
    return f"no fitting configuration reaches {target:g} tokens/s/user; the best reachable is {best:.1f}"


def _summary(diag: dict, batch) -> dict:
    """Guideline diagnostics at the chosen batch as plain numbers."""
    keep = ("g_dev", "tile_rows", "attention_tile_d", "gemm_compute_bound_applies_to", "gemm_compute_bound_from_d",
            "gemm_compute_bound_from_d_spec_sheet", "ridge_tokens_effective", "ridge_tokens_spec_sheet",
            "dense_gemm_compute_bound_from_d", "dense_gemm_compute_bound_from_d_spec_sheet",
            "dense_ridge_tokens_effective", "dense_ridge_tokens_spec_sheet", "attention_share")
    out = {"batch": batch, **{k: np.asarray(diag[k]).reshape(-1)[0].item() for k in keep}}
    out["g1_line"] = g1_sentence(out)
    return out

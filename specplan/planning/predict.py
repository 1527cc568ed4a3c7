"""`predict` one speculative configuration: the point as a plain dict (step times, AL, speedup, memory, the
binding guideline), and with a workload the serving numbers too (the CLI's predict calls these)."""

from __future__ import annotations

import numpy as np

from specplan.core.errors import SpecplanError
from specplan.costs.precision import resolve_precision
from specplan.model.parallel import layout_for
from specplan.planning.cost import OperatingPoint, predict_energy
from specplan.speculation.spec import Speculation
from specplan.profiles.registry import load_engine, load_hardware, load_model
from specplan.speculation.guidelines import StepCurve, binding_line
from specplan.speculation.speedup import evaluate, evaluate_kw


def _f(x) -> float:
    return float(np.asarray(x).reshape(-1)[0])


def predict_summary(model, hardware, *, tp=1, batch=1, context_len=1024, mechanism="none", draft_len=0,
                    acceptance=None, **kw) -> dict:
    """One point as a dict: baseline and speculative step (ms), AL, speedup, throughputs, memory, guidelines."""
    if mechanism != "none" and draft_len < 1:
        raise SpecplanError(f"draft length: mechanism {mechanism} needs --draft-len >= 1, got {draft_len}")
    model, hardware = load_model(model), load_hardware(hardware)  # resolved once, passed down as profiles
    hw = hardware
    r = evaluate_kw(model, hardware, tp=tp, batch=batch, context_len=context_len, draft_len=draft_len,
                 mechanism=mechanism, acceptance=acceptance, guidelines=True, **kw)
    g = r.guidelines
    diag = {k: (v.item() if isinstance(v, np.ndarray) and v.size == 1 else v) for k, v in g.items()}
    diag = {k: (np.asarray(v).reshape(-1)[0].item() if isinstance(v, np.ndarray) else v) for k, v in diag.items()}
    diag["rho_time"] = _f(r.rho_time)
    guideline, line = _predict_binding(model, hardware, (tp, batch, context_len),
                                       Speculation(mechanism, draft_len, acceptance), (diag, r), kw)
    diag["binding"] = guideline
    diag["binding_line"] = line
    prec = r.precision
    lpu = hw.kind == "lpu"
    dev_t, dev_d = _f(r.target_devices), _f(r.draft_devices)
    memory = {"total_gb": _f(r.memory_total_bytes) / 1e9, "state_gb": _f(r.memory_state_bytes) / 1e9,
              "capacity_gb": _f(r.memory_capacity_bytes) / 1e9, "fits": bool(np.asarray(r.fits).all())}
    if lpu:  # SRAM-only chips: the deployment takes as many chips as its bytes need
        memory.update({"chips": int(dev_t + (dev_d if draft_hardware_is_same(kw) else 0)),
                       "chip_sram_gb": hw.mem_capacity_bytes / 1e9})
    notes = list(r.notes)
    base_s = _f(r.engine_baseline_step_s)
    extra = [(name, 1e3 * (_f(r[e]) - _f(r[g]))) for name, e, g in (
        ("baseline", "engine_baseline_step_s", "baseline_step_s"), ("speculative", "engine_iter_s", "iter_s"))]
    if any(ms > 0.01 * 1e3 * _f(r.iter_s) for _, ms in extra):
        notes.append("iter ms is the engine's step, the GPU's draft + verify plus host, launch and eager time (" +
                     ", ".join(f"{n} +{ms:.2f} ms" for n, ms in extra) + "), what the speedup and throughputs use")
    if not memory["fits"]:
        why = mla_tp_note(model, hw, tp, context_len, prec, kw.get("layout"))
        if why:
            notes.append(why)
    return {
        "model": model.id, "hardware": hw.id, "hardware_kind": hw.kind, "tp": tp,
        "layout": layout_dict(layout_for(tp, kw.get("layout"))), "batch": batch,
        "context_len": context_len, "mechanism": mechanism, "draft_len": draft_len,
        "verify_tokens": _f(r.verify_tokens),
        "precision": {"compute": prec.compute, "kv": prec.kv},
        "acceptance_source": r.acceptance_source,
        # the steps as the engine runs them (host, launches, graphs: equal to the GPU steps without an engine), the
        # times the speedup and throughputs use; draft and verify stay GPU seconds
        "baseline": {"step_ms": 1e3 * base_s,
                     "tokens_per_s_per_user": 1.0 / base_s,
                     "tokens_per_s_per_gpu": batch / (base_s * _f(r.baseline_devices))},
        "speculative": {"step_ms": 1e3 * _f(r.engine_iter_s), "draft_ms": 1e3 * _f(r.draft_s),
                        "verify_ms": 1e3 * _f(r.verify_s)},
        "acceptance_length": _f(r.acceptance_length),
        "speedup": _f(r.speedup),
        "break_even_al": _f(r.break_even_al),
        "rho": _f(r.rho), "rho_d": _f(r.rho_d), "rho_time": _f(r.rho_time),
        "tokens_per_s_per_user": _f(r.tokens_per_s_per_user),
        "tokens_per_s_per_gpu": _f(r.tokens_per_s_per_gpu),
        "tokens_per_s_per_device": _f(r.tokens_per_s_per_device),
        "devices": {"target": dev_t, "draft": dev_d},
        "memory": memory,
        "guidelines": diag,
        "binding": {"guideline": guideline, "line": line},
        "energy": predict_energy(model, hw, prec, layout_for(tp, kw.get("layout")),
                                 OperatingPoint(batch / (base_s * _f(r.baseline_devices)), batch, context_len),
                                 OperatingPoint(_f(r.tokens_per_s_per_gpu), batch, context_len, draft_len,
                                                _f(r.acceptance_length))),
        "notes": notes,
    }


def predict_step(model, hardware, *, batch=1, mechanism="none", engine=None, **kw) -> dict:
    """predict_summary at a batch the user gives (predict's step path), plus the engine's line when that batch exceeds
    the running cap the engine sets when it speculates (spec_cap_note: SGLang's 48 without --max-running-requests)."""
    r = predict_summary(model, hardware, batch=batch, mechanism=mechanism, engine=engine, **kw)
    if engine is not None and mechanism != "none":
        from specplan.speculation.round import spec_cap_note

        r["notes"] = r["notes"] + spec_cap_note(load_engine(engine), batch)
    return r


def predict_serving(model, hardware, workload, *, tp=1, mechanism="none", draft_len=0, acceptance=None,
                    engine=None, **kw) -> dict:
    """predict_summary at the derived decode batch and context (ISL + OSL/2), plus r['serving'] (serving/api).
    kw 'layout' (a Layout beyond TP: data-parallel attention, EP) is the (decode) instances' layout, kw
    'prefill_layout' a disaggregated prefill pool's own (docs/serving.md)."""
    srv = _serving_summary(model, hardware, workload, tp, mechanism, draft_len, acceptance, engine, kw)
    kw = {k: v for k, v in kw.items() if k != "prefill_layout"}  # the step below is the decode instance's
    batch = max(1, int(round(srv["baseline"]["decode_batch"])))
    r = predict_summary(model, hardware, tp=tp, batch=batch, context_len=int(round(workload.decode_context)),
                        mechanism=mechanism, draft_len=draft_len, acceptance=acceptance, engine=engine, **kw)
    r["serving"] = srv
    if r["energy"] is not None:  # serving rates, decode batches and one prefill per request
        hw = load_hardware(hardware)
        sp = srv.get("speculative")
        wl, b = workload, srv["baseline"]
        base = OperatingPoint(b["tokens_per_s_per_gpu"], b["decode_batch"], wl.decode_context, isl=wl.isl, osl=wl.osl)
        spec = None if not sp else OperatingPoint(sp["tokens_per_s_per_gpu"], sp["decode_batch"], wl.decode_context,
                                                  draft_len, sp["acceptance_length"], wl.isl, wl.osl)
        r["serving"]["energy"] = predict_energy(
            load_model(model), hw, resolve_precision(load_model(model), hw, kw.get("dtype"), kw.get("kv_dtype")),
            layout_for(tp, kw.get("layout")), base, spec)
    return r


def _serving_summary(model, hardware, workload, tp, mechanism, draft_len, acceptance, engine, kw) -> dict:
    """serving/api.serving_summary with the predict options the serving model takes (dtype, kv_dtype, draft_model)."""
    from specplan.serving.api import serving_summary

    keep = {k: kw[k] for k in ("dtype", "kv_dtype", "draft_model") if kw.get(k) is not None}
    if kw.get("prefill_layout") is not None:
        keep["prefill_layout"] = kw["prefill_layout"]
    lay = layout_for(tp, kw.get("layout"))  # a layout beyond TP is priced per DP rank; TP alone as before
    srv = serving_summary(model, hardware, workload, tp=lay if kw.get("layout") is not None else tp, engine=engine,
                          mechanism=mechanism, draft_len=draft_len, acceptance=acceptance, **keep)
    if kw.get("layout") is None and kw.get("prefill_layout") is None:  # TP only: the answer as it always was
        return srv
    if workload.mode == "disagg":  # each pool's layout, in the grammar of --layouts
        srv["decode_layout"] = lay.name
        srv["prefill_layout"] = layout_for(1, kw.get("prefill_layout") or lay).name
    else:
        srv["layout"] = lay.name
    return srv


SWEEP_KEYS = ("model", "hardware", "tp", "mechanism", "draft_len", "verify_tokens", "precision", "acceptance_source",
              "notes")


def predict_serving_sweep(model, hardware, workload, *, tp=1, mechanism="none", draft_len=0, acceptance=None,
                          engine=None, **kw) -> dict:
    """The serving model at each of the workload's loads (one vectorized pass: r['serving']['points']), with the
    model, precision, acceptance source and notes of the step at the lowest load's decode batch."""
    srv = _serving_summary(model, hardware, workload, tp, mechanism, draft_len, acceptance, engine, kw)
    kw = {k: v for k, v in kw.items() if k != "prefill_layout"}  # the step below is the decode instance's
    loads = workload.concurrency if workload.concurrency is not None else workload.request_rate
    low = srv["points"][int(np.argmin(np.asarray(loads, dtype=float)))]  # the lowest load, wherever it is listed
    batch = max(1, int(round(low["baseline"]["decode_batch"])))
    r = predict_summary(model, hardware, tp=tp, batch=batch, context_len=int(round(workload.decode_context)),
                        mechanism=mechanism, draft_len=draft_len, acceptance=acceptance, engine=engine, **kw)
    return {**{k: r[k] for k in SWEEP_KEYS}, "serving": srv}


def draft_hardware_is_same(kw: dict) -> bool:
    """True when the draft (if any) runs on the target's hardware (no --draft-hardware)."""
    return kw.get("draft_hardware") is None


def _predict_binding(model, hardware, at: tuple, spec: Speculation, found: tuple, kw):
    """The shared binding rule (`guidelines.binding_line`) at the predicted D: the curve D = 0 ... D + 1. `at`:
    (TP, batch, context); `found`: (the guideline diagnostics, the evaluation at the predicted D)."""
    tp, batch, context_len = at
    mechanism, draft_len, acceptance = spec.mechanism, spec.draft_len, spec.acceptance
    diag, r = found
    if mechanism == "none" or draft_len < 1:
        return "-", "no speculation (D = 0)"
    if mechanism == "medusa":
        from specplan.speculation.drafters import medusa_heads

        acc = acceptance if acceptance is not None else None
        heads = medusa_heads(None if kw.get("draft_model") is None else load_model(kw["draft_model"]),
                             kw.get("draft_heads") or (None if acc is None else (acc.meta or {}).get("heads")))
        if draft_len + 1 > heads:
            return "range", f"D = {draft_len + 1} needs more than the drafter's {heads} Medusa heads"
    ds = np.arange(0, draft_len + 2)
    kw2 = dict(kw)
    if kw2.get("tree_tokens") is not None:  # one more depth needs at least one more verified token
        kw2["tree_tokens"] = np.maximum(float(kw2["tree_tokens"]) + (ds - draft_len), 1 + ds)
    try:
        c = evaluate_kw(model, hardware, tp=tp, batch=batch, context_len=context_len, draft_len=ds,
                     mechanism=mechanism, acceptance=acceptance, **kw2)
    except SpecplanError:  # e.g. D + 1 exceeds the Medusa heads: no next D to compare with
        return "range", f"D = {draft_len + 1} is not available for {mechanism}"
    return binding_line(draft_len, StepCurve.of(c), diag, r.acceptance_d_max, extrapolate=True)


def layout_dict(lay) -> dict:
    """A Layout as plain numbers for --json."""
    return {"tp": lay.tp, "dp": lay.dp, "ep": lay.ep, "pp": lay.pp, "expert_tp": lay.expert_tp, "gpus": lay.gpus,
            "name": lay.name}


def mla_tp_note(m, hw, tp: int, context_len, prec, layout=None) -> str | None:
    """Why an MLA model does not fit under TP: the latent KV is replicated on every TP rank; the largest batch."""
    lay = layout_for(tp, layout)
    if m.mla is None or lay.tp <= 1 or hw.kind == "lpu":
        return None
    from specplan.model.memory import memory_usage

    mem = memory_usage(m, hw, lay.tp, 1, context_len, prec, layout=lay)
    if mem.weights_bytes >= mem.capacity_bytes:  # the weights alone: the KV layout is not the reason
        return (f"{m.id} does not fit: its weights take {mem.weights_bytes / 1e9:.1f} GB per device at {lay.name}, "
                f"over the {mem.capacity_bytes / 1e9:.1f} GB usable, before any KV cache (more devices, or "
                f"lower-precision weights)")
    mb = int(min(float(mem.max_batch), 1e9))
    fit = (f"the largest batch that fits at context {int(context_len):,} is {mb} (D = 0)" if mb >= 1 else
           f"not even batch 1 fits at context {int(context_len):,} (D = 0)")
    return (f"{m.id} uses MLA: its latent KV cache is replicated on every one of the {lay.tp} TP ranks of a DP "
            f"rank (TP splits heads, not the shared latent), so TP does not shrink the KV per device; "
            f"data-parallel attention (--dp N --tp 1 --ep N) holds it once per sequence; {fit}")

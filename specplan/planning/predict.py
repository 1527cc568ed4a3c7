"""`predict` one speculative configuration: the point as a typed record (step times, AL, speedup, memory, the
binding guideline), and with a workload the serving numbers too (the CLI's predict calls these)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from specplan.core.errors import SpecplanError
from specplan.core.records import Record, record
from specplan.costs.precision import resolve_precision
from specplan.model.parallel import layout_for
from specplan.planning.cost import OperatingPoint, predict_energy
from specplan.speculation.spec import Speculation
from specplan.profiles.registry import load_engine, load_hardware, load_model
from specplan.speculation.guidelines import StepCurve, binding_line
from specplan.model.deployment import Deployment
from specplan.speculation.speedup import evaluate, options_objects
from specplan.planning.answer_parts import Binding, LayoutNumbers, mla_tp_note


def _f(x) -> float:
    return float(np.asarray(x).reshape(-1)[0])


@record
class PrecisionNames(Record):
    """The compute and KV-cache formats a point is priced in."""

    compute: str
    kv: str


@record
class BaselineStep(Record):
    """The D = 0 step as the engine runs it (ms) and its throughputs."""

    step_ms: float
    tokens_per_s_per_user: float
    tokens_per_s_per_gpu: float


@record
class SpeculativeStep(Record):
    """The speculative iteration as the engine runs it, and its draft and verify GPU times (ms)."""

    step_ms: float
    draft_ms: float
    verify_ms: float


@record
class Devices(Record):
    """Devices the target and the draft take."""

    target: float
    draft: float


@record
class PointMemory(Record):
    """Memory per device (GB) and whether it fits; an SRAM-only chip's count and SRAM (GB) on an LPU."""

    total_gb: float
    state_gb: float
    capacity_gb: float
    fits: bool
    chips: int | None = None
    chip_sram_gb: float | None = None
    OPTIONAL = ("chips", "chip_sram_gb")


@record
class PredictAnswer(Record):
    """One predicted point: where (model, hardware, layout, batch, context), what (mechanism, D, verified tokens,
    precision, acceptance source), the baseline and speculative steps, AL, speedup, break-even AL, ρ, throughputs,
    devices, memory, the guideline diagnostics and the binding one, energy (None without a power model), notes;
    with a workload the serving answer (serving/api)."""

    model: str
    hardware: str
    hardware_kind: str
    tp: int
    layout: LayoutNumbers
    batch: int
    context_len: int
    mechanism: str
    draft_len: int
    verify_tokens: float
    precision: PrecisionNames
    acceptance_source: str
    baseline: BaselineStep
    speculative: SpeculativeStep
    acceptance_length: float
    speedup: float
    break_even_al: float
    rho: float
    rho_d: float
    rho_time: float
    tokens_per_s_per_user: float
    tokens_per_s_per_gpu: float
    tokens_per_s_per_device: float
    devices: Devices
    memory: PointMemory
    guidelines: dict
    binding: Binding
    energy: dict | None
    notes: list
    serving: object = None
    OPTIONAL = ("serving",)


@record
class PredictSweep(Record):
    """The serving model at each of a workload's loads (`serving`: a ServingSweep), with the model, precision,
    acceptance source and notes of the step at the lowest load's decode batch."""

    model: str
    hardware: str
    tp: int
    mechanism: str
    draft_len: int
    verify_tokens: float
    precision: PrecisionNames
    acceptance_source: str
    notes: list
    serving: object

    @classmethod
    def of(cls, r: PredictAnswer, serving) -> "PredictSweep":
        """The sweep's head from predicted point `r`, and the serving answers."""
        return cls(r.model, r.hardware, r.tp, r.mechanism, r.draft_len, r.verify_tokens, r.precision,
                   r.acceptance_source, r.notes, serving)


def _objects(model, hardware, tp, spec: Speculation, kw: dict) -> tuple[Deployment, Speculation]:
    """predict's options by name (dtype, kv_dtype, layout, engine, draft_model, ...) as the Deployment and the
    Speculation they describe (`spec`: mechanism, D and acceptance)."""
    dep, sp, _ = options_objects(model, hardware, tp=tp, mechanism=spec.mechanism, draft_len=spec.draft_len,
                                 acceptance=spec.acceptance, **kw)
    return dep, sp


def _diagnostics(r) -> dict:
    """The evaluation's guideline diagnostics as plain numbers (a table by guideline name), with ρ_time."""
    diag = {k: (v.item() if isinstance(v, np.ndarray) and v.size == 1 else v) for k, v in r.guidelines.items()}
    diag = {k: (np.asarray(v).reshape(-1)[0].item() if isinstance(v, np.ndarray) else v) for k, v in diag.items()}
    return {**diag, "rho_time": _f(r.rho_time)}


def _memory(r, hw, spec: Speculation) -> PointMemory:
    """Memory per device of evaluation `r`; on SRAM-only chips the deployment takes as many chips as its bytes need."""
    fits = bool(np.asarray(r.fits).all())
    chips = sram = None
    if hw.kind == "lpu":
        chips = int(_f(r.target_devices) + (_f(r.draft_devices) if spec.draft.hardware is None else 0))
        sram = hw.mem_capacity_bytes / 1e9
    return PointMemory(_f(r.memory_total_bytes) / 1e9, _f(r.memory_state_bytes) / 1e9,
                       _f(r.memory_capacity_bytes) / 1e9, fits, chips, sram)


def _notes(r, model, hw, dep: Deployment, at: tuple, fits: bool) -> list[str]:
    """The evaluation's notes, the engine's extra step time where it matters, and why an MLA model does not fit;
    `at`: (TP, context)."""
    tp, context_len = at
    notes = list(r.notes)
    extra = [("baseline", 1e3 * (_f(r.engine_baseline_step_s) - _f(r.baseline_step_s))),
             ("speculative", 1e3 * (_f(r.engine_iter_s) - _f(r.iter_s)))]
    if any(ms > 0.01 * 1e3 * _f(r.iter_s) for _, ms in extra):
        notes.append("iter ms is the engine's step, the GPU's draft + verify plus host, launch and eager time (" +
                     ", ".join(f"{n} +{ms:.2f} ms" for n, ms in extra) + "), what the speedup and throughputs use")
    if not fits:
        why = mla_tp_note(model, hw, tp, context_len, r.precision, dep.layout)
        if why:
            notes.append(why)
    return notes


def predict_summary(model, hardware, *, tp=1, batch=1, context_len=1024, mechanism="none", draft_len=0,
                    acceptance=None, **kw) -> PredictAnswer:
    """One point: baseline and speculative step (ms), AL, speedup, throughputs, memory, guidelines; `kw`: the
    deployment's and the draft's options by name (dtype, kv_dtype, layout, engine, draft_model, ...)."""
    if mechanism != "none" and draft_len < 1:
        raise SpecplanError(f"draft length: mechanism {mechanism} needs --draft-len >= 1, got {draft_len}")
    model, hw = load_model(model), load_hardware(hardware)  # resolved once, passed down as profiles
    dep, spec = _objects(model, hw, tp, Speculation(mechanism, draft_len, acceptance), kw)
    r = evaluate(dep, spec, batch=batch, context_len=context_len, guidelines=True)
    diag = _diagnostics(r)
    guideline, line = _predict_binding(dep, spec, (batch, context_len), (diag, r))
    diag = {**diag, "binding": guideline, "binding_line": line}
    prec = r.precision
    memory = _memory(r, hw, spec)
    base_s = _f(r.engine_baseline_step_s)
    lay = layout_for(tp, dep.layout)
    return PredictAnswer(
        model.id, hw.id, hw.kind, tp, LayoutNumbers.of(lay), batch, context_len, mechanism, draft_len,
        _f(r.verify_tokens), PrecisionNames(prec.compute, prec.kv), r.acceptance_source,
        # the steps as the engine runs them (host, launches, graphs: equal to the GPU steps without an engine), the
        # times the speedup and throughputs use; draft and verify stay GPU seconds
        BaselineStep(1e3 * base_s, 1.0 / base_s, batch / (base_s * _f(r.baseline_devices))),
        SpeculativeStep(1e3 * _f(r.engine_iter_s), 1e3 * _f(r.draft_s), 1e3 * _f(r.verify_s)),
        _f(r.acceptance_length), _f(r.speedup), _f(r.break_even_al), _f(r.rho), _f(r.rho_d), _f(r.rho_time),
        _f(r.tokens_per_s_per_user), _f(r.tokens_per_s_per_gpu), _f(r.tokens_per_s_per_device),
        Devices(_f(r.target_devices), _f(r.draft_devices)), memory, diag, Binding(guideline, line),
        predict_energy(model, hw, prec, lay, OperatingPoint(batch / (base_s * _f(r.baseline_devices)), batch,
                                                            context_len),
                       OperatingPoint(_f(r.tokens_per_s_per_gpu), batch, context_len, draft_len,
                                      _f(r.acceptance_length))),
        _notes(r, model, hw, dep, (tp, context_len), memory.fits))


def predict_step(model, hardware, *, batch=1, mechanism="none", engine=None, **kw) -> PredictAnswer:
    """predict_summary at a batch the user gives (predict's step path), plus the engine's line when that batch exceeds
    the running cap the engine sets when it speculates (spec_cap_note: SGLang's 48 without --max-running-requests)."""
    r = predict_summary(model, hardware, batch=batch, mechanism=mechanism, engine=engine, **kw)
    if engine is not None and mechanism != "none":
        from specplan.speculation.round import spec_cap_note

        return dataclasses.replace(r, notes=r.notes + spec_cap_note(load_engine(engine), batch))
    return r


def predict_serving(model, hardware, workload, *, tp=1, mechanism="none", draft_len=0, acceptance=None,
                    engine=None, **kw) -> PredictAnswer:
    """predict_summary at the derived decode batch and context (ISL + OSL/2), with its `serving` answer (serving/api).
    kw 'layout' (a Layout beyond TP: data-parallel attention, EP) is the (decode) instances' layout, kw
    'prefill_layout' a disaggregated prefill pool's own (docs/serving.md)."""
    dep, spec = _objects(model, hardware, tp, Speculation(mechanism, draft_len, acceptance), dict(kw, engine=engine))
    srv = _serving_summary(workload, dep, spec)
    kw = {k: v for k, v in kw.items() if k != "prefill_layout"}  # the step below is the decode instance's
    batch = max(1, int(round(srv.baseline.decode_batch)))
    r = predict_summary(model, hardware, tp=tp, batch=batch, context_len=int(round(workload.decode_context)),
                        mechanism=mechanism, draft_len=draft_len, acceptance=acceptance, engine=engine, **kw)
    if r.energy is not None:  # serving rates, decode batches and one prefill per request
        m, hw = load_model(model), load_hardware(hardware)
        sp, b, wl = srv.speculative, srv.baseline, workload
        base = OperatingPoint(b.tokens_per_s_per_gpu, b.decode_batch, wl.decode_context, isl=wl.isl, osl=wl.osl)
        spec_point = None if not sp else OperatingPoint(sp.tokens_per_s_per_gpu, sp.decode_batch, wl.decode_context,
                                                        draft_len, sp.acceptance_length, wl.isl, wl.osl)
        srv = dataclasses.replace(srv, energy=predict_energy(
            m, hw, resolve_precision(m, hw, dep.dtypes.dtype, dep.dtypes.kv_dtype), layout_for(tp, dep.layout),
            base, spec_point))
    return dataclasses.replace(r, serving=srv)


def _serving_summary(workload, dep: Deployment, spec: Speculation):
    """serving/api.serving_summary with the predict options the serving model takes (dtype, kv_dtype, draft_model,
    a disaggregated prefill pool's layout), each pool's layout named where one goes beyond TP."""
    from specplan.serving.api import serving_summary

    tp, layout, pre = dep.tp, dep.layout, dep.prefill_layout
    lay = layout_for(tp, layout)  # a layout beyond TP is priced per DP rank; TP alone as before
    srv = serving_summary(dep.model, dep.hardware, workload, tp=lay if layout is not None else tp, engine=dep.engine,
                          mechanism=spec.mechanism, draft_len=spec.draft_len, acceptance=spec.acceptance,
                          dtype=dep.dtypes.dtype, kv_dtype=dep.dtypes.kv_dtype, draft_model=spec.draft.model,
                          prefill_layout=pre)
    if layout is None and pre is None:  # TP only: the answer as it always was
        return srv
    if workload.mode == "disagg":  # each pool's layout, in the grammar of --layouts
        return dataclasses.replace(srv, decode_layout=lay.name, prefill_layout=layout_for(1, pre or lay).name)
    return dataclasses.replace(srv, layout=lay.name)


def predict_serving_sweep(model, hardware, workload, *, tp=1, mechanism="none", draft_len=0, acceptance=None,
                          engine=None, **kw) -> PredictSweep:
    """The serving model at each of the workload's loads (one vectorized pass: r.serving.points), with the
    model, precision, acceptance source and notes of the step at the lowest load's decode batch."""
    dep, spec = _objects(model, hardware, tp, Speculation(mechanism, draft_len, acceptance), dict(kw, engine=engine))
    srv = _serving_summary(workload, dep, spec)
    kw = {k: v for k, v in kw.items() if k != "prefill_layout"}  # the step below is the decode instance's
    loads = workload.concurrency if workload.concurrency is not None else workload.request_rate
    low = srv.points[int(np.argmin(np.asarray(loads, dtype=float)))]  # the lowest load, wherever it is listed
    batch = max(1, int(round(low.baseline.decode_batch)))
    r = predict_summary(model, hardware, tp=tp, batch=batch, context_len=int(round(workload.decode_context)),
                        mechanism=mechanism, draft_len=draft_len, acceptance=acceptance, engine=engine, **kw)
    return PredictSweep.of(r, srv)


def _predict_binding(dep: Deployment, spec: Speculation, at: tuple, found: tuple):
    """The shared binding rule (`guidelines.binding_line`) at the predicted D: the curve D = 0 ... D + 1. `at`:
    (batch, context); `found`: (the guideline diagnostics, the evaluation at the predicted D)."""
    batch, context_len = at
    mechanism, draft_len, acceptance = spec.mechanism, spec.draft_len, spec.acceptance
    diag, r = found
    if mechanism == "none" or draft_len < 1:
        return "-", "no speculation (D = 0)"
    if mechanism == "medusa":
        from specplan.speculation.drafters import medusa_heads

        heads = medusa_heads(None if spec.draft.model is None else load_model(spec.draft.model),
                             spec.draft_heads or (None if acceptance is None else (acceptance.meta or {}).get("heads")))
        if draft_len + 1 > heads:
            return "range", f"D = {draft_len + 1} needs more than the drafter's {heads} Medusa heads"
    ds = np.arange(0, draft_len + 2)
    tree = spec.tree_tokens
    if tree is not None:  # one more depth needs at least one more verified token
        tree = np.maximum(float(tree) + (ds - draft_len), 1 + ds)
    try:
        c = evaluate(dep, dataclasses.replace(spec, draft_len=ds, tree_tokens=tree), batch=batch,
                     context_len=context_len)
    except SpecplanError:  # e.g. D + 1 exceeds the Medusa heads: no next D to compare with
        return "range", f"D = {draft_len + 1} is not available for {mechanism}"
    return binding_line(draft_len, StepCurve.of(c), diag, r.acceptance_d_max, extrapolate=True)

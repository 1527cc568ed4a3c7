"""`recommend` the best (mechanism, D) at a batch or under a tokens/s/user target: a typed StepRecommendation."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from specplan.core.records import Record, record
from specplan.costs.precision import Dtypes
from specplan.speculation.acceptance_spec import parse_acceptance
from specplan.core.errors import SpecplanError
from specplan.core.limits import DRAFT_LEN_LIMIT, MAX_BATCH, MAX_CONTEXT, MAX_TP, check_int
from specplan.model.parallel import Layout, layout_for
from specplan.planning.cost import OperatingPoint, PriceOptions
from specplan.planning.answer_parts import Binding, LayoutNumbers, mla_tp_note
from specplan.profiles.registry import load_hardware, load_model
from specplan.speculation.acceptance import Acceptance, find_profile
from specplan.speculation.guidelines import StepCurve, binding_line, g1_sentence, mechanism_line
from specplan.speculation.spec import DraftSearch
from specplan.speculation.speedup import evaluate_kw, mechanism_names, options_objects
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
    top_b = max((x.batch for x in shown if x.mechanism != "none"), default=None)
    return unfitted_note(eng) + ([] if top_b is None else spec_cap_note(eng, top_b))


@record
class StepRow(Record):
    """One (mechanism, D) of a step recommendation at its best batch: whether it qualifies, AL, speedup,
    tokens/s per user, per GPU and per device, iteration, draft and verify times (s), memory (bytes), ρ, the largest
    batch that fits (None: unbounded) and the devices; why it lost to the best (per mechanism) and its power, energy
    and cost (with a power model) where they were added."""

    mechanism: str
    draft_len: int
    batch: int
    feasible: bool
    acceptance_length: float
    speedup: float
    tokens_per_s_per_user: float
    tokens_per_s_per_gpu: float
    iter_s: float
    draft_s: float
    verify_s: float
    memory_total_bytes: float
    rho_d: float
    rho_time: float
    tokens_per_s_per_device: float
    max_batch: int | None
    target_devices: int
    draft_devices: int
    why_lost: str | None = None
    power_w_per_gpu: float | None = None
    joules_per_token: float | None = None
    tokens_per_s_per_mw: float | None = None
    usd_per_mtok: float | None = None
    OPTIONAL = ("why_lost", "power_w_per_gpu", "joules_per_token", "tokens_per_s_per_mw", "usd_per_mtok")


@record
class NearBest(Record):
    """A runner-up the model cannot rank apart from the best: its (mechanism, D, batch) and how far below (%)."""

    mechanism: str
    draft_len: int
    batch: int
    below_best_pct: float


@record
class GuidelineSummary(Record):
    """The guideline diagnostics at the chosen batch as plain numbers, with guideline 1 in words."""

    batch: int | None
    g_dev: float
    tile_rows: float
    attention_tile_d: float
    gemm_compute_bound_applies_to: str
    gemm_compute_bound_from_d: float
    gemm_compute_bound_from_d_spec_sheet: float
    ridge_tokens_effective: float
    ridge_tokens_spec_sheet: float
    dense_gemm_compute_bound_from_d: float
    dense_gemm_compute_bound_from_d_spec_sheet: float
    dense_ridge_tokens_effective: float
    dense_ridge_tokens_spec_sheet: float
    attention_share: float
    g1_line: str = ""


@record
class StepRecommendation(Record):
    """recommend's step answer: where (model, hardware, TP and layout, context), what was asked (batch or a
    tokens/s/user target, mechanisms), the rows ranked by tokens/s/GPU, notes and memory limits, and the best row
    (None: nothing qualified, `infeasible` says why); with a best row, what binds its D, the choice of mechanism
    (None with one mechanism), the guideline diagnostics, the near-best rows, the best row of each mechanism and
    the runners-up."""

    model: str
    hardware: str
    hardware_kind: str
    tp: int
    layout: LayoutNumbers
    context_len: int
    batch: int | None
    target_tps_per_user: float | None
    mechanisms: list
    ranked: list
    notes: list
    memory_limits: list
    best: StepRow | None
    binding: Binding | None = None
    mechanism_choice: Binding | None = None
    guidelines: GuidelineSummary | None = None
    near_best: list | None = None
    per_mechanism: list | None = None
    runners_up: list | None = None
    infeasible: str | None = None
    FOUND = ("binding", "mechanism_choice", "guidelines", "near_best", "per_mechanism", "runners_up")

    def _names(self) -> list[str]:
        drop = self.FOUND if self.best is None else ("infeasible",)
        return [k for k in super()._names() if k not in drop]


def _search(m, hardware, bs, mechs, acceptance, drafts, at, kw) -> tuple:
    """Every (mechanism, D) row at its best batch of `bs`, the evaluations by mechanism, the notes and the memory
    limits; `at`: (TP, context, tokens/s/user target)."""
    tp, context_len, target_tps_per_user = at
    notes, limits, rows, curves = [], [], [], {}
    for mech in mechs:
        acc = acceptance.get(mech)
        d = _draft_range(acc, drafts.max_draft_len, drafts.extrapolate, notes, mech)
        r = evaluate_kw(m, hardware, tp=tp, batch=bs[:, None], context_len=context_len, draft_len=d[None, :],
                        mechanism=mech, acceptance=acc, guidelines=True, **kw)
        if acc is None and r.acceptance_d_max is not None and not drafts.extrapolate:
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
    rows.sort(key=lambda x: (x.feasible, x.tokens_per_s_per_gpu if x.feasible else -1), reverse=True)
    return rows, curves, notes, limits


def recommend(model, hardware, *, tp=1, batch=None, target_tps_per_user=None, context_len=1024,
              drafts: DraftSearch | None = None, top=10, **kw) -> StepRecommendation:
    """Best (mechanism, D) of `drafts` (default: every mechanism with acceptance data, D up to MAX_DRAFT_LEN) by
    tokens/s/GPU at a batch, or over batch subject to tokens/s/user >= a target (neither given: over every batch
    that fits, i.e. the throughput end of the frontier); `kw`: evaluate's deployment options (dtype, engine, ...)."""
    drafts = drafts if drafts is not None else DraftSearch(max_draft_len=MAX_DRAFT_LEN)
    batch, max_draft_len = _checked(tp, batch, target_tps_per_user, context_len, drafts.max_draft_len)
    drafts = dataclasses.replace(drafts, max_draft_len=max_draft_len)
    m = load_model(model)
    dep, spec, _ = options_objects(m, hardware, tp=tp, **kw)
    acceptance = {k: parse_acceptance(v) for k, v in (drafts.acceptance or {}).items()}
    mechs = _mechanisms(m.id, drafts.mechanisms, acceptance, spec.draft.model)
    for k in acceptance:
        if k not in mechs:
            raise SpecplanError(f"acceptance: '{k}' is not among the mechanisms ({', '.join(mechs)})")
    hw = load_hardware(hardware)
    bs = np.array([batch], dtype=float) if batch is not None else batch_candidates(m, hw, tp, context_len, kw)
    rows, curves, notes, limits = _search(m, hardware, bs, mechs, acceptance, drafts,
                                          (tp, context_len, target_tps_per_user), kw)
    feasible = [x for x in rows if x.feasible]
    if dep.engine is not None and any(x != "none" for x in mechs):
        notes += _engine_notes(dep.engine, rows[:top])
    head = StepRecommendation(m.id, hw.id, hw.kind, tp, LayoutNumbers.of(layout_for(tp, dep.layout)), context_len,
                              batch, target_tps_per_user, mechs, rows[:top], notes, limits,
                              feasible[0] if feasible else None)
    if not feasible:
        why = _explain(rows, curves, target_tps_per_user)
        if not any(bool(np.any(r.fits)) for _, r in curves.values()):
            d0, r0 = next(iter(curves.values()))
            mla = mla_tp_note(m, hw, tp, context_len, r0.precision, dep.layout)
            why += f"; {mla}" if mla else ""
        return dataclasses.replace(head, infeasible=why)
    return _found(head, rows, curves, bs, drafts.extrapolate)


def _found(head: StepRecommendation, rows: list, curves: dict, bs: np.ndarray, extrapolate: bool):
    """The answer with a best row: what binds its D, the choice of mechanism, the guideline diagnostics, the
    near-best rows, the best row of each mechanism, the runners-up and the notes on the chosen point."""
    feasible = [x for x in rows if x.feasible]
    best, mechs = head.best, head.mechanisms
    mech = best.mechanism if best.mechanism != "none" else mechs[0]
    d, r = curves[mech]
    i = int(np.argmin(np.abs(bs - best.batch)))
    step = StepCurve.of(r, i)
    shape = r.speedup.shape
    diag = {k: (np.broadcast_to(v, shape)[i, 0] if isinstance(v, np.ndarray) else v)
            for k, v in r.guidelines.items() if k not in ("tile_aligned", "gemm_regime", "moe_regime", "rho", "rho_d")}
    guideline, line = binding_line(best.draft_len, step, diag, r.acceptance_d_max, extrapolate)
    if best.draft_len == 0 and any(x.draft_len > 0 and not x.feasible for x in rows):
        guideline, line = "memory", "speculative configurations do not fit in memory at this batch (see the notes)"
    choice = mechanism_line(rows)  # G5: the choice of mechanism (None with one mechanism or speculation off)
    per = best_per_mechanism(feasible, best, mechs)
    shown = {(x.mechanism, x.draft_len) for x in per}
    return dataclasses.replace(
        head, binding=Binding(guideline, line), mechanism_choice=None if choice is None else Binding(*choice),
        guidelines=_summary(diag, best.batch), near_best=near_best(feasible, best), per_mechanism=per,
        runners_up=[x for x in feasible if (x.mechanism, x.draft_len) not in shown][:5],
        notes=head.notes + point_notes(best, curves, bs, head.target_tps_per_user, head.batch is None))


def best_per_mechanism(feasible: list, best, mechs: list[str]) -> list:
    """The best feasible row of each mechanism (and of no speculation), best first, each with why it lost."""
    out = []
    for mech in [*mechs, "none"]:
        own = [x for x in feasible if x.mechanism == mech]
        if own:  # `feasible` is sorted by tokens/s/GPU
            out.append(dataclasses.replace(own[0], why_lost="best" if own[0] is best else why_lost(own[0], best)))
    return sorted(out, key=lambda x: -x.tokens_per_s_per_gpu)


def why_lost(x, best) -> str:
    """Why row `x` has fewer tokens/s/GPU than `best`: tok/s/GPU = B x AL / iteration / devices, so the
    ratio splits into batch, AL, iteration time and device factors; the (at most two) factors that cost most."""
    pct = 100.0 * (1.0 - x.tokens_per_s_per_gpu / best.tokens_per_s_per_gpu)
    if x.mechanism == "none":
        return f"-{pct:.1f}%: no speculation (AL 1 vs {best.acceptance_length:.2f})"
    factors = [
        (np.log(x.batch / best.batch), f"batch {x.batch} vs {best.batch}"),
        (np.log(x.acceptance_length / best.acceptance_length),
         f"AL {x.acceptance_length:.2f} vs {best.acceptance_length:.2f}"),
        (-np.log(x.iter_s / best.iter_s),
         f"iteration {1e3 * x.iter_s:.2f} vs {1e3 * best.iter_s:.2f} ms (draft {1e3 * x.draft_s:.2f} vs "
         f"{1e3 * best.draft_s:.2f})"),
        (-np.log(x.target_devices / best.target_devices),  # tok/s/GPU divides by the target devices
         f"{x.target_devices} vs {best.target_devices} target devices"),
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


def point_notes(best: StepRow, curves: dict, bs: np.ndarray, target, batch_free: bool) -> list[str]:
    """Notes about the chosen operating point: its memory, what stops a larger batch, and from which D each
    mechanism stops fitting at the chosen batch."""
    mech = best.mechanism
    d, r = curves[mech] if mech in curves else next(iter(curves.values()))
    i = int(np.argmin(np.abs(bs - best.batch)))
    j = int(np.argmin(np.abs(d - best.draft_len)))
    cap = float(np.asarray(r.memory_capacity_bytes).reshape(-1)[0])
    used, capt = gb_pair(best.memory_total_bytes, cap)
    out = [f"chosen point: {mech} D = {best.draft_len} at batch {best.batch} uses {used} GB of {capt} GB "
           f"usable per device; iteration {1e3 * best.iter_s:.2f} ms = draft {1e3 * best.draft_s:.2f} + "
           f"verify {1e3 * best.verify_s:.2f} ms, {best.tokens_per_s_per_user:.2f} tok/s/user"]
    if batch_free and i + 1 < len(bs):
        nb = int(bs[i + 1])
        tps, fits = float(r.tokens_per_s_per_user[i + 1, j]), bool(r.fits[i + 1, j])
        if not fits:
            a, c = gb_pair(float(r.memory_total_bytes[i + 1, j]), cap)
            out.append(f"batch {nb} would not fit ({a} GB > {c} GB)")
        elif target is not None and tps < target:
            out.append(f"batch {nb} would give {tps:.2f} tok/s/user < the {target:g} target")
    elif batch_free:
        out.append(f"batch {best.batch} is the largest that fits at D = 0")
    for m, (dm, rm) in curves.items():
        bad = np.flatnonzero(~np.asarray(rm.fits[i]) & (dm > 0))
        if bad.size:
            k = int(bad[0])
            a, c = gb_pair(float(rm.memory_total_bytes[i, k]), cap)
            out.append(f"{m} at batch {best.batch}: D >= {int(dm[k])} does not fit ({a} GB > {c} GB per device)")
    return out


def batch_candidates(m, hw, tp: int, context_len, kw: dict) -> np.ndarray:
    """Every integer batch from 1 to the largest that fits at D = 0 (at most BATCH_MAX; an LPU: BATCH_MAX).

    evaluate() is vectorized over batch, so searching all of them costs about as much as a coarse list and
    does not miss the optimum between two of its entries."""
    top = BATCH_MAX
    if hw.kind != "lpu":
        r = evaluate_kw(m, hw, tp=tp, batch=np.arange(1, BATCH_MAX + 1, dtype=float), context_len=context_len,
                        draft_len=0, mechanism="none", **{k: v for k, v in kw.items()
                                                    if k in ("dtype", "kv_dtype", "reserve", "attention_style",
                                                             "routing", "layout")})
        ok = np.flatnonzero(np.asarray(r.fits).reshape(-1))
        top = int(ok[-1]) + 1 if ok.size else 1
    return np.arange(1, top + 1, dtype=float)


NEAR_BEST = 0.02  # configurations this close to the best are not separable at the model's accuracy


def near_best(feasible: list, best, within: float = NEAR_BEST) -> list[NearBest]:
    """Runners-up whose tokens/s/GPU is within `within` of the best (the model cannot rank them apart)."""
    top = best.tokens_per_s_per_gpu
    return [NearBest(x.mechanism, x.draft_len, x.batch, 100.0 * (1.0 - x.tokens_per_s_per_gpu / top))
            for x in feasible[1:] if x.tokens_per_s_per_gpu >= (1.0 - within) * top]


def _row(mech, d, r, i, j, feasible, bs) -> StepRow:
    at = lambda v: float(v[i, j])  # noqa: E731
    max_batch = None if not np.isfinite(at(r.max_batch)) else int(min(at(r.max_batch), 1e9))
    return StepRow(mech, d, int(bs[i]), feasible, at(r.acceptance_length), at(r.speedup),
                   at(r.tokens_per_s_per_user), at(r.tokens_per_s_per_gpu), at(r.iter_s), at(r.draft_s),
                   at(r.verify_s), at(r.memory_total_bytes), at(r.rho_d), at(r.rho_time),
                   at(r.tokens_per_s_per_device), max_batch, int(round(at(r.target_devices))),
                   int(round(at(r.draft_devices))))


def _memory_notes(mech: str, d: np.ndarray, r, bs: np.ndarray) -> list[str]:
    """Where speculative configurations stop fitting from some D on (with the bytes): at most three batches,
    the smallest such batch, a middle one and the largest (every integer batch is searched)."""
    out = []
    cap = float(np.asarray(r.memory_capacity_bytes).reshape(-1)[0]) / 1e9
    hit = [i for i in range(len(bs)) if np.any(~r.fits[i] & (d > 0)) and (len(bs) == 1 or r.fits[i, 0])]
    for i in sorted({hit[0], hit[len(hit) // 2], hit[-1]}) if hit else []:
        j = np.nonzero(~r.fits[i] & (d > 0))[0][0]
        state = float(r.memory_state_bytes[i, j]) / 1e9
        extra = f", of which {state:.1f} GB recurrent-state checkpoints" if state > 0 else ""
        out.append(f"{mech}: at batch {int(bs[i])}, D >= {int(d[j])} does not fit: "
                   f"{float(r.memory_total_bytes[i, j]) / 1e9:.1f} GB per device > {cap:.1f} GB usable{extra}")
    return out


def _dedupe(rows: list) -> list:
    """One D = 0 baseline row (identical for every mechanism); batches filled in from the index."""
    out, seen = [], False
    for x in rows:
        if x.mechanism == "none":
            if seen:
                continue
            seen = True
        out.append(x)
    return out


def _explain(rows, curves, target) -> str:
    """Why nothing qualified: memory, or the tokens/s/user target out of reach."""
    any_fit = any(bool(np.any(r.fits)) for _, r in curves.values())
    if not any_fit:
        mech, (d, r) = next(iter(curves.items()))
        need = float(np.min(r.memory_total_bytes)) / 1e9
        cap = float(r.memory_capacity_bytes.reshape(-1)[0]) / 1e9
        return f"nothing fits in memory: the smallest configuration needs {need:.1f} GB per device > {cap:.1f} GB usable"
    best = max(float(np.max(np.where(r.fits, r.tokens_per_s_per_user, 0))) for _, r in curves.values())
    return f"no fitting configuration reaches {target:g} tokens/s/user; the best reachable is {best:.1f}"


def _summary(diag: dict, batch) -> GuidelineSummary:
    """Guideline diagnostics at the chosen batch as plain numbers (`diag`: the evaluation's, by guideline name)."""
    keep = [f.name for f in dataclasses.fields(GuidelineSummary)][1:-1]
    out = GuidelineSummary(batch, *(np.asarray(diag[k]).reshape(-1)[0].item() for k in keep))
    return dataclasses.replace(out, g1_line=g1_sentence(out))


def priced(r: StepRecommendation, model, hardware, dtypes: Dtypes, price: PriceOptions | None) -> StepRecommendation:
    """Answer `r` of recommend(model, hardware, dtype and kv_dtype as `dtypes` name them) with power, J/token,
    tokens/s/MW and $/Mtok on its rows (decode steps at its context); `r` as it is without a power model."""
    from specplan.costs.precision import resolve_precision
    from specplan.planning.cost import ENERGY_KEYS, point_energy

    m, hw = load_model(model), load_hardware(hardware)
    if hw.power is None:
        return r
    prec = resolve_precision(m, hw, dtypes.dtype, dtypes.kv_dtype)
    lay = Layout(tp=r.layout.tp, dp=r.layout.dp, ep=r.layout.ep, pp=r.layout.pp)

    def row(x: StepRow | None) -> StepRow | None:
        if x is None:
            return None
        point = OperatingPoint(x.tokens_per_s_per_gpu, x.batch, r.context_len, x.draft_len, x.acceptance_length)
        e = point_energy(m, hw, prec, lay, point, **(price or {}))
        return dataclasses.replace(x, **{k: float(np.asarray(e[k]).reshape(-1)[0]) for k in ENERGY_KEYS if k in e})

    rows = lambda xs: None if xs is None else [row(x) for x in xs]  # noqa: E731
    return dataclasses.replace(r, best=row(r.best), per_mechanism=rows(r.per_mechanism),
                               runners_up=rows(r.runners_up), ranked=rows(r.ranked))

"""Grid sweep: every (device, TP, mechanism) combination evaluated over a whole batch x D x context grid.

The only Python loop is over (device, layout, mechanism); `specplan.speculation.speedup.evaluate` is called once
per combination on broadcast arrays (chunked along batch so memory stays bounded). Memory-infeasible points
are kept with `fits = False`. The D = 0 baseline is evaluated once per (device, layout) as mechanism `none`;
each speculative mechanism is evaluated for D = 1 ... max with its own acceptance.

Columns (see `COLUMNS` for units) are float32 for measures, 64-bit ints for grid coordinates and categoricals
for names; `sweep` returns a pandas DataFrame.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from specplan.core.records import record
from specplan.core.errors import SpecplanError
from specplan.core.limits import (DRAFT_LEN_LIMIT, MAX_BATCH, MAX_BATCH_POINTS, MAX_CONTEXT, MAX_GRID_POINTS, MAX_TP,
                             check_int, check_ints)
from specplan.costs.precision import Dtypes
from specplan.model.step import StepKernels
from specplan.profiles.registry import load_hardware, load_model
from specplan.speculation.spec import DraftPlacement, DraftSearch
# The table writers live in specplan.core.tables; re-exported here for importers of specplan.planning.sweep.
from specplan.core.tables import csv_bytes, round_significant, write_table  # noqa: F401

COLUMNS: dict[str, str] = {
    "hardware": "target device id",
    "mechanism": "draft mechanism ('none' = no speculation, D = 0)",
    "tp": "tensor-parallel degree of the target: attention TP within one DP rank (devices)",
    "dp": "data-parallel attention ranks (docs/parallel.md)",
    "ep": "expert-parallel ranks (expert-TP = tp x dp / ep)",
    "pp": "pipeline stages",
    "layout": "the layout's spelling, e.g. tp8, dp8ep8 (GPUs = tp x dp x pp)",
    "context_len": "tokens already in the KV cache per sequence (tokens)",
    "batch": "concurrent sequences B",
    "draft_len": "draft length D, tokens proposed per iteration",
    "step_ms": "baseline decode step of the target at this batch and context, D = 0 (ms)",
    "verify_ms": "target verification step over 1 + D tokens per sequence (ms)",
    "draft_ms": "drafting time per iteration (ms)",
    "iter_ms": "one speculation iteration, verify + draft (ms); = step_ms when D = 0",
    "acceptance_length": "AL, tokens produced per iteration (1 ... 1 + D)",
    "break_even_al": "AL at which speculation breaks even at this point (tokens)",
    "speedup": "tok_s_user relative to D = 0 at the same batch (x)",
    "tok_s_user": "interactivity: tokens/s per user = AL / iter time (tokens/s)",
    "tok_s_gpu": "system throughput per target GPU: B x tok_s_user / target_devices; draft devices are not "
                 "counted (tokens/s per device)",
    "tok_s_device": "system throughput per device, draft devices included: B x tok_s_user / (target_devices + "
                    "draft_devices); rank by this when drafts run on other hardware (tokens/s per device)",
    "target_devices": "devices serving the target: the layout's TP x DP x PP GPUs, or LPU chips (devices)",
    "draft_devices": "devices serving the draft beyond the target's: an external draft's own devices "
                     "(--draft-hardware), or extra chips of a draft on the target's LPU; 0 when the draft shares "
                     "the target GPUs (devices)",
    "memory_gb": "memory per target device (GB, 1e9 bytes)",
    "fits": "True when the point fits in device memory (infeasible points are kept, marked False)",
}

# evaluate() key -> (column, scale)
_KEYS = {
    "baseline_step_s": ("step_ms", 1e3),
    "verify_s": ("verify_ms", 1e3),
    "draft_s": ("draft_ms", 1e3),
    "iter_s": ("iter_ms", 1e3),
    "acceptance_length": ("acceptance_length", 1.0),
    "break_even_al": ("break_even_al", 1.0),
    "speedup": ("speedup", 1.0),
    "tokens_per_s_per_user": ("tok_s_user", 1.0),
    "tokens_per_s_per_gpu": ("tok_s_gpu", 1.0),
    "tokens_per_s_per_device": ("tok_s_device", 1.0),
    "target_devices": ("target_devices", 1.0),
    "draft_devices": ("draft_devices", 1.0),
    "memory_total_bytes": ("memory_gb", 1e-9),
}
TP_CHOICES = (1, 2, 4, 8)
MAX_DRAFT_LEN = 32  # default largest D of every command (pareto, recommend, study, adaptive): reaches G2's 128/G - 1 = 31 at G = 4
BATCH_CAP = 1024


def parse_acceptance(spec):
    """An Acceptance from a user value: an Acceptance, a rate in (0, 1) ('0.8'), a length 'AL@D' ('3.2@4'),
    per-position rates '0.9,0.8,0.7', or a profile name. None stays None (the mechanism's default)."""
    from specplan.speculation.acceptance import Acceptance

    if spec is None or isinstance(spec, Acceptance):
        return spec
    if isinstance(spec, dict):
        kind, val = next(iter(spec.items()))
        if kind == "rate":
            return Acceptance.from_rate(float(val))
        if kind == "length":
            al, at = str(val).split("@") if isinstance(val, str) else val
            return Acceptance.from_length(float(al), int(at))
        if kind == "per_position":
            return Acceptance.from_per_position([float(v) for v in val])
        if kind == "profile":
            return Acceptance.from_profile(str(val))
        raise SpecplanError(f"acceptance: unknown kind '{kind}' (rate, length, per_position, profile)")
    if isinstance(spec, (int, float)):
        return Acceptance.from_rate(float(spec))
    s = str(spec).strip()
    try:
        if "@" in s:
            al, at = s.split("@", 1)
            return Acceptance.from_length(float(al), int(at))
        if "," in s:
            return Acceptance.from_per_position([float(v) for v in s.split(",") if v.strip()])
        return Acceptance.from_rate(float(s))
    except ValueError as exc:
        if isinstance(exc, SpecplanError):
            raise
    return Acceptance.from_profile(s)


def tp_choices(model, hw, tps=None) -> list[int]:
    """TP degrees to sweep: 1, 2, 4, 8 (or `tps`) that divide the query heads and fit the scale-up domain;
    an LPU pipelines over chips and only takes TP 1. A given TP that is not a positive divisor of the query
    heads is an error; given TPs none of which fit the scale-up domain are an error too (never a silent TP 1)."""
    model, hw = load_model(model), load_hardware(hw)
    if tps:
        for t in tps:
            if int(t) < 1 or model.num_q_heads % int(t) != 0:
                raise SpecplanError(f"tp: {int(t)} does not divide the {model.num_q_heads} query heads of {model.id}")
    if hw.kind == "lpu":
        return [1]
    out = list(dict.fromkeys(int(t) for t in tps or TP_CHOICES  # a TP given twice is swept once
                             if model.num_q_heads % int(t) == 0 and int(t) <= max(hw.scaleup_domain, 1)))
    if not out:
        raise SpecplanError(f"tp: none of {', '.join(str(int(t)) for t in tps)} fits the scale-up domain of "
                            f"{hw.id} ({max(hw.scaleup_domain, 1)} devices)")
    return out


def batch_grid(batch_max: int, points: int = 128) -> np.ndarray:
    """1 ... batch_max: every integer when there are at most `points`, else ~`points` geometric steps."""
    batch_max = max(1, int(batch_max))
    if batch_max <= points:
        return np.arange(1, batch_max + 1)
    g = np.unique(np.round(np.geomspace(1, batch_max, points)).astype(int))
    return np.unique(np.concatenate([g, [batch_max]]))


def _unique_devices(hws: list) -> list:
    """Devices in order with repeats dropped (the same --hardware twice); two different profiles sharing one id
    are an error (the grid tells devices apart by id)."""
    out: dict[str, object] = {}
    for h in hws:
        if h.id in out and out[h.id] != h:
            raise SpecplanError(f"hardware: two different profiles share the id '{h.id}'; give one of them another id")
        out.setdefault(h.id, h)
    if not out:
        raise SpecplanError("hardware: give at least one device")
    return list(out.values())


def _check_finite(cols: dict) -> None:
    """Every float column finite (a float32 overflow would be a silent inf); else a one-line error naming it."""
    for k, v in cols.items():
        if v.dtype.kind == "f" and not np.all(np.isfinite(v)):
            i = int(np.argmax(~np.isfinite(v)))
            raise SpecplanError(f"grid: column {k} is not finite at batch {int(cols['batch'][i])}, context "
                                f"{int(cols['context_len'][i])}, D {int(cols['draft_len'][i])} (the profile's "
                                f"numbers are out of any physical range)")


def largest_fitting_batch(model, hardware_list, layouts_of, context_len, dtype=None, kv_dtype=None) -> int:
    """Largest batch that fits on any of the (device, layout) combos at `context_len`, D = 0 (capped)."""
    from specplan.model.memory import memory_usage
    from specplan.costs.precision import resolve_precision

    model = load_model(model)
    best = 1
    for hw in hardware_list:
        hw = load_hardware(hw)
        if hw.kind == "lpu":
            best = max(best, 256)
            continue
        prec = resolve_precision(model, hw, dtype, kv_dtype)
        for lay in layouts_of(hw):
            mb = memory_usage(model, hw, lay.tp, 1, context_len, prec, layout=lay).max_batch
            best = max(best, int(min(float(mb), BATCH_CAP)))
    return best


def applicable(model, hw, mechanism: str, acceptance, max_d: int, common: dict) -> bool:
    """True when `mechanism` evaluates for this model with the inputs given (e.g. MTP needs an MTP module,
    external a draft model, every mechanism an acceptance or a shipped profile)."""
    from specplan.speculation.speedup import evaluate, evaluate_kw

    try:
        evaluate_kw(model, hw, tp=1, batch=1, context_len=1024, draft_len=max(1, max_d), mechanism=mechanism,
                 acceptance=acceptance, **common)
    except SpecplanError:
        return False
    return True


def layout_choices(model, hw, tps=None, layouts=None) -> list:
    """Layouts to sweep: the given ones (spellings or Layouts, each checked for this model and device), else
    TP only over `tp_choices`."""
    from specplan.model.parallel import Layout, as_layout

    model, hw = load_model(model), load_hardware(hw)
    if layouts is None:
        return [Layout(tp=t) for t in tp_choices(model, hw, tps)]
    if tps:
        raise SpecplanError("layouts: give either tp or layouts, not both")
    out = []
    for x in layouts:
        lay = as_layout(x)
        lay.check(model, hw)
        if lay.tp > max(hw.scaleup_domain, 1) and hw.kind != "lpu":
            raise SpecplanError(f"layouts: tp {lay.tp} of {lay.name} exceeds the scale-up domain of {hw.id} "
                                f"({hw.scaleup_domain} devices)")
        if lay not in out:
            out.append(lay)
    if not out:
        raise SpecplanError("layouts: give at least one layout")
    return out


@dataclass
class _Combo:
    hw: object
    layout: object
    mechanism: str
    drafts: np.ndarray
    acceptance: object


@record
class SweepAxes:
    """The grid's axes besides mechanism and D's range: batch values (None: 1 ... batch_max in batch_points steps,
    batch_max default the largest that fits at the smallest context), the D values (None: 0 ... the largest D of the
    DraftSearch), TP values (None: 1, 2, 4, 8 where the heads divide) or layouts ('tp8', 'dp8ep8', ...) instead of
    TP, and the contexts (tokens)."""

    batch: object = None
    batch_max: int | None = None
    batch_points: int = 128
    draft_lens: object = None
    tp: object = None
    layouts: object = None
    contexts: object = (1024,)


def sweep(
    model,
    hardware,
    *,
    axes: SweepAxes = SweepAxes(),
    drafts: DraftSearch | None = None,
    dtypes: Dtypes = Dtypes(),
    draft: DraftPlacement = DraftPlacement(),
    kernels: StepKernels = StepKernels(),
    chunk_points: int = 1 << 18,
    progress: bool | None = None,
    as_frame: bool = True,
):
    """Evaluate the grid and return a DataFrame with the columns of `COLUMNS`.

    hardware: one id/profile or a list. `axes`: batch, D values, TP or layouts, contexts (SweepAxes). `drafts`:
    mechanisms (default: every mechanism of the speculation layer), acceptance {mechanism: spec} (see
    `parse_acceptance`) and the largest D (default MAX_DRAFT_LEN). `dtypes`: the target's dtypes as named;
    `draft`: an external draft's model, hardware and dtype; `kernels`: attention style and MoE routing.
    """
    drafts = drafts if drafts is not None else DraftSearch(max_draft_len=MAX_DRAFT_LEN)
    batch, batch_max, batch_points, draft_lens = axes.batch, axes.batch_max, axes.batch_points, axes.draft_lens
    tp, layouts, contexts = axes.tp, axes.layouts, axes.contexts
    mechanisms, acceptance, max_draft_len = drafts.mechanisms, drafts.acceptance, drafts.max_draft_len
    dtype, kv_dtype = dtypes.dtype, dtypes.kv_dtype
    draft_model, draft_hardware, draft_dtype = draft.model, draft.hardware, draft.dtype
    attention_style, routing = kernels.attention_style, kernels.routing
    m = load_model(model)
    hws = _unique_devices([load_hardware(h) for h in (hardware if isinstance(hardware, (list, tuple)) else [hardware])])
    ctx = np.unique(np.asarray(check_ints(contexts, "context", 0, MAX_CONTEXT), dtype=np.int64))
    lays_of = (lambda h: layout_choices(m, h, None if tp is None else check_ints(tp, "tp", 1, MAX_TP), layouts))
    b = _batch_axis(m, hws, lays_of, ctx, batch, batch_max, batch_points, dtype, kv_dtype)
    d = _draft_axis(draft_lens, max_draft_len)
    common = dict(dtype=dtype, kv_dtype=kv_dtype, draft_model=draft_model, draft_hardware=draft_hardware,
                  draft_dtype=draft_dtype, attention_style=attention_style, routing=routing)
    mechs, acc = _swept_mechanisms(m, hws[0], mechanisms, acceptance, d, common)
    combos = _combos(hws, lays_of, d, mechs, acc)
    points = sum(b.size * ctx.size * c.drafts.size for c in combos)
    if points > MAX_GRID_POINTS:
        raise SpecplanError(f"grid: {points:,} points (batch {b.size} x context {ctx.size} x D {d.size} x "
                            f"{len(combos)} device/layout/mechanism combinations) is more than {MAX_GRID_POINTS:,}; "
                            f"use fewer values")
    names = ([h.id for h in hws], ["none", *mechs], list(dict.fromkeys(c.layout.name for c in combos)))
    out, codes = _evaluate_combos(m, combos, b, ctx, d, points, names, common, chunk_points, progress)
    _check_finite(out)
    return _as_table(out, codes, names, as_frame)


def _batch_axis(m, hws, lays_of, ctx, batch, batch_max, batch_points, dtype, kv_dtype) -> np.ndarray:
    """The batch values: explicit, else batch_points values 1 ... batch_max (default: the largest that fits)."""
    if batch is not None:
        return np.unique(np.asarray(check_ints(batch, "batch", 1, MAX_BATCH), dtype=np.int64))
    if batch_max is not None:
        batch_max = check_int(batch_max, "batch_max", 1, MAX_BATCH)
    batch_points = check_int(batch_points, "batch_points", 2, MAX_BATCH_POINTS)
    bmax = batch_max or largest_fitting_batch(m, hws, lays_of, int(ctx.min()), dtype, kv_dtype)
    return batch_grid(bmax, batch_points)


def _draft_axis(draft_lens, max_draft_len) -> np.ndarray:
    """The D values: explicit, else 0 ... max_draft_len."""
    if draft_lens is not None:
        return np.unique(np.asarray(check_ints(draft_lens, "draft length", 0, DRAFT_LEN_LIMIT), dtype=np.int64))
    max_draft_len = check_int(max_draft_len, "max draft length", 0, DRAFT_LEN_LIMIT)
    return np.arange(0, int(max_draft_len) + 1, dtype=np.int64)


def _swept_mechanisms(m, hw, mechanisms, acceptance, d, common) -> tuple[list[str], dict]:
    """(mechanisms to sweep, {mechanism: Acceptance}); by default every mechanism that applies to the model."""
    from specplan.speculation.speedup import mechanism_names

    known = list(mechanism_names())
    mechs = list(dict.fromkeys(x for x in (mechanisms if mechanisms is not None else known) if x != "none"))
    for x in mechs:
        if x not in known:
            raise SpecplanError(f"mechanism: unknown '{x}' (known: {', '.join(known)})")
    acc = {k: parse_acceptance(v) for k, v in (acceptance or {}).items()}
    if mechanisms is None:  # default: every mechanism that applies to this model with the given inputs
        mechs = [x for x in mechs if applicable(m, hw, x, acc.get(x), int(d.max()) if d.size else 1, common)]
    for k in acc:
        if k not in mechs:
            raise SpecplanError(f"acceptance: '{k}' is not one of the swept mechanisms ({', '.join(mechs)})")
    return mechs, acc


def _combos(hws, lays_of, d, mechs, acc) -> list[_Combo]:
    """One (device, layout, mechanism) combination per evaluate call; the D = 0 baseline once per layout."""
    spec_d = d[d >= 1]
    combos: list[_Combo] = []
    for h in hws:
        for lay in lays_of(h):
            if 0 in d or not mechs:
                combos.append(_Combo(h, lay, "none", np.array([0]), None))
            if spec_d.size:
                combos.extend(_Combo(h, lay, x, spec_d, acc.get(x)) for x in mechs)
    return combos


def _evaluate_combos(m, combos, b, ctx, d, points, names, common, chunk_points, progress):
    """Evaluate every combination in batch chunks into columns preallocated at the grid's size.

    Returns (columns, (hardware codes, mechanism codes, layout codes))."""
    from specplan.core.progress import Progress
    from specplan.speculation.speedup import evaluate, evaluate_kw

    hw_names, mech_names, lay_names = names
    kinds = {"fits": bool, "target_devices": np.int64, "draft_devices": np.int64,
             **{k: np.int64 for k in ("batch", "context_len", "draft_len", "tp", "dp", "ep", "pp")}}
    out = {k: np.empty(points, dtype=kinds.get(k, np.float32)) for k in COLUMNS
           if k not in ("hardware", "mechanism", "layout")}
    hw_c, mech_c, lay_c = (np.empty(points, dtype=np.int8), np.empty(points, dtype=np.int8),
                           np.empty(points, dtype=np.int16))
    step = max(1, int(chunk_points) // max(1, ctx.size * d.size))
    total = sum(math.ceil(b.size / step) for _ in combos)
    pos = 0
    with Progress(total, "sweep", enabled=progress) as bar:
        for c in combos:
            for lo in range(0, b.size, step):
                bb = b[lo:lo + step]
                shape = (bb.size, ctx.size, c.drafts.size)  # batch-major, so chunks follow each other in order
                r = evaluate_kw(m, c.hw, layout=c.layout, batch=bb[:, None, None], context_len=ctx[None, :, None],
                             draft_len=c.drafts[None, None, :], mechanism=c.mechanism, acceptance=c.acceptance,
                             **common)
                n = int(np.prod(shape))
                sl = slice(pos, pos + n)
                pos += n
                _write_chunk(out, sl, shape, bb, ctx, c, r)
                lay_c[sl] = lay_names.index(c.layout.name)
                hw_c[sl] = hw_names.index(c.hw.id)
                mech_c[sl] = mech_names.index(c.mechanism)
                bar.update(1)
    return out, (hw_c, mech_c, lay_c)


def _write_chunk(out: dict, sl: slice, shape: tuple, bb, ctx, c: _Combo, r) -> None:
    """Copy one evaluate result (a SpeedupGrid, shape batch x context x D) into the preallocated columns at `sl`."""
    out["batch"][sl] = np.repeat(bb, ctx.size * c.drafts.size)
    out["context_len"][sl] = np.tile(np.repeat(ctx, c.drafts.size), bb.size)
    out["draft_len"][sl] = np.tile(c.drafts, bb.size * ctx.size)
    for ax in ("tp", "dp", "ep", "pp"):
        out[ax][sl] = getattr(c.layout, ax)
    for key, (col, scale) in _KEYS.items():
        dst = out[col][sl].reshape(shape)  # a view: written in place, cast to the column's dtype
        if scale != 1.0:
            np.multiply(r[key], scale, out=dst, casting="unsafe")
        else:
            np.copyto(dst, r[key], casting="unsafe")
    np.copyto(out["fits"][sl].reshape(shape), r.fits)


def _as_table(out: dict, codes: tuple, names: tuple, as_frame: bool):
    """The grid as a DataFrame (categorical hardware / mechanism / layout) or, as_frame=False, a dict of arrays."""
    hw_c, mech_c, lay_c = codes
    hw_names, mech_names, lay_names = names
    if not as_frame:
        out["hardware"] = np.asarray(hw_names, dtype=object)[hw_c]
        out["mechanism"] = np.asarray(mech_names, dtype=object)[mech_c]
        out["layout"] = np.asarray(lay_names, dtype=object)[lay_c]
        return {k: out[k] for k in COLUMNS}
    import pandas as pd

    data = {
        "hardware": pd.Categorical.from_codes(hw_c, categories=hw_names),
        "mechanism": pd.Categorical.from_codes(mech_c, categories=mech_names),
        "layout": pd.Categorical.from_codes(lay_c, categories=lay_names),
    }
    data.update(out)
    # copy=False: the columns are fresh arrays owned by the frame; no copy into one consolidated block (about a
    # sixth of the sweep time on millions of rows)
    return pd.DataFrame({k: data[k] for k in COLUMNS}, copy=False)


def columns_doc() -> str:
    """Markdown table of the grid columns and their units."""
    lines = ["| column | meaning (unit) |", "|---|---|"]
    lines += [f"| `{k}` | {v} |" for k, v in COLUMNS.items()]
    return "\n".join(lines)

"""Speedup of speculative decoding on a whole (batch, context, D) grid at once.

    speedup = T_verif(B) · AL / (T_verif(B·(1+D)) + T_draft(B, D))

T_verif(B·(1+D)) is the target step with q_len = 1 + D (or the tree's verified tokens) per sequence: every
sequence's KV is read once for all its 1 + D query rows (not B·(1+D) independent decodes).
"""

from __future__ import annotations

import numpy as np

from specplan.core.errors import SpecplanError
from specplan.core.limits import DRAFT_LEN_LIMIT, MAX_BATCH, MAX_CONTEXT, check_array
from specplan.model.memory import DEFAULT_RESERVE, check_reserve, memory_usage
from specplan.model.parallel import layout_for
from specplan.profiles.engine import engine_hardware
from specplan.profiles.registry import load_engine, load_hardware, load_model
from specplan.speculation.acceptance import Acceptance, find_profile
from specplan.speculation.drafters import DRAFTERS, DraftInput, get_drafter
from specplan.speculation.serving import get_serving
from specplan.model.deployment import Deployment
from specplan.model.step import StepKernels, step_time
from specplan.speculation.spec import Speculation
from specplan.speculation.speedup_grid import SpeedupGrid
from specplan.costs.precision import Dtypes

KEYS = ("baseline_step_s", "verify_s", "draft_s", "iter_s", "acceptance_length", "speedup", "tokens_per_s_per_user",
        "tokens_per_s_per_gpu", "tokens_per_s_per_device", "memory_total_bytes", "fits", "break_even_al",
        "target_devices", "baseline_devices", "draft_devices", "rho", "rho_d", "rho_time")


def engine_families(engine, hw=None):
    """(decode, verify, MLA decode, MLA verify) attention KernelFamily of an engine on `hw`'s GPU generation;
    all None without an engine."""
    if engine is None:
        return None, None, None, None
    from specplan.profiles.registry import load_engine, load_kernel_family

    eng = load_engine(engine)
    return tuple(load_kernel_family(eng.family_id(r, hw)) for r in ("decode_attention", "verify_attention",
                                                                       "mla_attention", "mla_verify_attention"))


def tree_verify_family(engine):
    """The KernelFamily that verifies a token tree: the engine's prefill (masked) family, else prefill-default."""
    from specplan.profiles.registry import load_engine, load_kernel_family

    return load_kernel_family(load_engine(engine).prefill_attention if engine is not None else "prefill-default")


def mechanism_names() -> list[str]:
    """The draft mechanisms evaluate() understands."""
    return list(DRAFTERS)


def resolve_acceptance(mechanism: str, model_id: str, acceptance) -> Acceptance | None:
    """The acceptance to use: the given one, else the shipped profile for (mechanism, model), else an error."""
    if mechanism == "none":
        return None
    if acceptance is None:
        prof = find_profile(mechanism, model_id)
        if prof is None:
            raise SpecplanError(f"mechanism {mechanism}: no acceptance given and no shipped acceptance profile for "
                                f"{model_id}; pass an acceptance rate, length, per-position list or profile")
        return Acceptance.from_profile(prof)
    if not isinstance(acceptance, Acceptance):
        raise SpecplanError(f"mechanism {mechanism}: acceptance must be an Acceptance, got {type(acceptance).__name__}")
    return acceptance


def _grid(batch, context_len, draft_len):
    b = check_array(batch, "batch", 1, MAX_BATCH)
    ctx = check_array(context_len, "context", 0, MAX_CONTEXT)
    d = check_array(draft_len, "draft length", 0, DRAFT_LEN_LIMIT)
    if d.size and (np.min(d) < 0 or not np.all(np.isfinite(d))):
        raise SpecplanError(f"draft length: must be >= 0, got {np.min(d):g}")
    if d.size and np.any(d != np.round(d)):
        raise SpecplanError("draft length: must be whole tokens")
    shape = np.broadcast(b, ctx, d).shape
    return b, ctx, d, shape


def verify_tokens(draft_len, tree_tokens=None) -> np.ndarray:
    """Tokens verified per sequence: 1 + D for a chain, the tree's tokens with tree verification, 1 at D = 0."""
    d = np.asarray(draft_len, dtype=float)
    if tree_tokens is None:
        return 1.0 + d
    t = np.asarray(tree_tokens, dtype=float)
    if np.any(t < 1 + d):
        raise SpecplanError(f"tree tokens: must be >= 1 + D (root + one node per depth), got {np.min(t):g}")
    return np.where(d > 0, t, 1.0)


def profile_tree_tokens(acc: Acceptance | None, draft_len):
    """Verified tokens of the tree an acceptance profile was measured with (its `tree_tokens` at its depth, the
    profile's largest D), or None for a chain profile. At another D the tree is taken as pruned or grown
    proportionally: 1 + (T − 1)·D / depth, at least 1 + D (an assumption: the same nodes per depth)."""
    t = acc.tree_tokens if acc is not None else None
    if t is None:
        return None
    depth = float(acc.d_max or max(acc.table_d or (1.0,)))
    d = np.asarray(draft_len, dtype=float)
    return np.maximum(np.round(1.0 + (float(t) - 1.0) * d / depth), 1.0 + d)


def _tree_notes(acc: Acceptance | None, d, q) -> list[str]:
    """A tree verified with a chain acceptance, or a tree AL priced with fewer verified tokens than its tree."""
    tree = profile_tree_tokens(acc, d)
    if tree is not None:
        d_b, q_b, t_b = np.broadcast_arrays(np.asarray(d, dtype=float), np.asarray(q, dtype=float), tree)
        short = (d_b > 0) & (q_b < t_b)
        if not np.any(short):
            return []
        return [f"the AL ({acc.source}) was measured with tree verification of {int(acc.tree_tokens)} "
                f"tokens at D = {acc.d_max:g}, but the verify step is priced with {int(np.min(q_b[short]))} "
                f"(a chain is 1 + D): the AL is the tree's, so the speedup is overstated; drop --tree-tokens to price "
                f"the profile's tree"]
    if acc is None or acc.kind not in ("rate", "length"):
        return []
    d, q = np.broadcast_arrays(np.asarray(d, dtype=float), np.asarray(q, dtype=float))
    spec = d > 0
    if not np.any(q[spec] > 1 + d[spec]):
        return []
    n = int(np.max(q[spec]))
    return [f"tree verification prices {n} verified tokens per sequence, but the AL comes from a chain "
            f"acceptance ({acc.source}): AL is not converted for the tree, so give the tree's measured AL "
            f"(--acceptance-length AL at this D) or per-depth tree probabilities (--acceptance-per-position, "
            f"e.g. from specplan.speculation.acceptance.tree_per_position(α, widths))"]


def _engine_step_s(eng, m, hw, grid: tuple, spec: tuple, prec, base, iter_gpu_s, rho_d):
    """(baseline step, speculative round) seconds as the engine runs them: specplan.speculation.round.round_s over
    the GPU times plus the round's GPU extras (rejection, draft extend, tree width) — what the serving path prices
    per iteration, without prefill interference. `grid`: (TP, batch, context, D, verified tokens); `spec`:
    (mechanism, draft model)."""
    tp, b, ctx, d, q = grid
    mechanism, draft_model = spec
    from specplan.costs.precision import resolve_precision
    from specplan.speculation.round import RoundShape, round_draft_model, round_gpu_extra_s, round_s

    dm = round_draft_model(m, mechanism, draft_model) if mechanism != "none" else None
    draft = None if dm is None else (dm, resolve_precision(dm, hw, prec.compute, prec.kv))
    extra = round_gpu_extra_s(m, hw, tp, RoundShape(b, d, q, ctx), mechanism, draft, eng=eng)
    kernels = float(base.kernels)
    base_t = round_s(eng, base.total_s, b, 0.0, 1.0, kernels, 0.0)
    iter_t = round_s(eng, iter_gpu_s + extra, b, d, q, kernels, kernels * rho_d)
    return base_t, np.where(d > 0, iter_t, base_t)


def _fits_and_devices(hw, shape, mem, dc, base, ver, d):
    """(fits, baseline devices, target devices, draft devices) of a grid; on an LPU (SRAM-only chips) the target
    needs the chips of its own bytes at the verify step's q_len and a draft on the same LPU adds the chips its
    weights and KV/state need on top (mem.total_bytes holds target + draft + verify-time KV/state; a draft on
    separate hardware brings dc.devices instead)."""
    fits = mem.fits & np.asarray(dc.fits)
    dev_base = np.asarray(base.devices, dtype=float)
    dev_t = dev_base
    dev_d = np.asarray(dc.devices, dtype=float) * (d > 0)
    if hw.kind == "lpu":
        fits = np.ones(shape, dtype=bool) & np.asarray(dc.fits)  # e.g. Medusa D beyond its heads
        dev_t = np.asarray(ver.devices, dtype=float)
        chips = np.maximum(1.0, np.ceil(mem.total_bytes / hw.mem_capacity_bytes))
        dev_d = dev_d + np.maximum(0.0, chips - dev_t) * (d > 0)
    return fits, dev_base, dev_t, dev_d


DEPLOYMENT_OPTIONS = ("tp", "layout", "engine", "serving", "precision", "prefill_layout")
SPECULATION_OPTIONS = ("mechanism", "draft_len", "acceptance", "draft_model", "draft_hardware", "draft_dtype",
                       "draft_kv_budget", "tree_tokens", "draft_heads")


def options_objects(model, hardware, **options) -> tuple[Deployment, Speculation, dict]:
    """Options by name as the objects they describe: tp, layout, engine, serving, precision, prefill_layout, dtype,
    kv_dtype, attention_style, routing (the Deployment); mechanism, draft_len, acceptance, draft_model,
    draft_hardware, draft_dtype, draft_kv_budget, tree_tokens, draft_heads (the Speculation); and the options left
    (batch, context_len, admission, ...)."""
    dep = {k: options.pop(k) for k in DEPLOYMENT_OPTIONS if k in options}
    dtypes = Dtypes(options.pop("dtype", None), options.pop("kv_dtype", None))
    kernels = StepKernels(attention_style=options.pop("attention_style", "shared"),
                          routing=options.pop("routing", "random"))
    spec = Speculation.of(**{k: options.pop(k) for k in SPECULATION_OPTIONS if k in options})
    return Deployment(model, hardware, dtypes=dtypes, kernels=kernels, **dep), spec, options


def evaluate_kw(model, hardware, **options) -> SpeedupGrid:
    """evaluate with its options by name (options_objects), and batch, context_len, reserve, guidelines, as the
    serving model's keyword dicts carry them."""
    dep, spec, rest = options_objects(model, hardware, **options)
    return evaluate(dep, spec, **rest)


def evaluate(dep: Deployment, spec: Speculation = Speculation(), *, batch=1, context_len=1024,
             reserve=DEFAULT_RESERVE, guidelines=False) -> SpeedupGrid:
    """Baseline and speculative step times, AL, speedup, throughputs, memory and ρ over a broadcast grid
    as a SpeedupGrid (with `guidelines`, also the guideline diagnostics). `batch` counts the
    instance's sequences; `dep.layout` (specplan.model.parallel: TP, DP, EP, PP; default TP only) places them, and
    tokens/s/GPU divides by its TP x DP x PP GPUs.

    `spec.tree_tokens`: verified tokens per sequence of a tree (default: the acceptance profile's tree, if it was
    measured with one, else a chain of 1 + D). `spec.draft_heads`: Medusa heads of the trained drafter (default:
    the heads profile's, else the acceptance profile's `heads`, else drafters.MEDUSA_DEFAULT_HEADS).

    `dep.engine` (EngineProfile, id or path) sets the decode / verify / MLA attention kernel families, the GEMM
    scales of its kernels and, unless `dep.serving` is given, the two speculative host costs; None = hardware
    attention block and GEMM fractions, no engine costs. `dep.precision` (a resolved Precision: per-module weight
    formats, e.g. a checkpoint's MXFP4 experts) wins over `dep.dtypes` for the target's steps."""
    model, hardware, tp, layout, engine, serving = dep.model, dep.hardware, dep.tp, dep.layout, dep.engine, dep.serving
    dtype, kv_dtype, precision = dep.dtypes.dtype, dep.dtypes.kv_dtype, dep.precision
    attention_style, routing = dep.kernels.attention_style, dep.kernels.routing
    mechanism, draft_len, acceptance = spec.mechanism, spec.draft_len, spec.acceptance
    draft_model, draft_kv_budget, tree_tokens = spec.draft.model, spec.draft.kv_budget, spec.tree_tokens
    if draft_kv_budget is not None and not (draft_kv_budget >= 0):
        raise SpecplanError(f"draft KV budget (--draft-kv-budget): must be >= 0 tokens, got {draft_kv_budget:g}")
    reserve = check_reserve(reserve)
    m = load_model(model)
    hw = load_hardware(hardware)
    lay = layout_for(tp, layout)
    tp = lay.tp
    drafter = get_drafter(mechanism)
    acc = resolve_acceptance(mechanism, m.id, acceptance)
    b, ctx, d, shape = _grid(batch, context_len, draft_len)
    d = np.zeros_like(d) if mechanism == "none" else d
    srv = get_serving(serving if serving is not None or engine is None else engine)
    fam_dec, fam_ver, fam_mla, fam_mla_ver = engine_families(engine, hw)
    if engine is not None:  # the engine's GEMM kernels (its gemm_*_scale); no engine: the hardware's own
        hw = engine_hardware(hw, load_engine(engine))
    base = step_time(m, hw, tp, b, 1, ctx, layout=lay, precision=precision or Dtypes(dtype=dtype, kv_dtype=kv_dtype),
                     kernels=StepKernels(attention_style=attention_style, routing=routing, attention_family=fam_dec,
                                         mla_family=fam_mla))
    prec = base.precision
    q = verify_tokens(d, profile_tree_tokens(acc, d) if tree_tokens is None else tree_tokens)
    if np.any(q > 1 + d):  # a tree verifies through the masked, prefill-style attention path (round.py)
        fam_ver = tree_verify_family(engine)
    ver = step_time(m, hw, tp, b, q, ctx, layout=lay, precision=prec,
                    kernels=StepKernels(attention_style=attention_style, routing=routing, attention_family=fam_ver,
                                        mla_family=fam_mla_ver))
    dc = drafter(_draft_input(dep, spec, (m, hw, lay, prec), (b, d, ctx), acc))
    drafting = d > 0
    verify_s = np.where(drafting, ver.total_s + srv.iteration_overhead_s, base.total_s)
    draft_s = np.where(drafting, dc.time_s + dc.serial_steps * srv.draft_step_overhead_s, 0.0)
    iter_s = verify_s + draft_s
    al = np.ones(shape) if acc is None else np.broadcast_to(acc.al(d), shape)
    if np.any(al > 1 + d + 1e-9):
        raise SpecplanError(f"acceptance length: AL must be <= 1 + D, got {np.max(al - d - 1) + 1:g} above")
    mem = memory_usage(m, hw, tp, b, ctx, prec, q_len=q, reserve=reserve, draft=dc, layout=lay)
    fits, dev_base, dev_t, dev_d = _fits_and_devices(hw, shape, mem, dc, base, ver, d)
    base_t, iter_t = base.total_s, iter_s
    if engine is not None:  # the step as the engine runs it: host, launches, graphs, the round's extras (round.py)
        # the engine's defaults on this GPU and TP; it may run this mechanism's rounds unoverlapped
        eng = load_engine(engine).for_hardware(hw, tp).for_mechanism(mechanism)
        base_t, iter_t = _engine_step_s(eng, m, hw, (tp, b, ctx, d, q), (mechanism, draft_model), prec, base, iter_s,
                                        np.asarray(dc.rho, dtype=float) * d)
    out = _result_arrays(b, d, q, al, (base, ver), (verify_s, draft_s, iter_s, base_t, iter_t), mem,
                         (fits, dev_base, dev_t, dev_d), dc, hw)
    out = {k: np.broadcast_to(np.asarray(v, dtype=float if k != "fits" else bool), shape) for k, v in out.items()}
    diag = None
    if guidelines:
        from specplan.speculation.guidelines import diagnostics

        diag = diagnostics(m, hw, tp, lay.per_rank_batch(b), ctx, d, prec, (base, ver), dc.rho,
                           StepKernels(attention_style=attention_style, routing=routing))
    return SpeedupGrid(**out, guidelines=diag, precision=prec,
                       **_notes(dc, acc, d, q, engine, mechanism, m.moe is not None))


def _draft_input(dep: Deployment, spec: Speculation, target: tuple, grid: tuple, acc) -> DraftInput:
    """What a drafter prices: the target (model, engine-scaled hardware, layout, resolved precision), the grid
    (batch, D, context) and the draft's placement and heads (the acceptance profile's heads by default)."""
    m, hw, lay, prec = target
    b, d, ctx = grid
    heads = spec.draft_heads if spec.draft_heads is not None else (None if acc is None else acc.heads)
    return DraftInput(m, hw, lay.tp, prec, b, d, ctx, dtype=dep.dtypes.dtype, kv_dtype=dep.dtypes.kv_dtype,
                      layout=lay, draft_model=None if spec.draft.model is None else load_model(spec.draft.model),
                      draft_hardware=None if spec.draft.hardware is None else load_hardware(spec.draft.hardware),
                      draft_dtype=spec.draft.dtype, draft_kv_budget=spec.draft.kv_budget,
                      attention_style=dep.kernels.attention_style, routing=dep.kernels.routing, draft_heads=heads)


def _result_arrays(b, d, q, al, steps, times, mem, devices, dc, hw) -> dict:
    """evaluate's arrays by name from its priced parts: steps (baseline, verify StepCost), times (verify, draft,
    iteration, engine baseline, engine iteration s), devices (fits, baseline, target, draft devices)."""
    base, ver = steps
    verify_s, draft_s, iter_s, base_t, iter_t = times
    fits, dev_base, dev_t, dev_d = devices
    spec = d > 0
    return {
        "baseline_step_s": base.total_s,
        "verify_s": verify_s,
        "draft_s": draft_s,
        "iter_s": iter_s,
        "acceptance_length": al,
        "engine_baseline_step_s": base_t,
        "engine_iter_s": iter_t,
        "speedup": base_t * al / iter_t,
        "tokens_per_s_per_user": al / iter_t,
        "tokens_per_s_per_gpu": b * al / (iter_t * dev_t),
        "tokens_per_s_per_device": b * al / (iter_t * (dev_t + dev_d)),
        "memory_total_bytes": mem.total_bytes,
        "memory_state_bytes": mem.state_bytes,
        "fits": fits,
        "break_even_al": iter_t / base_t,
        "target_devices": dev_t,
        "baseline_devices": dev_base,
        "draft_devices": dev_d,
        "rho": np.asarray(dc.rho, dtype=float),
        "rho_d": np.asarray(dc.rho, dtype=float) * d,
        # ρ is a layer ratio; rho_time is the cost ratio: draft time per drafted token / baseline step time
        "rho_time": np.where(spec, draft_s / np.maximum(d, 1.0), 0.0) / base.total_s,
        "verify_tokens": q,
        "verify_attention_s": ver.breakdown_s["attention"],
        "verify_state_s": ver.breakdown_s["state"],
        "verify_gemm_s": ver.breakdown_s["gemm"] + ver.breakdown_s["moe"],
        "memory_capacity_bytes": mem.capacity_bytes,
        # the largest batch whose verify step (q_len = verify tokens, with the draft's bytes) fits, as `fits` has it
        "max_batch": np.where(np.asarray(dc.fits), mem.max_batch, 0.0) if hw.kind != "lpu" else np.inf,
    }


def _notes(dc, acc, d, q, engine, mechanism, moe: bool = False) -> dict:
    """The notes of a result (drafter, tree, MoE verify routing, unfitted engine round numbers) and where its
    acceptance came from."""
    notes = list(dc.notes) + _tree_notes(acc, d, q)
    if moe and mechanism != "none":
        from specplan.speculation.round import moe_verify_note

        notes += moe_verify_note()
    if engine is not None and mechanism != "none":
        from specplan.speculation.round import unfitted_note

        notes += unfitted_note(load_engine(engine))
    return {"notes": notes, "acceptance_source": "" if acc is None else acc.source,
            "acceptance_d_max": None if acc is None else acc.d_max}

"""Python API used by the CLI and notebooks: one call per question, typed records and DataFrames out."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specplan.core.errors import SpecplanError
from specplan.core.records import Record, record
from specplan.core.limits import MAX_BATCH, MAX_CONTEXT, MAX_Q_LEN, MAX_TP, check_int
from specplan.model.memory import DEFAULT_RESERVE, check_reserve, memory_usage
from specplan.profiles.registry import load_hardware, load_model
from specplan.model.step import CLASSES, StepKernels, step_time
from specplan.costs.precision import Dtypes
from specplan.planning.answer_parts import LayoutNumbers


def _positive_int(name: str, value, low: int = 1, high: int | None = None) -> int:
    """`value` as an int in [low, high] (bounds of specplan.core.limits), else a one-line error."""
    return check_int(value, name, low, high)


@record
class StepPrecision(Record):
    """The formats a step is priced in: compute, KV cache and weights."""

    compute: str
    kv: str
    weights: str


@record
class StepMemory(Record):
    """Memory per device (GB) of one step: weights, KV cache, recurrent state, activations, total, usable capacity,
    the reserve kept free, whether it fits and the largest batch that does (None on an LPU, which counts chips)."""

    weights_gb: float
    kv_cache_gb: float
    state_gb: float
    activations_gb: float
    total_gb: float
    capacity_gb: float
    reserve: float
    fits: bool
    max_batch: int | None
    chips: int | None = None
    OPTIONAL = ("chips",)


@record
class StepSummary(Record):
    """One decode step: where (model, hardware, TP, layout, devices), the batch, q_len and context, precision,
    G_dev, the step (ms), its breakdown (ms) and regime by kernel class (tables by class), kernels, memory."""

    model: str
    hardware: str
    tp: int
    layout: LayoutNumbers
    devices: int
    batch: int
    q_len: int
    context_len: int
    precision: StepPrecision
    g_dev: float
    step_ms: float
    breakdown_ms: dict
    regimes: dict
    kernels_per_step: int
    memory: StepMemory


def step_summary(
    model,
    hardware,
    tp: int = 1,
    batch: int = 1,
    q_len: int = 1,
    context_len: int = 1024,
    dtypes: Dtypes = Dtypes(),
    kernels: StepKernels = StepKernels(),
    reserve: float = DEFAULT_RESERVE,
    layout=None,
) -> StepSummary:
    """One decode step: step_ms, breakdown_ms and regimes by kernel class, memory (GB, fits, max batch) per GPU;
    `layout` (specplan.model.parallel: TP, DP, EP, PP) places the `batch` sequences (default TP only); `dtypes` as
    named (None: the checkpoint's), `kernels`: attention style and MoE routing."""
    from specplan.model.parallel import layout_for

    _positive_int("tp", tp, 1, MAX_TP)
    lay = layout_for(tp, layout)
    tp = lay.tp
    _positive_int("batch", batch, 1, MAX_BATCH)
    _positive_int("q_len", q_len, 1, MAX_Q_LEN)
    _positive_int("context", context_len, 0, MAX_CONTEXT)
    reserve = check_reserve(reserve)
    m = load_model(model)
    hw = load_hardware(hardware)
    r = step_time(m, hw, tp, batch, q_len, context_len, layout=lay, precision=dtypes, kernels=kernels)
    mem = memory_usage(m, hw, tp, batch, context_len, r.precision, q_len=q_len, reserve=reserve, layout=lay)
    lpu = hw.kind == "lpu"  # SRAM-only: the deployment grows to as many chips as weights + KV + state need
    memory = StepMemory(mem.weights_bytes / 1e9, float(mem.kv_bytes) / 1e9, float(mem.state_bytes) / 1e9,
                        float(mem.activation_bytes) / 1e9, float(mem.total_bytes) / 1e9, mem.capacity_bytes / 1e9,
                        reserve, True if lpu else bool(mem.fits), None if lpu else int(mem.max_batch),
                        int(r.devices) if lpu else None)
    return StepSummary(
        m.id, hw.id, tp, LayoutNumbers.of(lay), int(r.devices), batch, q_len, context_len,
        StepPrecision(r.precision.compute, r.precision.kv, r.precision.weights), m.g_dev(tp),
        float(r.total_s) * 1e3, {c: float(r.breakdown_s[c]) * 1e3 for c in CLASSES},
        {c: str(r.regime(c)) for c in CLASSES}, r.kernels, memory)


@record
class HardwareRow(Record):
    """A hardware profile in a line: id, name, kind, 16-bit TFLOPS ('-' without), dtypes, memory (GB, TB/s)."""

    id: str
    name: str
    kind: str
    tflops_16bit: object
    dtypes: str
    mem_gb: float
    mem_bw_tb_s: float


@record
class ModelRow(Record):
    """A model profile in a line: id, kind, layers, hidden size, query and KV heads, G, features, MTP layers and
    weight dtypes."""

    id: str
    kind: str
    layers: int
    hidden: int
    q_heads: int
    kv_heads: int
    G: float
    features: str
    mtp: int
    weights: str


@record
class AcceptanceRow(Record):
    """A shipped acceptance profile in a line: id, mechanism, target model, draft, dataset, D range, whether it is
    the default, its source in a few words."""

    id: str
    mechanism: str
    model: str
    draft: str
    dataset: str
    D: str
    default: bool
    source: str


@record
class EngineRow(Record):
    """An engine profile in a line: id, name, version, host step (ms), CUDA-graph batch, fitted fields, source."""

    id: str
    name: str
    version: str
    host_step_ms: float
    graph_max_batch: object
    fitted: str
    source: str


@record
class ProfilesTable(Record):
    """The built-in profiles as four lists of rows: hardware, models, acceptance, engines."""

    hardware: list
    models: list
    acceptance: list
    engines: list


def _tflops_16bit(h):
    """The 16-bit peak (TFLOPS: bf16, else fp16), '-' for a device without one (peak_flops: a table by dtype)."""
    if "bf16" not in h.peak_flops and "fp16" not in h.peak_flops:
        return "-"
    return (h.peak_flops.get("bf16") or h.peak_flops.get("fp16")) / 1e12


def profiles_table() -> ProfilesTable:
    """Built-in hardware and model profiles, shipped acceptance and engine profiles as lists of summary rows."""
    from specplan.profiles.registry import hardware_ids, model_ids

    hws = []
    for i in hardware_ids():
        h = load_hardware(i)
        hws.append(HardwareRow(h.id, h.name, h.kind, _tflops_16bit(h), ",".join(sorted(h.peak_flops)),
                               h.mem_capacity_bytes / 1e9, h.mem_bandwidth_bytes_s / 1e12))
    models = []
    for i in model_ids():
        m = load_model(i)
        kinds = sorted({g.mixer for g in m.groups()} | ({"moe"} if m.moe else set()) | ({"mla"} if m.mla else set()))
        models.append(ModelRow(m.id, m.kind, m.num_layers, m.hidden_size, m.num_q_heads, m.num_kv_heads, m.g_dev(1),
                               ",".join(k for k in kinds if k != "none"), m.mtp.num_layers if m.mtp else 0,
                               _weights_label(m)))
    return ProfilesTable(hws, models, acceptance_table(), engine_table())


def brief_source(text: str, n: int = 70) -> str:
    """A source in a few words: its first URL, else its text up to the first ' (' or ';', at most n characters."""
    import re

    url = re.search(r"https?://[^\s),'\"]+", text or "")
    if url:
        return url.group(0)
    head = re.split(r" \(|;", (text or "").strip(), maxsplit=1)[0]
    return head if len(head) <= n else head[: n - 1] + "…"


def acceptance_table() -> list[AcceptanceRow]:
    """Shipped acceptance profiles, one row each: mechanism, target model, draft, dataset, D range, source (each
    profile is read as its YAML file gives it)."""
    from specplan.speculation.acceptance import load_profile, profile_ids

    out = []
    for i in profile_ids():
        p = load_profile(i)
        ds = [int(d) for d, _ in p["points"]]
        out.append(AcceptanceRow(i, p["mechanism"], p.get("target", "-"), p.get("draft_model", "-"),
                                 p.get("workload", "-"), f"{min(ds)}-{max(ds)}" if len(ds) > 1 else str(ds[0]),
                                 bool(p.get("default", False)), brief_source(p.get("source", ""))))
    return out


def engine_table() -> list[EngineRow]:
    """Built-in engine profiles, one row each: name, version, host step, CUDA-graph batch, the fields
    fitted by `specplan validate-serving`, and where the numbers come from."""
    from specplan.profiles.registry import engine_ids, load_engine

    out = []
    for i in engine_ids():
        e = load_engine(i)
        fitted = sorted(k for k, v in e.sources.items() if "fitted" in v)
        serving_fit = any("validate-serving" in e.sources.get(k, "") for k in fitted)
        host_ms = round(1e3 * float(getattr(e, "host_step_s", 0.0) or 0.0), 3)
        out.append(EngineRow(e.id, e.name, e.version or "-", host_ms, getattr(e, "graph_max_batch", "-"),
                             ",".join(fitted) or "-",
                             f"{len(e.sources)} fields sourced in engine_profiles/{e.id}.yaml"
                             + ("; host numbers fitted by specplan validate-serving" if serving_fit else "")))
    return out


def _weights_label(m) -> str:
    """The checkpoint's weight dtype, with the modules stored in another format (e.g. 'bf16; moe fp4')."""
    other = sorted(f"{k} {v}" for k, v in m.module_dtypes.items() if v != m.weight_dtype)
    return m.weight_dtype + (f" ({', '.join(other)})" if other else "")


def as_array(x) -> np.ndarray:
    """Helper for notebooks: a float array."""
    return np.asarray(x, dtype=float)

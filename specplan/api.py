"""Python API used by the CLI and notebooks: one call per question, plain dicts and DataFrames out."""

from __future__ import annotations

import numpy as np

from specplan.core.errors import SpecplanError
from specplan.core.limits import MAX_BATCH, MAX_CONTEXT, MAX_Q_LEN, MAX_TP, check_int
from specplan.model.memory import DEFAULT_RESERVE, check_reserve, memory_usage
from specplan.profiles.registry import load_hardware, load_model
from specplan.model.step import CLASSES, StepKernels, step_time
from specplan.costs.precision import Dtypes


def _positive_int(name: str, value, low: int = 1, high: int | None = None) -> int:
    """`value` as an int in [low, high] (bounds of specplan.core.limits), else a one-line error."""
    return check_int(value, name, low, high)


def step_summary(
    model,
    hardware,
    tp: int = 1,
    batch: int = 1,
    q_len: int = 1,
    context_len: int = 1024,
    dtype: str | None = None,
    kv_dtype: str | None = None,
    weight_dtype: str | None = None,
    attention_style: str = "shared",
    routing: str = "random",
    reserve: float = DEFAULT_RESERVE,
    layout=None,
) -> dict:
    """One decode step as a dict: step_ms, breakdown_ms and regimes by kernel class, memory (GB, fits, max batch)
    per GPU; `layout` (specplan.model.parallel: TP, DP, EP, PP) places the `batch` sequences (default TP only)."""
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
    r = step_time(m, hw, tp, batch, q_len, context_len, layout=lay,
                  precision=Dtypes(dtype=dtype, kv_dtype=kv_dtype, weight_dtype=weight_dtype),
                  kernels=StepKernels(attention_style=attention_style, routing=routing))
    mem = memory_usage(m, hw, tp, batch, context_len, r.precision, q_len=q_len, reserve=reserve, layout=lay)
    memory = {
        "weights_gb": mem.weights_bytes / 1e9,
        "kv_cache_gb": float(mem.kv_bytes) / 1e9,
        "state_gb": float(mem.state_bytes) / 1e9,
        "activations_gb": float(mem.activation_bytes) / 1e9,
        "total_gb": float(mem.total_bytes) / 1e9,
        "capacity_gb": mem.capacity_bytes / 1e9,
        "reserve": reserve,
        "fits": bool(mem.fits),
        "max_batch": int(mem.max_batch),
    }
    if hw.kind == "lpu":  # SRAM-only: the deployment grows to as many chips as weights + KV + state need
        memory.update({"fits": True, "max_batch": None, "chips": int(r.devices)})
    return {
        "model": m.id,
        "hardware": hw.id,
        "tp": tp,
        "layout": {"tp": lay.tp, "dp": lay.dp, "ep": lay.ep, "pp": lay.pp, "expert_tp": lay.expert_tp,
                   "gpus": lay.gpus, "name": lay.name},
        "devices": int(r.devices),
        "batch": batch,
        "q_len": q_len,
        "context_len": context_len,
        "precision": {"compute": r.precision.compute, "kv": r.precision.kv, "weights": r.precision.weights},
        "g_dev": m.g_dev(tp),
        "step_ms": float(r.total_s) * 1e3,
        "breakdown_ms": {c: float(r.breakdown_s[c]) * 1e3 for c in CLASSES},
        "regimes": {c: str(r.regime(c)) for c in CLASSES},
        "kernels_per_step": r.kernels,
        "memory": memory,
    }


def profiles_table() -> dict:
    """Built-in hardware and model profiles as two lists of summary dicts."""
    from specplan.profiles.registry import hardware_ids, model_ids

    hws = []
    for i in hardware_ids():
        h = load_hardware(i)
        hws.append({
            "id": h.id, "name": h.name, "kind": h.kind,
            "tflops_16bit": ((h.peak_flops.get("bf16") or h.peak_flops.get("fp16")) / 1e12
                             if ("bf16" in h.peak_flops or "fp16" in h.peak_flops) else "-"),
            "dtypes": ",".join(sorted(h.peak_flops)),
            "mem_gb": h.mem_capacity_bytes / 1e9, "mem_bw_tb_s": h.mem_bandwidth_bytes_s / 1e12,
        })
    models = []
    for i in model_ids():
        m = load_model(i)
        kinds = sorted({g.mixer for g in m.groups()} | ({"moe"} if m.moe else set()) | ({"mla"} if m.mla else set()))
        models.append({
            "id": m.id, "kind": m.kind, "layers": m.num_layers, "hidden": m.hidden_size,
            "q_heads": m.num_q_heads, "kv_heads": m.num_kv_heads, "G": m.g_dev(1),
            "features": ",".join(k for k in kinds if k != "none"), "mtp": m.mtp.num_layers if m.mtp else 0,
            "weights": _weights_label(m),
        })
    return {"hardware": hws, "models": models, "acceptance": acceptance_table(), "engines": engine_table()}


def brief_source(text: str, n: int = 70) -> str:
    """A source in a few words: its first URL, else its text up to the first ' (' or ';', at most n characters."""
    import re

    url = re.search(r"https?://[^\s),'\"]+", text or "")
    if url:
        return url.group(0)
    head = re.split(r" \(|;", (text or "").strip(), maxsplit=1)[0]
    return head if len(head) <= n else head[: n - 1] + "…"


def acceptance_table() -> list[dict]:
    """Shipped acceptance profiles, one summary dict each: mechanism, target model, draft, dataset, D range,
    source."""
    from specplan.speculation.acceptance import load_profile, profile_ids

    out = []
    for i in profile_ids():
        p = load_profile(i)
        ds = [int(d) for d, _ in p["points"]]
        out.append({"id": i, "mechanism": p["mechanism"], "model": p.get("target", "-"),
                    "draft": p.get("draft_model", "-"), "dataset": p.get("workload", "-"),
                    "D": f"{min(ds)}-{max(ds)}" if len(ds) > 1 else str(ds[0]),
                    "default": bool(p.get("default", False)), "source": brief_source(p.get("source", ""))})
    return out


def engine_table() -> list[dict]:
    """Built-in engine profiles, one summary dict each: name, version, host step, CUDA-graph batch, the fields
    fitted by `specplan validate-serving`, and where the numbers come from."""
    from specplan.profiles.registry import engine_ids, load_engine

    out = []
    for i in engine_ids():
        e = load_engine(i)
        fitted = sorted(k for k, v in e.sources.items() if "fitted" in v)
        serving_fit = any("validate-serving" in e.sources.get(k, "") for k in fitted)
        out.append({"id": e.id, "name": e.name, "version": e.version or "-",
                    "host_step_ms": round(1e3 * float(getattr(e, "host_step_s", 0.0) or 0.0), 3),
                    "graph_max_batch": getattr(e, "graph_max_batch", "-"),
                    "fitted": ",".join(fitted) or "-",
                    "source": (f"{len(e.sources)} fields sourced in engine_profiles/{e.id}.yaml"
                               + ("; host numbers fitted by specplan validate-serving" if serving_fit else ""))})
    return out


def _weights_label(m) -> str:
    """The checkpoint's weight dtype, with the modules stored in another format (e.g. 'bf16; moe fp4')."""
    other = sorted(f"{k} {v}" for k, v in m.module_dtypes.items() if v != m.weight_dtype)
    return m.weight_dtype + (f" ({', '.join(other)})" if other else "")


def as_array(x) -> np.ndarray:
    """Helper for notebooks: a float array."""
    return np.asarray(x, dtype=float)

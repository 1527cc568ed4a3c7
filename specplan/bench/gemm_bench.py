"""Decode GEMM benchmark: y = x[M, K] @ W[N, K]^T over shapes and M values (torch).

bf16 / fp16 / fp32 through ``torch.nn.functional.linear``; fp8 (e4m3, per-tensor scales,
bf16 output) through ``torch._scaled_mm`` on CUDA when supported -- otherwise skipped with a
note.  Rows have exactly the columns ``csvio.GEMM_COLUMNS``.
"""

from __future__ import annotations

import time
from typing import Iterable, Sequence

if __package__:
    from .progress import Progress, note
    from .timing import TimingPlan, measure, source_label
    from .torch_env import device_info, framework_name, normalize_dtype, require_torch, torch_dtype
else:  # loaded from the bench folder on sys.path (device_run.py)
    from progress import Progress, note  # type: ignore[no-redef]
    from timing import TimingPlan, measure, source_label  # type: ignore[no-redef]
    from torch_env import device_info, framework_name, normalize_dtype, require_torch, torch_dtype  # type: ignore[no-redef]

DEFAULT_M_VALUES: tuple[int, ...] = tuple(2 ** i for i in range(13))  # 1 .. 4096

#: (n, k, name) of the llama-3.1-8b decode GEMMs at TP=1.
LLAMA31_8B_GEMMS: tuple[tuple[int, int, str], ...] = (
    (6144, 4096, "qkv"),
    (4096, 4096, "o_proj"),
    (28672, 4096, "gate_up"),
    (4096, 14336, "down"),
    (128256, 4096, "lm_head"),
)


def m_values(max_m: int | None = None, values: Iterable[int] | None = None) -> list[int]:
    """GEMM M values: ``values`` (default 1, 2, 4, ..., 4096) capped at ``max_m``."""
    vals = sorted({int(v) for v in (values if values is not None else DEFAULT_M_VALUES)})
    if max_m is not None:
        vals = [v for v in vals if v <= int(max_m)]
    return vals


_m_values = m_values  # bench_gemm's argument shadows the function name


def _gemm_shapes(shapes) -> list[tuple[int, int, str]]:
    """Normalize shapes given as {n, k, name} dicts or (n, k[, name]) tuples to (n, k, name)."""
    out = []
    for s in shapes:
        if isinstance(s, dict):
            n, k = int(s["n"]), int(s["k"])
            name = str(s.get("name", f"{n}x{k}"))
        else:
            seq = tuple(s)
            n, k = int(seq[0]), int(seq[1])
            name = str(seq[2]) if len(seq) > 2 else f"{n}x{k}"
        out.append((n, k, name))
    return out



def bench_gemm(shapes: Sequence, m_values: Sequence[int] | None = None, *, device: str = "cpu",
               dtype: str = "bf16", max_m: int | None = None, timing: TimingPlan = TimingPlan(),
               notes: list | None = None) -> list[dict]:
    """Time y = x[M,K] @ W[N,K]^T for each (n, k, name) in ``shapes`` and each M.

    ``m_values`` defaults to 1, 2, ..., 4096 (capped by ``max_m``).  ``deadline`` is a
    ``time.monotonic()`` value after which no new measurement starts.  Returns rows with the
    columns :data:`GEMM_COLUMNS`; skipped cases (fp8 unsupported, out of memory) are
    reported in ``notes``.  ``timing`` (repetitions, warm-up, flush, graphs, deadline, seed, the CPU clock:
    "wall" or "thread", progress) says how each case is timed (timing.measure).
    """
    reps, warmup, flush_bytes, use_graph = timing.reps, timing.warmup, timing.flush_bytes, timing.use_graph
    deadline, seed, cpu_clock, progress = timing.deadline, timing.seed, timing.cpu_clock, timing.progress
    torch = require_torch()
    dev = torch.device(device)
    dname = normalize_dtype(dtype)
    info = device_info(torch, dev)
    shapes_l = _gemm_shapes(shapes)
    ms = _m_values(max_m, m_values)
    if reps is None:
        reps = 20 if dev.type == "cuda" else 5
    gen = torch.Generator(device="cpu").manual_seed(seed)

    fp8 = dname == "fp8"
    if fp8:
        if dev.type != "cuda" or not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
            note(notes, f"fp8 GEMM skipped: torch._scaled_mm on CUDA needed (device {dev.type})")
            return []
        kernel = "torch._scaled_mm"
    else:
        kernel = "torch.nn.functional.linear"
    tdt = torch_dtype(torch, "bf16" if fp8 else dname)

    rows: list[dict] = []
    bar = Progress(len(shapes_l) * len(ms), f"gemm {dname}", progress)
    try:
        for n, k, name in shapes_l:
            if deadline is not None and time.monotonic() > deadline:
                note(notes, f"gemm {dname}: deadline reached before shape {name}")
                break
            w = (torch.randn(n, k, generator=gen) * 0.5).to(device=dev, dtype=tdt)
            if fp8:
                w = w.to(torch.float8_e4m3fn)
                wt = w.t()  # column-major [K, N], as _scaled_mm wants
                scale = torch.ones((), device=dev, dtype=torch.float32)
            for m in ms:
                if deadline is not None and time.monotonic() > deadline:
                    break
                try:
                    x = (torch.randn(m, k, generator=gen) * 0.5).to(device=dev, dtype=tdt)
                    if fp8:
                        x = x.to(torch.float8_e4m3fn)

                        def fn(x=x):
                            return torch._scaled_mm(x, wt, scale_a=scale, scale_b=scale,
                                                    out_dtype=torch.bfloat16)
                    else:
                        def fn(x=x):
                            return torch.nn.functional.linear(x, w)
                    res = measure(fn, dev, reps=reps, warmup=warmup, flush_bytes=flush_bytes,
                                  use_graph=use_graph, cpu_clock=cpu_clock)
                except Exception as exc:
                    note(notes, f"gemm {dname} {name} m={m} n={n} k={k} skipped: {type(exc).__name__}: {str(exc)[:200]}")
                    bar.update(1)
                    continue
                rows.append({
                    "device": info["device"], "dtype": dname, "m": m, "n": n, "k": k,
                    "time_us": round(res["time_us"], 3), "framework": framework_name(torch),
                    "kernel": kernel, "source": source_label(res["method"], res["reps"]),
                    "torch_version": torch.__version__, "device_name": info["device_name"],
                })
                bar.update(1, f"{name} m={m} {res['time_us']:.1f}us")
            del w
    finally:
        bar.close()
    return rows

"""Torch microbenchmarks of the decode-step kernels: GEMMs and decode attention (q_len >= 1).

Importable without torch, pydantic or pandas: torch is imported inside the functions, and a
missing torch raises :class:`TorchMissingError` saying how to install it
(``pip install 'specplan[bench]'``, or ``pip install torch==2.13.0`` for the CPU wheel).

Public functions
----------------
``bench_gemm(shapes, m_values=None, *, device, dtype, reps, progress, max_m, ...) -> list[dict]``
    y = x[M, K] @ W[N, K]^T for every (n, k, name) in ``shapes`` and every M in ``m_values``
    (default 1, 2, 4, ..., 4096, capped by ``max_m``).  bf16 / fp16 / fp32 through
    ``torch.nn.functional.linear``; fp8 (e4m3, per-tensor scales, bf16 output) through
    ``torch._scaled_mm`` on CUDA when supported -- otherwise skipped with a note.
    Rows have exactly the columns :data:`GEMM_COLUMNS`.

``bench_attention(configs, *, device, dtype, kv_dtype, reps, progress, kernels, ...) -> list[dict]``
    Decode attention with q_len new tokens per sequence, causal mask aligned to the END of
    the KV (query i may attend KV positions j <= kv_len - q_len + i).  Times
    ``torch.nn.functional.scaled_dot_product_attention`` with grouped KV heads
    (``enable_gqa=True``; KV expanded where torch lacks it), forcing the SDPA backends in the
    order flash, efficient, cudnn, math and recording the first that runs (kernel
    ``sdpa_flash`` / ``sdpa_efficient`` / ``sdpa_cudnn`` / ``sdpa_math``), and a kernel that
    packs the G * q_len query rows of one KV head into row tiles of 128
    (``triton_packed``, see :mod:`specplan.bench.packed_attention`; ``torch_packed`` where
    Triton is missing, e.g. on CPU).  Rows have exactly the columns
    :data:`ATTENTION_COLUMNS`.  Numerical checks (packed vs SDPA, max abs error) are
    appended to the optional ``checks`` list (columns :data:`CHECK_COLUMNS`).

``write_csv(rows, path, columns=None)`` / ``read_csv(path)``
    Atomic CSV write (temp file + ``os.replace``; ``.gz`` compresses) and typed read-back.

``main(argv)`` -- ``python -m specplan.bench.harness gemm|attention|all [--shapes FILE]
    [--device cuda|cpu] [--dtype bf16] [--kv-dtype bf16] [--max-m M] [--reps N] -o out.csv``.
    With ``all``, ``-o out.csv`` writes ``out_gemm.csv`` and ``out_attention.csv``.

Timing
------
CUDA: warm-up calls, then the call is captured in a CUDA graph (eager if capture fails) and
each repetition is timed with CUDA events around one replay; a buffer larger than the L2
(256 MB or twice the L2, whichever is larger) is overwritten before every repetition, outside
the timed region; the median of the repetitions is reported.  Calls slower than 5 ms get
fewer repetitions.  CPU: the same code path timed with ``time.perf_counter`` around each call
(a small 8 MB buffer is overwritten between repetitions), median of the repetitions.

Shapes file (YAML or JSON)
--------------------------
::

    m: [1, 2, 4, 8, 16]            # optional: GEMM M values (default 1..4096, powers of 2)
    gemm:                          # y = x[M,K] @ W[N,K]^T
      - {n: 6144, k: 4096, name: qkv}
      - {n: 4096, k: 14336, name: down}
    attention:                     # every field may be a scalar or a list (cartesian product)
      - batch: [1, 8]
        q_len: [1, 2, 3, 4]        # query tokens per sequence (1 = plain decode)
        n_kv_heads: 8
        n_q_heads: [8, 32]         # or  group: [1, 4]  (n_q_heads = group * n_kv_heads)
        head_dim: 128
        kv_len: [1024, 4096]       # KV length INCLUDING the q_len new tokens

Without ``--shapes`` the GEMMs of llama-3.1-8b and a small attention grid are used.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import itertools
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from typing import Any, Callable, Iterable, Sequence

GEMM_COLUMNS: tuple[str, ...] = (
    "device", "dtype", "m", "n", "k", "time_us", "framework", "kernel", "source",
    "torch_version", "device_name",
)
ATTENTION_COLUMNS: tuple[str, ...] = (
    "device", "framework", "kernel", "dtype", "kv_dtype", "batch", "q_len", "n_q_heads",
    "n_kv_heads", "head_dim", "kv_len", "time_us", "source", "torch_version", "device_name",
)
CHECK_COLUMNS: tuple[str, ...] = (
    "device", "kernel", "reference", "dtype", "batch", "q_len", "n_q_heads", "n_kv_heads",
    "head_dim", "kv_len", "max_abs_err", "ref_max_abs", "torch_version", "device_name",
)
INT_COLUMNS = frozenset({"m", "n", "k", "batch", "q_len", "n_q_heads", "n_kv_heads", "head_dim", "kv_len"})
FLOAT_COLUMNS = frozenset({"time_us", "max_abs_err", "ref_max_abs"})

DEFAULT_M_VALUES: tuple[int, ...] = tuple(2 ** i for i in range(13))  # 1 .. 4096

#: (n, k, name) of the llama-3.1-8b decode GEMMs at TP=1.
LLAMA31_8B_GEMMS: tuple[tuple[int, int, str], ...] = (
    (6144, 4096, "qkv"),
    (4096, 4096, "o_proj"),
    (28672, 4096, "gate_up"),
    (4096, 14336, "down"),
    (128256, 4096, "lm_head"),
)

DEFAULT_ATTENTION_CONFIGS: tuple[dict, ...] = (
    {"batch": [1, 8], "q_len": [1, 2, 4, 8, 16, 17], "n_kv_heads": 8, "group": [1, 4, 8, 16],
     "head_dim": 128, "kv_len": [1024, 4096]},
)

SDPA_BACKEND_ORDER: tuple[str, ...] = ("flash", "efficient", "cudnn", "math")
_SDPA_ENUM = {
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "math": "MATH",
}

INSTALL_HINT = (
    "torch is required for the benchmarks: pip install 'specplan[bench]' "
    "(or, for the CPU-only wheel, pip install torch==2.13.0)"
)

_DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "float8_e4m3fn"}
_DTYPE_ALIASES = {
    "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "half": "fp16", "fp16": "fp16",
    "float32": "fp32", "float": "fp32", "fp32": "fp32", "fp8": "fp8", "fp8_e4m3": "fp8",
    "float8_e4m3fn": "fp8", "e4m3": "fp8",
}


class TorchMissingError(ImportError):
    """torch (the optional ``bench`` extra) is not installed."""


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def require_torch():
    """Import and return torch, or raise :class:`TorchMissingError` with the install hint."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise TorchMissingError(INSTALL_HINT) from exc
    return torch


def _packed_module():
    try:
        from . import packed_attention as mod  # type: ignore[no-redef]
    except ImportError:  # run as a plain script directory (device_run.py adds it to sys.path)
        import packed_attention as mod  # type: ignore[no-redef]
    return mod


def normalize_dtype(name: str) -> str:
    """'bfloat16' -> 'bf16', ... ; raises ValueError for unknown names."""
    key = str(name).strip().lower()
    if key not in _DTYPE_ALIASES:
        raise ValueError(f"unknown dtype {name!r}; use one of bf16, fp16, fp32, fp8")
    return _DTYPE_ALIASES[key]


def torch_dtype(torch, name: str):
    return getattr(torch, _DTYPE_NAMES[normalize_dtype(name)])


def m_values(max_m: int | None = None, values: Iterable[int] | None = None) -> list[int]:
    """GEMM M values: ``values`` (default 1, 2, 4, ..., 4096) capped at ``max_m``."""
    vals = sorted({int(v) for v in (values if values is not None else DEFAULT_M_VALUES)})
    if max_m is not None:
        vals = [v for v in vals if v <= int(max_m)]
    return vals


_m_values = m_values  # bench_gemm's argument shadows the function name


def device_slug(name: str) -> str:
    """Short device id in the style of the reference tables ('h100-sxm', 'h200-sxm', 'cpu')."""
    n = name.lower()
    if "gh200" in n:
        return "gh200"
    for chip in ("h200", "h100", "b200", "b300", "h20", "l40s", "a100"):
        if chip not in n:
            continue
        if chip == "a100":
            return "a100-sxm-80gb" if "80" in n else "a100-sxm-40gb"
        if chip in ("h100", "h200"):
            if "pcie" in n:
                return f"{chip}-pcie"
            if "nvl" in n:
                return f"{chip}-nvl"
            return f"{chip}-sxm"
        return chip
    slug = "".join(c if c.isalnum() else "-" for c in n).strip("-")
    while "--" in slug:
        slug = slug.replace("--", "-")
    return slug or "unknown"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def device_info(torch, device) -> dict:
    """{'device': slug, 'device_name': ..., 'torch_version': ..., 'l2_bytes': ..., 'n_sms': ...}."""
    dev = torch.device(device)
    info: dict[str, Any] = {"torch_version": torch.__version__}
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        info["device_name"] = props.name
        info["device"] = device_slug(props.name)
        info["l2_bytes"] = int(getattr(props, "L2_cache_size", 0) or 0)
        info["n_sms"] = int(props.multi_processor_count)
        info["memory_bytes"] = int(props.total_memory)
        info["capability"] = f"{props.major}.{props.minor}"
    else:
        info["device_name"] = _cpu_name()
        info["device"] = "cpu"
        info["l2_bytes"] = 0
        info["n_sms"] = os.cpu_count() or 1
    try:
        import triton

        info["triton_version"] = triton.__version__
    except Exception:
        info["triton_version"] = None
    return info


def _framework(torch) -> str:
    return "torch " + torch.__version__.split("+")[0]


class Progress:
    """Minimal stderr progress bar (uses tqdm when importable and ``use_tqdm``)."""

    def __init__(self, total: int, label: str, enabled: bool = True, use_tqdm: bool = False,
                 stream=None):
        self.total = max(int(total), 0)
        self.label = label
        self.enabled = enabled
        self.count = 0
        self.t0 = time.monotonic()
        self.stream = stream or sys.stderr
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last_draw = 0.0
        self._last_pct = -1
        self._tqdm = None
        if enabled and use_tqdm:
            try:
                from tqdm import tqdm

                self._tqdm = tqdm(total=self.total, desc=label, file=self.stream)
            except Exception:
                self._tqdm = None

    def update(self, n: int = 1, info: str = "") -> None:
        self.count += n
        if not self.enabled:
            return
        if self._tqdm is not None:
            self._tqdm.update(n)
            if info:
                self._tqdm.set_postfix_str(info, refresh=False)
            return
        now = time.monotonic()
        frac = self.count / self.total if self.total else 1.0
        elapsed = now - self.t0
        if self._tty:
            if now - self._last_draw < 0.1 and self.count < self.total:
                return
            width = 30
            fill = int(width * frac)
            bar = "#" * fill + "." * (width - fill)
            self.stream.write(f"\r{self.label} [{bar}] {self.count}/{self.total} {elapsed:6.1f}s {info[:40]:<40}")
            self.stream.flush()
            self._last_draw = now
        else:
            pct = int(frac * 20) * 5  # a line every 5 %
            if pct != self._last_pct or self.count == self.total:
                self._last_pct = pct
                self.stream.write(f"{self.label}: {self.count}/{self.total} ({pct}%) {elapsed:.1f}s {info}\n")
                self.stream.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        if self._tqdm is not None:
            self._tqdm.close()
        elif self._tty:
            self.stream.write("\n")
            self.stream.flush()


# --------------------------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------------------------
_FLUSH_CACHE: dict[tuple[str, int], Any] = {}


def _flush_buffer(torch, dev, flush_bytes: int | None, l2_bytes: int = 0):
    if flush_bytes is None:
        flush_bytes = max(256 << 20, 2 * l2_bytes) if dev.type == "cuda" else 8 << 20
    if flush_bytes <= 0:
        return None
    key = (str(dev), int(flush_bytes))
    buf = _FLUSH_CACHE.get(key)
    if buf is None:
        buf = torch.empty(int(flush_bytes) // 4, dtype=torch.float32, device=dev)
        _FLUSH_CACHE[key] = buf
    return buf


def measure(fn: Callable[[], Any], device="cpu", reps: int = 20, warmup: int = 3,
            flush_bytes: int | None = None, use_graph: bool = True,
            slow_call_s: float = 5e-3) -> dict:
    """Time ``fn()``: returns {'time_us': median, 'reps': n, 'method': str, 'all_us': [...]}.

    CUDA: warm-up, CUDA-graph capture (eager fallback), events around each replay, L2 flushed
    between repetitions outside the timed region.  CPU: ``time.perf_counter`` around each call.
    """
    torch = require_torch()
    dev = torch.device(device)
    reps = max(1, int(reps))
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        flush = _flush_buffer(torch, dev, flush_bytes, l2)
        for _ in range(max(1, warmup)):
            fn()
        torch.cuda.synchronize(dev)
        # one eager call timed, to size the repetitions
        s0, e0 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s0.record()
        fn()
        e0.record()
        torch.cuda.synchronize(dev)
        one_s = s0.elapsed_time(e0) / 1e3
        if one_s > 10 * slow_call_s:
            reps = min(reps, 3)
        elif one_s > slow_call_s:
            reps = min(reps, 5)
        call = fn
        method = "cuda events, eager"
        graph = None
        if use_graph:
            try:
                side = torch.cuda.Stream(device=dev)
                side.wait_stream(torch.cuda.current_stream(dev))
                with torch.cuda.stream(side):
                    fn()
                torch.cuda.current_stream(dev).wait_stream(side)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    fn()
                graph.replay()
                torch.cuda.synchronize(dev)
                call = graph.replay
                method = "cuda graph replay, cuda events"
            except Exception as exc:  # capture failed: time eagerly
                graph = None
                call = fn
                method = f"cuda events, eager (graph capture failed: {type(exc).__name__})"
                torch.cuda.synchronize(dev)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for r in range(reps):
            if flush is not None:
                flush.zero_()
            starts[r].record()
            call()
            ends[r].record()
        torch.cuda.synchronize(dev)
        times = [s.elapsed_time(e) * 1e3 for s, e in zip(starts, ends)]
        del graph
        if flush is not None:
            method += f", L2 flushed ({flush.numel() * 4 >> 20} MB) between reps"
    else:
        flush = _flush_buffer(torch, dev, flush_bytes)
        for _ in range(max(0, warmup)):
            fn()
        t0 = time.perf_counter()
        fn()
        one_s = time.perf_counter() - t0
        if one_s > 0.5:
            reps = min(reps, 3)
        times = []
        for _ in range(reps):
            if flush is not None:
                flush.zero_()
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e6)
        method = "time.perf_counter"
        if flush is not None:
            method += f", {flush.numel() * 4 >> 20} MB buffer written between reps"
    return {"time_us": float(statistics.median(times)), "reps": len(times), "method": method,
            "all_us": times}


def _source(method: str, reps: int) -> str:
    return f"specplan.bench.harness; {method}; median of {reps}"


# --------------------------------------------------------------------------------------------
# GEMM
# --------------------------------------------------------------------------------------------
def _gemm_shapes(shapes) -> list[tuple[int, int, str]]:
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


def _note(notes: list | None, msg: str) -> None:
    if notes is not None:
        notes.append(msg)
    sys.stderr.write(f"[specplan.bench] {msg}\n")


def bench_gemm(shapes: Sequence, m_values: Sequence[int] | None = None, *, device: str = "cpu",
               dtype: str = "bf16", reps: int | None = None, progress: bool = True,
               max_m: int | None = None, warmup: int = 3, flush_bytes: int | None = None,
               use_graph: bool = True, deadline: float | None = None,
               notes: list | None = None, seed: int = 0) -> list[dict]:
    """Time y = x[M,K] @ W[N,K]^T for each (n, k, name) in ``shapes`` and each M.

    ``m_values`` defaults to 1, 2, ..., 4096 (capped by ``max_m``).  ``deadline`` is a
    ``time.monotonic()`` value after which no new measurement starts.  Returns rows with the
    columns :data:`GEMM_COLUMNS`; skipped cases (fp8 unsupported, out of memory) are
    reported in ``notes``.
    """
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
            _note(notes, f"fp8 GEMM skipped: torch._scaled_mm on CUDA needed (device {dev.type})")
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
                _note(notes, f"gemm {dname}: deadline reached before shape {name}")
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
                                  use_graph=use_graph)
                except Exception as exc:
                    _note(notes, f"gemm {dname} {name} m={m} n={n} k={k} skipped: {type(exc).__name__}: {str(exc)[:200]}")
                    bar.update(1)
                    continue
                rows.append({
                    "device": info["device"], "dtype": dname, "m": m, "n": n, "k": k,
                    "time_us": round(res["time_us"], 3), "framework": _framework(torch),
                    "kernel": kernel, "source": _source(res["method"], res["reps"]),
                    "torch_version": torch.__version__, "device_name": info["device_name"],
                })
                bar.update(1, f"{name} m={m} {res['time_us']:.1f}us")
            del w
    finally:
        bar.close()
    return rows


# --------------------------------------------------------------------------------------------
# attention
# --------------------------------------------------------------------------------------------
def _as_list(v) -> list:
    if isinstance(v, (list, tuple)):
        return list(v)
    return [v]


def expand_attention_configs(configs: Iterable[dict]) -> list[dict]:
    """Expand list-valued fields; returns dicts with batch, q_len, n_q_heads, n_kv_heads, head_dim, kv_len."""
    out: list[dict] = []
    for cfg in configs:
        cfg = dict(cfg)
        hkv_l = _as_list(cfg.get("n_kv_heads", 8))
        if "n_q_heads" in cfg:
            heads = [("q", v) for v in _as_list(cfg["n_q_heads"])]
        else:
            heads = [("g", v) for v in _as_list(cfg.get("group", cfg.get("g", 1)))]
        for b, hkv, (kind, hv), d, s, ql in itertools.product(
                _as_list(cfg.get("batch", 1)), hkv_l, heads, _as_list(cfg.get("head_dim", 128)),
                _as_list(cfg.get("kv_len", 4096)), _as_list(cfg.get("q_len", 1))):
            hkv = int(hkv)
            hq = int(hv) if kind == "q" else int(hv) * hkv
            if hq % hkv:
                raise ValueError(f"n_q_heads {hq} not a multiple of n_kv_heads {hkv}")
            if int(s) < int(ql):
                raise ValueError(f"kv_len {s} < q_len {ql}")
            out.append({"batch": int(b), "q_len": int(ql), "n_q_heads": hq, "n_kv_heads": hkv,
                        "head_dim": int(d), "kv_len": int(s)})
    return out


def _sdpa_fn(torch, q, k, v, backend: str):
    """A zero-argument callable running SDPA with only ``backend`` enabled."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    F = torch.nn.functional
    hq, hkv = q.shape[1], k.shape[1]
    q_len, kv_len = q.shape[2], k.shape[2]
    kwargs: dict[str, Any] = {}
    if hq != hkv:
        try:
            import inspect

            has_gqa = "enable_gqa" in inspect.signature(F.scaled_dot_product_attention).parameters
        except (TypeError, ValueError):
            has_gqa = True
        if has_gqa:
            kwargs["enable_gqa"] = True
        else:  # old torch: expand KV (outside the timed call)
            k = k.repeat_interleave(hq // hkv, dim=1)
            v = v.repeat_interleave(hq // hkv, dim=1)
    mask = None
    if q_len > 1:
        try:
            from torch.nn.attention.bias import causal_lower_right

            mask = causal_lower_right(q_len, kv_len)
        except ImportError:
            mask = _packed_module().end_aligned_causal_mask(q_len, kv_len, q.device)
    enum = getattr(SDPBackend, _SDPA_ENUM[backend])

    def fn():
        with sdpa_kernel([enum]):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kwargs)

    return fn


def _try_sdpa(torch, q, k, v, backends: Sequence[str], first_only: bool = True):
    """[(backend, fn)] for the backends that run on these tensors, in order (only the first
    that runs when ``first_only``)."""
    ok = []
    for be in backends:
        if not hasattr(torch.nn.attention.SDPBackend, _SDPA_ENUM[be]):
            continue
        fn = _sdpa_fn(torch, q, k, v, be)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = fn()
            if q.device.type == "cuda":
                torch.cuda.synchronize(q.device)
            if not torch.isfinite(out).all():
                continue
        except Exception:
            continue
        ok.append((be, fn))
        if first_only:
            break
    return ok


def bench_attention(configs: Iterable[dict], *, device: str = "cpu", dtype: str = "bf16",
                    kv_dtype: str | None = None, reps: int | None = None, progress: bool = True,
                    kernels: Sequence[str] = ("sdpa", "packed"),
                    sdpa_backends: Sequence[str] | None = None, warmup: int = 3,
                    flush_bytes: int | None = None, use_graph: bool = True,
                    check: bool = True, checks: list | None = None,
                    deadline: float | None = None, notes: list | None = None,
                    seed: int = 0) -> list[dict]:
    """Time decode attention (q_len >= 1, end-aligned causal mask) for every expanded config.

    ``kernels``: 'sdpa' (torch SDPA, backend recorded in the kernel column) and/or 'packed'
    (Triton packed kernel on CUDA, the torch packed implementation where Triton is missing;
    'torch_packed' forces the torch one).  ``sdpa_backends=None`` times the FIRST backend of
    flash, efficient, cudnn, math that runs; a list (e.g. ['flash', 'math']) times each of
    them that runs.  ``check``: compare the packed output with SDPA's (max abs error) at the
    smallest and largest q_len of each (batch, kv_len, heads, head_dim) family; results go to
    ``checks``.  Returns rows with the columns :data:`ATTENTION_COLUMNS`.
    """
    torch = require_torch()
    pa = _packed_module()
    dev = torch.device(device)
    dname = normalize_dtype(dtype)
    kvname = normalize_dtype(kv_dtype or dname)
    if kvname != dname:
        raise ValueError(f"kv_dtype {kvname} != dtype {dname}: only equal dtypes are benchmarked")
    if dname == "fp8":
        raise ValueError("fp8 attention is not benchmarked; use bf16/fp16/fp32")
    tdt = torch_dtype(torch, dname)
    info = device_info(torch, dev)
    cfgs = expand_attention_configs(configs)
    if reps is None:
        reps = 20 if dev.type == "cuda" else 5
    gen = torch.Generator(device="cpu").manual_seed(seed)
    framework = _framework(torch)
    triton_fw = f"triton {info['triton_version']}" if info.get("triton_version") else framework
    use_triton = ("packed" in kernels and dev.type == "cuda" and pa.HAVE_TRITON)
    want_torch_packed = ("torch_packed" in kernels) or ("packed" in kernels and not use_triton)
    if "packed" in kernels and dev.type == "cuda" and not pa.HAVE_TRITON:
        _note(notes, "Triton not importable: timing torch_packed instead of triton_packed")
    backend_list = list(sdpa_backends) if sdpa_backends else list(SDPA_BACKEND_ORDER)
    first_only = sdpa_backends is None

    # group by the KV tensors so that they are allocated once
    groups: dict[tuple, list[dict]] = {}
    for c in cfgs:
        groups.setdefault((c["batch"], c["kv_len"], c["n_kv_heads"], c["head_dim"]), []).append(c)
    n_kernels = (1 if "sdpa" in kernels else 0) + (1 if use_triton else 0) + (1 if want_torch_packed else 0)
    bar = Progress(len(cfgs) * max(n_kernels, 1), f"attention {dname}", progress)
    rows: list[dict] = []
    stop = False

    def base_row(c):
        return {"device": info["device"], "dtype": dname, "kv_dtype": kvname, "batch": c["batch"],
                "q_len": c["q_len"], "n_q_heads": c["n_q_heads"], "n_kv_heads": c["n_kv_heads"],
                "head_dim": c["head_dim"], "kv_len": c["kv_len"],
                "torch_version": torch.__version__, "device_name": info["device_name"]}

    def record(c, kernel, fw, res):
        row = base_row(c)
        row.update({"framework": fw, "kernel": kernel, "time_us": round(res["time_us"], 3),
                    "source": _source(res["method"], res["reps"])})
        rows.append({col: row[col] for col in ATTENTION_COLUMNS})

    try:
        for (b, s, hkv, d), group_cfgs in groups.items():
            if stop:
                break
            try:
                k = torch.randn(b, hkv, s, d, generator=gen).to(device=dev, dtype=tdt)
                v = torch.randn(b, hkv, s, d, generator=gen).to(device=dev, dtype=tdt)
            except Exception as exc:
                _note(notes, f"attention b={b} kv={s} hkv={hkv} d={d} skipped (KV alloc): {type(exc).__name__}: {str(exc)[:160]}")
                bar.update(len(group_cfgs) * max(n_kernels, 1))
                continue
            # q_len extremes per G, for the numerical checks
            qrange: dict[int, tuple[int, int]] = {}
            for c in group_cfgs:
                lo, hi = qrange.get(c["n_q_heads"], (c["q_len"], c["q_len"]))
                qrange[c["n_q_heads"]] = (min(lo, c["q_len"]), max(hi, c["q_len"]))
            for c in group_cfgs:
                if deadline is not None and time.monotonic() > deadline:
                    _note(notes, f"attention: deadline reached; {len(rows)} rows measured")
                    stop = True
                    break
                hq, q_len = c["n_q_heads"], c["q_len"]
                tag = f"b={b} kv={s} hkv={hkv} G={hq // hkv} d={d} q={q_len}"
                q = torch.randn(b, hq, q_len, d, generator=gen).to(device=dev, dtype=tdt)
                outs: dict[str, Any] = {}
                if "sdpa" in kernels:
                    try:
                        cands = _try_sdpa(torch, q, k, v, backend_list, first_only)
                        if not cands:
                            raise RuntimeError("no SDPA backend ran")
                        for be, fn in (cands[:1] if first_only else cands):
                            with warnings.catch_warnings():
                                warnings.simplefilter("ignore")
                                res = measure(fn, dev, reps=reps, warmup=warmup,
                                              flush_bytes=flush_bytes, use_graph=use_graph)
                                outs[f"sdpa_{be}"] = fn
                            record(c, f"sdpa_{be}", framework, res)
                            bar.update(0, f"{tag} sdpa_{be} {res['time_us']:.1f}us")
                    except Exception as exc:
                        _note(notes, f"sdpa {tag} failed: {type(exc).__name__}: {str(exc)[:200]}")
                    bar.update(1)
                if use_triton:
                    try:
                        fn = pa.TritonPackedAttention(q, k, v)
                        res = measure(fn, dev, reps=reps, warmup=warmup, flush_bytes=flush_bytes,
                                      use_graph=use_graph)
                        record(c, "triton_packed", triton_fw, res)
                        outs["triton_packed"] = fn
                        bar.update(0, f"{tag} triton {res['time_us']:.1f}us")
                    except Exception as exc:
                        _note(notes, f"triton_packed {tag} failed: {type(exc).__name__}: {str(exc)[:300]}")
                        if not want_torch_packed:
                            want_torch_packed = True
                            n_kernels += 1
                            _note(notes, "falling back to torch_packed for the remaining configs")
                    bar.update(1)
                if want_torch_packed:
                    try:
                        mask = pa.packed_causal_mask(hq // hkv, q_len, s, dev)

                        def fn(q=q, mask=mask):
                            return pa.torch_packed_attention(q, k, v, mask=mask)

                        res = measure(fn, dev, reps=reps, warmup=warmup, flush_bytes=flush_bytes,
                                      use_graph=use_graph)
                        record(c, "torch_packed", framework, res)
                        outs["torch_packed"] = fn
                    except Exception as exc:
                        _note(notes, f"torch_packed {tag} failed: {type(exc).__name__}: {str(exc)[:200]}")
                    bar.update(1)
                if check and checks is not None and q_len in qrange.get(hq, ()):
                    ref_name = next((n for n in outs if n.startswith("sdpa_")), None)
                    if ref_name is not None:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            ref = outs[ref_name]().float()
                        for name, fn in outs.items():
                            if name.startswith("sdpa_"):
                                continue
                            out = fn().float()
                            checks.append({
                                "device": info["device"], "kernel": name, "reference": ref_name,
                                "dtype": dname, "batch": b, "q_len": q_len, "n_q_heads": hq,
                                "n_kv_heads": hkv, "head_dim": d, "kv_len": s,
                                "max_abs_err": float((out - ref).abs().max().item()),
                                "ref_max_abs": float(ref.abs().max().item()),
                                "torch_version": torch.__version__,
                                "device_name": info["device_name"],
                            })
                del q, outs
            del k, v
    finally:
        bar.close()
    return rows


# --------------------------------------------------------------------------------------------
# CSV
# --------------------------------------------------------------------------------------------
def _columns_for(rows: Sequence[dict]) -> tuple[str, ...]:
    if not rows:
        raise ValueError("no rows and no columns given")
    keys = set(rows[0])
    for cols in (ATTENTION_COLUMNS, GEMM_COLUMNS, CHECK_COLUMNS):
        if keys == set(cols):
            return cols
    return tuple(rows[0].keys())


def write_csv(rows: Sequence[dict], path: str | os.PathLike, columns: Sequence[str] | None = None) -> str:
    """Write ``rows`` with the standard column order; atomic (temp file + os.replace).

    A path ending in ``.gz`` is gzip-compressed.  Returns the path.
    """
    path = os.fspath(path)
    cols = tuple(columns) if columns is not None else _columns_for(rows)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols, extrasaction="raise", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: row.get(c, "") for c in cols})
    data = buf.getvalue().encode("utf-8")
    if path.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".csv", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def read_csv(path: str | os.PathLike) -> list[dict]:
    """Read a CSV written by :func:`write_csv`; int/float columns converted back."""
    path = os.fspath(path)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        for key, val in row.items():
            if val == "":
                continue
            if key in INT_COLUMNS:
                row[key] = int(val)
            elif key in FLOAT_COLUMNS:
                row[key] = float(val)
    return rows


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------
def load_shapes(path: str | os.PathLike) -> dict:
    """Load a shapes file (YAML or JSON, see the module docstring)."""
    path = os.fspath(path)
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    if path.endswith(".json"):
        data = json.loads(text)
    else:
        try:
            import yaml
        except ImportError:
            data = json.loads(text)
        else:
            data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping with 'gemm' and/or 'attention'")
    return data


def _split_out(out: str, suffix: str) -> str:
    for ext in (".csv.gz", ".csv"):
        if out.endswith(ext):
            return out[: -len(ext)] + f"_{suffix}" + ext
    return f"{out}_{suffix}.csv"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specplan.bench.harness",
                                     description="Time decode GEMMs and attention with torch.")
    parser.add_argument("what", choices=("gemm", "attention", "all"))
    parser.add_argument("--shapes", help="YAML/JSON with 'gemm' and/or 'attention' (see module doc)")
    parser.add_argument("--device", default="cuda", help="cuda | cpu | cuda:N (default cuda)")
    parser.add_argument("--dtype", default="bf16", help="bf16 | fp16 | fp32 | fp8 (GEMM only)")
    parser.add_argument("--kv-dtype", default=None)
    parser.add_argument("--max-m", type=int, default=None)
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        torch = require_torch()
    except TorchMissingError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.stderr.write("error: --device cuda but torch sees no CUDA device (use --device cpu)\n")
        return 2
    data = load_shapes(args.shapes) if args.shapes else {}
    notes: list[str] = []
    if args.what in ("gemm", "all"):
        shapes = data.get("gemm", LLAMA31_8B_GEMMS if not args.shapes else [])
        rows = bench_gemm(shapes, data.get("m"), device=args.device, dtype=args.dtype,
                          reps=args.reps, progress=not args.no_progress, max_m=args.max_m,
                          notes=notes)
        out = args.output if args.what == "gemm" else _split_out(args.output, "gemm")
        write_csv(rows, out, GEMM_COLUMNS)
        sys.stderr.write(f"wrote {len(rows)} GEMM rows to {out}\n")
    if args.what in ("attention", "all"):
        configs = data.get("attention", DEFAULT_ATTENTION_CONFIGS if not args.shapes else [])
        adt = args.dtype if normalize_dtype(args.dtype) != "fp8" else "bf16"
        rows = bench_attention(configs, device=args.device, dtype=adt, kv_dtype=args.kv_dtype,
                               reps=args.reps, progress=not args.no_progress, notes=notes)
        out = args.output if args.what == "attention" else _split_out(args.output, "attention")
        write_csv(rows, out, ATTENTION_COLUMNS)
        sys.stderr.write(f"wrote {len(rows)} attention rows to {out}\n")
    for n in notes:
        sys.stderr.write(f"note: {n}\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""Timing one zero-argument call: CUDA graph + events with L2 flush, or time.perf_counter on CPU.

CUDA: warm-up calls, then the call is captured in a CUDA graph (eager if capture fails) and
each repetition is timed with CUDA events around one replay; a buffer larger than the L2
(256 MB or twice the L2, whichever is larger) is overwritten before every repetition, outside
the timed region; the median of the repetitions is reported.  Calls slower than 5 ms get
fewer repetitions.  CPU: the same code path timed with ``time.perf_counter`` around each call
(a small 8 MB buffer is overwritten between repetitions), median of the repetitions; with
``cpu_clock="thread"`` the calling thread's CPU time (``time.thread_time``) instead, which does not count
the time other processes hold the core (for single-threaded torch on a shared, loaded machine).
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

from specplan.core.records import record

if __package__:
    from .torch_env import require_torch
else:  # loaded from the bench folder on sys.path (device_run.py)
    from torch_env import require_torch  # type: ignore[no-redef]

_FLUSH_CACHE: dict[tuple[str, int], Any] = {}


@record
class TimingPlan:
    """How each benchmark case is timed: repetitions (None: 20 on CUDA, 5 on CPU), warm-up runs, bytes of the L2
    flush buffer (None: the device's L2), CUDA-graph capture, a time.monotonic() deadline after which no case
    starts, the inputs' RNG seed, the CPU clock ("wall" or "thread"), progress lines on stderr."""

    reps: int | None = None
    warmup: int = 3
    flush_bytes: int | None = None
    use_graph: bool = True
    deadline: float | None = None
    seed: int = 0
    cpu_clock: str = "wall"
    progress: bool = True


def _flush_buffer(torch, dev, flush_bytes: int | None, l2_bytes: int = 0):
    """Cached float32 buffer overwritten between repetitions to evict the caches (None: no flush)."""
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
            slow_call_s: float = 5e-3, cpu_clock: str = "wall") -> dict:
    """Time ``fn()``: returns {'time_us': median, 'reps': n, 'method': str, 'all_us': [...]}.

    CUDA: warm-up, CUDA-graph capture (eager fallback), events around each replay, L2 flushed
    between repetitions outside the timed region.  CPU: ``time.perf_counter`` around each call.
    """
    torch = require_torch()
    dev = torch.device(device)
    reps = max(1, int(reps))
    if cpu_clock not in ("wall", "thread"):
        raise ValueError(f"cpu_clock: must be 'wall' or 'thread', got {cpu_clock!r}")
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
        clock = time.thread_time if cpu_clock == "thread" else time.perf_counter
        for _ in range(max(0, warmup)):
            fn()
        t0 = clock()
        fn()
        one_s = clock() - t0
        if one_s > 0.5:
            reps = min(reps, 3)
        times = []
        for _ in range(reps):
            if flush is not None:
                flush.zero_()
            t0 = clock()
            fn()
            times.append((clock() - t0) * 1e6)
        method = "time.thread_time (thread CPU time)" if cpu_clock == "thread" else "time.perf_counter"
        if flush is not None:
            method += f", {flush.numel() * 4 >> 20} MB buffer written between reps"
    return {"time_us": float(statistics.median(times)), "reps": len(times), "method": method,
            "all_us": times}


def source_label(method: str, reps: int) -> str:
    """Source column value: where and how a time was measured."""
    return f"specplan.bench.harness; {method}; median of {reps}"


"""Request-level metrics of a simulated policy: TPOT and TTFT percentiles, SLO attainment, goodput, throughput.

- TTFT_i = first token − arrival (queueing + prefill; the first token comes out of the prefill step).
- TPOT_i = (finish − first token) / (OSL_i − 1), requests with OSL > 1 (time per output token after the first).
- SLO attainment = share of requests with TPOT_i <= --max-tpot-ms and TTFT_i <= --max-ttft-ms (those given);
  goodput = output tokens/s of the requests that meet it.
- tokens/s/GPU = all output tokens / (last finish − first arrival) / target devices;
  tokens/s/user = mean over requests of 1 / TPOT_i.
- mean D = mean draft length over decode steps (the step time series has D, batch, AL and step seconds).
"""

from __future__ import annotations

import numpy as np

from specplan.adaptive.records import CudaGraphs, GraphCost, PolicyRow, PolicyRun, WindowSeries, finite_or_none

PCTS = (50, 90, 99)


def _pct(x: np.ndarray, q: float) -> float:
    x = x[np.isfinite(x)]
    return float(np.percentile(x, q)) if x.size else float("nan")


def request_times(res: PolicyRun, osl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(TPOT seconds, TTFT seconds) per request; TPOT is NaN where OSL = 1."""
    ttft = res.first_token_s - res.arrival_s
    tpot = np.where(osl > 1, (res.finish_s - res.first_token_s) / np.maximum(osl - 1, 1), np.nan)
    return tpot, ttft


def attainment(tpot: np.ndarray, ttft: np.ndarray | None, max_tpot_s: float | None,
               max_ttft_s: float | None) -> np.ndarray | None:
    """Per-request SLO met (booleans), None when no SLO is given; TPOT of OSL-1 requests counts as met."""
    if max_tpot_s is None and max_ttft_s is None:
        return None
    ok = np.ones(tpot.size, dtype=bool)
    if max_tpot_s is not None:
        ok &= ~(tpot > max_tpot_s)
    if max_ttft_s is not None and ttft is not None:
        ok &= ttft <= max_ttft_s
    return ok


def summarize(res: PolicyRun, osl: np.ndarray, devices: float, *, max_tpot_s=None, max_ttft_s=None,
              graphs: GraphCost | None = None) -> PolicyRow:
    """The per-policy row (times in ms)."""
    tpot, ttft = request_times(res, osl)
    s = res.series
    dec = s.batch > 0
    t0 = float(np.min(res.arrival_s))
    dur = float(np.nanmax(res.finish_s)) - t0
    tokens = float(osl.sum())
    ok = attainment(tpot, ttft, max_tpot_s, max_ttft_s)
    tp50, tp90, tp99 = (1e3 * _pct(tpot, q) for q in PCTS)
    tf50, tf90, tf99 = (1e3 * _pct(ttft, q) for q in PCTS)
    return finite_or_none(PolicyRow(
        policy=res.policy, lossy=res.lossy, tpot_p50_ms=tp50, tpot_p90_ms=tp90, tpot_p99_ms=tp99,
        ttft_p50_ms=tf50, ttft_p90_ms=tf90, ttft_p99_ms=tf99,
        tokens_per_s_per_gpu=tokens / dur / devices if dur > 0 else float("nan"),
        tokens_per_s_per_user=float(np.nanmean(1.0 / tpot)) if np.isfinite(tpot).any() else float("nan"),
        slo_attainment=None if ok is None else float(ok.mean()),
        goodput_tokens_per_s=None if ok is None else float(osl[ok].sum()) / dur if dur > 0 else None,
        goodput_requests_per_s=None if ok is None else float(ok.sum()) / dur if dur > 0 else None,
        mean_draft_len=float(s.draft_len[dec].mean()) if dec.any() else 0.0,
        mean_batch=float(np.sum(s.batch[dec] * s.step_s[dec]) / np.sum(s.step_s[dec])) if dec.any() else 0.0,
        mean_acceptance_length=float(np.nanmean(s.al[dec])) if dec.any() else float("nan"),
        duration_s=dur,
        steps=int(s.t_s.size),
        eager_steps=res.eager_steps,
        over_capacity=res.over_capacity,
        fits=not res.over_capacity,  # every request's KV (with the weights) fits the memory
        relaxed_token_fraction=res.relaxed_token_fraction if res.lossy else None,
        cuda_graphs=None if graphs is None else CudaGraphs(graphs.graphs, graphs.capture_s, graphs.memory_bytes / 1e9),
    ))


def window_medians(t_s: np.ndarray, x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Median of the finite `x` whose time `t_s` falls in each window [edges[k], edges[k+1]) (the last window
    closed); NaN for a window with none. One sort, no loop over windows."""
    bins = edges.size - 1
    ok = np.isfinite(x) & np.isfinite(t_s)
    w = np.clip(np.searchsorted(edges, t_s[ok], side="right") - 1, 0, bins - 1)
    v = x[ok]
    order = np.lexsort((v, w))
    v = v[order]
    n = np.bincount(w, minlength=bins)
    start = np.cumsum(n) - n
    lo = np.clip(start + (n - 1) // 2, 0, max(v.size - 1, 0))
    hi = np.clip(start + n // 2, 0, max(v.size - 1, 0))
    if v.size == 0:
        return np.full(bins, np.nan)
    return np.where(n > 0, 0.5 * (v[lo] + v[hi]), np.nan)


def draft_len_series(res: PolicyRun, bins: int = 200, osl: np.ndarray | None = None) -> WindowSeries:
    """D, batch, AL and per-token step time averaged over `bins` equal time windows (for plots and JSON); with
    `osl`, also request_tpot_p50_ms: the median TPOT_i (the table's per-request TPOT) of the requests that
    finish in each window."""
    s = res.series
    t = s.t_s
    if t.size == 0:
        z = np.zeros(0)
        return WindowSeries(z, z, z, z, z, z if osl is not None else None)
    edges = np.linspace(0.0, t[-1], bins + 1)
    idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, bins - 1)
    dec = s.batch > 0
    w = np.where(dec, s.step_s, 0.0)
    wsum = np.bincount(idx, w, bins)
    norm = np.where(wsum > 0, wsum, np.nan)
    d, b, al = (np.bincount(idx, w * np.where(dec, np.nan_to_num(v), 0.0), bins) / norm
                for v in (s.draft_len, s.batch, s.al))
    tp = np.where(dec, s.step_s / np.where(dec, np.nan_to_num(s.al, nan=1.0), 1.0), 0.0)
    tpot_ms = 1e3 * np.bincount(idx, w * tp, bins) / norm
    req = None
    if osl is not None:
        tpot, _ = request_times(res, osl)
        req = 1e3 * window_medians(res.finish_s, tpot, edges)
    keep = wsum > 0  # windows without a decode step (idle, or prefill only) are left out
    return WindowSeries((0.5 * (edges[1:] + edges[:-1]))[keep], d[keep], b[keep], al[keep], tpot_ms[keep],
                        None if req is None else req[keep])

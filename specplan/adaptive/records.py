"""What an adaptive run answers, as frozen records: a simulated policy's requests and steps, its metrics row (a
policy, a bound or a trace row), the time series per window, the run itself. Each is also a read-only mapping over
its fields in order (core/records.Record), so `to_jsonable` writes the dict the run wrote before, key for key."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import ClassVar

import numpy as np

from specplan.core.records import Record, record
from specplan.serving.simulator import StepSeries  # one run's steps, the serving simulator's record


@record(eq=False)
class PolicyRun(Record):
    """One policy simulated over a workload: per-request arrival, first-token and finish times (s), the step
    series, the share of output tokens accepted only by a lossy policy's relaxed test, the steps run without a
    CUDA graph, and whether some request's KV did not fit the memory."""

    policy: str
    lossy: bool
    arrival_s: np.ndarray
    first_token_s: np.ndarray
    finish_s: np.ndarray
    series: StepSeries
    relaxed_token_fraction: float
    eager_steps: int
    over_capacity: bool


@record
class GraphCost(Record):
    """CUDA graphs a policy captures: their count, one-time capture seconds and memory bytes."""

    graphs: int
    capture_s: float
    memory_bytes: float


@record
class CudaGraphs(Record):
    """The CUDA graphs of a policy row (JSON): count, capture seconds, memory (GB)."""

    graphs: int
    capture_s: float
    memory_gb: float


@record
class PolicyRow(Record):
    """The per-policy metrics of a request-level run (times in ms; docs in adaptive/metrics.py); a lossy policy's
    relaxed token share and the CUDA graphs only where known."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("relaxed_token_fraction", "cuda_graphs")
    bound: ClassVar[bool] = False

    policy: str
    lossy: bool
    tpot_p50_ms: float | None
    tpot_p90_ms: float | None
    tpot_p99_ms: float | None
    ttft_p50_ms: float | None
    ttft_p90_ms: float | None
    ttft_p99_ms: float | None
    tokens_per_s_per_gpu: float | None
    tokens_per_s_per_user: float | None
    slo_attainment: float | None
    goodput_tokens_per_s: float | None
    goodput_requests_per_s: float | None
    mean_draft_len: float | None
    mean_batch: float | None
    mean_acceptance_length: float | None
    duration_s: float | None
    steps: int
    eager_steps: int
    over_capacity: bool
    fits: bool
    relaxed_token_fraction: float | None = None
    cuda_graphs: CudaGraphs | None = None


@record
class BoundRow(Record):
    """The oracle / clairvoyant bound of a request-level run in the shape of a policy row: TPOT and TTFT percentiles
    (ms) lower bounds, tokens/s and SLO attainment upper bounds, and the largest batch the run can reach."""

    policy: str
    lossy: bool
    bound: bool
    tpot_p50_ms: float | None
    tpot_p90_ms: float | None
    tpot_p99_ms: float | None
    ttft_p50_ms: float | None
    ttft_p90_ms: float | None
    ttft_p99_ms: float | None
    tokens_per_s_per_gpu: float | None
    tokens_per_s_per_user: float | None
    slo_attainment: float | None
    mean_draft_len: float | None
    bound_batch: int


@record
class TraceRow(Record):
    """One policy (or bound) over trace segments: realized and expected tokens/s/user, tokens/s/GPU, TPOT
    percentiles (ms), SLO attainment, mean D, seconds, whether every D fit, the D per iteration; a lossy
    policy's relaxed token share, and the speedup over no speculation once the run has it."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("relaxed_token_fraction", "speedup")

    policy: str
    lossy: bool
    bound: bool
    tokens_per_s_per_user: float | None
    expected_tokens_per_s_per_user: float | None
    tokens_per_s_per_gpu: float | None
    tpot_p50_ms: float | None
    tpot_p90_ms: float | None
    tpot_p99_ms: float | None
    ttft_p50_ms: float | None
    slo_attainment: float | None
    mean_draft_len: float | None
    time_s: float | None
    fits: bool
    chosen_d: np.ndarray
    relaxed_token_fraction: float | None = None
    speedup: float | None = None


@record(eq=False)
class WindowSeries(Record):
    """A run's steps averaged over equal time windows (for plots, CSV and JSON): window mid time (s), D, decode
    batch, AL, step time / AL (ms), and the median TPOT (ms) of the requests finishing in the window where asked."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("request_tpot_p50_ms",)

    t_s: np.ndarray
    draft_len: np.ndarray
    batch: np.ndarray
    al: np.ndarray
    tpot_ms: np.ndarray
    request_tpot_p50_ms: np.ndarray | None = None


@record(eq=False)
class RequestsRun(Record):
    """Policies compared over one request workload: the model, hardware and engine ids, the requests and where
    they came from, a row per policy, the window series per simulated policy, and the step costs (StepCosts)."""

    mode: str
    model: str
    hardware: str
    engine: str
    requests: int
    source: str | None
    policies: list
    series: dict
    costs: object


@record(eq=False)
class TraceRun(Record):
    """Policies compared over trace segments: a row per policy and the context (tokens)."""

    mode: str
    policies: list
    context_len: int


def finite_or_none(row: Record) -> Record:
    """NaN (a metric that is not defined, e.g. TPOT when every OSL is 1) as None: JSON has no NaN."""
    bad = {f.name: None for f in fields(row) if isinstance(v := getattr(row, f.name), float) and not np.isfinite(v)}
    return replace(row, **bad) if bad else row

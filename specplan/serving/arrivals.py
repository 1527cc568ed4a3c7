"""Request sets for the serving simulator: closed loop, open loop (Poisson or gamma), trace replay, lengths.

- closed loop: C clients start together at 0 and each sends its next request when its last one ends (the
  benchmark harnesses: genai-perf, vLLM's benchmark_serving with --max-concurrency); the simulator releases them;
- open loop: arrivals at a rate, Poisson (exponential gaps) or gamma with a coefficient of variation (bursty:
  cv > 1);
- a trace (serving/traces.py): arrival seconds, lengths and shared prefixes as recorded;
- lengths: one ISL / OSL, or a named distribution (`parse_length_dist`), drawn with a seed;
- prefix hit: a fraction of every prompt found in the prefix cache (`--prefix-hit F`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from specplan.core.records import record
from specplan.core.errors import SpecplanError
from specplan.core.limits import MAX_CONTEXT
from specplan.serving.traces import Trace, cached_prefix_tokens, check_sizes, shared_prefix_tokens

LENGTH_DISTS = {"fixed": 1, "uniform": 2, "normal": 2, "lognormal": 2, "exponential": 1}


@record
class RequestSet:
    """Requests to simulate: prompt / output tokens, cached prefix tokens, arrival seconds (None: closed loop of
    `clients`), per-request acceptance rates (None: drawn), shared-prefix KV tokens, where they came from."""

    isl: np.ndarray
    osl: np.ndarray
    cached_tokens: np.ndarray
    arrival_s: np.ndarray | None = None
    clients: int | None = None
    alpha: np.ndarray | None = None
    shared_kv_tokens: float = 0.0
    source: str = ""
    start: str = "benchmark"  # closed loop: "benchmark", "together" or "steady" (closed_loop)

    @property
    def n(self) -> int:
        """Number of requests."""
        return int(self.isl.size)


def parse_length_dist(text: str, flag: str) -> tuple[str, tuple[float, ...]]:
    """'fixed:N' | 'uniform:LO,HI' | 'normal:MEAN,SD' | 'lognormal:MEDIAN,SIGMA' | 'exponential:MEAN' (tokens) ->
    (kind, params); one line naming the flag otherwise."""
    kind, _, rest = str(text).strip().partition(":")
    want = "fixed:N, uniform:LO,HI, normal:MEAN,SD, lognormal:MEDIAN,SIGMA or exponential:MEAN"
    try:
        args = tuple(float(x) for x in rest.split(",") if x.strip())
    except ValueError:
        raise SpecplanError(f"{flag}: cannot read '{text}' (expected {want})") from None
    if kind not in LENGTH_DISTS or len(args) != LENGTH_DISTS[kind]:
        raise SpecplanError(f"{flag}: expected {want}, got '{text}'")
    if not all(np.isfinite(args)) or args[0] <= 0 or (len(args) > 1 and args[1] < 0):
        raise SpecplanError(f"{flag}: parameters must be finite, the first > 0 and the second >= 0, got '{text}'")
    if kind == "uniform" and args[1] < args[0]:
        raise SpecplanError(f"{flag}: uniform needs LO <= HI, got '{text}'")
    return kind, args


def draw_lengths(dist: tuple[str, tuple[float, ...]], n: int, seed: int) -> np.ndarray:
    """n whole token counts >= 1 from a parsed length distribution (capped at the longest context)."""
    kind, a = dist
    rng = np.random.default_rng(seed)
    if kind == "fixed":
        x = np.full(n, a[0])
    elif kind == "uniform":
        x = rng.uniform(a[0], a[1], n)
    elif kind == "normal":
        x = rng.normal(a[0], a[1], n)
    elif kind == "lognormal":
        x = a[0] * np.exp(rng.normal(0.0, a[1], n))
    else:
        x = rng.exponential(a[0], n)
    return np.clip(np.round(x), 1, MAX_CONTEXT).astype(np.int64)


def lengths(value: int, dist: tuple | None, n: int, seed: int) -> np.ndarray:
    """n token counts: `value` each, or drawn from `dist`."""
    return np.full(n, int(value), dtype=np.int64) if dist is None else draw_lengths(dist, n, seed)


def open_loop_arrivals(rate_per_s: float, n: int, seed: int, cv: float = 1.0) -> np.ndarray:
    """Arrival seconds of n requests at `rate_per_s`: Poisson (cv 1) or gamma gaps with coefficient of variation
    cv (shape 1/cv², mean 1/rate; cv > 1 is bursty)."""
    if not (np.isfinite(rate_per_s) and rate_per_s > 0):
        raise SpecplanError(f"request rate (--request-rate): must be > 0 requests/s, got {rate_per_s:g}")
    if not (np.isfinite(cv) and cv > 0):
        raise SpecplanError(f"burstiness (--arrival-cv): must be > 0, got {cv:g}")
    rng = np.random.default_rng([seed, 1])
    shape = 1.0 / cv ** 2
    return np.cumsum(rng.gamma(shape, 1.0 / (rate_per_s * shape), n))


CLIENT_STARTS = ("benchmark", "together", "steady")


def closed_loop(isl: np.ndarray, osl: np.ndarray, clients: int, start: str = "benchmark") -> RequestSet:
    """C clients releasing the requests in order. "together": all start at 0 and (with equal lengths) stay in
    lockstep; "steady": their first requests spread evenly over one request's latency (a settled loop);
    "benchmark": the first round together, the later rounds settled (serving/sim_serving.py)."""
    if clients < 1:
        raise SpecplanError(f"concurrency (--concurrency): must be >= 1 client, got {clients}")
    if start not in CLIENT_STARTS:
        raise SpecplanError(f"client start: must be one of {', '.join(CLIENT_STARTS)}, got '{start}'")
    check_sizes(isl.size, float(osl.sum()), "workload")
    return RequestSet(isl, osl, np.zeros(isl.size, dtype=np.int64), None, int(clients), start=start)


def open_loop(isl: np.ndarray, osl: np.ndarray, rate_per_s: float, seed: int, cv: float = 1.0) -> RequestSet:
    """Requests arriving at a rate (Poisson, or gamma at cv)."""
    check_sizes(isl.size, float(osl.sum()), "workload")
    return RequestSet(isl, osl, np.zeros(isl.size, dtype=np.int64), open_loop_arrivals(rate_per_s, isl.size, seed, cv))


def from_trace(trace: Trace) -> RequestSet:
    """A trace's requests as recorded, with the shared prefixes it names found in the prefix cache."""
    return RequestSet(trace.isl, trace.osl, cached_prefix_tokens(trace), trace.arrival_s, None, trace.alpha,
                      shared_prefix_tokens(trace), trace.source)


def with_prefix_hit(req: RequestSet, fraction: float) -> RequestSet:
    """Every prompt finds ⌊fraction x ISL⌋ tokens in the prefix cache (at least one token is computed), a shared
    prefix stored once (the largest)."""
    if not (np.isfinite(fraction) and 0.0 <= fraction < 1.0):
        raise SpecplanError(f"prefix hit (--prefix-hit): must be a fraction in [0, 1), got {fraction:g}")
    hit = np.minimum(np.floor(fraction * req.isl), req.isl - 1).astype(np.int64)
    return replace(req, cached_tokens=np.maximum(req.cached_tokens, hit),
                   shared_kv_tokens=max(req.shared_kv_tokens, float(hit.max(initial=0))))


def synthetic_chat_trace(n: int = 300, rate_per_s: float = 4.0, seed: int = 39) -> dict[str, np.ndarray]:
    """Columns of the shipped example trace (specplan/data/traces/synthetic_chat.csv): Poisson arrivals at
    `rate_per_s`; each request one of 4 system prompts (prefix_id sys0-sys3, 512-2048 tokens) followed by a
    user turn of lognormal length (median 600 tokens, sigma 0.8), output lognormal (median 250, sigma 0.6).
    Synthetic: no measured trace's numbers."""
    rng = np.random.default_rng(seed)
    arrival = np.round(open_loop_arrivals(rate_per_s, n, seed), 4)
    sys_len = np.array([512, 1024, 1536, 2048])
    k = rng.integers(0, 4, n)
    user = draw_lengths(("lognormal", (600.0, 0.8)), n, seed + 1)
    osl = np.minimum(draw_lengths(("lognormal", (250.0, 0.6)), n, seed + 2), 4096)
    return {"arrival_s": arrival, "isl": sys_len[k] + np.minimum(user, 8192), "osl": osl,
            "prefix_id": np.array([f"sys{j}" for j in k]), "prefix_len": sys_len[k]}

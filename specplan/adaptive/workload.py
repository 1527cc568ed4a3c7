"""Workloads for the adaptive simulator: requests (arrival, ISL, OSL, acceptance) and the `--trace` shorthand.

A request workload is three arrays in arrival order plus each request's acceptance law:
- Poisson arrivals at a rate (or all at t = 0 for a closed loop), fixed ISL / OSL, or a CSV with the columns
  `arrival_s, isl, osl` and optionally `alpha` (that request's acceptance rate).
- Acceptance per request: a rate α_i drawn from a distribution (`--acceptance-dist`), optionally drifting
  linearly over the request's output (`--acceptance-drift`), or one per-position vector p_1..p_n for all.
Bad input is one line naming the row and column (rows count data rows from 1, the header is row 0).
"""

from __future__ import annotations

import csv
from dataclasses import field
from pathlib import Path

import numpy as np

from specplan.core.records import record
from specplan.core.errors import SpecplanError
from specplan.serving.traces import MAX_OUTPUT_TOKENS, MAX_REQUESTS, REQUIRED, check_sizes  # noqa: F401  one reader
from specplan.speculation.acceptance import check_rate


@record
class Workload:
    """Requests in arrival order: arrival seconds, input and output tokens, acceptance rate per request."""

    arrival_s: np.ndarray
    isl: np.ndarray
    osl: np.ndarray
    alpha: np.ndarray  # per-request acceptance rate (ignored when `per_position` is set)
    drift: float = 0.0  # α changes linearly by this much from the first to the last output token
    per_position: tuple[float, ...] = ()  # p_1..p_n for every request (replaces α)
    closed_loop: int | None = None  # concurrency of a closed loop (arrivals released as requests finish)
    source: str = ""
    meta: dict = field(default_factory=dict, compare=False)

    @property
    def n(self) -> int:
        """Number of requests."""
        return int(self.arrival_s.size)


def poisson_arrivals(rate_per_s: float, n: int, seed: int) -> np.ndarray:
    """Arrival seconds of n requests of a Poisson process at `rate_per_s` (the first at its first gap)."""
    if not (rate_per_s > 0):
        raise SpecplanError(f"--request-rate: must be > 0 requests/s, got {rate_per_s:g}")
    rng = np.random.default_rng([seed, 1])
    return np.cumsum(rng.exponential(1.0 / rate_per_s, n))


def synthetic(n: int, isl: int, osl: int, *, rate_per_s: float | None = None, concurrency: int | None = None,
              seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(arrival_s, isl, osl) of n equal requests: Poisson at `rate_per_s`, or all at 0 for a closed loop."""
    for name, v, low in (("--requests", n, 1), ("--isl", isl, 1), ("--osl", osl, 1)):
        if v < low:
            raise SpecplanError(f"{name}: must be >= {low}, got {v}")
    if (rate_per_s is None) == (concurrency is None):
        raise SpecplanError("workload: give exactly one of --request-rate or --concurrency")
    if concurrency is not None and concurrency < 1:
        raise SpecplanError(f"--concurrency: must be >= 1, got {concurrency}")
    check_sizes(n, float(n) * osl, "workload")
    arr = np.zeros(n) if concurrency is not None else poisson_arrivals(rate_per_s, n, seed)
    return arr, np.full(n, int(isl)), np.full(n, int(osl))


def read_workload_csv(path: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """(arrival_s, isl, osl, alpha or None) from a trace (CSV or JSONL: serving/traces.py, the one reader)."""
    from specplan.serving.traces import read_trace

    t = read_trace(path)
    return t.arrival_s, t.isl, t.osl, t.alpha


def parse_acceptance_dist(spec: str) -> tuple[str, tuple[float, ...]]:
    """'0.8' | 'fixed:0.8' | 'beta:A,B' | 'uniform:LO,HI' | 'normal:MEAN,SD' | 'pos:0.9/0.8/0.7' -> (kind, args)."""
    s = str(spec).strip()
    kind, _, rest = s.partition(":")
    if not rest:
        kind, rest = "fixed", s
    try:
        args = tuple(float(x) for x in rest.replace("/", ",").split(",") if x.strip())
    except ValueError:
        raise SpecplanError(f"--acceptance-dist: cannot read '{spec}' (0.8, beta:A,B, uniform:LO,HI, "
                            f"normal:MEAN,SD or pos:P1/P2/...)") from None
    need = {"fixed": 1, "beta": 2, "uniform": 2, "normal": 2}
    if kind == "pos":
        if not args:
            raise SpecplanError(f"--acceptance-dist: pos needs probabilities, e.g. pos:0.9/0.8, got '{spec}'")
        for i, a in enumerate(args, 1):
            check_rate(a, where=f"--acceptance-dist p_{i}")
        return kind, args
    if kind not in need or len(args) != need[kind]:
        raise SpecplanError(f"--acceptance-dist: expected 0.8, beta:A,B, uniform:LO,HI, normal:MEAN,SD or "
                            f"pos:P1/P2/..., got '{spec}'")
    if kind == "fixed":
        check_rate(args[0], where="--acceptance-dist")
    elif kind == "beta" and not (args[0] > 0 and args[1] > 0):
        raise SpecplanError(f"--acceptance-dist: beta parameters must be > 0, got '{spec}'")
    elif kind == "uniform" and not (0 <= args[0] <= args[1] <= 1):
        raise SpecplanError(f"--acceptance-dist: uniform needs 0 <= LO <= HI <= 1, got '{spec}'")
    elif kind == "normal" and not (args[1] >= 0 and 0 <= args[0] <= 1):
        raise SpecplanError(f"--acceptance-dist: normal needs MEAN in [0, 1] and SD >= 0, got '{spec}'")
    return kind, args


def draw_alpha(kind: str, args: tuple[float, ...], n: int, seed: int) -> np.ndarray:
    """Per-request acceptance rates from a parsed distribution (clipped to [0, 1])."""
    rng = np.random.default_rng([seed, 2])
    if kind == "fixed":
        return np.full(n, args[0])
    if kind == "beta":
        return rng.beta(args[0], args[1], n)
    if kind == "uniform":
        return rng.uniform(args[0], args[1], n)
    return np.clip(rng.normal(args[0], args[1], n), 0.0, 1.0)


def parse_drift(spec: str | None) -> float:
    """'-0.3': α moves by −0.3 from a request's first to its last output token (clipped to [0, 1])."""
    if spec is None:
        return 0.0
    try:
        v = float(spec)
    except ValueError:
        raise SpecplanError(f"--acceptance-drift: expected a change of α over the request such as -0.2, "
                            f"got '{spec}'") from None
    if not (-1.0 <= v <= 1.0):
        raise SpecplanError(f"--acceptance-drift: must be in [-1, 1], got {spec}")
    return v


def build_workload(arrival_s, isl, osl, *, alpha=None, dist: str | None = None, drift: str | None = None,
                   concurrency: int | None = None, seed: int = 0, source: str = "") -> Workload:
    """A Workload from arrays and acceptance options (a CSV alpha column wins over the distribution)."""
    n = int(np.asarray(arrival_s).size)
    pos: tuple[float, ...] = ()
    if alpha is None:
        if dist is None:
            raise SpecplanError("acceptance: give --acceptance-rate A, --acceptance-dist SPEC, or an alpha column")
        kind, args = parse_acceptance_dist(dist)
        if kind == "pos":
            pos, alpha = args, np.full(n, np.nan)
        else:
            alpha = draw_alpha(kind, args, n, seed)
    d = parse_drift(drift)
    if pos and d:
        raise SpecplanError("--acceptance-drift: not defined with a per-position acceptance (pos:...)")
    return Workload(np.asarray(arrival_s, float), np.asarray(isl, np.int64), np.asarray(osl, np.int64),
                    np.asarray(alpha, float), d, pos, concurrency, source)


def ramp_workload(n: int, rate_start: float, rate_end: float, alpha_start: float, alpha_end: float,
                  isl: int, osl: int, concentration: float = 50.0, seed: int = 0) -> dict[str, np.ndarray]:
    """Columns of a CSV whose arrival rate rises linearly over the requests while the mix shifts from requests
    of acceptance `alpha_start` to requests of `alpha_end` (request k is of the second kind with probability
    k / (n − 1), e.g. code-like turning into chat-like traffic); each α ~ Beta(mean · c, (1 − mean) · c)."""
    rng = np.random.default_rng([seed, 3])
    frac = np.arange(n) / max(n - 1, 1)
    rate = rate_start + (rate_end - rate_start) * frac
    arrival = np.cumsum(rng.exponential(1.0 / rate))
    mean = np.where(rng.random(n) < frac, alpha_end, alpha_start)
    alpha = rng.beta(mean * concentration, (1.0 - mean) * concentration)
    return {"arrival_s": np.round(arrival, 4), "isl": np.full(n, isl), "osl": np.full(n, osl),
            "alpha": np.round(alpha, 4)}


def write_workload_csv(path: str | Path, cols: dict[str, np.ndarray]) -> None:
    """Write workload columns (arrival_s, isl, osl[, alpha]) as a CSV."""
    names = list(cols)
    with Path(path).open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(names)
        w.writerows(zip(*(cols[c].tolist() for c in names)))


@record
class Segment:
    """`--trace` shorthand: `iterations` target iterations at acceptance rate `alpha` with `batch` sequences."""

    alpha: float
    batch: int
    iterations: int


def parse_trace(text: str, default_batch: int = 1) -> list[Segment]:
    """Parse 'alpha[@batch]xITER,...' e.g. '0.9@8x300,0.5@32x300' into segments."""
    segs = []
    for i, part in enumerate(p.strip() for p in text.split(",") if p.strip()):
        try:
            head, iters = part.split("x")
            alpha, _, batch = head.partition("@")
            seg = Segment(float(alpha), int(batch) if batch else default_batch, int(iters))
        except ValueError:
            raise SpecplanError(f"trace[{i}]: expected 'alpha[@batch]xITERATIONS', got '{part}'") from None
        check_rate(seg.alpha, where=f"trace[{i}].alpha")
        if seg.batch < 1 or seg.iterations < 1:
            raise SpecplanError(f"trace[{i}]: batch and iterations must be >= 1, got '{part}'")
        segs.append(seg)
    if not segs:
        raise SpecplanError("trace: no segments")
    if sum(s.iterations * s.batch for s in segs) > MAX_OUTPUT_TOKENS:
        raise SpecplanError(f"trace: more than {MAX_OUTPUT_TOKENS:,} sequence-iterations (the simulator's cap)")
    return segs

"""A serving workload: prompt and output lengths, closed-loop concurrency or open-loop request rate, mode.

    Workload(isl, osl, concurrency=None, request_rate=None, mode="agg", pools=None)
        isl, osl      tokens per request (prompt, generated; osl counts the first token, made by the prefill)
        concurrency   requests in flight (closed loop, as benchmark clients run); or
        request_rate  requests per second arriving (open loop, Poisson)
        mode          "agg" (prefill chunks share engine steps with decoding) | "disagg" (prefill and decode pools)
        pools         (prefill instances x, decode instances y) for disagg, from "xPyD" (None: searched by
                      recommend / pareto; 1P1D where one configuration is evaluated)
        startup_cohort  opt-in (default off): add the engine's start-up term (C - 1)·`startup_prefill_frac`·(one prompt's service) to a
                      closed loop's TTFT, the start-up bunching of a benchmark whose C clients send their first requests together
                      (docs/serving.md); planning leaves it off

`check(model)` raises a one-line SpecplanError for impossible values (OSL 0, ISL beyond the model's context,
concurrency 0, a pools string that does not parse).
"""

from __future__ import annotations

import re

import numpy as np

from specplan.core.records import record
from specplan.core.errors import SpecplanError, brief
from specplan.core.limits import MAX_CONTEXT, REQUEST_RATE, check_number

MODES = ("agg", "disagg")


def parse_pools(text: str | None) -> tuple[int, int] | None:
    """'2P1D' -> (2, 1): prefill and decode instances of a disaggregated deployment; None stays None."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*[pP]\s*(\d+)\s*[dD]\s*", str(text))
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise SpecplanError(f"pools (--pools): expected xPyD with x, y >= 1 (e.g. 1P1D, 2P3D), got '{text}'")
    return int(m.group(1)), int(m.group(2))


def _whole_at_least_one(v) -> bool:
    """True for a whole number >= 1 (an int of any size, or an integral float), never converting a huge int."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    return v >= 1 and (isinstance(v, int) or float(v).is_integer())


@record
class Workload:
    """Request lengths (tokens), load (concurrency or requests/s) and serving mode."""

    isl: int
    osl: int
    concurrency: float | np.ndarray | None = None  # one value or an array (a sweep)
    request_rate: float | np.ndarray | None = None  # one value or an array (a sweep)
    mode: str = "agg"
    pools: tuple[int, int] | None = None  # None: disaggregated serving runs 1P1D, recommend / pareto search them
    startup_cohort: bool = False  # opt-in: add the start-up bunching of a benchmark whose clients start together
    ranks: int = 1  # DP-attention ranks sharing the load: this is one rank's share (per_rank; 1 = the whole load)

    def __post_init__(self):
        for name, what, v in (("isl (--isl)", "prompt", self.isl), ("osl (--osl)", "output", self.osl)):
            if not _whole_at_least_one(v):
                raise SpecplanError(f"{name}: must be a whole number of {what} tokens >= 1, got {brief(v)}")
        if self.mode not in MODES:
            raise SpecplanError(f"mode (--mode): must be agg or disagg, got '{self.mode}'")
        if (self.concurrency is None) == (self.request_rate is None):
            raise SpecplanError("workload: give exactly one of --concurrency or --request-rate")
        if self.concurrency is not None:
            c = np.asarray(self.concurrency, dtype=float)
            if c.size == 0 or not (np.all(np.isfinite(c)) and np.min(c) * self.ranks >= 1):
                bad = np.min(c) if c.size else "nothing"
                raise SpecplanError(f"concurrency (--concurrency): must be >= 1 request, got {bad:g}"
                                    if c.size else "concurrency (--concurrency): got no value")
        if self.request_rate is not None:  # the one rule of a request rate (specplan.core.limits.REQUEST_RATE)
            for r in np.atleast_1d(np.asarray(self.request_rate, dtype=object)).ravel():
                check_number(r, "request rate (--request-rate)", *REQUEST_RATE)
        for name, v in (("isl (--isl)", self.isl), ("osl (--osl)", self.osl)):
            if v > MAX_CONTEXT:
                raise SpecplanError(f"{name}: must be <= {MAX_CONTEXT:,} tokens, got {brief(v)}")
        if self.pools is not None and self.mode != "disagg":
            raise SpecplanError(f"pools (--pools): only with --mode disagg, got mode {self.mode}")

    def per_rank(self, dp: int) -> "Workload":
        """One of `dp` data-parallel attention ranks' share of the load: concurrency or request rate / dp (each
        rank schedules its own requests; the load spread evenly), `ranks` = dp; itself at dp 1."""
        if dp <= 1:
            return self
        import dataclasses

        cut = lambda v: None if v is None else np.asarray(v, dtype=float) / dp  # noqa: E731
        return dataclasses.replace(self, concurrency=cut(self.concurrency), request_rate=cut(self.request_rate),
                                   ranks=self.ranks * dp)

    @property
    def total_concurrency(self):
        """Requests in flight over all the ranks sharing the load (concurrency x ranks; None in an open loop)."""
        return None if self.concurrency is None else np.asarray(self.concurrency, dtype=float) * self.ranks

    def check(self, model) -> None:
        """One-line error if a request does not fit the model's context (prompt + output tokens)."""
        cap = getattr(model, "max_context_len", None)
        if cap is not None and self.isl + self.osl > cap:
            raise SpecplanError(f"isl + osl (--isl, --osl): {self.isl} + {self.osl} = {self.isl + self.osl} tokens "
                                f"exceeds {model.id}'s context of {cap} tokens (max_context_len)")

    @property
    def decode_context(self) -> float:
        """Mean cached tokens of a decoding request: ISL + OSL / 2 (whole tokens, OSL / 2 rounded down)."""
        return float(int(self.isl) + int(self.osl) // 2)


def workload_from_options(isl=None, osl=None, concurrency=None, request_rate=None, mode="agg", pools=None,
                          require_load: bool = True, startup_cohort: bool = False) -> Workload | None:
    """The Workload of the --isl/--osl/--concurrency/--request-rate/--mode/--pools options, or None without
    --isl/--osl (one-line errors for half a workload)."""
    if isl is None and osl is None:
        given = [n for n, v in (("--concurrency", concurrency), ("--request-rate", request_rate),
                                ("--pools", pools)) if v is not None] + (["--mode"] if mode not in (None, "agg") else [])
        if given:
            raise SpecplanError(f"workload: {', '.join(given)} need --isl and --osl")
        return None
    if isl is None or osl is None:
        raise SpecplanError(f"workload: give both --isl and --osl, got only {'--isl' if osl is None else '--osl'}")
    if not require_load and concurrency is None and request_rate is None:
        concurrency = 1.0  # a placeholder load: the caller searches the concurrency
    return Workload(isl, osl, concurrency, request_rate, mode or "agg", parse_pools(pools), bool(startup_cohort))

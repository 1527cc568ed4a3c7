"""The options a planning search takes, as frozen records: the SLA, how answers are ranked, how the serving grid is
searched, a GPU budget."""

from __future__ import annotations

from dataclasses import fields

from specplan.core.errors import SpecplanError
from specplan.core.records import record


@record
class Sla:
    """Latency targets in milliseconds (None: no target): time to first token, time per output token."""

    max_ttft_ms: float | None = None
    max_tpot_ms: float | None = None


@record
class Ranking:
    """How serving points are ranked: objective (tokens-per-gpu | cost | energy), price options
    (planning.cost.PriceOptions: gpu_hour_usd, kwh_usd, pue, tier), rows kept (top)."""

    objective: str = "tokens-per-gpu"
    price: object = None
    top: int = 10


@record
class GridOptions:
    """How a serving search walks its grid: search the concurrency (None: when the workload gives no load), keep
    every point (the pareto grid), the xPyD pools searched (None: all), the best D per concurrency band for the
    winner, and a GPU budget whose replicas prune the refinement (recommend --gpus)."""

    search_concurrency: bool | None = None
    keep_grid: bool = False
    pools: object = None
    d_by_load: bool = True
    budget: int | None = None


@record
class DeploymentSpace:
    """The deployments recommend --gpus searches: the GPU budget, the largest TP (GPUs per node; None: the
    hardware's scale-up domain), the dtypes (None: the checkpoint's) and the modes (agg, disagg)."""

    gpus: int
    gpus_per_node: int | None = None
    dtypes: object = None
    modes: tuple = ("agg", "disagg")


@record
class LoadTarget:
    """A load to serve: output tokens/s in all, tokens/s each user sees, and its request lengths (ISL and OSL), or
    a fixed decode context instead (tokens)."""

    tps: float
    tps_per_user: float
    isl: int | None = None
    osl: int | None = None
    context_len: int | None = None

    @classmethod
    def of_load(cls, request_rate, target_tps, target_tps_per_user, max_tpot_ms, isl: int, osl: int) -> "LoadTarget":
        """The load of `recommend --request-rate R` (R x OSL output tokens/s) or `--target-tps T`, each user at
        --target-tps-per-user or at 1000 / --max-tpot-ms tokens/s."""
        total = request_rate * osl if request_rate is not None else target_tps
        user = target_tps_per_user if target_tps_per_user is not None else (1e3 / max_tpot_ms if max_tpot_ms else None)
        if user is None:
            raise SpecplanError("recommend at a load (--request-rate / --target-tps): give --max-tpot-ms or "
                                "--target-tps-per-user (the per-user rate each replica must hold)")
        return cls(total, user, isl, osl)


@record
class ServingOptions:
    """The deployment's options a serving search passes to the serving model as given (None: not given, the
    model's default): weights and KV dtypes, a disaggregated prefill pool's own layout, and an external draft's
    model, hardware, dtype and KV budget (tokens)."""

    dtype: str | None = None
    kv_dtype: str | None = None
    prefill_layout: object = None
    draft_model: str | None = None
    draft_hardware: object = None
    draft_dtype: str | None = None
    draft_kv_budget: int | None = None

    def given(self) -> dict:
        """The options given, by name, as the serving model's keyword arguments (specplan.serving.api.serve)."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}

"""GPUs, $/hour, $/Mtok and J/token for one load on several devices: `recommend --request-rate R` (or --target-tps
with several --hardware or an --objective), each device answered by the GPU-count search (planning/capacity.py:
aggregated replicas of the best unit, or disaggregated pools) and ranked by the objective."""

from __future__ import annotations

from specplan.core.records import record
from specplan.core.errors import SpecplanError

OBJECTIVE_KEYS = {"cost": "usd_per_mtok", "energy": "joules_per_token", "tokens-per-gpu": "gpus"}


@record
class DeviceAtLoad:
    """One device's answer for the load: whole GPUs, the deployment, and what it costs per hour and per Mtok."""

    hardware: str
    gpus: int | None
    mode: str | None
    layout: str | None
    mechanism: str | None
    draft_len: int | None
    tokens_per_s_per_user: float | None
    gpu_hour_usd: float | None
    usd_per_hour: float | None
    usd_per_mtok: float | None
    joules_per_token: float | None
    why: str | None


@record
class LoadPlan:
    """The devices ranked for one load (best first; those that cannot serve it last)."""

    model: str
    isl: int
    osl: int
    target_tps: float
    target_tps_per_user: float
    objective: str
    devices: tuple[DeviceAtLoad, ...]
    best: DeviceAtLoad | None


def usd_per_mtok(usd_per_hour: float, tokens_per_s: float) -> float:
    """$ per million output tokens of a deployment costing usd_per_hour while it serves tokens_per_s."""
    return usd_per_hour / (tokens_per_s * 3600.0 / 1e6)


def device_at_load(r, gpu_hour_usd: float | None) -> DeviceAtLoad:
    """A DeviceAtLoad from a capacity.search answer (CapacityAnswer) and the device's $/GPU-hour (None: no
    price)."""
    a = r.answer
    if a is None:
        return DeviceAtLoad(r.hardware, None, None, None, None, None, None, gpu_hour_usd, None, None, None,
                            r.infeasible or r.prefill_unreachable or "no deployment meets the targets")
    if a.mode == "agg":
        x = r.aggregated
        layout = f"{x.replicas} x TP {x.tp}"
        user, jt = x.tokens_per_s_per_user, x.joules_per_token
    else:
        x = r.best
        layout = f"{x.prefill_gpus} prefill GPUs + {x.instances} x {x.layout} decode"
        user, jt = x.tokens_per_s_per_user, None
    usd_h = None if gpu_hour_usd is None else a.gpus * gpu_hour_usd
    return DeviceAtLoad(r.hardware, int(a.gpus), a.mode, layout, x.mechanism, int(x.draft_len), user,
                        gpu_hour_usd, usd_h, None if usd_h is None else usd_per_mtok(usd_h, r.target_tps), jt, None)


def rank_devices(rows: list[DeviceAtLoad], objective: str) -> list[DeviceAtLoad]:
    """Rows best first by the objective (fewest GPUs, lowest $/Mtok or J/token); rows without the number last."""
    key = OBJECTIVE_KEYS.get(objective)
    if key is None:
        raise SpecplanError(f"objective: must be one of {', '.join(OBJECTIVE_KEYS)}, got '{objective}'")

    def order(row):
        v = getattr(row, key)
        return (v is None or row.gpus is None, v if v is not None else 0.0, row.gpus or 0)

    return sorted(rows, key=order)


def plan_load(model, hardware: list, *, target_tps: float, target_tps_per_user: float, isl: int, osl: int,
              objective: str = "cost", gpu_hour_usd: float | None = None, price_tier: str | None = None,
              **search_kw) -> LoadPlan:
    """The load on each device (capacity.search with `search_kw`: drafts, dtypes, max_ttft_ms, engine, max_gpus),
    priced and ranked by `objective`."""
    from specplan.planning.capacity import search
    from specplan.planning.options import LoadTarget
    from specplan.planning.cost import check_tier, prices_for

    check_tier(price_tier)
    rows = []
    for hw in hardware:
        r = search(model, hw, load=LoadTarget(target_tps, target_tps_per_user, isl, osl), **search_kw)
        try:
            price = gpu_hour_usd if gpu_hour_usd is not None else prices_for(r.hardware, price_tier).gpu_hour_usd
        except SpecplanError:
            price = None
        rows.append(device_at_load(r, price))
    if objective == "cost" and all(x.usd_per_mtok is None for x in rows if x.gpus):
        raise SpecplanError("objective cost: no device has a price: give --gpu-hour-usd")
    ranked = rank_devices(rows, objective)
    best = next((x for x in ranked if x.gpus is not None and getattr(x, OBJECTIVE_KEYS[objective]) is not None),
                None)
    return LoadPlan(r.model, isl, osl, target_tps, target_tps_per_user, objective, tuple(ranked), best)

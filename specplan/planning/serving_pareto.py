"""The serving Pareto grid: every device, TP and mode priced over concurrency, mechanism and D
(recommend_serving.serving_grid), its frontier and its energy frontier (`specplan pareto --isl/--osl`)."""

from __future__ import annotations

import dataclasses
import time

from specplan.core.records import record


@record
class ServingPareto:
    """A serving grid (pandas, one row per configuration), its frontier (overall and per device and mode), the energy
    frontier (None without a power model), the TPs swept per device, and CPU seconds per phase."""

    grid: object
    frontier: object
    energy_frontier: object
    tps_by_hardware: dict
    grid_cpu_s: float
    frontier_cpu_s: float


def serving_pareto(model, hardware: list, workload, tps: list[int] | None, modes: list[str], grid_kw: dict) -> ServingPareto:
    """Price the serving grid of `model` (a profile) on each of `hardware` (profiles) at the given TPs (else 1, 2, 4,
    8 where the heads divide and the scale-up domain holds them: planning.sweep.tp_choices) and modes;
    `grid_kw` are recommend_serving.serving_grid's options (engine, mechanisms, acceptance, SLA, ...)."""
    import pandas as pd

    from specplan.planning.frontier import frontier_mask, serving_frontier
    from specplan.planning.recommend_serving import serving_grid
    from specplan.planning.sweep import tp_choices

    parts, swept = [], {}
    t0 = time.process_time()
    for hw in hardware:
        swept[hw.id] = tp_choices(model, hw, tps)
        for tp in swept[hw.id]:
            for mode in modes:
                w = dataclasses.replace(workload, mode=mode, pools=workload.pools if mode == "disagg" else None)
                g = serving_grid(model, hw, w, tp=tp, **grid_kw)
                g.insert(0, "mode", mode)
                g.insert(0, "tp", tp)
                g.insert(0, "hardware", hw.id)
                parts.append(g)
    df = pd.concat(parts, ignore_index=True)
    t1 = time.process_time()
    front = serving_frontier(df)
    ok = df[df["meets_sla"]]
    e_front = None
    if "joules_per_token" in ok:  # the energy frontier: fewest J/token at each tokens/s/user or faster
        e_front = ok[frontier_mask(ok["tokens_per_s_per_user"].to_numpy(), -ok["joules_per_token"].to_numpy())]
        e_front = e_front.sort_values("tokens_per_s_per_user")
    return ServingPareto(df, front, e_front, swept, t1 - t0, time.process_time() - t1)

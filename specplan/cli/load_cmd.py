"""recommend at a load on several devices (`--request-rate R` or `--target-tps T` with --isl/--osl): GPUs, $/hour,
$/Mtok and J/token per device, ranked by --objective (specplan.planning.load_plan)."""

from __future__ import annotations

from dataclasses import asdict

import typer

from specplan.cli.output import print_json, table


def _cell(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def print_load_plan(plan, request_rate, json_out: bool) -> None:
    """The ranked devices of a LoadPlan as a table (or JSON); exit 1 when no device serves the load."""
    if json_out:
        out = asdict(plan)
        out["request_rate"] = request_rate
        print_json(out)
        if plan.best is None:
            raise typer.Exit(1)
        return
    load = f"{request_rate:g} requests/s x OSL {plan.osl}" if request_rate is not None else "the load"
    print(f"{plan.model}: {load} = {plan.target_tps:,.0f} output tokens/s, >= {plan.target_tps_per_user:g} "
          f"tokens/s/user, ISL {plan.isl}; ranked by {plan.objective}")
    rows = [[x.hardware, _cell(x.gpus, "d"), x.layout or "-",
             f"{x.mechanism} D = {x.draft_len}" if x.mechanism else "-", _cell(x.tokens_per_s_per_user, ".1f"),
             _cell(x.gpu_hour_usd, ".2f"), _cell(x.usd_per_hour, ".2f"), _cell(x.usd_per_mtok, ".4f"),
             _cell(x.joules_per_token, ".3f"), x.why or ""] for x in plan.devices]
    print(table(rows, ["hardware", "GPUs", "deployment", "mechanism", "tok/s/user", "$/GPU-hour", "$/hour",
                       "$/Mtok", "J/token", "why not"]))
    if plan.best is None:
        print("infeasible: no device serves the load (each row says why)")
        raise typer.Exit(1)
    b = plan.best
    gpus = f"{b.gpus} GPU{'' if b.gpus == 1 else 's'}"
    print(f"best: {b.hardware}, {gpus} ({b.layout}, {b.mechanism} D = {b.draft_len})"
          + (f", ${b.usd_per_hour:.2f}/hour, ${b.usd_per_mtok:.4f}/Mtok" if b.usd_per_hour is not None else ""))
    print("note: $/Mtok divides the deployment's $/hour by the load's output tokens (GPUs are whole, so spare "
          "capacity is paid for); prices: specplan/planning/prices.yaml unless --gpu-hour-usd")

"""`specplan predict`: one speculative configuration (a step, or the serving model at one or several loads)."""

from __future__ import annotations

from typing import List, Optional

import numpy as np
import typer

from specplan.cli.app import app
from specplan.cli.output import print_json
from specplan.cli.parsing import cli_layout, fold_ids, model_context, number_list
from specplan.cli.serving_options import (MECHS, SERVING_HELP, ArrivalCv, Concurrency, DecodeLayout, Engine, Isl,
                                          DSchedule, IslDist, KvOffload, Mode, Osl, OslDist, Pools, PrefillLayout, PrefixHit, RequestRate,
                                          Requests, Simulate, StartupCohort, WorkloadFile, engine_choice)
from specplan.core.errors import SpecplanError


@app.command("predict")
def predict(
    model: str = typer.Option(..., "--model", "-m", help="Target model id or profile YAML path."),
    hardware: str = typer.Option(..., "--hardware", "-H", help="Hardware id or profile YAML path."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel devices of the target."),
    dp: int = typer.Option(1, "--dp", help="Data-parallel attention ranks (docs/parallel.md)."),
    ep: int = typer.Option(1, "--ep", help="Expert-parallel ranks; expert-TP = TP x DP / EP."),
    pp: int = typer.Option(1, "--pp", help="Pipeline stages; GPUs = TP x DP x PP."),
    batch: Optional[int] = typer.Option(None, "--batch", "-b", help="Concurrent sequences (derived with --isl)."),
    context: Optional[str] = typer.Option(None, "--context", "-c", help="KV tokens per sequence; 32k = 32768."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="Weights and GEMM math dtype (default: checkpoint's)."),
    kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="KV-cache dtype; default or auto: the checkpoint's declared KV format, else 16-bit (the engines' auto rule)."),
    mechanism: str = typer.Option("none", "--mechanism", "--mechanisms", callback=fold_ids, help=MECHS + " (one)."),
    draft_len: int = typer.Option(0, "--draft-len", "-D", help="Draft length D (tree: depth)."),
    tree_tokens: Optional[int] = typer.Option(None, "--tree-tokens", help="Verified tokens per step (tree)."),
    draft_model: Optional[str] = typer.Option(None, "--draft-model", help="Draft model / head id or YAML path."),
    draft_hardware: Optional[str] = typer.Option(None, "--draft-hardware", help="Run the draft on this hardware."),
    draft_dtype: Optional[str] = typer.Option(None, "--draft-dtype", help="Dtype of an external draft."),
    draft_kv_budget: Optional[int] = typer.Option(None, "--draft-kv-budget", help="KV tokens the draft reads."),
    acceptance_length: Optional[float] = typer.Option(None, "--acceptance-length", help="Measured AL at --draft-len."),
    acceptance_rate: Optional[float] = typer.Option(None, "--acceptance-rate", help="i.i.d. acceptance rate α."),
    acceptance_per_position: Optional[str] = typer.Option(None, "--acceptance-per-position", help="p1,p2,..."),
    acceptance_profile: Optional[str] = typer.Option(None, "--acceptance-profile", help="Shipped profile id."),
    acceptance: Optional[List[str]] = typer.Option(None, "--acceptance", help="[MECH=]VALUE as in recommend: rate "
                                                   "0.8, AL@D 3.1@4, per-position 0.9/0.8, or a profile id."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Acceptance from published profiles of a dataset "
                                          "or class: code, chat, math, ... (docs/acceptance_datasets.md)."),
    serving: Optional[str] = typer.Option(None, "--serving", help=SERVING_HELP),
    engine: Engine = None,
    mode: Mode = "agg",
    isl: Isl = None,
    osl: Osl = None,
    concurrency: Concurrency = None,
    request_rate: RequestRate = None,
    pools: Pools = None,
    startup_cohort: StartupCohort = False,
    prefill_layout: PrefillLayout = None,
    decode_layout: DecodeLayout = None,
    simulate: Simulate = False, workload_file: WorkloadFile = None, prefix_hit: PrefixHit = None,
    isl_dist: IslDist = None, osl_dist: OslDist = None, requests: Requests = None, arrival_cv: ArrivalCv = None,
    kv_offload: KvOffload = False, d_schedule: DSchedule = None,
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Baseline vs speculative step, AL, speedup, throughputs, memory and guideline diagnostics of one point;
    with --isl/--osl also the serving model (TPOT, TTFT, latency, tokens/s) at --concurrency or --request-rate
    (several concurrencies, 1,8,32: one table of the serving answer at each)."""
    from specplan.speculation.acceptance_spec import cli_acceptance, one_acceptance
    from specplan.planning.predict import predict_serving, predict_serving_sweep, predict_step
    from specplan.planning.simulate import sim_request, simulate_into, trace_workload
    from specplan.speculation.speedup import options_objects
    from specplan.serving.workload import workload_from_options

    from specplan.cli.dataset_option import dataset_acceptance
    from specplan.cli.predict_render import print_point, print_serving, print_sweep

    acc = cli_acceptance(acceptance_length, acceptance_rate, acceptance_per_position, acceptance_profile, draft_len)
    acceptance = dataset_acceptance(dataset, model, [mechanism], acceptance, draft_model, json_out,
                                    given=[mechanism] if acc is not None or acceptance else [])
    if acceptance:
        acc = one_acceptance(acceptance, mechanism, draft_len, given=acc is not None)
    loads = number_list(concurrency, "--concurrency")
    rates = number_list(request_rate, "--request-rate")
    sweep = any(v is not None and len(v) > 1 for v in (loads, rates))
    one = lambda v: None if v is None else (np.asarray(v) if len(v) > 1 else v[0])  # noqa: E731
    wl = workload_from_options(isl, osl, one(loads), one(rates), mode, pools, startup_cohort=startup_cohort)
    cohort = bool(startup_cohort and loads is not None and len(loads) == 1)  # one closed loop: simulated
    sim = sim_request(simulate, workload_file, prefix_hit, isl_dist, osl_dist, requests, arrival_cv,
                      cohort, kv_offload, d_schedule)  # None: not asked
    wl = trace_workload(sim, wl) if sim is not None else wl
    kw = dict(mechanism=mechanism, draft_len=draft_len, acceptance=acc, dtype=dtype, kv_dtype=kv_dtype,
              draft_model=draft_model, draft_hardware=draft_hardware, draft_dtype=draft_dtype,
              draft_kv_budget=draft_kv_budget, tree_tokens=tree_tokens, engine=engine_choice(engine, serving))
    if wl is not None:  # the serving model takes any layout (docs/serving.md): per-pool ones when disaggregated
        from specplan.cli.parsing import serving_layouts

        tp_s, lay_kw, pre = serving_layouts(tp, dp, ep, pp, mode, prefill_layout, decode_layout)
        kw = dict(kw, **lay_kw, **({"prefill_layout": pre} if pre is not None else {}))
    elif prefill_layout or decode_layout:
        raise SpecplanError("--prefill-layout / --decode-layout: the serving model's pools need --isl and --osl")
    if wl is not None and sweep:
        r = predict_serving_sweep(model, hardware, wl, tp=tp_s, **kw)
        if json_out:
            print_json(r)
        else:
            print_sweep(r)
        return
    if wl is not None:
        r = predict_serving(model, hardware, wl, tp=tp_s, **kw)
        if sim is not None:
            r = simulate_into(r, wl, sim, *options_objects(model, hardware, tp=tp_s, **kw)[:2])
    else:
        if batch is None or context is None:
            raise SpecplanError("predict: give --batch and --context, or --isl and --osl with --concurrency or "
                                "--request-rate")
        r = predict_step(model, hardware, tp=tp, batch=batch, context_len=model_context(model, context),
                         layout=cli_layout(tp, dp, ep, pp), **kw)
    if json_out:
        print_json(r)
        return
    if wl is not None:
        print_serving(r["serving"])
        print(f"decode step alone (no prefill, admission or engine host time) at the baseline's decode batch "
              f"{r['batch']}: guidelines and memory")
    print_point(r)

"""`specplan recommend`: parse the options into a workload, acceptance and the answer's identity, call the planning
function of the mode asked (step: planning.recommend; serving: recommend_serving; several devices:
recommend_devices; --gpus: search_deployment; --target-tps: capacity.search; --request-rate: load_plan.plan_load),
and render its answer (cli/recommend_render.py)."""

from __future__ import annotations

from typing import Annotated, List, Optional

import typer

from specplan.cli.app import app
from specplan.cli.output import print_json
from specplan.cli.parsing import cli_layout, comma_list, fold_ids, mech_values, model_context, one_number
from specplan.cli.serving_options import (SERVING_HELP, Concurrency, DecodeLayout, Engine, Isl, Mode, Osl, Pools,
                                          PrefillLayout, RequestRate, StartupCohort, engine_choice)
from specplan.core.errors import SpecplanError
from specplan.planning.sweep import MAX_DRAFT_LEN
from specplan.planning.options import DeploymentSpace, GridOptions, Ranking, Sla
from specplan.speculation.spec import DraftSearch

# recommend's deployment-search and price options, one definition each
Gpus = Annotated[Optional[int], typer.Option(
    "--gpus", help="GPU budget (with --isl/--osl): search TP, replicas, agg/disagg pools, mechanism, D and "
                   "concurrency (a load: --target-tps).")]
GpusPerNode = Annotated[Optional[int], typer.Option(
    "--gpus-per-node", help="Largest TP (default: the hardware's scale-up domain).")]
Dtypes = Annotated[Optional[str], typer.Option(
    "--dtypes", help="Comma list of dtypes --gpus searches (e.g. fp8,bf16; default --dtype).")]
Emit = Annotated[Optional[str], typer.Option(
    "--emit", help="Also print the launch of the best point: vllm | sglang | trtllm | dynamo "
                   "(docs/launch.md); the answer is priced with that engine unless --engine says otherwise.")]
Objective = Annotated[str, typer.Option(
    "--objective", help="Rank by tokens-per-gpu | cost ($/Mtok) | energy (J/token) (with --isl/--osl; "
                        "docs/cost.md).")]
GpuHourUsd = Annotated[Optional[float], typer.Option(
    "--gpu-hour-usd", help="$/GPU-hour (default: InferenceX's all-in TCO for the device, power included).")]
KwhUsd = Annotated[Optional[float], typer.Option(
    "--kwh-usd", help="$/kWh added to a --gpu-hour-usd price that excludes power.")]


@app.command("recommend")
def recommend(
    ctx: typer.Context,
    model: str = typer.Option(..., "--model", "-m", help="Target model id or profile YAML path."),
    hardware: List[str] = typer.Option(..., "--hardware", "-H", help="Hardware id or profile YAML path; repeat to "
                                       "compare devices by --objective (with --isl/--osl)."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel devices of the target."),
    dp: int = typer.Option(1, "--dp", help="Data-parallel attention ranks (docs/parallel.md)."),
    ep: int = typer.Option(1, "--ep", help="Expert-parallel ranks; expert-TP = TP x DP / EP."),
    pp: int = typer.Option(1, "--pp", help="Pipeline stages; GPUs = TP x DP x PP."),
    batch: Optional[int] = typer.Option(None, "--batch", "-b", help="Concurrent sequences (fixed)."),
    target_tps: Optional[float] = typer.Option(None, "--target-tps-per-user", help="Min tokens/s/user; batch free."),
    target_total: Optional[float] = typer.Option(None, "--target-tps", help="Total output tokens/s: find the smallest "
                                                 "GPU count (whole nodes) over layouts, mechanisms and D (docs/parallel.md)."),
    max_gpus: Optional[int] = typer.Option(None, "--max-gpus", help="Largest GPU count --target-tps searches "
                                           "(default 64, or two nodes where a node is larger, e.g. GB200 NVL72: 144)."),
    isl: Isl = None,
    osl: Osl = None,
    context: Optional[str] = typer.Option(None, "--context", "-c", help="Tokens in the KV cache per sequence; 32k = 32768."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="Weights and GEMM math dtype."),
    kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="KV-cache dtype; default or auto: the checkpoint's declared KV format, else 16-bit (the engines' auto rule)."),
    mechanisms: Optional[List[str]] = typer.Option(None, "--mechanisms", "--mechanism", callback=fold_ids,
                                                   help="Comma list or repeat (default: those with acceptance data)."),
    acceptance: Optional[List[str]] = typer.Option(None, "--acceptance", help="mech=value (0.8, 3.1@4, 0.9/0.8, profile)."),
    max_draft_len: int = typer.Option(MAX_DRAFT_LEN, "--max-draft-len", help="Largest D searched (every command's default)."),
    extrapolate: bool = typer.Option(False, "--extrapolate", help="Search past the acceptance data's D range."),
    dataset: Optional[str] = typer.Option(None, "--dataset", help="Acceptance from published profiles of a dataset "
                                          "or class: code, chat, math, ... (docs/acceptance_datasets.md)."),
    draft_model: Optional[str] = typer.Option(None, "--draft-model", help="Draft model for external / heads."),
    draft_hardware: Optional[str] = typer.Option(None, "--draft-hardware", help="Run the draft on this hardware."),
    draft_dtype: Optional[str] = typer.Option(None, "--draft-dtype", help="Dtype of an external draft."),
    draft_kv_budget: Optional[int] = typer.Option(None, "--draft-kv-budget", help="KV tokens the draft reads."),
    serving: Optional[str] = typer.Option(None, "--serving", help=SERVING_HELP),
    engine: Engine = None,
    mode: Mode = "agg",
    concurrency: Concurrency = None,
    request_rate: RequestRate = None,
    pools: Pools = None,
    startup_cohort: StartupCohort = False,
    max_ttft_ms: Optional[float] = typer.Option(None, "--max-ttft-ms", help="SLA: time to first token (ms)."),
    max_tpot_ms: Optional[float] = typer.Option(None, "--max-tpot-ms", help="SLA: time per output token (ms)."),
    gpus: Gpus = None,
    gpus_per_node: GpusPerNode = None,
    dtypes: Dtypes = None,
    prefill_layout: PrefillLayout = None,
    decode_layout: DecodeLayout = None,
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    emit: Emit = None,
    objective: Objective = "tokens-per-gpu",
    gpu_hour_usd: GpuHourUsd = None,
    kwh_usd: KwhUsd = None,
    pue: Optional[float] = typer.Option(None, "--pue", help="Facility PUE (default 1.3 air, 1.1 liquid-cooled GB200)."),
    price_tier: Optional[str] = typer.Option(None, "--price-tier", help="hyperscaler (default) | neocloud | rental_3yr."),
) -> None:
    """Best (mechanism, D) with runners-up, and the guideline that bound the choice; with --isl/--osl (and no
    --target-tps) the best (mechanism, D, concurrency[, pools]) by serving tokens/s/GPU under --max-ttft-ms /
    --max-tpot-ms (docs/serving.md)."""
    acc, mechs, eng, draft_model, ident = _answer_inputs(model, mechanisms, acceptance, dataset, draft_model,
                                                         engine_choice(engine, serving), emit, json_out)
    concurrency = one_number(concurrency, "--concurrency")
    request_rate = one_number(request_rate, "--request-rate")
    hw_list, hardware = list(hardware), hardware[0]
    if gpus is None and isl is not None and (request_rate is not None or (target_total is not None and (
            len(hw_list) > 1 or objective != "tokens-per-gpu"))):
        _recommend_at_load(model, hw_list, isl, osl, request_rate, target_total, target_tps, max_tpot_ms, max_ttft_ms,
                           dict(mechanisms=mechs, acceptance=acc, max_draft_len=max_draft_len, dtype=dtype,
                                kv_dtype=kv_dtype, engine=eng, max_gpus=max_gpus, draft_model=draft_model),
                           objective, gpu_hour_usd, price_tier, json_out)
        return
    if target_total is not None and len(hw_list) > 1:
        raise SpecplanError("recommend --target-tps: give one --hardware")
    if target_total is not None:
        _gpus_for_load(model, hardware, target_total, target_tps, max_gpus, isl, osl, context, mechs, acc,
                       max_draft_len, dtype, kv_dtype, json_out, max_ttft_ms, eng, emit, draft_model, ident)
        return
    if gpus is not None:
        src = ctx.get_parameter_source("mode")
        _check_gpus_search(isl, osl, tp, pools, concurrency, request_rate, hw_list)
        if objective == "energy":  # a fixed budget: tokens/s of the budget and $/Mtok rank alike; J/token does not
            raise SpecplanError("recommend --gpus: ranks by output tokens/s of the budget (on one device the same as "
                                "--objective cost); --objective energy ranks serving points: drop --gpus")
        if objective == "cost" and not json_out:
            print("note: --objective cost with --gpus: one device at one $/GPU-hour, so the most output tokens/s of "
                  "the budget is the lowest $/Mtok (the ranking below)")
        space = _deployment_space(gpus, gpus_per_node, dtypes, dtype,
                                  "auto" if src is None or src.name == "DEFAULT" else mode)
        _search_deployment(model, hardware, (isl, osl), space, eng, DraftSearch(mechs, acc, max_draft_len, extrapolate),
                           Sla(max_ttft_ms, max_tpot_ms), json_out,
                           dict(dtype=dtype, kv_dtype=kv_dtype, draft_model=draft_model, identity=ident), emit)
        return
    if mode == "auto":
        raise SpecplanError("mode (--mode): auto needs --gpus (the deployment search); use agg or disagg")
    wl, tp, serving_kw = _serving_inputs(isl, osl, concurrency, request_rate, mode, pools, startup_cohort,
                                         (tp, dp, ep, pp), (prefill_layout, decode_layout))
    from specplan.planning.cost import price_options

    price = price_options(gpu_hour_usd, kwh_usd, pue, price_tier)
    if _recommend_workload(model, hw_list, wl, tp, eng, DraftSearch(mechs, acc, max_draft_len, extrapolate),
                           Sla(max_ttft_ms, max_tpot_ms), concurrency is None and request_rate is None, json_out,
                           dict(dtype=dtype, kv_dtype=kv_dtype, draft_model=draft_model, identity=ident,
                                **serving_kw), emit, Ranking(objective, price)):
        return
    if context is None:
        raise SpecplanError("recommend: --context is required (or --target-tps with --isl and --osl)")
    _recommend_step(model, hardware, (tp, dp, ep, pp), dict(
        batch=batch, target_tps_per_user=target_tps, context_len=model_context(model, context),
        drafts=DraftSearch(mechs, acc, max_draft_len, extrapolate), dtype=dtype, kv_dtype=kv_dtype,
        draft_model=draft_model, draft_hardware=draft_hardware, draft_dtype=draft_dtype,
        draft_kv_budget=draft_kv_budget, engine=eng), price, emit, json_out, ident)


def _answer_inputs(model, mechanisms, acceptance, dataset, draft_model, eng, emit, json_out) -> tuple:
    """(acceptance by mechanism, mechanisms, engine, draft profile, the answer's identity) from recommend's options;
    --emit checked before any search (an unknown engine, a launch that could not be built)."""
    if emit is not None:
        from specplan.planning.launch.emit import ENGINES as EMIT_ENGINES

        if emit not in EMIT_ENGINES:
            raise SpecplanError(f"--emit: must be one of {', '.join(EMIT_ENGINES)}, got '{emit}'")
    from specplan.cli.dataset_option import dataset_acceptance

    acceptance = dataset_acceptance(dataset, model, comma_list(mechanisms) or None, acceptance, draft_model, json_out)
    acc = mech_values(acceptance, "mechanism=value")
    mechs = comma_list(mechanisms) or None
    ident = {}  # what a saved answer or a launch names (repos, checkpoint dtype): only those two read it
    if draft_model is not None or json_out or emit is not None:
        from specplan.planning.launch.answer import draft_and_identity

        draft_model, ident = draft_and_identity(model, draft_model, mechs)
    if emit is not None and eng is None:  # one engine throughout: --emit E prices with E (Dynamo: its default backend)
        eng = "sglang" if emit == "dynamo" else emit
    if emit is not None:
        from specplan.planning.launch.answer import check_answer_emittable

        check_answer_emittable(emit, model, mechs, acc, draft_model, ident)
    return acc, mechs, eng, draft_model, ident


def _serving_inputs(isl, osl, concurrency, request_rate, mode, pools, startup_cohort, layout: tuple,
                    pool_layouts: tuple) -> tuple:
    """(workload or None, the serving TP, the prefill pool's own layout as a keyword) from recommend's options: the
    serving model takes any layout; a disaggregated prefill pool may have its own."""
    from specplan.serving.workload import workload_from_options

    wl = workload_from_options(isl, osl, concurrency, request_rate, mode, pools, require_load=False,
                               startup_cohort=startup_cohort)
    tp = layout[0]
    if wl is None:
        if any(pool_layouts):
            raise SpecplanError("--prefill-layout / --decode-layout: the serving model's pools need --isl and --osl")
        return wl, tp, {}
    from specplan.cli.parsing import serving_layouts

    tp, lay_kw, pre = serving_layouts(*layout, mode, *pool_layouts)
    if lay_kw:
        from specplan.model.parallel import serving_parallelism

        tp = serving_parallelism(lay_kw["layout"])
    return wl, tp, ({"prefill_layout": pre} if pre is not None else {})


def _recommend_step(model, hardware, layout: tuple, kw: dict, price, emit, json_out, ident) -> None:
    """recommend without a workload: the best (mechanism, D) over batches at one context (planning.recommend),
    annotated with energy and cost, printed or as JSON, with the --emit launch."""
    from specplan.cli.recommend_render import print_recommendation
    from specplan.planning.launch.answer import answer_json, launch_or_error
    from specplan.costs.precision import Dtypes
    from specplan.planning.recommend import priced, recommend as run

    r = priced(run(model, hardware, tp=layout[0], layout=cli_layout(*layout), **kw), model, hardware,
               Dtypes(kw["dtype"], kw["kv_dtype"]), price)
    given = dict(hardware=hardware, kv_dtype=kw["kv_dtype"], dtype=kw["dtype"], draft_model=kw["draft_model"],
                 identity=ident)
    launch, err = launch_or_error(r, emit, given, json_out)
    if json_out:
        print_json(answer_json(r, launch, given))
        return
    print_recommendation(r, kw["batch"], kw["target_tps_per_user"], launch)
    if err is not None:  # the answer stands; only its launch could not be written
        raise err


def _recommend_workload(model, hw_list, wl, tp, eng, drafts: DraftSearch, sla: Sla, search, json_out, kw, emit,
                        ranking: Ranking) -> bool:
    """recommend with a serving workload (one device or several side by side); False when there is none (the
    step recommend answers), after refusing what needs a workload."""
    if len(hw_list) > 1:
        if wl is None:
            raise SpecplanError("recommend: several --hardware are compared with the serving model: give --isl and --osl")
        _recommend_devices(model, hw_list, wl, tp, eng, drafts, sla, search, json_out, kw, ranking)
        return True
    if wl is None and ranking.objective != "tokens-per-gpu":
        raise SpecplanError("recommend: --objective cost|energy ranks serving points: give --isl and --osl")
    if wl is not None:
        _recommend_serving(model, hw_list[0], wl, tp, eng, drafts, sla, search, json_out, kw, emit, ranking)
        return True
    if sla.max_ttft_ms is not None or sla.max_tpot_ms is not None:
        raise SpecplanError("recommend: --max-ttft-ms / --max-tpot-ms need --isl and --osl (the serving model)")
    return False


def _check_gpus_search(isl, osl, tp, pools, concurrency, request_rate, hw_list) -> None:
    """recommend --gpus: one line for what the deployment search cannot take (it searches TP, pools, concurrency)."""
    if isl is None or osl is None:
        raise SpecplanError("recommend --gpus: give --isl and --osl (the serving workload to deploy)")
    if tp != 1 or pools is not None or concurrency is not None or request_rate is not None:
        raise SpecplanError("recommend --gpus: searches TP, pools and concurrency itself; drop --tp / --pools / "
                            "--concurrency / --request-rate")
    if len(hw_list) > 1:
        raise SpecplanError("recommend --gpus: one --hardware (the GPU type to deploy on)")


def _planning_kw(kw: dict) -> dict:
    """The options a planning function takes (what is given, less the answer's identity for the launch)."""
    return {k: v for k, v in kw.items() if v is not None and k != "identity"}


def _answer_out(r: dict, emit, given: dict, json_out: bool, best_key: str = "best"):
    """The --emit launch of an answer (or the error it met, raised after the text answer) and, with --json, the
    answer printed (exit 1 without a best point); returns (launch, error, printed)."""
    from specplan.planning.launch.answer import answer_json, launch_or_error

    launch, err = launch_or_error(r, emit, given, json_out)
    if json_out:
        print_json(answer_json(r, launch, given))
        if r[best_key] is None:
            raise typer.Exit(1)
    return launch, err, json_out


def _recommend_devices(model, hardware, wl, tp, eng, drafts, sla, search, json_out, kw, ranking) -> None:
    """recommend with several --hardware: each device's best point, the one --objective prefers first."""
    from specplan.cli.recommend_render import print_devices
    from specplan.planning.recommend_serving import recommend_devices

    res = recommend_devices(model, hardware, wl, tp=tp, engine=eng, drafts=drafts, sla=sla, ranking=ranking,
                            grid=GridOptions(search_concurrency=search), **_planning_kw(kw))
    if json_out:
        print_json(res)
        if res["best"] is None:
            raise typer.Exit(1)
        return
    print_devices(res, hardware, tp, wl)


def _recommend_at_load(model, hw_list, isl, osl, request_rate, target_total, target_user, max_tpot_ms, max_ttft_ms,
                       kw, objective, gpu_hour_usd, price_tier, json_out) -> None:
    """recommend --request-rate R (or --target-tps over several devices or by cost/energy): the GPUs each device
    needs for the load, priced and ranked (specplan.planning.load_plan)."""
    from specplan.cli.load_cmd import print_load_plan
    from specplan.planning.options import LoadTarget
    from specplan.planning.load_plan import plan_load
    from specplan.planning.recommend import default_mechanisms

    from specplan.costs.precision import Dtypes

    load = LoadTarget.of_load(request_rate, target_total, target_user, max_tpot_ms, isl, osl)
    mechs = kw["mechanisms"] or default_mechanisms(model, kw["acceptance"], kw["draft_model"])
    drafts = DraftSearch([m for m in mechs if m != "none"], kw["acceptance"], kw["max_draft_len"])
    plan = plan_load(model, hw_list, target_tps=load.tps, target_tps_per_user=load.tps_per_user, isl=isl, osl=osl,
                     objective="cost" if objective == "cost" else objective, gpu_hour_usd=gpu_hour_usd,
                     price_tier=price_tier, max_ttft_ms=max_ttft_ms, drafts=drafts,
                     dtypes=Dtypes(kw["dtype"], kw["kv_dtype"]), engine=kw["engine"], max_gpus=kw["max_gpus"])
    print_load_plan(plan, request_rate, json_out)


def _gpus_for_load(model, hardware, target_total, target_user, max_gpus, isl, osl, context, mechs, acc, max_d,
                   dtype, kv_dtype, json_out, max_ttft_ms=None, engine=None, emit=None, draft_model=None,
                   identity=None) -> None:
    """recommend --target-tps: the smallest GPU count for a load (specplan.planning.capacity.search), printed, and
    with --emit the launch of the mode its answer picked."""
    from specplan.cli.recommend_render import print_gpus_for_load
    from specplan.planning.capacity import search
    from specplan.planning.recommend import default_mechanisms

    if target_user is None:
        raise SpecplanError("recommend --target-tps: give --target-tps-per-user too")
    if mechs is None:  # the same default mechanisms as every mode: those with acceptance data (shipped profiles)
        mechs = default_mechanisms(model, acc, draft_model)
    from specplan.costs.precision import Dtypes
    from specplan.planning.options import LoadTarget

    load = LoadTarget(target_total, target_user, isl, osl, None if context is None else model_context(model, context))
    r = search(model, hardware, load=load, max_gpus=max_gpus,
               drafts=DraftSearch([x for x in mechs if x != "none"], acc, max_d), dtypes=Dtypes(dtype, kv_dtype),
               max_ttft_ms=max_ttft_ms, engine=engine)
    given = dict(hardware=hardware, dtype=dtype, kv_dtype=kv_dtype, draft_model=draft_model, identity=identity)
    launch, err, done = _answer_out(r, emit if r.get("answer") else None, given, json_out, "answer")
    if done:
        return
    print_gpus_for_load(r, max_ttft_ms, launch)
    if err is not None:
        raise err


def _deployment_space(gpus, gpus_per_node, dtypes, dtype, mode) -> DeploymentSpace:
    """The deployments --gpus searches, from its options (--mode auto: both modes; --dtypes or --dtype)."""
    if mode not in (None, "auto", "agg", "disagg"):
        raise SpecplanError(f"mode (--mode): must be auto, agg or disagg, got '{mode}'")
    dl = comma_list([dtypes]) if dtypes else None
    if dl and dtype:
        raise SpecplanError("recommend --gpus: give --dtype or --dtypes, not both")
    return DeploymentSpace(gpus, gpus_per_node, dl or [dtype], ("agg", "disagg") if mode in (None, "auto") else (mode,))


def _search_deployment(model, hardware, lengths: tuple, space, eng, drafts, sla, json_out, kw, emit=None) -> None:
    """recommend --gpus: the best deployment of each mode and layout, why the others lost, and with --emit the
    launch of the best one; exit 1 if none."""
    from specplan.cli.recommend_render import print_deployment_search
    from specplan.planning.recommend import default_mechanisms
    from specplan.planning.recommend_serving import search_deployment

    plan_kw = _planning_kw({k: v for k, v in kw.items() if k != "dtype"})
    r = search_deployment(model, hardware, *lengths, space=space, engine=eng, drafts=drafts, sla=sla, **plan_kw)
    launch, err, done = _answer_out(r, emit, dict(hardware=hardware, **kw), json_out)
    if done:
        return
    priced = any(m_ != "none" for m_ in (drafts.mechanisms or default_mechanisms(model, drafts.acceptance,
                                                                                   kw.get("draft_model"))))
    print_deployment_search(r, (sla.max_ttft_ms, sla.max_tpot_ms), space.gpus, lengths, priced, launch)
    if err is not None:  # the search stands; only its launch could not be written
        raise err


def _recommend_serving(model, hardware, wl, tp, eng, drafts, sla, search, json_out, kw, emit, ranking) -> None:
    """recommend --isl/--osl: print the ranked serving configurations; exit 1 (explained) when none meets the SLA."""
    from specplan.cli.recommend_render import print_serving_recommendation
    from specplan.planning.recommend_serving import recommend_serving

    r = recommend_serving(model, hardware, wl, tp=tp, engine=eng, drafts=drafts, sla=sla, ranking=ranking,
                          grid=GridOptions(search_concurrency=search), **_planning_kw(kw))
    launch, err, done = _answer_out(r, emit, dict(hardware=hardware, **kw), json_out)
    if done:
        return
    print_serving_recommendation(r, hardware, tp, (sla.max_ttft_ms, sla.max_tpot_ms), kw.get("prefill_layout"), launch)
    if err is not None:  # the answer stands; only its launch could not be written
        raise err

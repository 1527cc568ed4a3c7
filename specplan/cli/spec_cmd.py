"""`specplan predict` (one speculative configuration) and `specplan recommend` (best mechanism and D)."""

from __future__ import annotations

import json

from typing import Annotated, List, Optional

import numpy as np
import typer

from specplan.cli.app import app
from specplan.cli.serving_options import (ArrivalCv, Concurrency, DecodeLayout, Engine, Isl, IslDist, Mode, Osl,
                                          OslDist, Pools, PrefillLayout, PrefixHit, RequestRate, Requests,
                                          Simulate, StartupCohort, WorkloadFile)
from specplan.cli.parsing import cli_layout, comma_list, fold_ids, model_context, mech_values, number_list, one_number
from specplan.cli.output import print_json, table
from specplan.core.errors import SpecplanError
from specplan.speculation.guidelines import g1_phrase
from specplan.planning.sweep import MAX_DRAFT_LEN

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

MECHS = "none|external|eagle3|mtp|medusa|dflash|dspark|ngram|self"


def layout_phrase(lay: dict) -> str:
    """'tp 8', or 'tp 1 dp 8 ep 8 (expert-TP 1, 8 GPUs)' for a layout beyond TP."""
    if lay["dp"] == lay["ep"] == lay["pp"] == 1:
        return f"tp {lay['tp']}"
    pp = f" pp {lay['pp']}" if lay["pp"] > 1 else ""
    return f"tp {lay['tp']} dp {lay['dp']} ep {lay['ep']}{pp} (expert-TP {lay['expert_tp']}, {lay['gpus']} GPUs)"


SERVING_HELP = "Engine overheads (alias of --engine for one release): roofline | vllm-v1-eagle-2025 | engine id."


def _engine(engine, serving):
    """--engine, or the engine behind a --serving alias (roofline = ideal, vllm-v1-eagle-2025 = vllm)."""
    from specplan.speculation.serving import ALIASES

    if engine is not None and serving is not None:
        from specplan.core.errors import SpecplanError

        raise SpecplanError("engine: give --engine or its old alias --serving, not both")
    return engine if serving is None else ALIASES.get(serving, serving)


def _print_serving(s: dict) -> None:
    load = f"concurrency {s['concurrency']:g}" if "concurrency" in s else f"{s['request_rate']:g} requests/s"
    pools = f" {s['pools']}" if "pools" in s else ""
    lay = (f", prefill {s['prefill_layout']}, decode {s['decode_layout']}" if "decode_layout" in s else
           f", layout {s['layout']}" if "layout" in s else "")
    print(f"serving ({s['mode']}{pools}{lay}, engine {s['engine']}): ISL {s['isl']}, OSL {s['osl']}, {load}")
    rows, where = [], {}
    dash = lambda v: "-" if v is None else v  # noqa: E731
    names = [n for n in ("baseline", "speculative") if n in s]
    for name in names:
        x = s[name]
        rows.append([name, dash(x["tpot_ms"]), dash(x["ttft_ms"]), dash(x.get("ttft_p50_ms")),
                     dash(x.get("ttft_p90_ms")),
                     dash(x["request_latency_ms"]), dash(x["tokens_per_s_per_user"]),
                     dash(x["tokens_per_s_per_gpu"]), x["decode_batch"], "yes" if x["fits"] else "no"])
        if x.get("note"):
            where.setdefault(x["note"], []).append(name)
    print(table(rows, ["", "TPOT ms", "TTFT ms", "TTFT p50 ms", "TTFT p90 ms", "latency ms", "tok/s/user", "tok/s/GPU",
                       "decode batch", "fits"]))
    for n, w in where.items():  # a note of both rows once; one row's note names its row
        print(f"note: {n}" if len(w) == len(names) else f"note: {w[0]}: {n}")
    if s.get("speedup_tpot") is not None:
        print(f"serving speedup: TPOT {s['speedup_tpot']:.3f}, throughput {s['speedup_throughput']:.3f} "
              f"(same load)")


def pays_line(points: list, key: str, label: str) -> str:
    """Where speculation stops paying over a sweep: the speedup at the same load (throughput for a closed loop,
    TPOT for an open loop, whose throughput is the arrival rate either way) against 1, in load order."""
    kind = "throughput" if key == "concurrency" else "TPOT"
    loads = lambda ps: ", ".join(f"{p[key]:g}" for p in ps)  # noqa: E731
    pts = sorted((p for p in points if p.get(f"speedup_{kind.lower()}") is not None), key=lambda p: p[key])
    none = sorted((p for p in points if p.get(f"speedup_{kind.lower()}") is None), key=lambda p: p[key])
    rest = f"; no steady state at {label} {loads(none)}" if none else ""
    if not pts:
        return f"speculation: no {kind} speedup at any listed load{rest}"
    sp = [p[f"speedup_{kind.lower()}"] for p in pts]
    if all(x > 1.0 for x in sp):
        return (f"speculation pays at every listed load with a steady state ({kind} speedup {min(sp):.3f}x-"
                f"{max(sp):.3f}x, the lowest at {label} {pts[int(np.argmin(sp))][key]:g}){rest}")
    lose = [p for p, x in zip(pts, sp) if x <= 1.0]
    win = [p for p, x in zip(pts, sp) if x > 1.0]
    where = f"; it pays at {label} {loads(win)}" if win else ""
    return f"speculation does not pay ({kind} speedup <= 1) at {label} {loads(lose)}{where}{rest}"


def _print_sweep(r: dict) -> None:
    """predict's table over several loads (concurrencies or request rates): baseline and speculative serving at
    each, and the speedups."""
    s = r["serving"]
    spec = r["mechanism"] != "none"
    key, label = ("concurrency", "concurrency") if "concurrency" in s["points"][0] else ("request_rate", "req/s")
    pools = f" {s['points'][0]['pools']}" if "pools" in s["points"][0] else ""
    lay = (f"prefill {s['prefill_layout']}, decode {s['decode_layout']}" if "decode_layout" in s else
           f"layout {s['layout']}" if "layout" in s else f"tp {r['tp']}")
    print(f"{r['model']} on {r['hardware']} ({lay}), engine {s['engine']}, ISL {s['isl']}, OSL {s['osl']}, "
          f"{s['mode']}{pools}; {r['mechanism']} D = {r['draft_len']}; compute {r['precision']['compute']}, "
          f"kv {r['precision']['kv']}")
    if r["acceptance_source"]:
        print(f"acceptance: {r['acceptance_source']}")
    dash = lambda v: "-" if v is None else v  # noqa: E731
    rows, where = [], {}  # each row note once, with the rows it belongs to (all rows: no list)
    for p in s["points"]:
        b = p["baseline"]
        row = [p[key], dash(b["tpot_ms"]), dash(b["ttft_ms"]), dash(b["tokens_per_s_per_user"]),
               dash(b["tokens_per_s_per_gpu"])]
        x = p.get("speculative")
        if x is not None:
            row += [dash(x["tpot_ms"]), dash(x["ttft_ms"]), dash(x["tokens_per_s_per_user"]),
                    dash(x["tokens_per_s_per_gpu"]), dash(p["speedup_tpot"]), dash(p["speedup_throughput"])]
        fits = b["fits"] and (x is None or x["fits"])
        rows.append(row + [b["decode_batch"]] + ([] if x is None else [x["decode_batch"]]) + ["yes" if fits else "no"])
        for side, n in (("baseline", b.get("note")), ("speculative", None if x is None else x.get("note"))):
            if n:
                where.setdefault(n, []).append(f"{label} {p[key]:g} {side}" if spec else f"{label} {p[key]:g}")
    head = [label, "TPOT ms", "TTFT ms", "tok/s/user", "tok/s/GPU"]
    if spec:
        head = ([label, "base TPOT ms", "base TTFT ms", "base tok/s/user", "base tok/s/GPU", "spec TPOT ms",
                 "spec TTFT ms", "spec tok/s/user", "spec tok/s/GPU", "TPOT speedup", "throughput speedup"])
    print(table(rows, head + (["base decode batch", "spec decode batch"] if spec else ["decode batch"]) + ["fits"]))
    if spec:
        print(pays_line(s["points"], key, label))
    n_rows = len(s["points"]) * (2 if spec else 1)
    notes = [n if len(w) == n_rows else f"{'; '.join(w)}: {n}" for n, w in where.items()]
    for n in notes + list(r["notes"]):
        print(f"note: {n}")


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
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Baseline vs speculative step, AL, speedup, throughputs, memory and guideline diagnostics of one point;
    with --isl/--osl also the serving model (TPOT, TTFT, latency, tokens/s) at --concurrency or --request-rate
    (several concurrencies, 1,8,32: one table of the serving answer at each)."""
    from specplan.speculation.acceptance_spec import cli_acceptance, one_acceptance
    from specplan.planning.predict import predict_serving, predict_serving_sweep, predict_step
    from specplan.planning.simulate import sim_request, simulate_into, trace_workload
    from specplan.serving.workload import workload_from_options

    from specplan.cli.dataset_option import dataset_acceptance

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
    sim = sim_request(simulate, workload_file, prefix_hit, isl_dist, osl_dist, requests, arrival_cv)  # None: not asked
    wl = trace_workload(sim, wl) if sim is not None else wl
    kw = dict(mechanism=mechanism, draft_len=draft_len, acceptance=acc, dtype=dtype, kv_dtype=kv_dtype,
              draft_model=draft_model, draft_hardware=draft_hardware, draft_dtype=draft_dtype,
              draft_kv_budget=draft_kv_budget, tree_tokens=tree_tokens, engine=_engine(engine, serving))
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
            _print_sweep(r)
        return
    if wl is not None:
        r = predict_serving(model, hardware, wl, tp=tp_s, **kw)
        r = simulate_into(r, model, hardware, wl, sim, tp_s, kw) if sim is not None else r
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
        _print_serving(r["serving"])
        print(f"decode step alone (no prefill, admission or engine host time) at the baseline's decode batch "
              f"{r['batch']}: guidelines and memory")
    _print_point(r)


def _print_point(r: dict) -> None:
    """predict's plain-text answer for one point: baseline vs speculative, devices, memory, energy, guidelines."""
    print(f"{r['model']} on {r['hardware']} ({layout_phrase(r['layout'])}), batch {r['batch']}, "
          f"context {r['context_len']}; "
          f"{r['mechanism']} D = {r['draft_len']} ({r['verify_tokens']:g} verified "
          f"token{'' if r['verify_tokens'] == 1 else 's'}); "
          f"compute {r['precision']['compute']}, kv {r['precision']['kv']}")
    if r["acceptance_source"]:
        print(f"acceptance: {r['acceptance_source']}")
    lpu = r["hardware_kind"] == "lpu"
    unit = "tok/s/chip" if lpu else "tok/s/GPU"  # per target device (chip on an LPU)
    drafts = r["devices"]["draft"] > 0
    b, s = r["baseline"], r["speculative"]
    rows = [["baseline (D = 0)", b["step_ms"], "-", b["step_ms"], 1.0, b["tokens_per_s_per_user"],
             b["tokens_per_s_per_gpu"]],
            ["speculative", s["step_ms"], s["draft_ms"], s["verify_ms"], r["acceptance_length"],
             r["tokens_per_s_per_user"], r["tokens_per_s_per_gpu"]]]
    head = ["", "iter ms", "draft ms", "verify ms", "AL", "tok/s/user", unit]
    if drafts:
        rows[0].append(b["tokens_per_s_per_gpu"])
        rows[1].append(r["tokens_per_s_per_device"])
        head.append("tok/s/device")
    print(table(rows, head))
    dev = r["devices"]
    if drafts:
        print(f"devices: {dev['target']:g} target + {dev['draft']:g} draft; {unit} divides by the target "
              f"{'chips' if lpu else 'GPUs'} only, tok/s/device by all {dev['target'] + dev['draft']:g} devices")
    elif lpu:
        print(f"devices: {dev['target']:g} target chips; {unit} is per chip")
    mem = r["memory"]
    if lpu:
        where = (f"memory {mem['total_gb']:.2f} GB over {mem['chips']} chips of {mem['chip_sram_gb']:.2f} GB SRAM "
                 f"({mem['capacity_gb']:.2f} GB usable each; the chip count grows with the bytes)")
    else:
        where = (f"memory {mem['total_gb']:.2f} GB of {mem['capacity_gb']:.2f} GB per device "
                 f"(state {mem['state_gb']:.2f}), fits: {str(mem['fits']).lower()}")
    print(f"speedup {r['speedup']:.3f}  (break-even AL {r['break_even_al']:.3f}); {where}")
    en = (r.get("serving") or {}).get("energy") or r.get("energy")
    if en:
        where_e = "serving, prefill included" if (r.get("serving") or {}).get("energy") else "decode steps"
        spec_e = f"; speculative {_energy_phrase(en['speculative'])}" if "speculative" in en else ""
        print(f"energy/cost ({where_e}): baseline {_energy_phrase(en['baseline'])}{spec_e}")
    g = r["guidelines"]
    if g["gemm_compute_bound_applies_to"] == "experts":
        g1 = (f"expert GEMMs {g['moe_regime']} (compute-bound from {g1_phrase(g)}; spec sheet "
              f"{g1_phrase(g, 'gemm_compute_bound_from_d_spec_sheet')}), dense GEMMs {g['gemm_regime']} "
              f"(compute-bound from D = {g['dense_gemm_compute_bound_from_d']}; spec sheet "
              f"{g['dense_gemm_compute_bound_from_d_spec_sheet']})")
    else:
        g1 = (f"verify GEMMs {g['gemm_regime']} (compute-bound from D = {g['gemm_compute_bound_from_d']}; spec sheet "
              f"{g['gemm_compute_bound_from_d_spec_sheet']})")
    tiles = ("attention tiles n/a (LPU)" if lpu else
             f"attention tile D {g['attention_tile_d']}, tile aligned {str(g['tile_aligned']).lower()}")
    print(f"guidelines: G_dev {g['g_dev']}, {tiles}, {g1}, attention share {100 * g['attention_share']:.0f}%, "
          f"draft/target step time {g['rho_time']:.3f} (layer ratio ρ {g['rho']:.4f}, ρD {g['rho_d']:.3f})")
    if r["binding"]["guideline"] != "-":
        print(f"binding at D = {r['draft_len']}: [{r['binding']['guideline']}] {r['binding']['line']}")
    for n in r["notes"]:
        print(f"note: {n}")
    print(TERMS)


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
    from specplan.planning.recommend import recommend as run
    from specplan.serving.workload import workload_from_options

    if emit is not None:  # checked before the search, not after it
        from specplan.planning.launch.emit import ENGINES as EMIT_ENGINES

        if emit not in EMIT_ENGINES:
            raise SpecplanError(f"--emit: must be one of {', '.join(EMIT_ENGINES)}, got '{emit}'")
    from specplan.cli.dataset_option import dataset_acceptance

    acceptance = dataset_acceptance(dataset, model, comma_list(mechanisms) or None, acceptance, draft_model, json_out)
    acc = mech_values(acceptance, "mechanism=value")
    mechs = comma_list(mechanisms) or None
    eng = _engine(engine, serving)
    ident = {}  # what a saved answer or a launch names (repos, checkpoint dtype): only those two read it
    if draft_model is not None or json_out or emit is not None:
        draft_model, ident = _draft_and_identity(model, draft_model, mechs)
    if emit is not None and eng is None:  # one engine throughout: --emit E prices with E (Dynamo: its default backend)
        eng = "sglang" if emit == "dynamo" else emit
    if emit is not None:
        _check_emittable(emit, model, mechs, acc, draft_model, ident)
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
        _search_deployment(model, hardware, isl, osl, gpus, gpus_per_node, dtypes, dtype,
                           "auto" if src is None or src.name == "DEFAULT" else mode, eng, mechs, acc,
                           max_draft_len, extrapolate, max_ttft_ms, max_tpot_ms, json_out,
                           dict(kv_dtype=kv_dtype, draft_model=draft_model, identity=ident), emit)
        return
    if mode == "auto":
        raise SpecplanError("mode (--mode): auto needs --gpus (the deployment search); use agg or disagg")
    wl = workload_from_options(isl, osl, concurrency, request_rate, mode, pools, require_load=False,
                               startup_cohort=startup_cohort)
    serving_kw = {}
    if wl is not None:  # the serving model takes any layout; a disaggregated prefill pool may have its own
        from specplan.cli.parsing import serving_layouts

        tp, lay_kw, pre = serving_layouts(tp, dp, ep, pp, mode, prefill_layout, decode_layout)
        if lay_kw:
            from specplan.model.parallel import serving_parallelism

            tp = serving_parallelism(lay_kw["layout"])
        serving_kw = {"prefill_layout": pre} if pre is not None else {}
    elif prefill_layout or decode_layout:
        raise SpecplanError("--prefill-layout / --decode-layout: the serving model's pools need --isl and --osl")
    price = _price(gpu_hour_usd, kwh_usd, pue, price_tier)
    if _recommend_workload(model, hw_list, wl, tp, eng, mechs, acc, max_draft_len, extrapolate,
                           (max_ttft_ms, max_tpot_ms), concurrency is None and request_rate is None, json_out,
                           dict(dtype=dtype, kv_dtype=kv_dtype, draft_model=draft_model, identity=ident,
                                **serving_kw), emit,
                           objective, price):
        return
    if context is None:
        raise SpecplanError("recommend: --context is required (or --target-tps with --isl and --osl)")
    r = run(model, hardware, tp=tp, batch=batch, target_tps_per_user=target_tps,
            context_len=model_context(model, context), mechanisms=mechs, acceptance=acc, max_draft_len=max_draft_len,
            extrapolate=extrapolate, dtype=dtype,
            kv_dtype=kv_dtype, draft_model=draft_model, draft_hardware=draft_hardware, draft_dtype=draft_dtype,
            draft_kv_budget=draft_kv_budget, engine=eng, layout=cli_layout(tp, dp, ep, pp))
    _annotate_energy(r, model, hardware, dtype, kv_dtype, price)
    given = dict(hardware=hardware, kv_dtype=kv_dtype, dtype=dtype, draft_model=draft_model, identity=ident)
    launch, err = _launch_or_error(r, emit, given, json_out)
    if json_out:
        print_json(_answer_json(r, launch, given))
        return
    _print_recommend(r, batch, target_tps, launch)
    if err is not None:  # the answer stands; only its launch could not be written
        raise err


def _recommend_workload(model, hw_list, wl, tp, eng, mechs, acc, max_draft_len, extrapolate, sla, search,
                        json_out, kw, emit, objective, price) -> bool:
    """recommend with a serving workload (one device or several side by side); False when there is none (the
    step recommend answers), after refusing what needs a workload."""
    max_ttft_ms, max_tpot_ms = sla
    if len(hw_list) > 1:
        if wl is None:
            raise SpecplanError("recommend: several --hardware are compared with the serving model: give --isl and --osl")
        _recommend_devices(model, hw_list, wl, tp, eng, mechs, acc, max_draft_len, extrapolate, max_ttft_ms,
                           max_tpot_ms, search, json_out, kw, objective, price)
        return True
    if wl is None and objective != "tokens-per-gpu":
        raise SpecplanError("recommend: --objective cost|energy ranks serving points: give --isl and --osl")
    if wl is not None:
        _recommend_serving(model, hw_list[0], wl, tp, eng, mechs, acc, max_draft_len, extrapolate, max_ttft_ms,
                           max_tpot_ms, search, json_out, kw, emit=emit, objective=objective, price=price)
        return True
    if max_ttft_ms is not None or max_tpot_ms is not None:
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


def _print_recommend(r: dict, batch, target_tps, launch) -> None:
    """recommend's plain-text answer (no workload): best of each mechanism, runners-up, notes, the binding
    guideline; exit 1 when nothing fits or meets the target."""
    lpu = r["hardware_kind"] == "lpu"
    unit = "tok/s/chip" if lpu else "tok/s/GPU"
    where = (f"batch {batch}" if batch is not None else f"tokens/s/user >= {target_tps:g}" if target_tps is not None
             else f"best {unit} over every batch that fits")
    print(f"{r['model']} on {r['hardware']} ({layout_phrase(r['layout'])}), context {r['context_len']}, {where}")
    if r["best"] is None:
        _ranked_table(r["ranked"], unit, lpu)
        for n in r["notes"]:
            print(f"note: {n}")
        print(f"infeasible: {r['infeasible']}")
        raise typer.Exit(1)
    print(f"best of each mechanism (its best D and batch; ranked by {unit}):")
    _ranked_table(r["per_mechanism"], unit, lpu, why=True)
    if r["runners_up"]:
        print("runners-up (other D):")
        _ranked_table(r["runners_up"], unit, lpu)
    for n in r["notes"]:
        print(f"note: {n}")
    b, g = r["best"], r["guidelines"]
    extra = (f", {b['tokens_per_s_per_device']:.1f} tok/s/device over {b['target_devices']} target + "
             f"{b['draft_devices']} draft devices" if b["draft_devices"] > 0 else "")
    print(f"best: {b['mechanism']} D = {b['draft_len']} at batch {b['batch']} "
          f"(speedup {b['speedup']:.3f}, {b['tokens_per_s_per_gpu']:.1f} {unit}{extra})")
    if "joules_per_token" in b:
        print(f"energy/cost (decode steps): {_energy_phrase(b)}")
    print(f"why: [{r['binding']['guideline']}] {r['binding']['line']}")
    if r.get("near_best"):
        close = ", ".join(f"{x['mechanism']} D = {x['draft_len']} (B {x['batch']}, -{x['below_best_pct']:.1f}%)"
                          for x in r["near_best"])
        tile = [x for x in r["near_best"] if x["draft_len"] == g["attention_tile_d"] and not lpu]
        hint = f"; includes G2's D = {g.get('tile_rows', 128)}/G − 1 = {g['attention_tile_d']}" if tile else ""
        print(f"within 2% of the best (not separable at the model's accuracy): {close}{hint}")
    g2 = ("attention tiles n/a (LPU)" if lpu else f"G2 start D = {g.get('tile_rows', 128)}/G − 1 = {g['attention_tile_d']}")
    print(f"guidelines: G_dev {g['g_dev']} -> {g2} (full attention "
          f"{100 * g['attention_share']:.0f}% of the D = 0 step); G1 {g['g1_line']} (spec-sheet ridge "
          f"{g['ridge_tokens_spec_sheet']:.0f} tokens -> {g1_phrase(g, 'gemm_compute_bound_from_d_spec_sheet')})")
    if not lpu and b["draft_len"] > 0:
        print(f"G2 vs the choice: {g2_relation(b['draft_len'], g['attention_tile_d'], r['binding']['guideline'], g.get('tile_rows', 128))}")
    print(TERMS)
    if launch is not None:
        print(launch["text"])


def _annotate_energy(r: dict, model, hardware, dtype, kv_dtype, price) -> None:
    """Power, J/token, tokens/s/MW and $/Mtok on recommend's rows (decode steps at its context)."""
    from specplan.model.parallel import Layout
    from specplan.planning.cost import annotate_rows
    from specplan.costs.precision import resolve_precision
    from specplan.profiles.registry import load_hardware, load_model

    m, hw = load_model(model), load_hardware(hardware)
    lay = Layout(**{k: r["layout"][k] for k in ("tp", "dp", "ep", "pp")})
    rows = [r.get("best")] + list(r.get("per_mechanism") or []) + list(r.get("runners_up") or []) + list(r["ranked"])
    annotate_rows(rows, m, hw, resolve_precision(m, hw, dtype, kv_dtype), lay, r["context_len"], price)


def _price(gpu_hour_usd, kwh_usd, pue, tier) -> dict:
    """Price options for specplan.planning.cost (only those given)."""
    from specplan.planning.cost import check_tier

    check_tier(tier)
    got = dict(gpu_hour_usd=gpu_hour_usd, kwh_usd=kwh_usd, pue=pue, tier=tier)
    for k in ("gpu_hour_usd", "kwh_usd", "pue"):  # a GPU-hour may cost 0 (owned GPUs: energy only, --kwh-usd)
        if got[k] is not None and not (got[k] >= 0 if k == "gpu_hour_usd" else got[k] > 0):
            raise SpecplanError(f"--{k.replace('_', '-')}: must be {'>=' if k == 'gpu_hour_usd' else '>'} 0, "
                                f"got {got[k]:g}")
    return {k: v for k, v in got.items() if v is not None}


def _energy_phrase(x: dict) -> str:
    """'612 W/GPU, 0.110 J/token, 7.9M tok/s/MW, $0.056/Mtok' of a row (what it has)."""
    if "joules_per_token" not in x:
        return "no power model for this hardware"
    usd = f", ${x['usd_per_mtok']:.3f}/Mtok" if "usd_per_mtok" in x else ""
    return (f"{x['power_w_per_gpu']:.0f} W/GPU, {x['joules_per_token']:.3f} J/token, "
            f"{x['tokens_per_s_per_mw'] / 1e6:.2f}M tok/s per MW{usd}")


def _print_energy(r: dict) -> None:
    """Energy and cost of the best point and of the best no-speculation point (recommend with --isl/--osl)."""
    b = r["best"]
    base = next((x for x in r["ranked"] if x["mechanism"] == "none" and x["feasible"]), None)
    print(f"energy/cost ({r.get('objective', 'tokens-per-gpu')} objective): best {_energy_phrase(b)}")
    if base is not None and b["mechanism"] != "none":
        print(f"  no speculation (D = 0, concurrency {base['concurrency']:g}): {_energy_phrase(base)}")


def _recommend_devices(model, hardware, wl, tp, eng, mechs, acc, max_draft_len, extrapolate, max_ttft_ms,
                       max_tpot_ms, search, json_out, kw, objective, price) -> None:
    """recommend with several --hardware: each device's best point, the one --objective prefers first."""
    from specplan.planning.cost import objective_value
    from specplan.planning.recommend_serving import recommend_serving

    out = []
    for h in hardware:
        r = recommend_serving(model, h, wl, tp=tp, engine=eng, mechanisms=mechs, acceptance=acc,
                              max_draft_len=max_draft_len, extrapolate=extrapolate, max_ttft_ms=max_ttft_ms,
                              max_tpot_ms=max_tpot_ms, search_concurrency=search, objective=objective, price=price,
                              **_planning_kw(kw))
        out.append({"hardware": h, "best": r["best"], "notes": r["notes"]})
    ok = [x for x in out if x["best"] is not None]
    ok.sort(key=lambda x: objective_value(objective, x["best"]), reverse=True)
    res = {"model": model, "objective": objective, "devices": ok + [x for x in out if x["best"] is None],
           "best": ok[0] if ok else None}
    if json_out:
        print_json(res)
        if not ok:
            raise typer.Exit(1)
        return
    rows = [[x["hardware"], x["best"]["mechanism"], x["best"]["draft_len"], x["best"]["concurrency"],
             x["best"]["tokens_per_s_per_gpu"], x["best"].get("power_w_per_gpu", "-"),
             x["best"].get("joules_per_token", "-"), x["best"].get("usd_per_mtok", "-")]
            for x in ok]
    print(f"{model} over {', '.join(hardware)} (tp {tp}), ISL {wl.isl}, OSL {wl.osl}; each device's best by "
          f"{objective}")
    print(table(rows, ["hardware", "mechanism", "D", "concurrency", "tok/s/GPU", "W/GPU", "J/token", "$/Mtok"]))
    for x in out:
        if x["best"] is None:
            print(f"{x['hardware']}: no configuration meets the SLA")
    if not ok:
        raise typer.Exit(1)
    print(f"best by {objective}: {ok[0]['hardware']} ({_energy_phrase(ok[0]['best'])})")


def _recommend_at_load(model, hw_list, isl, osl, request_rate, target_total, target_user, max_tpot_ms, max_ttft_ms,
                       kw, objective, gpu_hour_usd, price_tier, json_out) -> None:
    """recommend --request-rate R (or --target-tps over several devices or by cost/energy): the GPUs each device
    needs for the load, priced and ranked (specplan.planning.load_plan)."""
    from specplan.cli.load_cmd import load_targets, print_load_plan
    from specplan.planning.load_plan import plan_load

    total, user = load_targets(request_rate, target_total, target_user, max_tpot_ms, osl)
    mechs = kw.pop("mechanisms") or _default_mechanisms(model, kw["acceptance"], kw["draft_model"])
    kw.pop("draft_model")
    plan = plan_load(model, hw_list, target_tps=total, target_tps_per_user=user, isl=isl, osl=osl,
                     objective="cost" if objective == "cost" else objective, gpu_hour_usd=gpu_hour_usd,
                     price_tier=price_tier, max_ttft_ms=max_ttft_ms,
                     mechanisms=[m for m in mechs if m != "none"], **kw)
    print_load_plan(plan, request_rate, json_out)


def _draft_and_identity(model: str, draft_model, mechs) -> tuple:
    """(the draft profile the pricing reads, what a saved answer carries to launch: the model's Hugging Face repo and
    checkpoint dtype and the draft's repo) from --model and --draft-model (an id, a YAML or a Hugging Face repo)."""
    from specplan.planning.launch.emit import answer_identity
    from specplan.profiles.registry import load_model
    from specplan.speculation.drafters import resolve_draft

    prof = load_model(model)
    draft = resolve_draft(draft_model, prof, mechs)
    ident = answer_identity(prof, draft)
    if draft.note:
        ident["draft_note"] = draft.note
    return draft.profile, ident


def _check_emittable(emit: str, model: str, mechs, acc: dict, draft_model, ident: dict) -> None:
    """--emit: refuse before the search a launch that could not be built (docs/launch.md)."""
    from specplan.planning.launch.emit import check_emittable
    from specplan.profiles.registry import load_model
    from specplan.speculation.drafters import DraftRef

    prof = load_model(model)
    wanted = mechs if mechs is not None else _default_mechanisms(model, acc, draft_model)
    check_emittable(emit, prof, wanted, DraftRef(draft_model, ident.get("draft_model")))


def _default_mechanisms(model: str, acc: dict, draft_model) -> list[str]:
    """The mechanisms a search takes when none are named: those with acceptance data (shipped profiles or
    --acceptance), as every mode takes them; none (the D = 0 baseline alone) where the model has no data."""
    from specplan.planning.recommend import _mechanisms
    from specplan.profiles.registry import load_model

    try:
        return _mechanisms(load_model(model).id, None, acc, draft_model)
    except SpecplanError:
        return []


def _planning_kw(kw: dict) -> dict:
    """The options a planning function takes (what is given, less the answer's identity for the launch)."""
    return {k: v for k, v in kw.items() if v is not None and k != "identity"}


def _answer_json(r: dict, launch, given: dict) -> dict:
    """The --json answer: the planning answer, what a saved answer needs to launch (kept where the answer has
    its own), and the --emit launch."""
    ident = {k: v for k, v in (given.get("identity") or {}).items() if k not in r and k != "draft_note"}
    out = {**r, **ident}
    return out if launch is None else {**out, "launch": launch}


def _launch_or_error(r: dict, engine, given: dict, json_out: bool):
    """(launch, None), or in text mode (None, the SpecplanError) when the launch cannot be written, so that the
    answer is printed before the one error line (JSON mode raises at once: one document or one error)."""
    try:
        return _launch(r, engine, given), None
    except SpecplanError as exc:
        if json_out:
            raise
        return None, exc


def _launch(r: dict, engine, given: dict) -> dict | None:
    """The --emit launch of an answer as {engine, argv, files, notes, text}; None without --emit or a best point."""
    if engine is None or (r.get("best") is None and not r.get("answer")):
        return None
    from dataclasses import asdict

    from specplan.planning.launch.emit import build, engine_notes, plan_from_answer, render

    ident = given.get("identity") or {}
    rest = {k: v for k, v in given.items() if k != "identity"}
    launch = build(engine, plan_from_answer({**{k: v for k, v in ident.items() if k not in r}, **r}, **rest))
    launch.notes += engine_notes(r.get("engine"), launch.engine, launch.files) + (
        [ident["draft_note"]] if ident.get("draft_note") else [])
    return {**asdict(launch), "text": render(launch)}


TERMS = ("terms: AL = tokens produced per iteration (1 ... 1 + D); G_dev = query heads per KV head on one device; "
         "ridge = GEMM rows B·(1 + D) at which a GEMM turns compute-bound; G1-G5 = the five guidelines "
         "(docs/speculation.md#guidelines-guidelinespy)")


def g2_relation(d: int, tile_d: int, binding: str, tile_rows: int = 128) -> str:
    """One line relating the recommended D to G2's start D = tile_rows/G − 1 (128; MLA kernels 64)."""
    if d < tile_d:
        first = f"[{binding}] binds first" if binding not in ("-", "G2", "G3") else "its AL gain runs out first"
        return (f"D = {d} < {tile_d}: attention would stay within one {tile_rows}-row tile up to D = {tile_d}, but "
                f"{first}")
    if d == tile_d:
        return f"D = {d} = {tile_rows}/G − 1: the last D before the attention step (G2's start D)"
    return (f"D = {d} > {tile_d}: past the first attention tile; the added tile costs less than the AL gained "
            f"(G3: prefer G·(1 + D) a multiple of {tile_rows})")


def _ranked_table(rows: list[dict], unit: str, lpu: bool, why: bool = False) -> None:
    """Rows of recommend (mechanism, D, batch, AL, speedup, throughputs, draft/verify ms[, vs best])."""
    drafts = any(x["draft_devices"] > 0 for x in rows)
    body = [[x["mechanism"], x["draft_len"], x["batch"], x["acceptance_length"], x["speedup"],
             x["tokens_per_s_per_user"], x["tokens_per_s_per_gpu"]]
            + ([x["draft_devices"], x["tokens_per_s_per_device"]] if drafts else [])
            + [1e3 * x["draft_s"], 1e3 * x["verify_s"]]
            + ([x["why_lost"]] if why else ["yes" if x["feasible"] else "no"]) for x in rows]
    print(table(body, ["mechanism", "D", "batch", "AL", "speedup", "tok/s/user", unit]
                + (["draft dev", "tok/s/device"] if drafts else []) + ["draft ms", "verify ms"]
                + ([f"vs best ({unit})"] if why else ["feasible"])))
    if drafts:
        print(f"{unit} divides by the {'target chips' if lpu else 'target GPUs'} only; tok/s/device also counts the "
              f"draft devices (draft dev)")


def _gpus_for_load(model, hardware, target_total, target_user, max_gpus, isl, osl, context, mechs, acc, max_d,
                   dtype, kv_dtype, json_out, max_ttft_ms=None, engine=None, emit=None, draft_model=None,
                   identity=None) -> None:
    """recommend --target-tps: the smallest GPU count for a load (specplan.planning.capacity.search), printed, and
    with --emit the launch of the mode its answer picked."""
    from specplan.planning.capacity import search

    if target_user is None:
        raise SpecplanError("recommend --target-tps: give --target-tps-per-user too")
    if mechs is None:  # the same default mechanisms as every mode: those with acceptance data (shipped profiles)
        mechs = _default_mechanisms(model, acc, draft_model)
    r = search(model, hardware, target_tps=target_total, target_tps_per_user=target_user, max_gpus=max_gpus,
               isl=isl, osl=osl, context_len=None if context is None else model_context(model, context),
               mechanisms=[x for x in mechs if x != "none"], acceptance=acc, max_draft_len=max_d, dtype=dtype,
               kv_dtype=kv_dtype, max_ttft_ms=max_ttft_ms, engine=engine)
    given = dict(hardware=hardware, dtype=dtype, kv_dtype=kv_dtype, draft_model=draft_model, identity=identity)
    launch, err = _launch_or_error(r, emit, given, json_out) if r.get("answer") else (None, None)
    if json_out:
        print_json(_answer_json(r, launch, given))
        if r["answer"] is None:
            raise typer.Exit(1)
        return
    load = f"ISL {r['isl']}, OSL {r['osl']}; " if r["isl"] else ""
    print(f"{r['model']} on {r['hardware']}: {r['target_tps']:,.0f} output tokens/s at >= "
          f"{r['target_tps_per_user']:g} tokens/s/user ({load}decode at context {r['context_len']}; whole nodes of "
          f"{r['node_gpus']}, up to {r['max_gpus']} GPUs)")
    rows = [[t["gpus"], t["prefill_gpus"], t["decode_gpus"], t.get("layout", "-"), t.get("instances", "-"),
             f"{t['mechanism']} D = {t['draft_len']}" if "mechanism" in t else "-", t.get("batch", "-"),
             f"{t['tokens_per_s_per_user']:.1f}" if "tokens_per_s_per_user" in t else "-", f"{t['tps']:,.0f}",
             "yes" if t["meets"] else "no"]
            for t in r["counts"]]
    print(table(rows, ["GPUs", "prefill", "decode", "layout", "instances", "mechanism", "batch/inst",
                       "tok/s/user", "tok/s total", "meets"]))
    b = r["best"]
    a = r.get("aggregated")
    if a is not None:
        print(f"aggregated (serving model): {a['gpus']} GPUs = {a['replicas']} x TP {a['tp']} replicas, "
              f"{a['mechanism']} D = {a['draft_len']} at concurrency {a['concurrency_per_replica']:g} per replica, "
              f"TPOT {a['tpot_ms']:.1f} ms, TTFT {a['ttft_ms']:.0f} ms, {a['tokens_per_s_per_replica']:,.0f} "
              f"tokens/s per replica" + ("" if a["fits_budget"] else f" (over --max-gpus {r['max_gpus']})"))
    if r.get("prefill_unreachable"):
        print(f"note: disaggregated: {r['prefill_unreachable']}")
    ans = r["answer"]
    if b is None:
        print(f"infeasible (disaggregated): {r['infeasible']}")
        if ans is None:
            raise typer.Exit(1)
    else:
        from specplan.model.parallel import parse_layout

        lay = parse_layout(b["layout"])
        flags = f"--tp {lay.tp} --dp {lay.dp} --ep {lay.ep}" + (f" --pp {lay.pp}" if lay.pp > 1 else "")
        pre = (f"prefill {b['prefill_gpus']} GPUs (TP {r['node_gpus']} groups, {1e3 * r['prefill_s_per_request']:.1f} "
               f"ms of prefill per request) + " if b["prefill_gpus"] else "")
        lead = "answer" if ans is not None and ans["mode"] == "disagg" else "disaggregated"
        print(f"{lead}: {b['gpus']} GPUs ({b['gpus'] // r['node_gpus']} nodes): {pre}decode {b['decode_gpus']} GPUs = "
              f"{b['instances']} x {b['layout']} ({flags}, docs/parallel.md for engine flags)")
        print(f"  {b['mechanism']} D = {b['draft_len']}, batch {b['batch']} per instance, "
              f"{b['tokens_per_s_per_user']:.1f} tokens/s/user (AL {b['acceptance_length']:.2f}, iteration "
              f"{b['iter_ms']:.1f} ms), {b['tps']:,.0f} tokens/s total, {b['memory_gb']:.1f} GB per GPU")
        print(f"why not fewer{' (disaggregated)' if ans is not None and ans['mode'] == 'agg' else ''}: "
              f"{r['smaller_fails']}")
    if ans is None:  # the disaggregated count has no prefill pool (prefill_unreachable above)
        print("infeasible: no prefill pool meets the TTFT target and no aggregated replicas meet the targets")
        raise typer.Exit(1)
    if ans["mode"] == "agg":
        than = (f"fewer than the disaggregated {b['gpus']}" if b is not None else
                "the disaggregated search meets the targets with none")
        print(f"answer: {a['gpus']} GPUs, aggregated: {a['replicas']} x TP {a['tp']} replicas ({than}; "
              f"the aggregated line above)")
        if a.get("smaller_fails"):
            print(f"why not fewer (aggregated): {a['smaller_fails']}")
        if max_ttft_ms is None and b is not None:  # the modes' TTFTs were not held to one target
            print(f"note: no --max-ttft-ms: the aggregated replicas' TTFT is {a['ttft_ms']:.0f} ms, the disaggregated "
                  f"prefill pool is sized to {r['prefill_ttft_target_ms']:.0f} ms; --max-ttft-ms holds both to one")
    ttft = r.get("prefill_ttft_target_ms")
    print("assumptions: decode instances of one layout at the mean context ISL + OSL / 2; prefill pool of whole "
          "nodes sized to the request rate (target / OSL) at the roofline prefill time with its M/D/1 wait"
          + (f", TTFT <= {ttft:.0f} ms" if ttft else "") + " (docs/parallel.md)")
    if launch is not None:
        print(launch["text"])
    if err is not None:
        raise err


def _search_deployment(model, hardware, isl, osl, gpus, gpus_per_node, dtypes, dtype, mode, eng, mechs, acc,
                       max_draft_len, extrapolate, max_ttft_ms, max_tpot_ms, json_out, kw, emit=None) -> None:
    """recommend --gpus: the best deployment of each mode and layout, why the others lost, and with --emit the
    launch of the best one; exit 1 if none."""
    from specplan.planning.recommend_serving import search_deployment

    if mode not in (None, "auto", "agg", "disagg"):
        raise SpecplanError(f"mode (--mode): must be auto, agg or disagg, got '{mode}'")
    modes = ("agg", "disagg") if mode in (None, "auto") else (mode,)
    dl = comma_list([dtypes]) if dtypes else None
    if dl and dtype:
        raise SpecplanError("recommend --gpus: give --dtype or --dtypes, not both")
    r = search_deployment(model, hardware, isl, osl, gpus=gpus, gpus_per_node=gpus_per_node, dtypes=dl or [dtype],
                          modes=modes, engine=eng, mechanisms=mechs, acceptance=acc, max_draft_len=max_draft_len,
                          extrapolate=extrapolate, max_ttft_ms=max_ttft_ms, max_tpot_ms=max_tpot_ms,
                          **_planning_kw(kw))
    given = dict(hardware=hardware, dtype=dtype, **kw)
    launch, err = _launch_or_error(r, emit, given, json_out)
    if json_out:
        print_json(_answer_json(r, launch, given))
        if r["best"] is None:
            raise typer.Exit(1)
        return
    sla = ", ".join(x for x in (f"TTFT <= {max_ttft_ms:g} ms" if max_ttft_ms else "",
                                f"TPOT <= {max_tpot_ms:g} ms" if max_tpot_ms else "") if x) or "no SLA"
    print(f"{r['model']} on up to {gpus} x {r['hardware']} (TP up to {r['gpus_per_node']}), engine {r['engine']}, "
          f"ISL {isl}, OSL {osl}; {sla}")
    rows = []
    for x in r["layouts"]:
        b = x["best"] or {}
        rows.append([x["mode"], x["dtype"], x.get("label") or x.get("layout", f"TP {x['tp']}"), x.get("gpus_used", "-"),
                     f"{b['mechanism']} D = {b['draft_len']}" if b else "-", x.get("total_concurrency", "-"),
                     _or_dash(b.get("tpot_ms")), _or_dash(b.get("ttft_ms")), b.get("tokens_per_s_per_gpu", "-"),
                     x["verdict"]])
    print(table(rows, ["mode", "dtype", "layout", "GPUs", "mechanism", "concurrency", "TPOT ms", "TTFT ms",
                       "tok/s/GPU", "verdict"]))
    notes = sorted({n for x in r["layouts"] for n in x.get("notes", [])})
    for n in notes:
        print(f"note: {n}")
    print(f"assumptions: {r['assumptions']}")
    if r["best"] is None:
        print("infeasible: no layout meets the SLA (each layout's line says why)")
        raise typer.Exit(1)
    for m_, x in r["best_by_mode"].items():
        b = x["best"]
        print(f"best {m_}: {x.get('label') or x['layout']} ({x['dtype']}), {b['mechanism']} D = {b['draft_len']}, concurrency "
              f"{x['total_concurrency']:g} in all: {b['tokens_per_s_per_gpu']:.1f} tok/s/GPU on {x['gpus_used']} GPUs, "
              + (f"TPOT {b['tpot_ms']:.2f} ms, " if _or_dash(b["tpot_ms"]) != "-" else "no TPOT (OSL 1), ")
          + f"TTFT {b['ttft_ms']:.1f} ms")
    for k, x in (r.get("best_by_family") or {}).items():  # MoE: the best of each layout family and why it lost
        print(f"best of {k}: {x.get('label') or x['layout']}, {x['best']['tokens_per_s_per_gpu']:.1f} tok/s/GPU "
              f"({x['verdict']})")
    x = r["best"]
    print(f"answer: {x['mode']} {x.get('label') or x['layout']} ({x['dtype']})")
    priced = [m_ for m_ in (mechs or _default_mechanisms(model, acc, kw.get("draft_model"))) if m_ != "none"]
    verdict = speculation_verdict(x["best"], f"{x['mode']} {x.get('label') or x['layout']}") if priced else None
    if verdict:
        print(verdict)
    _warn_without_sla(max_ttft_ms, max_tpot_ms, x["best"])
    if launch is not None:
        print(launch["text"])
    if err is not None:  # the search stands; only its launch could not be written
        raise err


def speculation_verdict(best: dict, where: str) -> str | None:
    """One line: does speculation pay at the answer (its throughput over the best without speculation on the same
    layout, `speedup_vs_none`), or None where the answer does not say."""
    x = best.get("speedup_vs_none")
    if x is None or x != x:
        return None
    if best["mechanism"] == "none":
        return f"speculation does not pay here: no draft mechanism beats the baseline on {where}"
    return (f"speculation pays: x {x:.2f} the tokens/s/GPU of the best without speculation on {where} "
            f"({best['mechanism']} D = {best['draft_len']})")


def _warn_without_sla(max_ttft_ms, max_tpot_ms, best: dict) -> None:
    """A warning line when no SLA bounds the answer: the most tokens/s/GPU at any latency is rarely a deployment
    anyone runs (a TTFT of minutes)."""
    if max_ttft_ms is not None or max_tpot_ms is not None:
        return
    tpot = _or_dash(best.get("tpot_ms"))
    print(f"warning: no SLA given (--max-ttft-ms / --max-tpot-ms): this answer maximizes tokens/s/GPU at any latency "
          f"(TTFT {best['ttft_ms']:,.0f} ms, TPOT {tpot if tpot == '-' else f'{tpot:.1f}'} ms); give the SLA you "
          f"serve under")


def _or_dash(x):
    """A number for a table, or '-' where there is none (None or NaN: OSL 1 has no TPOT)."""
    return "-" if x is None or x != x else x


def _print_d_schedule(s: dict, mechanism: str) -> None:
    """recommend's D by load: the best D per concurrency band, the engines' schedule forms, the winner re-priced."""
    print(f"D by load ({mechanism}; each concurrency band priced at its own steady state, most tok/s/GPU):")
    print(table([[f"{lo}-{hi}" if hi > lo else f"{lo}", f"{c:.1f}", k, f"{t:.1f}", f"{x:.3f}", f"{tp:.2f}", f"{tt:.1f}"]
                 for (lo, hi, c, k, t, x), (tp, tt) in zip(s["bands"], s["band_tpot_ttft_ms"])],
                ["concurrency", "priced at", "D", "tok/s/GPU", "x D=0", "TPOT ms", "TTFT ms"]))
    print("vLLM speculative_config num_speculative_tokens_per_batch_size: "
          + json.dumps([list(v) for v in s["vllm"]]))
    if s["trtllm"] is not None:
        print("TensorRT-LLM draft_len_schedule: " + json.dumps({str(k): v for k, v in s["trtllm"].items()}))
    a = s["at_best"]
    print(f"at concurrency {a['concurrency']:g} the schedule's D = {a['draft_len']}: {a['tokens_per_s_per_gpu']:.1f} "
          f"tok/s/GPU, TPOT {a['tpot_ms']:.2f} ms (fixed D = {a['fixed_draft_len']}: "
          f"{a['fixed_tokens_per_s_per_gpu']:.1f} tok/s/GPU, TPOT {a['fixed_tpot_ms']:.2f} ms)")
    for n in s["notes"]:
        print(f"note: {n}")


def _recommend_serving(model, hardware, wl, tp, eng, mechs, acc, max_draft_len, extrapolate, max_ttft_ms, max_tpot_ms,
                       search, json_out, kw, emit=None, objective="tokens-per-gpu", price=None) -> None:
    """recommend --isl/--osl: print the ranked serving configurations; exit 1 (explained) when none meets the SLA."""
    from specplan.planning.recommend_serving import recommend_serving

    r = recommend_serving(model, hardware, wl, tp=tp, engine=eng, mechanisms=mechs, acceptance=acc,
                          max_draft_len=max_draft_len, extrapolate=extrapolate, max_ttft_ms=max_ttft_ms,
                          max_tpot_ms=max_tpot_ms, search_concurrency=search, objective=objective, price=price,
                          **_planning_kw(kw))
    given = dict(hardware=hardware, **kw)
    launch, err = _launch_or_error(r, emit, given, json_out)
    if json_out:
        print_json(_answer_json(r, launch, given))
        if r["best"] is None:
            raise typer.Exit(1)
        return
    sla = ", ".join(x for x in (f"TTFT <= {max_ttft_ms:g} ms" if max_ttft_ms else "",
                                f"TPOT <= {max_tpot_ms:g} ms" if max_tpot_ms else "") if x) or "no SLA"
    where = f"tp {tp}" if "layout" not in r and "prefill_layout" not in kw else " ".join(
        x for x in (f"layout {r.get('layout', f'tp{tp}')}", f"prefill {kw['prefill_layout'].name}"
                    if kw.get("prefill_layout") is not None else "") if x)
    print(f"{r['model']} on {hardware} ({where}), engine {r['engine']}, {r['mode']}, ISL {r['isl']}, OSL {r['osl']}; {sla}")
    rows = [[x["mechanism"], x["draft_len"], x["concurrency"], x["pools"] or "-", x["acceptance_length"],
             _or_dash(x["tpot_ms"]), x["ttft_ms"], _or_dash(x["tokens_per_s_per_user"]), x["tokens_per_s_per_gpu"],
             "-" if x.get("speedup_vs_none") is None else f"{x['speedup_vs_none']:.3f}",
             "yes" if x["feasible"] else "no"] for x in r["ranked"]]
    print(table(rows, ["mechanism", "D", "concurrency", "pools", "AL", "TPOT ms", "TTFT ms", "tok/s/user",
                       "tok/s/GPU", "x none", "meets SLA"]))
    for n in r["notes"]:
        print(f"note: {n}")
    if r["best"] is None:
        print(f"infeasible: {r['infeasible']}")
        raise typer.Exit(1)
    b = r["best"]
    print(f"best: {b['mechanism']} D = {b['draft_len']} at concurrency {b['concurrency']:g}"
          f"{' ' + b['pools'] if b['pools'] else ''}: {b['tokens_per_s_per_gpu']:.1f} tok/s/GPU, "
          + (f"TPOT {b['tpot_ms']:.2f} ms, " if _or_dash(b["tpot_ms"]) != "-" else "no TPOT (OSL 1), ")
          + f"TTFT {b['ttft_ms']:.1f} ms"
          + (f" ({b['speedup_vs_none']:.2f}x the best without speculation)" if b.get("speedup_vs_none") and
             b["mechanism"] != "none" else ""))
    _print_energy(r)
    _warn_without_sla(max_ttft_ms, max_tpot_ms, b)
    if r.get("d_by_load"):  # not in the --emit launch, which runs the ranked answer's fixed D
        _print_d_schedule(r["d_by_load"], b["mechanism"])
    if launch is not None:
        print(launch["text"])
    if err is not None:  # the answer stands; only its launch could not be written
        raise err

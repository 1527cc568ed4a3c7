"""`specplan adaptive`: compare draft-length policies over a request workload (or `--trace` segments)."""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

import typer

from specplan.cli.app import app
from specplan.cli.output import print_json, table
from specplan.cli.parsing import comma_list, fold_ids, model_context
from specplan.planning.sweep import MAX_DRAFT_LEN

COLUMNS = ("policy", "tpot_p50_ms", "tpot_p99_ms", "ttft_p50_ms", "ttft_p99_ms", "tokens_per_s_per_gpu",
           "tokens_per_s_per_user", "slo_attainment", "mean_draft_len", "fits")
TRACE_COLUMNS = ("policy", "tokens_per_s_per_user", "expected_tokens_per_s_per_user", "speedup", "tpot_p50_ms",
                 "tpot_p99_ms", "slo_attainment", "mean_draft_len", "fits")


def parse_tiers(text: str, flag: str = "--tiers") -> list[int]:
    """'1,3,7' -> [1, 3, 7]: non-negative, strictly increasing integers; one line naming `flag` and the position
    otherwise."""
    from specplan.core.errors import SpecplanError
    from specplan.core.limits import DRAFT_LEN_LIMIT

    out = []
    for i, part in enumerate((p.strip() for p in text.split(",")), 1):
        try:
            v = int(part)
        except ValueError:
            raise SpecplanError(f"{flag}: position {i}: expected an integer, got '{part}'") from None
        if v < 0:
            raise SpecplanError(f"{flag}: position {i}: must be >= 0, got {v}")
        if v > DRAFT_LEN_LIMIT:
            raise SpecplanError(f"{flag}: position {i}: must be <= {DRAFT_LEN_LIMIT} (the largest D), got {v}")
        if out and v <= out[-1]:
            raise SpecplanError(f"{flag}: position {i}: {v} is not above {out[-1]} (the values must increase)")
        out.append(v)
    return out


def tiers_config(tiers: list[int], out_dir) -> str:
    """An SGLang adaptive config with one slot (every batch) over these tiers, written next to the outputs."""
    import json
    import tempfile
    from pathlib import Path

    d = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="specplan-tiers-"))
    d.mkdir(parents=True, exist_ok=True)
    p = d / "sglang_tiers_config.json"
    p.write_text(json.dumps({"1": {"candidate_steps": tiers}}, indent=2) + "\n")
    return str(p)


@app.command("adaptive")
def adaptive(
    model: str = typer.Option(..., "--model", "-m", help="Target model id or profile YAML path."),
    hardware: str = typer.Option(..., "--hardware", "-H", help="Hardware id or profile YAML path."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel devices."),
    workload: Optional[str] = typer.Option(None, "--workload", help="CSV: arrival_s, isl, osl [, alpha]."),
    request_rate: Optional[float] = typer.Option(None, "--request-rate", help="Poisson arrivals per second."),
    concurrency: Optional[int] = typer.Option(None, "--concurrency", help="Closed loop: requests in the system."),
    requests: int = typer.Option(1000, "--requests", help="Requests of a synthetic workload."),
    isl: int = typer.Option(1024, "--isl", help="Input tokens per request (synthetic workload)."),
    osl: int = typer.Option(256, "--osl", help="Output tokens per request (synthetic workload)."),
    acceptance_rate: Optional[float] = typer.Option(None, "--acceptance-rate", help="One α for every request."),
    acceptance_dist: Optional[str] = typer.Option(
        None, "--acceptance-dist", help="α per request: 0.8, beta:A,B, uniform:LO,HI, normal:MEAN,SD, pos:P1/P2/..."),
    acceptance_drift: Optional[str] = typer.Option(
        None, "--acceptance-drift", help="Change of α from a request's first to last output token, e.g. -0.2."),
    trace: Optional[str] = typer.Option(
        None, "--trace", help="Shorthand: segments alpha[@batch]xITER, e.g. 0.9@8x300,0.5@32x300 (needs --context)."),
    context: Optional[str] = typer.Option(None, "--context", "-c", help="Context of --trace segments; 32k = 32768."),
    mechanism: str = typer.Option("eagle3", "--mechanism", "--mechanisms", callback=fold_ids,
                                  help="Draft mechanism whose costs are used."),
    policies: str = typer.Option("fixed:3,sglang,model,oracle", "--policies",
                                 help="fixed:D, sglang[:CONFIG.json], model[:acc=S/time=E/slo=0], "
                                      "adasd[:max=D/relax=R]; bounds: oracle, clairvoyant (docs/adaptive.md)."),
    max_draft_len: int = typer.Option(MAX_DRAFT_LEN, "--max-draft-len", help="Largest D a policy may pick."),
    captured_d: Optional[str] = typer.Option(None, "--captured-d",
                                             help="D with CUDA graphs for model/adasd (default 0..8)."),
    sglang_config: Optional[str] = typer.Option(None, "--sglang-config",
                                                help="SGLang --speculative-adaptive-config JSON."),
    sglang_initial: Optional[int] = typer.Option(None, "--sglang-initial-steps",
                                                 help="SGLang --speculative-num-steps (default: middle candidate)."),
    tiers: Optional[str] = typer.Option(None, "--tiers", help="Shorthand for an SGLang config of one slot, e.g. 1,3,7."),
    max_tpot_ms: Optional[float] = typer.Option(None, "--max-tpot-ms", "--slo-tpot-ms",
                                                help="TPOT target (ms): SLO attainment; model aims at it."),
    max_ttft_ms: Optional[float] = typer.Option(None, "--max-ttft-ms", help="TTFT target (ms) for SLO attainment."),
    engine: str = typer.Option("sglang", "--engine", help="Engine profile id or YAML (host costs, budgets, graphs)."),
    prefill_budget: Optional[int] = typer.Option(None, "--prefill-budget",
                                                 help="Prompt tokens per step (default: the engine's)."),
    max_running: Optional[int] = typer.Option(None, "--max-running",
                                              help="Largest running batch (default: the engine's; KV limits too)."),
    graph_max_bs: Optional[int] = typer.Option(None, "--graph-max-bs",
                                               help="Largest CUDA-graph decode batch (default: the engine's; 0: no "
                                                    "largest, as graph_max_batch: 0 in an engine YAML)."),
    draft_model: Optional[str] = typer.Option(None, "--draft-model", help="Draft model / head id."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="Weights and GEMM math dtype."),
    seed: int = typer.Option(0, "--seed", help="Random seed (an integer >= 0): arrivals, α draws, acceptance."),
    simulator: str = typer.Option("adaptive", "--simulator",
                                  help="adaptive (its own simulator) or serving (serving/simulator.py: the engine's "
                                       "admission and step table; fixed, sglang and model policies)."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
    out: Optional[str] = typer.Option(None, "-o", "--out", "--output", help="Directory for table, JSON, series and plots."),
) -> None:
    """Simulate draft-length policies request by request: TPOT/TTFT percentiles, SLO attainment, tokens/s/GPU."""
    from specplan.core.errors import SpecplanError

    _check_options(max_draft_len, out, isl, osl, concurrency, max_running, graph_max_bs, prefill_budget,
                   sglang_initial, request_rate, seed, max_tpot_ms, max_ttft_ms)
    names = comma_list(policies)
    if simulator not in ("adaptive", "serving"):
        raise SpecplanError(f"--simulator: adaptive or serving, got '{simulator}'")
    if simulator == "serving" and trace is not None:
        raise SpecplanError("--simulator serving: not with --trace (trace segments have no requests)")
    cap = None if captured_d is None else [int(x) for x in parse_tiers(captured_d, "--captured-d")]
    if tiers is not None:
        if sglang_config is not None:
            raise SpecplanError("--tiers: give either --tiers or --sglang-config")
        sglang_config = tiers_config(parse_tiers(tiers), out)
    from specplan.costs.precision import Dtypes
    from specplan.speculation.spec import DraftPlacement

    kw = dict(tp=tp, dtypes=Dtypes(dtype=dtype), draft=DraftPlacement(draft_model))
    from specplan.adaptive.run import PolicyOptions
    from specplan.adaptive.simulator import Engine

    opts = PolicyOptions(d_max=max_draft_len, mechanism=mechanism, engine=Engine(engine, prefill_budget, max_running,
                                                                                 graph_max_bs),
                         max_tpot_s=None if max_tpot_ms is None else max_tpot_ms / 1e3, seed=seed, captured_d=cap,
                         sglang_config=sglang_config, sglang_initial=sglang_initial)
    if trace is not None:  # a trace has no arrivals: no TTFT target
        _trace(model, hardware, trace, context, names, opts, kw, json_out)
        return
    opts = replace(opts, max_ttft_s=None if max_ttft_ms is None else max_ttft_ms / 1e3, simulator=simulator)
    res = _requests(model, hardware, workload, request_rate, concurrency, requests, isl, osl, acceptance_rate,
                    acceptance_dist, acceptance_drift, names, opts, kw)
    rows = res.policies
    if out:
        from specplan.adaptive.report import write_report

        write_report(res, out)
    if json_out:
        print_json({"mode": "requests", "model": res.model, "hardware": res.hardware, "engine": res.engine,
                    "requests": res.requests,
                    "policies": rows,
                    "series": {k: {"t_s": v.t_s, "draft_len": v.draft_len, "batch": v.batch, "al": v.al,
                                   "tpot_ms": v.tpot_ms}
                               for k, v in res.series.items()}})
        return
    _print_requests(res, tp, mechanism)


def _check_options(max_draft_len, out, isl, osl, concurrency, max_running, graph_max_bs, prefill_budget,
                   sglang_initial, request_rate, seed, max_tpot_ms, max_ttft_ms) -> None:
    """One line for any option out of its bounds (specplan.core.limits), and a bad -o, before the simulation."""
    from specplan.core.errors import SpecplanError
    from specplan.core.limits import DRAFT_LEN_LIMIT, MAX_BATCH, MAX_CONTEXT, check_int, check_option

    check_int(max_draft_len, "--max-draft-len", 0, DRAFT_LEN_LIMIT)
    if out is not None:
        from specplan.core.io import check_output_dir

        check_output_dir(out)  # before the simulation, not after it
    for name, v, hi in (("--isl", isl, MAX_CONTEXT), ("--osl", osl, MAX_CONTEXT), ("--concurrency", concurrency, MAX_BATCH),
                        ("--max-running", max_running, MAX_BATCH), ("--graph-max-bs", graph_max_bs, MAX_BATCH),
                        ("--prefill-budget", prefill_budget, MAX_CONTEXT), ("--sglang-initial-steps", sglang_initial,
                                                                            DRAFT_LEN_LIMIT)):
        if v is not None:  # bounds of specplan.core.limits: no overflow, no run without end
            check_int(v, name, 0 if name in ("--sglang-initial-steps", "--graph-max-bs") else 1, hi)
    if request_rate is not None:
        check_option(request_rate, "--request-rate")  # the rule of predict's --request-rate too
    if seed < 0:
        raise SpecplanError(f"--seed: must be an integer >= 0, got {seed}")
    for name, v in (("--max-tpot-ms", max_tpot_ms), ("--max-ttft-ms", max_ttft_ms)):
        if v is not None and not (v > 0):
            raise SpecplanError(f"{name}: must be > 0, got {v:g}")
    for name, v, low in (("--prefill-budget", prefill_budget, 1), ("--graph-max-bs", graph_max_bs, 0),
                         ("--max-running", max_running, 1)):
        if v is not None and v < low:
            raise SpecplanError(f"{name}: must be >= {low}, got {v}")


def _fits(row) -> str:
    """'yes' / 'no' for a policy row (whether every request's KV fit the memory), '-' for a bound row."""
    return "-" if row.bound else ("no" if row.over_capacity else "yes")


def _print_requests(res, tp: int, mechanism: str) -> None:
    """The request-level table of every policy, with the lossy and bound rows explained."""
    rows = res.policies
    print(f"{res.model} on {res.hardware} (tp {tp}), {mechanism}, engine {res.engine}; {res.requests} "
          f"requests ({res.source})")
    print(table([[_fits(r) if c == "fits" else r.get(c) for c in COLUMNS] for r in rows], list(COLUMNS)))
    if any(not r.bound and r.over_capacity for r in rows):
        c = res.costs
        print(f"fits: no: the weights leave {max(c.capacity_bytes - c.fixed_bytes, 0) / 1e9:.1f} GB of "
              f"{c.capacity_bytes / 1e9:.1f} GB per device for the KV cache, less than one request needs; each such "
              f"request runs alone and the times price memory this machine does not have (predict shows the memory; "
              f"more TP or a smaller dtype fits)")
    for r in rows:
        if r.lossy:
            print(f"{r.policy} is lossy: {100 * r.relaxed_token_fraction:.1f}% of output tokens were accepted "
                  f"only by its relaxed test (α' = α + relax·(1 − α)); not comparable with the lossless rows")
        if r.bound:
            print(f"{r.policy}: bounds of every lossless policy on this seed (TPOT percentiles are lower bounds; "
                  "tokens/s and SLO attainment upper bounds; see docs/adaptive.md)")


def _requests(model, hardware, workload, rate, conc, n, isl, osl, acc_rate, acc_dist, drift, names, opts, kw):
    from specplan.adaptive import run_requests
    from specplan.adaptive.workload import build_workload, read_workload_csv, synthetic
    from specplan.core.errors import SpecplanError

    if acc_rate is not None and acc_dist is not None:
        raise SpecplanError("acceptance: give one of --acceptance-rate or --acceptance-dist")
    if acc_rate is not None and not 0.0 <= acc_rate <= 1.0:  # NaN fails too
        raise SpecplanError(f"--acceptance-rate: α must be in [0, 1], got {acc_rate:g}")
    dist = acc_dist if acc_dist is not None else (None if acc_rate is None else str(acc_rate))
    if workload is not None:
        if rate is not None:
            raise SpecplanError("--workload: give either a workload CSV or --request-rate")
        arr, i, o, alpha = read_workload_csv(workload)
        if alpha is not None and dist is not None:
            raise SpecplanError(f"{workload}: has an alpha column; drop --acceptance-rate/--acceptance-dist")
        if conc is not None:
            raise SpecplanError("--concurrency: not with --workload (its arrival times are given)")
        wl = build_workload(arr, i, o, alpha=alpha, dist=dist, drift=drift, seed=opts.seed, source=workload)
    else:
        if rate is None and conc is None:
            raise SpecplanError("workload: give --workload FILE.csv, --request-rate R or --concurrency C "
                                "(or --trace segments)")
        arr, i, o = synthetic(n, isl, osl, rate_per_s=rate, concurrency=conc, seed=opts.seed)
        src = f"closed loop, concurrency {conc}" if conc else f"Poisson {rate:g}/s"
        wl = build_workload(arr, i, o, dist=dist, drift=drift, concurrency=conc, seed=opts.seed,
                            source=f"{src}, ISL {isl}, OSL {osl}")
    return run_requests(model, hardware, wl, names, opts=opts, **kw)


def _trace(model, hardware, trace, context, names, opts, kw, json_out):
    from specplan.adaptive import parse_trace, run_trace
    from specplan.core.errors import SpecplanError

    if context is None:
        raise SpecplanError("--trace: needs --context (the KV tokens of every sequence)")
    ctx = model_context(model, context)
    res = run_trace(model, hardware, parse_trace(trace), names, context_len=ctx, opts=opts, **kw)
    rows = [{k: v for k, v in r.items() if k != "chosen_d"} for r in res.policies]
    if json_out:
        print_json({"mode": "trace", "context_len": ctx, "policies": rows})
        return
    print(f"{model} on {hardware} (tp {kw['tp']}), context {ctx}, {opts.mechanism}; trace {trace}")
    print(table([[r.get(c) for c in TRACE_COLUMNS] for r in rows], list(TRACE_COLUMNS)))

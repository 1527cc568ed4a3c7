"""The serving-workload options of predict, recommend and pareto, defined once (typer Annotated types): one
spelling and one help text in every command. `specplan.serving.workload.workload_from_options` reads them."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

Engine = Annotated[Optional[str], typer.Option(
    "--engine", help="Serving engine: trtllm | vllm | sglang | ideal | YAML (with --isl/--osl).")]
Mode = Annotated[str, typer.Option(
    "--mode", help="agg (in-flight batching) | disagg (prefill / decode pools; recommend and pareto search the "
                   "pools unless --pools) | auto (both: recommend --gpus's default); pareto draws both when "
                   "not given.")]
Isl = Annotated[Optional[int], typer.Option(
    "--isl", help="Prompt tokens per request: the serving model (recommend --target-tps: the load; pareto: the "
                  "serving frontier over concurrency).")]
Osl = Annotated[Optional[int], typer.Option("--osl", help="Output tokens per request (with --isl).")]
Concurrency = Annotated[Optional[str], typer.Option(
    "--concurrency", help="Requests in flight, closed loop (recommend and pareto: searched when not given); predict "
                          "takes a comma list (1,8,32,64,128) and prices each, baseline against speculation.")]
RequestRate = Annotated[Optional[str], typer.Option(
    "--request-rate", help="Requests per second (open loop); predict takes a comma list (0.5,1,2,4) and prices each; "
                           "recommend answers the GPUs each --hardware needs for it, priced (docs/cost.md).")]
Pools = Annotated[Optional[str], typer.Option(
    "--pools", help="Disaggregated pools xPyD, e.g. 1P1D, 2P3D (recommend and pareto: searched when not given).")]
StartupCohort = Annotated[bool, typer.Option(
    "--startup-cohort", help="A benchmark whose clients all start at once (to reproduce such runs): predict at one "
                             "--concurrency simulates it request by request (the first round together); recommend, "
                             "pareto and a concurrency list add (C - 1) x the engine's startup_prefill_frac x one prompt's "
                             "service time (plus C - 1 x startup_client_s) to TTFT. Off: "
                             "steady traffic.")]
PrefillLayout = Annotated[Optional[str], typer.Option(
    "--prefill-layout", help="Disaggregated (--mode disagg): the prefill instances' layout, in the grammar of "
                             "--layouts (tp8, tp8ep8, dp8ep8); default: the decode layout.")]
DecodeLayout = Annotated[Optional[str], typer.Option(
    "--decode-layout", help="Disaggregated (--mode disagg): the decode instances' layout (tp8, dp8ep8, dp16ep16); "
                            "default: --tp/--dp/--ep.")]

MECHS = "none|external|eagle3|mtp|medusa|dflash|dspark|ngram|self"
SERVING_HELP = "Engine overheads (alias of --engine for one release): roofline | vllm-v1-eagle-2025 | engine id."


def engine_choice(engine, serving):
    """--engine, or the engine behind a --serving alias (roofline = ideal, vllm-v1-eagle-2025 = vllm)."""
    from specplan.speculation.serving import ALIASES

    if engine is not None and serving is not None:
        from specplan.core.errors import SpecplanError

        raise SpecplanError("engine: give --engine or its old alias --serving, not both")
    return engine if serving is None else ALIASES.get(serving, serving)


# the request-level simulator (issue 39): any of these answers predict's serving blocks by simulation
Simulate = Annotated[bool, typer.Option(
    "--simulate", help="Answer the serving blocks by the request-level simulator (clients start together in a "
                       "closed loop; TTFT median / p90 / p99, docs/serving.md) instead of the steady-state model.")]
WorkloadFile = Annotated[Optional[str], typer.Option(
    "--workload", help="Replay a trace (CSV or JSONL: arrival_s, isl, osl, optional prefix_id, prefix_len) "
                       "through the simulator, instead of --isl/--osl/--concurrency.")]
PrefixHit = Annotated[Optional[float], typer.Option(
    "--prefix-hit", help="Fraction of every prompt found in the prefix cache (0.6: 60 percent of its tokens are "
                         "not prefilled); simulated.")]
IslDist = Annotated[Optional[str], typer.Option(
    "--isl-dist", help="Prompt lengths drawn per request (mean --isl ignored): fixed:N, uniform:LO,HI, "
                       "normal:MEAN,SD, lognormal:MEDIAN,SIGMA, exponential:MEAN; simulated.")]
OslDist = Annotated[Optional[str], typer.Option(
    "--osl-dist", help="Output lengths drawn per request, as --isl-dist; simulated.")]
Requests = Annotated[Optional[int], typer.Option(
    "--requests", help="Requests to simulate (default: 10 x the concurrency, at least 200).")]
ArrivalCv = Annotated[Optional[float], typer.Option(
    "--arrival-cv", help="Open loop (--request-rate), simulated: gaps between arrivals gamma-distributed with this "
                         "coefficient of variation (1: Poisson, the default; above 1: bursty).")]
KvOffload = Annotated[bool, typer.Option(
    "--kv-offload", help="Hold the cached prefixes (--prefix-hit, a trace's shared prefixes) in host memory and copy "
                         "each hit into HBM over the host link (the hardware profile's host_link_bandwidth_bytes_s: "
                         "PCIe, NVLink-C2C) when its prompt is scheduled; simulated.")]
DSchedule = Annotated[Optional[str], typer.Option(
    "--d-schedule", help="Draft length by batch size, LO-HI:K,... (vLLM num_speculative_tokens_per_batch_size; "
                         "K capped at --draft-len): each simulated step drafts the K of the requests it holds; "
                         "simulated.")]

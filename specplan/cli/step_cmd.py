"""`specplan step`: one decode step (time, breakdown with regimes, memory)."""

from __future__ import annotations

from typing import Optional

import typer

from specplan.cli.app import app
from specplan.cli.parsing import cli_layout, model_context
from specplan.cli.output import print_json, table


@app.command("step")
def step(
    model: str = typer.Option(..., "--model", "-m", help="Model id or profile YAML path."),
    hardware: str = typer.Option(..., "--hardware", "-H", help="Hardware id or profile YAML path."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel devices (attention TP within one DP rank)."),
    dp: int = typer.Option(1, "--dp", help="Data-parallel attention ranks (docs/parallel.md)."),
    ep: int = typer.Option(1, "--ep", help="Expert-parallel ranks; expert-TP = TP x DP / EP."),
    pp: int = typer.Option(1, "--pp", help="Pipeline stages; GPUs = TP x DP x PP."),
    batch: int = typer.Option(..., "--batch", "-b", help="Concurrent sequences."),
    q_len: int = typer.Option(1, "--q-len", help="New tokens per sequence (1 + D when verifying)."),
    context: str = typer.Option(..., "--context", "-c", help="Tokens already in the KV cache per sequence; 32k = 32768."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="Weights and GEMM math: bf16|fp16|fp8|fp4|int8 (default: checkpoint's)."),
    kv_dtype: Optional[str] = typer.Option(None, "--kv-dtype", help="KV-cache dtype; default or auto: the checkpoint's declared KV format, else 16-bit (the engines' auto rule)."),
    weight_dtype: Optional[str] = typer.Option(None, "--weight-dtype", help="Narrower weight format, e.g. int4 for W4A16."),
    attention_style: str = typer.Option("shared", "--attention-style", help="shared | reread (see docs/cost_model.md)."),
    routing: str = typer.Option("random", "--routing", help="MoE routing / expert-load imbalance: random (default: EPLB off, i.i.d. uniform routing) | balanced | eplb (EPLB on: ranks at the mean load) | skew:F (slowest rank at F x the mean)."),
    reserve: float = typer.Option(0.10, "--reserve", help="Fraction of memory kept free."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Time and memory of one decode step."""
    from specplan.api import step_summary

    from specplan.costs.precision import Dtypes
    from specplan.model.step import StepKernels

    r = step_summary(model, hardware, tp, batch, q_len, model_context(model, context),
                     Dtypes(dtype, kv_dtype, weight_dtype), StepKernels(attention_style, routing), reserve,
                     layout=cli_layout(tp, dp, ep, pp))
    if json_out:
        print_json(r)
        return
    p = r["precision"]
    lay = r["layout"]
    where = f"tp {r['tp']}" if lay["name"] == f"tp{r['tp']}" else (
        f"tp {lay['tp']} dp {lay['dp']} ep {lay['ep']} pp {lay['pp']}, expert-TP {lay['expert_tp']}")
    print(f"{r['model']} on {r['hardware']} x{r['devices']} ({where}), batch {r['batch']}, q_len {r['q_len']}, "
          f"context {r['context_len']}; compute {p['compute']}, kv {p['kv']}, G_dev {r['g_dev']}")
    print(f"step time: {r['step_ms']:.4f} ms   ({r['kernels_per_step']} kernels)")
    rows = [[c, ms, 100 * ms / r["step_ms"] if r["step_ms"] else 0, r["regimes"][c]]
            for c, ms in r["breakdown_ms"].items() if ms > 0]
    print(table(rows, ["class", "ms", "%", "regime"]))
    m = r["memory"]
    parts = (f"weights {m['weights_gb']:.2f}, KV {m['kv_cache_gb']:.2f}, state {m['state_gb']:.3f}, "
             f"activations {m['activations_gb']:.3f}")
    if m.get("chips"):  # LPU: SRAM only; the deployment is sized in chips
        print(f"memory: {m['total_gb']:.2f} GB in SRAM ({parts}) -> {m['chips']} chips of "
              f"{m['capacity_gb'] / (1 - m['reserve']):.2f} GB")
    else:
        print(f"memory per device: {m['total_gb']:.2f} GB of {m['capacity_gb']:.2f} GB usable ({parts}); "
              f"fits: {str(m['fits']).lower()}; max batch: {m['max_batch']}")

"""`specplan adaptive`: compare adaptive speculation policies over a time-varying workload trace."""

from __future__ import annotations

from typing import Optional

import typer

from specplan.cli.app import app
from specplan.cli.parsing import comma_list, context_tokens
from specplan.cli.output import print_json, table
from specplan.sweep import MAX_DRAFT_LEN


@app.command("adaptive")
def adaptive(
    model: str = typer.Option(..., "--model", "-m", help="Target model id or profile YAML path."),
    hardware: str = typer.Option(..., "--hardware", "-H", help="Hardware id or profile YAML path."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel devices."),
    context: str = typer.Option(..., "--context", "-c", help="Tokens in the KV cache per sequence; 32k = 32768."),
    trace: str = typer.Option(..., "--trace", help="Segments alpha[@batch]xITER, e.g. 0.9@8x300,0.5@32x300."),
    mechanism: str = typer.Option("eagle3", "--mechanism", help="Draft mechanism whose costs are used."),
    policies: str = typer.Option("static:3,ema,model,oracle", "--policies", help="static:D, ema, model, oracle."),
    max_draft_len: int = typer.Option(MAX_DRAFT_LEN, "--max-draft-len", help="Largest D a policy may pick."),
    tiers: str = typer.Option("1,3,7", "--tiers", help="Draft-length tiers of the ema policy."),
    slo_tpot_ms: Optional[float] = typer.Option(None, "--max-tpot-ms", "--slo-tpot-ms",
                                               help="TPOT target (ms) for model/oracle."),
    draft_model: Optional[str] = typer.Option(None, "--draft-model", help="Draft model / head id."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="Weights and GEMM math dtype."),
    seed: int = typer.Option(0, "--seed", help="Random seed of the acceptance draws."),
    json_out: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Tokens/s/user of static, SGLang-style EMA, model-based (AdaSpec-style) and oracle D choices."""
    from specplan.adaptive import compare_policies, parse_trace
    from specplan.errors import SpecplanError

    context = context_tokens(context)
    if max_draft_len < 1:
        raise SpecplanError(f"max-draft-len: must be >= 1, got {max_draft_len}")
    try:
        tier_list = tuple(int(t) for t in tiers.split(","))
    except ValueError:
        raise SpecplanError(f"tiers: expected integers like 1,3,7, got '{tiers}'") from None
    segs = parse_trace(trace)
    rows = compare_policies(model, hardware, segs, comma_list(policies),
                            max_d=max_draft_len, mechanism=mechanism, tiers=tier_list,
                            slo_tpot_s=None if slo_tpot_ms is None else slo_tpot_ms / 1e3, seed=seed,
                            tp=tp, context_len=context, draft_model=draft_model, dtype=dtype)
    if json_out:
        print_json([{k: v for k, v in r.items() if k != "chosen_d"} for r in rows])
        return
    print(f"{model} on {hardware} (tp {tp}), context {context}, {mechanism}; trace {trace}")
    print(table([[r["policy"], r["tokens_per_s_per_user"], r["speedup"], r["mean_d"]] for r in rows],
                ["policy", "tok/s/user", "speedup vs no spec", "mean D"]))

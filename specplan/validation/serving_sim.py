"""The H100 serving rows scored by the request-level simulator (issue 39): the benchmark harness simulated.

Two harnesses, both with the row group's out-of-sample engine fit (validation/serving.py `calibrate`), no start-up
term (startup_client_s 0) and the engines' own schedulers (serving/simulator.py):

- `together`: the literal closed loop: C clients start together at t = 0 and each sends its next request the
  moment its last one ends, 10 x C requests (genai-perf's common `--request-count` of 10 x the concurrency: an
  assumption, the aiconfigurator harness's count is not in the shared data), TTFT the mean over all of them. With
  equal lengths the simulated clients stay in lockstep round after round (every round's prompts queue together).
- `benchmark` (predict's closed loop): the first round as `together` (C prompts arriving at once), the 9 later
  rounds from a loop that has settled (the clients' first requests spread evenly over one request's latency),
  TTFT the mean over the 10 rounds (serving/sim_serving.py `benchmark_run`). The measured rows show the real loops do not stay in lockstep: vLLM's TTFT at C = 4
  is one prompt's prefill (121 ms, 70B TP 2, 1024 tokens), where lockstep would prefill four together. What
  breaks the lockstep (client and server jitter) is not modelled; the first round's bunching is what the fitted
  start-up term stood for.

The aiconfigurator TensorRT-LLM rows (admission `next_departure` in validation/serving.py) are simulated with the
engine's max batch at C and C + 1 clients, one request always queued: the wait for the next departure that the
analytical rule adds comes out of the simulation. NIM's rows (not a start-together harness: bunched_start) are the
settled loop alone.
"""

from __future__ import annotations

import numpy as np

from specplan.serving.arrivals import closed_loop, lengths
from specplan.serving.sim_serving import SimSetup, simulate_serving

ROUNDS = 10
HARNESSES = ("together", "benchmark")


def _row(g, eng, c: int, harness: str) -> tuple[float, float]:
    """(TPOT ms, TTFT ms) of one row under a harness (NIM's rows: the settled loop, whatever the harness)."""
    isl, osl = int(g.rows["input_len"].iloc[0]), int(g.rows["output_len"].iloc[0])
    queued = g.admission == "next_departure" and c > 1
    clients = c + 1 if queued else c
    setup = SimSetup(g.tp, eng, g.prec, running_cap=c if queued else None)
    n = ROUNDS * clients
    start = harness if g.bunched else "steady"
    s = simulate_serving(g.model, g.hw, closed_loop(lengths(isl, None, n, 0), lengths(osl, None, n, 0), clients,
                                                    start), setup)
    return s.tpot_mean_s * 1e3, s.ttft_mean_s * 1e3


def simulate_rows(gs, params_of, harness: str = "benchmark"):
    """The groups' rows with pred_tpot_ms / pred_ttft_ms from a simulated harness (engine numbers from
    params_of(g), as validation.serving._predict_rows takes them)."""
    import pandas as pd

    from specplan.validation.serving import fitted_engine

    out = []
    for g in gs:
        eng = fitted_engine(g.engine, params_of(g)).model_copy(update={"startup_client_s": 0.0})
        got = np.array([_row(g, eng, int(c), harness) for c in g.rows["batch"].to_numpy(int)])
        x = g.rows.copy()
        x["pred_tpot_ms"], x["pred_ttft_ms"] = got[:, 0], got[:, 1]
        x["decode_only_ms"] = np.asarray(g.decode_only_s) * 1e3
        out.append(x)
    return pd.concat(out)


def simulated_markdown(outs, sims: dict) -> list[str]:
    """The report's section: per framework, TTFT / TPOT medians of the analytical model (start-up term on, as
    scored above) beside each simulated harness, all out of sample."""
    from specplan.validation.serving import scores

    pct = lambda v: f"{100 * v:.1f} %"  # noqa: E731
    lines = ["", "## TTFT by the simulated harness (issue 39)", "",
             "The same out-of-sample engine fits, each row simulated request by request (`serving/simulator.py`: "
             "the engines' own admission, SGLang packing / vLLM token budget / TensorRT-LLM reserve-all), no "
             "start-up term (specplan/validation/serving_sim.py says how each harness runs). `together`: C "
             "clients start at once and, with equal lengths, stay in lockstep for all 10 rounds; `benchmark`: "
             "the first round so, the 9 later ones from a settled loop. The aiconfigurator TensorRT-LLM rows run "
             "with the engine's max batch at C and one request queued beyond it (the departure wait comes out of "
             "the simulation instead of the analytical rule).", "",
             "| framework | rows | TTFT median: analytical (term on) | " +
             " | ".join(f"simulated, {h}" for h in sims) + " | TTFT bias analytical / " +
             " / ".join(sims) + " | TPOT median analytical / " + " / ".join(sims) + " |",
             "|---|---|---|" + "---|" * len(sims) + "---|---|"]
    for fw in sorted(outs["framework"].unique()) + ["all"]:
        pick = (lambda t: t) if fw == "all" else (lambda t: t[t["framework"] == fw])  # noqa: E731
        a = scores(pick(outs))
        ss = [scores(pick(t)) for t in sims.values()]
        lines.append(f"| {fw} | {a['rows']} | {pct(a['ttft_median'])} | " +
                     " | ".join(pct(s['ttft_median']) for s in ss) + f" | {a['ttft_bias']:.2f} / " +
                     " / ".join(f"{s['ttft_bias']:.2f}" for s in ss) + f" | {pct(a['tpot_median'])} / " +
                     " / ".join(pct(s['tpot_median']) for s in ss) + " |")
    return lines

"""Validation of the parallel-layout model: published speculative-decoding rows predicted under the layout their
notes give, and the per-rank expert compute against the measured EP = 8 MoE rows.

Today: TensorRT-LLM's DeepSeek-R1 MTP sweep on 8 B200s (reference/specdec_public.csv rows trtllm-dsr1-b200-mtp*,
min-latency, batch 1, ISL 1024 / OSL 2048). The layout is read from each row's notes ("(--tp 8 --ep 4)": attention
TP 8, experts over 4 EP ranks, expert-TP 2); the precision is the notes' ("nvfp4 dense+MoE FFN, bf16 attention,
bf16 MTP layers, bf16 router GEMM"); AL is the row's measured acceptance length at its D. Nothing is fitted.

The measured speedup is an end-to-end latency ratio (TPS/user = output tokens / request latency, TTFT included),
so the prediction is the same ratio: (TTFT + OSL x T_step) / (TTFT + OSL / AL x T_iter), with TTFT = the
roofline prefill of ISL tokens (specplan.serving.prefill) and the decode steps at context ISL + OSL / 2.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from specplan.core.errors import SpecplanError
from specplan.model.parallel import Layout
from specplan.model.deployment import Deployment
from specplan.speculation.spec import Speculation

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "reference" / "specdec_public.csv"
CASES = "trtllm-dsr1-b200-mtp"
# The rows' notes: "Precision: nvfp4 dense+MoE FFN, bf16 attention, bf16 MTP layers, bf16 router GEMM".
MEASURED_BASE_TPS_USER = 111.0  # the rows' notes: "198 TPS/user vs 111 without MTP"
NOTES_PRECISION = {"attention": "bf16", "ffn": "fp4", "moe": "fp4", "mtp": "bf16", "lm_head": "bf16",
                   "embedding": "bf16", "router": "bf16"}


def layout_from_notes(notes: str) -> Layout:
    """The layout a row's notes name as '(--tp N --ep M)' (attention TP N, EP M), else a one-line error."""
    m = re.search(r"\(--tp (\d+) --ep (\d+)\)", notes)
    if not m:
        raise SpecplanError(f"{CSV.name}: notes name no '(--tp N --ep M)' layout: {notes[:80]}...")
    return Layout(tp=int(m.group(1)), ep=int(m.group(2)))


def _e2e_ratio(ttft, base_s, iter_s, al, osl):
    return (ttft + osl * base_s) / (ttft + osl / al * iter_s)


def b200_mtp_rows(layouts: dict[str, Layout] | None = None):
    """One row per published MTP row: measured vs predicted e2e speedup under the notes' layout (and, for
    comparison, under each layout of `layouts`), with the predicted baseline tokens/s/user beside the measured."""
    import pandas as pd

    from specplan.costs.precision import resolve_precision
    from specplan.profiles.registry import load_hardware, load_model
    from specplan.serving.prefill import prefill_s
    from specplan.speculation.acceptance import Acceptance
    from specplan.speculation.speedup import evaluate

    df = pd.read_csv(CSV)
    rows = df[df["case_id"].str.startswith(CASES)]
    if rows.empty:
        raise SpecplanError(f"{CSV}: no rows {CASES}*")
    base = load_model(rows["model"].iloc[0])
    model = base.model_copy(update={"module_dtypes": {**base.module_dtypes, **NOTES_PRECISION}})
    hw = load_hardware(rows["hardware"].iloc[0])
    prec = resolve_precision(model, hw, None, None)
    out = []
    for _, r in rows.iterrows():
        isl, osl, d, al = int(r["input_len"]), int(r["output_len"]), int(r["draft_len"]), float(r["acceptance_length"])
        lays = {"notes": layout_from_notes(str(r["notes"])), **(layouts or {})}
        rec = {"case_id": r["case_id"], "draft_len": d, "acceptance_length": al, "measured": float(r["speedup"])}
        for name, lay in lays.items():
            ttft = float(prefill_s(model, hw, lay.tp, isl, precision=prec))
            ev = evaluate(Deployment(model, hw, layout=lay),
                          Speculation(mechanism="mtp", draft_len=d, acceptance=Acceptance.from_length(al, d)),
                          batch=1, context_len=isl + osl // 2)
            b, it = float(ev.baseline_step_s), float(ev.iter_s)
            rec[f"{name}_layout"] = lay.name
            rec[f"{name}_predicted"] = _e2e_ratio(ttft, b, it, al, osl)
            rec[f"{name}_error_pct"] = 100.0 * (rec[f"{name}_predicted"] / rec["measured"] - 1.0)
            if name == "notes":
                rec.update(step_ms=1e3 * b, iter_ms=1e3 * it, draft_ms=1e3 * float(ev.draft_s), ttft_ms=1e3 * ttft,
                           base_tps_user=osl / (ttft + osl * b))
                # sensitivity, not a fit: if the gap to the measured baseline (MEASURED_BASE_TPS_USER) were a fixed
                # host time per target step, added to the baseline step and to every verify step
                host = max(0.0, (osl / MEASURED_BASE_TPS_USER - ttft) / osl - b)
                rec["host_s"] = host
                rec["with_host_predicted"] = _e2e_ratio(ttft, b + host, it + host, al, osl)
        out.append(rec)
    return pd.DataFrame(out)


def b200_mtp_report() -> str:
    """Markdown: measured vs predicted speedups of the B200 MTP rows under the notes' layout and plain TP 8 / EP 8."""
    t = b200_mtp_rows({"tp8": Layout(tp=8), "tp8ep8": Layout(tp=8, ep=8)})
    lay = t["notes_layout"].iloc[0]
    lines = [
        "# DeepSeek-R1 MTP on 8 B200s (TensorRT-LLM, min-latency): published vs predicted speedup",
        "",
        "<!-- generated by scripts/make_parallel_validation.py (specplan.validation.parallel.b200_mtp_report); do not edit -->",
        "",
        f"Rows `{CASES}1..5` of `reference/specdec_public.csv` (TensorRT-LLM tech blog 1, DeepSeek-R1 on 8 B200,",
        "concurrency 1, ISL 1024 / OSL 2048). Each is predicted under the layout its notes give, "
        f"`{lay}` (\"EP4TP2 (--tp 8 --ep 4)\": attention TP 8, 4 EP ranks of 64 experts, expert-TP 2), with the",
        "notes' precision (NVFP4 dense and MoE FFN, bf16 attention, MTP layer, router, LM head), the row's measured AL",
        "at its D, the b200 hardware profile and no engine profile (pure roofline). Nothing is fitted to these rows.",
        "The published speedup is a ratio of end-to-end request latencies (TTFT included); the prediction is the",
        "same ratio: (TTFT + OSL · T_step) / (TTFT + OSL / AL · T_iter), TTFT the roofline prefill of 1024 tokens,",
        "decode at context ISL + OSL / 2. Plain `tp8` (all 256 experts on every GPU, each split 8 ways) and `tp8ep8`",
        "are shown for comparison.",
        "",
        f"| row | D | AL | measured | predicted ({lay}) | error | predicted tp8 | error | predicted tp8ep8 | error |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in t.iterrows():
        lines.append(f"| {r['case_id']} | {r['draft_len']} | {r['acceptance_length']:.2f} | {r['measured']:.2f} | "
                     f"{r['notes_predicted']:.2f} | {r['notes_error_pct']:+.1f} % | {r['tp8_predicted']:.2f} | "
                     f"{r['tp8_error_pct']:+.1f} % | {r['tp8ep8_predicted']:.2f} | {r['tp8ep8_error_pct']:+.1f} % |")
    worst = float(np.max(np.abs(t["notes_error_pct"])))
    r0 = t.iloc[0]
    lines += [
        "",
        f"Worst error under the notes' layout: {worst:.1f} % (target: each row within 10 %: "
        f"{'met' if worst <= 10 else 'NOT met'}). The notes tie the EP4TP2 layout to the MTP 3 row (its 253 TPS/user "
        "equals that optimization stage); the other rows are taken to share it. At batch 1 the layout matters little:",
        f"plain TP 8 is within {float(np.max(np.abs(t['tp8_error_pct']))):.1f} % and TP 8 / EP 8 within "
        f"{float(np.max(np.abs(t['tp8ep8_error_pct']))):.1f} %.",
        "",
        "Why the speedup peaks at D = 3 and falls after: at batch 1 the verify step's 1 + D tokens pick up to",
        "8 (1 + D) experts; under EP 4 the slowest of the 4 ranks reads the expected-maximum number of touched experts",
        f"(specplan.costs.moe), so the verify step grows from {r0['step_ms']:.2f} ms (D = 0) faster than AL does; the",
        "MTP draft step itself is small (one layer + the LM head).",
        "",
        "Absolute times are not right: the predicted baseline is "
        f"{r0['step_ms']:.2f} ms per token ({r0['base_tps_user']:.0f} tokens/s/user with TTFT {r0['ttft_ms']:.0f} ms)",
        "against the measured 111 tokens/s/user. Where the missing time sits decides the speedup: if it were a fixed",
        f"host time per target step ({1e3 * r0['host_s']:.2f} ms, added to the baseline and to every verify step), the",
        "speedups would rise towards AL:",
        "",
        "| D | measured | roofline (above) | with a fixed host time per step | error |",
        "|---|---|---|---|---|",
    ]
    for _, r in t.iterrows():
        lines.append(f"| {r['draft_len']} | {r['measured']:.2f} | {r['notes_predicted']:.2f} | "
                     f"{r['with_host_predicted']:.2f} | {100 * (r['with_host_predicted'] / r['measured'] - 1):+.1f} % |")
    lines += [
        "",
        "The pure roofline ratio matching better hints that the missing time grows with the step's work (B200",
        "kernels below the H100-learned efficiencies the b200 profile carries) rather than being a constant per",
        "step, but five rows of one sweep do not prove it. Nothing here was fitted to them; the errors in the first",
        "table are those of the roofline alone.",
        "",
    ]
    return "\n".join(lines) + "\n" + moe_ep_report()


MOE_CSV = ROOT / "reference" / "measured" / "moe_h100_a100.csv.gz"


def moe_ep_table():
    """Median and p90 APE and median predicted/measured of the TRT-LLM cutlass fused-MoE rows (gated; balanced
    routing, no all-to-all) on H100 by EP (1, 8), dtype and regime: the EP = 8 rows are one rank's expert compute."""
    import pandas as pd

    from specplan.bench.families import predict_moe
    from specplan.profiles.registry import load_hardware

    d = pd.read_csv(MOE_CSV)
    d = d[d["framework"].str.startswith("trtllm") & d["kernel"].str.contains("cutlass")
          & ~d["kernel"].str.contains("nongated") & (d["device"] == "h100-sxm")].reset_index(drop=True)
    p = predict_moe(d, load_hardware("h100-sxm"))
    p["ep"] = d["moe_ep"].to_numpy()
    p["ratio"] = p["predicted_us"] / p["measured_us"]
    p["ape"] = 100.0 * (p["ratio"] - 1.0).abs()
    g = p.groupby(["ep", "dtype", "regime"])
    return g.agg(rows=("ape", "size"), median_ape=("ape", "median"), p90_ape=("ape", lambda x: float(np.percentile(x, 90))),
                 median_ratio=("ratio", "median")).reset_index()


def moe_ep_report() -> str:
    """Markdown section: per-rank expert compute against the measured EP = 8 rows, beside EP = 1."""
    t = moe_ep_table()
    lines = ["## Per-rank expert compute against the measured EP = 8 MoE rows", "",
             "`reference/measured/moe_h100_a100.csv.gz`, TRT-LLM 1.3.0rc20 cutlass fused MoE (gated), H100, balanced",
             "routing as collected, no all-to-all in the timed op: an EP = 8 row is one rank's compute over its",
             "E / 8 experts (`specplan.costs.moe.moe_experts_cost` with `ep = 8`, N k / 8 rows, min(E / 8, N k / 8)",
             "touched experts). The grouped-GEMM compute fractions (hardware_profiles/h100-sxm.yaml `moe`) are",
             "fitted on every TRT-LLM MoE row, these included; docs/validation/README.md scores them with each model",
             "shape left out.", "",
             "| EP | dtype | regime | rows | median APE | p90 APE | median predicted / measured |",
             "|---|---|---|---|---|---|---|"]
    for _, r in t.iterrows():
        lines.append(f"| {r['ep']} | {r['dtype']} | {r['regime']} | {r['rows']} | {r['median_ape']:.1f} % | "
                     f"{r['p90_ape']:.1f} % | {r['median_ratio']:.2f} |")
    lines += ["", "At EP = 8 the memory-bound rows are predicted a little fast (median ratio below 1) and the",
              "overhead-bound ones (a few tokens, a few experts per rank) about half as long as measured: a rank's",
              "fixed costs (routing, permutation, the grouped GEMM's launch and tail) weigh more when it owns only",
              "E / 8 experts, which the three-launch overhead of the model does not carry. The EP-specific parts of the",
              "model (expected maximum over ranks, all-to-all) are not in these rows: balanced routing, one rank."]
    return "\n".join(lines) + "\n"

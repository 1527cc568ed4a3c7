"""Regenerate the validation report: `python scripts/make_validation_report.py` -> docs/validation/.

Fits the H100 efficiencies on the TRT-LLM rows of reference/measured/ (GEMM, decode attention, custom
all-reduce; NCCL on nccl 2.29.2), scores them on the vLLM / SGLang rows (NCCL on 2.27.3), compares with the
spec-sheet profile (schema-default efficiencies), validates MoE / MLA / linear attention, checks the
H100-learned defaults on A100, and includes bench_data/*.csv (specplan's own harness) when present.
Writes docs/validation/README.md, *.png and h100_fit.json, and the per-framework numbers (the fa3 kernel family,
the engines' GEMM scales: fitted on half of each framework's rows, scored on the rest) to frameworks.md / .json
(`specplan.validation.framework_fit`). Takes about a minute on a laptop CPU.
"""

from __future__ import annotations

import json
from string import Template
from pathlib import Path

import numpy as np
import pandas as pd
from specplan.model.step import StepKernels

ROOT = Path(__file__).resolve().parents[2]  # the repository (reports read reference/ and write docs/)

from specplan.bench.calibrate import (allreduce_latency_floors, fallback_attention_rows, fit_allreduce,
                                      fit_attention, fit_gemm, fit_mla)
from specplan.bench.families import AUTO_ENGINE, attention_kv_bytes, predict_table
from specplan.validation.framework_fit import write_report as write_framework_report
from specplan.validation.kernels_engine import allreduce_engine_section, moe_engine_section
from specplan.validation.kernels import metrics, oracle_ape, scatter_plot
from specplan.profiles.hardware import AllReduceParams, AttentionEfficiency, HardwareProfile, KernelEfficiency
from specplan.profiles.registry import load_hardware

MEAS = ROOT / "reference" / "measured"
OUT = ROOT / "docs" / "validation"
H100 = "h100-sxm"


NARRATIVE = (Path(__file__).with_name("kernels_narrative.md")).read_text()
GEMM_KEYS = ["dtype", "m", "n", "k"]
ATTN_KEYS = ["dtype", "kv_dtype", "batch", "q_len", "n_q_heads", "n_kv_heads", "head_dim", "kv_len"]
# issue 4 Must show: (MAPE bound, median bound) in percent
TARGETS = {"gemm bf16": (8.0, 6.0), "gemm fp8": (20.0, 15.0), "attention": (20.0, 12.0)}
# The bounds the report states for the families without a fitting target (H100, graph mode). Each is checked
# against the computed tables below: `groups` are row labels of the family's table ("all" = every row), each of
# which must satisfy `metric op limit` (median_ape / p90_ape in percent; ratio = median measured / predicted).
# The verdict (and which groups miss) goes into the report and into h100_fit.json["bounds"]; never edit a limit
# to make it hold without saying so in the narrative.
BOUNDS = [
    {"id": "allreduce_custom_graph", "family": "allreduce", "metric": "median_ape", "op": "<=", "limit": 30.0,
     "text": "All-reduce, vLLM / SGLang custom kernels in graph mode: median APE per kernel and regime",
     "groups": ["SGLang_CustomAllReduce_graph / bandwidth", "SGLang_CustomAllReduce_graph / latency",
                "vLLM_custom_graph / bandwidth", "vLLM_custom_graph / latency"]},
    {"id": "allreduce_nccl", "family": "allreduce", "metric": "median_ape", "op": "<=", "limit": 15.0,
     "text": "All-reduce, NCCL (held-out NCCL 2.27.3): median APE per regime",
     "groups": ["NCCL / bandwidth", "NCCL / latency"]},
    {"id": "moe_trtllm_memory", "family": "moe", "metric": "median_ape", "op": "<=", "limit": 12.0,
     "text": "MoE, TRT-LLM cutlass, balanced routing, memory-bound: median APE per dtype",
     "groups": ["trtllm 1.3.0rc20 / bf16 / memory", "trtllm 1.3.0rc20 / fp8 / memory"]},
    {"id": "moe_trtllm_compute", "family": "moe", "metric": "median_ape", "op": "<=", "limit": 30.0,
     "text": "MoE, TRT-LLM cutlass, balanced routing, compute-bound: median APE per dtype",
     "groups": ["trtllm 1.3.0rc20 / bf16 / compute", "trtllm 1.3.0rc20 / fp8 / compute"]},
    {"id": "mla_overall", "family": "mla_decode", "metric": "median_ape", "op": "<=", "limit": 20.0,
     "text": "MLA decode (TRT-LLM): median APE over all rows", "groups": ["all"]},
    {"id": "mla_overhead", "family": "mla_decode", "metric": "median_ape", "op": "<=", "limit": 15.0,
     "text": "MLA decode, overhead regime: median APE per kv dtype",
     "groups": ["kv_bf16 / overhead", "kv_fp8 / overhead"]},
    {"id": "mla_memory", "family": "mla_decode", "metric": "median_ape", "op": "<=", "limit": 20.0,
     "text": "MLA decode, memory-bound: median APE per kv dtype", "groups": ["kv_bf16 / memory", "kv_fp8 / memory"]},
    {"id": "mla_compute", "family": "mla_decode", "metric": "ratio", "op": ">=", "limit": 0.5,
     "text": "MLA decode, compute-bound: predicted too slow by at most 2× (median measured / predicted per kv dtype)",
     "groups": ["kv_bf16 / compute", "kv_fp8 / compute"]},
    {"id": "linear_attention_2x", "family": "linear_attention_decode", "metric": "p90_ape", "op": "<=",
     "limit": 100.0, "text": "Linear attention decode: within 2× (predicted too slow) on nine rows in ten, "
     "i.e. p90 APE over all rows", "groups": ["all"]},
]


def med(x) -> float:
    """Median of an array (NaN-free)."""
    return float(np.median(np.asarray(x, float)))


def span(values, fmt: str = "{:.0f}") -> str:
    """'lo–hi' of a few numbers as quoted in prose ('x' when they round to the same text)."""
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def target_row(label: str, ape: np.ndarray, oracle: np.ndarray, bounds: tuple[float, float]) -> tuple[str, dict]:
    """One Must-show line: the model, the model on the oracle's rows, the TRT-LLM oracle, and the verdicts."""
    m, ok = metrics(ape), ~np.isnan(oracle)
    mo, o = metrics(ape[ok]), metrics(oracle[ok])
    holds = m["mape"] <= bounds[0] and m["median_ape"] <= bounds[1]
    reachable = o["mape"] <= bounds[0] and o["median_ape"] <= bounds[1]
    miss = [f"{v - b:.1f} over" if v - b >= 0.05 else f"{v - b:.2f} over" for v, b in ((m["mape"], bounds[0]), (m["median_ape"], bounds[1])) if v > b]
    verdict = "yes" if holds else f"**no** ({', '.join(miss)})"
    reach = ("yes" if reachable else "**no: unreachable for any model fitted only on TRT-LLM rows**")
    line = (f"| {label}: MAPE ≤ {bounds[0]:g} %, median ≤ {bounds[1]:g} % | {m['rows']} | {m['mape']:.1f} / "
            f"{m['median_ape']:.1f} | {mo['mape']:.1f} / {mo['median_ape']:.1f} | {o['mape']:.1f} / "
            f"{o['median_ape']:.1f} ({o['rows']} rows) | {verdict} | {reach} |")
    return line, {"model": m, "model_on_oracle_rows": mo, "oracle": o, "holds": holds, "reachable": reachable,
                  "bounds": {"mape": bounds[0], "median_ape": bounds[1]}}


def group_stats(pred: pd.DataFrame, keys: list[str]) -> dict:
    """Per-group metrics of a prediction table (labels as in `table_by`), plus "all"; ratio = median measured/predicted."""
    def one(x: pd.DataFrame) -> dict:
        return {**metrics(x["ape_pct"]), "ratio": med(x["measured_us"] / x["predicted_us"])}
    out = {" / ".join(map(str, k if isinstance(k, tuple) else (k,))): one(x) for k, x in pred.groupby(keys, sort=True)}
    return {**out, "all": one(pred)}


def check_bounds(stats: dict) -> tuple[list[str], list[dict]]:
    """Evaluate BOUNDS on the computed group statistics: the report's table rows and the JSON records."""
    lines = ["| bound | limit | measured (per group) | holds? |", "|---|---|---|---|"]
    records = []
    for b in BOUNDS:
        fam = stats[b["family"]]
        measured = {g: float(fam[g][b["metric"]]) for g in b["groups"]}  # KeyError = a group label went stale
        ok = {g: (v <= b["limit"] if b["op"] == "<=" else v >= b["limit"]) for g, v in measured.items()}
        holds = all(ok.values())
        fmt = "{:.2f}" if b["metric"] == "ratio" else "{:.1f}"
        unit = "" if b["metric"] == "ratio" else " %"
        meas = "; ".join(f"{g}: {fmt.format(v)}" + ("" if ok[g] else " ✗") for g, v in measured.items())
        missed = [g for g in b["groups"] if not ok[g]]
        gap = " points" if unit else ""
        verdict = "yes" if holds else "**no**: missed by " + ", ".join(
            f"{g} ({fmt.format(measured[g])}{unit}, {fmt.format(abs(measured[g] - b['limit']))}{gap} "
            f"{'over' if b['op'] == '<=' else 'under'})" for g in missed)
        metric = {"median_ape": "median APE", "p90_ape": "p90 APE", "ratio": "measured/predicted"}[b["metric"]]
        lines.append(f"| {b['text']} | {metric} {'≤' if b['op'] == '<=' else '≥'} {fmt.format(b['limit'])}{unit} "
                     f"| {meas} | {verdict} |")
        records.append({**b, "measured": measured, "holds": holds, "missed": missed})
    return lines, records


TARGET_HEAD = ("| target | rows | model MAPE / median % | model on the oracle's rows | oracle: TRT-LLM's own time "
               "(best any TRT-LLM-fitted model could do) | holds? | reachable from TRT-LLM rows? |\n"
               "|---|---|---|---|---|---|---|")


def spec_sheet(hw: HardwareProfile) -> HardwareProfile:
    """The profile with schema-default efficiencies (spec sheet x textbook fractions, nothing fitted)."""
    d = hw.model_dump()
    d.update(efficiency={"default": KernelEfficiency().model_dump()}, attention=AttentionEfficiency().model_dump(),
             allreduce=AllReduceParams().model_dump(), kernel_overhead_s=3e-6, calibration=None)
    return HardwareProfile.model_validate(d)


def fw(df: pd.DataFrame) -> pd.Series:
    """Framework family: trtllm / vllm / sglang / nccl / torch."""
    return df["framework"].astype(str).str.split().str[0]


def row(label: str, ape) -> str:
    """One markdown table row of metrics."""
    m = metrics(ape)
    return f"| {label} | {m['rows']} | {m['mape']:.1f} | {m['median_ape']:.1f} | {m['p90_ape']:.1f} |"


HEAD = "| rows scored | n | MAPE % | median APE % | p90 APE % |\n|---|---|---|---|---|"


def table_by(pred: pd.DataFrame, keys: list[str], title: str = "") -> list[str]:
    """Markdown metrics table grouped by `keys`."""
    out = [title, "", HEAD] if title else [HEAD]
    for k, g in pred.groupby(keys, sort=True):
        out.append(row(" / ".join(map(str, k if isinstance(k, tuple) else (k,))), g["ape_pct"]))
    return out + [""]


MLA_FIT: dict = {}  # the fitted mla-latent family, shared by mla_section and the MLA validation table
MLA_TILE_ROWS = 64  # FlashMLA (Hopper) processes 64 query rows (heads x query tokens) per CTA tile


def mla_section(hw: HardwareProfile, fit_record: dict, nums: dict) -> list[str]:
    """MLA decode before (the hardware attention block: 128-row tiles, compute 0.45) and after (the mla-latent
    family: 64-row tiles, mem_bw / compute fractions fitted on the H100 rows), on H100 and, carried over, A100;
    and what it changes for DeepSeek-V3 on H200 (TP 8, B 16, 32K)."""
    from specplan.profiles.engine import KernelFamily
    from specplan.profiles.registry import load_kernel_family
    from specplan.model.step import step_time

    t = pd.read_csv(MEAS / "mla_decode_h100_a100.csv.gz")
    h, a = t[t["device"] == H100], t[t["device"] != H100]
    before = KernelFamily(id="hardware-attention-block", source="the hardware profile's attention block")
    fam, info = fit_mla(h, hw, load_kernel_family("mla-latent"), tile_rows=MLA_TILE_ROWS)
    MLA_FIT["family"] = fam
    fit_record["mla"] = {"fitted_on": f"{info['rows']} H100 TRT-LLM 1.3.0rc20 MLA decode rows of "
                                      "reference/measured/mla_decode_h100_a100.csv.gz (bf16 and fp8 KV), tile 64 rows",
                         "tile_rows": info["tile_rows"], "mem_bw_fraction": fam.mem_bw_fraction,
                         "compute_fraction": fam.compute_fraction}
    a100 = load_hardware("a100-sxm-80gb")
    pb, pa = predict_table(h, hw, "mla", before), predict_table(h, hw, "mla", fam)
    ab, aa = predict_table(a, a100, "mla", before), predict_table(a, a100, "mla", fam)
    md = ["## MLA decode: before and after the 64-row tile (H100)", "",
          f"Before: the hardware attention block ({hw.attention.tile_rows}-row tiles, compute_fraction "
          f"{hw.attention.compute_fraction:g}, mem_bw_fraction {hw.attention.mem_bw_fraction:.3f}). After: the "
          f"`mla-latent` kernel family (engine_profiles/kernels/mla-latent.yaml), {fam.tile_rows}-row tiles as FlashMLA "
          f"runs them, mem_bw_fraction {fam.mem_bw_fraction:.3f} and compute_fraction {fam.compute_fraction:.3f} fitted "
          f"(robust least squares on log time, specplan.bench.calibrate.fit_mla) on the {info['rows']} H100 rows. "
          f"Tile rule for MLA: D = {fam.tile_rows}/G − 1. Regimes are each model's own.", "",
          "| rows | n | median APE % before | after | MAPE % before | after | measured / predicted before | after |",
          "|---|---|---|---|---|---|---|---|"]
    for name, b_, a_ in (("H100 all", pb, pa), ("A100 all (carried over, not fitted)", ab, aa)):
        md.append(f"| {name} | {len(b_)} | {med(b_['ape_pct']):.1f} | {med(a_['ape_pct']):.1f} | "
                  f"{b_['ape_pct'].mean():.1f} | {a_['ape_pct'].mean():.1f} | "
                  f"{med(b_['measured_us'] / b_['predicted_us']):.2f} | {med(a_['measured_us'] / a_['predicted_us']):.2f} |")
    for kv in ("kv_bf16", "kv_fp8"):
        for heads in ((1, 8), (16, 64), (128, 128)):
            sel = (pb["dtype"] == kv).to_numpy() & h["num_heads"].between(*heads).to_numpy()
            if not sel.any():
                continue
            b_, a_ = pb[sel], pa[sel]
            md.append(f"| H100 {kv}, {heads[0]}–{heads[1]} heads | {int(sel.sum())} | {med(b_['ape_pct']):.1f} | "
                      f"{med(a_['ape_pct']):.1f} | {b_['ape_pct'].mean():.1f} | {a_['ape_pct'].mean():.1f} | "
                      f"{med(b_['measured_us'] / b_['predicted_us']):.2f} | {med(a_['measured_us'] / a_['predicted_us']):.2f} |")
    r0 = step_time("deepseek-v3", "h200-sxm", 8, 16, 1, 32768, kernels=StepKernels(mla_family=before))
    r1 = step_time("deepseek-v3", "h200-sxm", 8, 16, 1, 32768, kernels=StepKernels(mla_family=fam))
    att0, att1 = float(r0.breakdown_s["attention"]) * 1e3, float(r1.breakdown_s["attention"]) * 1e3
    t0, t1 = float(r0.total_s) * 1e3, float(r1.total_s) * 1e3
    md += ["", f"DeepSeek-V3 on h200-sxm, TP 8, B 16, context 32K, D = 0: attention {att0:.3f} → {att1:.3f} ms "
           f"({100 * (att1 / att0 - 1):+.0f} %, now {r1.regime('attention')}-bound), step {t0:.3f} → {t1:.3f} ms "
           f"({100 * (t1 / t0 - 1):+.0f} %). The A100 rows are slower than the H100-fitted family predicts: "
           f"FlashMLA is Hopper-only and TRT-LLM 1.0 runs another MLA kernel on A100.", ""]
    nums.update(mla_before=f"{med(pb['ape_pct']):.1f}", mla_after=f"{med(pa['ape_pct']):.1f}",
                mla_bw=f"{fam.mem_bw_fraction:.3f}", mla_cf=f"{fam.compute_fraction:.3f}",
                mla_att=f"{att0:.3f} → {att1:.3f}", mla_step=f"{t0:.3f} → {t1:.3f}")
    return md


def main() -> None:
    """Fit, score and write docs/validation/README.md, h100_fit.json, the figures and frameworks.md."""
    OUT.mkdir(parents=True, exist_ok=True)
    base = load_hardware(H100)
    md, fit_record, nums, targets, verdicts = [], {}, {}, [TARGET_HEAD], {}
    hw = _gemm_section(base, md, fit_record, nums, targets, verdicts)
    hw = _attention_section(base, hw, md, fit_record, nums, targets, verdicts)
    hw, bound_stats = _allreduce_section(hw, md, fit_record, nums)
    _validation_only_sections(hw, md, fit_record, nums, bound_stats)
    _summary(md, fit_record, nums, targets, verdicts, bound_stats)
    (OUT / "h100_fit.json").write_text(json.dumps(fit_record, indent=1, default=float))
    (OUT / "README.md").write_text(Template(NARRATIVE).substitute(nums) + "\n".join(md) + "\n")
    write_framework_report(OUT, MEAS)
    print("\n".join(md))


def _gemm_targets(p_cal, oracles: tuple, quant_us: float, targets: list, verdicts: dict) -> None:
    """The GEMM target rows (bf16 and fp8, SGLang and vLLM) against TRT-LLM's own times (the raw oracle, and for
    fp8 the oracle minus TRT-LLM's fitted quantization), appended to `targets` and `verdicts`."""
    g_or, g_orq = oracles
    for d in ("bf16", "fp8"):
        for f in ("sglang", "vllm"):
            sel = ((p_cal["fw"] == f) & (p_cal["dtype"] == d)).to_numpy()
            line, v = target_row(f"GEMM {d}, {f}", p_cal["ape_pct"].to_numpy()[sel], g_or[sel], TARGETS[f"gemm {d}"])
            if d == "fp8":  # TRT-LLM's time includes its activation quantization; vLLM/SGLang's does not
                qo = metrics(g_orq[sel])
                line = line.replace("**no: unreachable for any model fitted only on TRT-LLM rows**",
                                    "**unproven** (the raw oracle includes TRT-LLM's quantization)")
                line = line[:-2] + (f"; oracle minus TRT-LLM's fitted {quant_us:.1f} µs quantization: "
                                    f"{qo['mape']:.1f} / {qo['median_ape']:.1f}, "
                                    + ("within the target" if qo["mape"] <= TARGETS["gemm fp8"][0]
                                       and qo["median_ape"] <= TARGETS["gemm fp8"][1] else "a miss")
                                    + " (see \"Read plainly\") |")
                v["oracle_minus_quant"] = qo
            targets.append(line)
            verdicts[f"gemm_{d}_{f}"] = v


def _gemm_section(base, md, fit_record, nums, targets, verdicts) -> HardwareProfile:
    """GEMM: efficiencies fitted on TRT-LLM rows, scored on vLLM/SGLang; the profile with the GEMM fit."""
    # ---------------- GEMM ----------------
    g = pd.read_csv(MEAS / "gemm_h100_a100.csv.gz")
    h = g[g["device"] == H100]
    layer = (h.n >= 1024) & (h.k >= 1024) & (h.m <= 4096) & (h.time_us >= 5)
    trt = fw(h) == "trtllm"
    hw, info = fit_gemm(h[trt & layer], base)
    fit_record["gemm"] = {"fitted_on": "TRT-LLM 1.3.0rc20 H100 GEMM rows, N,K >= 1024, M <= 4096, time >= 5 us",
                          "kernel_overhead_s": hw.kernel_overhead_s,
                          "efficiency": {k: v.model_dump() for k, v in hw.efficiency.items()}, **info}
    test = h[layer & ~trt]
    p_cal, p_spec = predict_table(test, hw), predict_table(test, spec_sheet(base))
    p_cal["fw"] = fw(test).to_numpy()
    p_cal["m"] = test["m"].to_numpy()
    # fp8: what the activation-quantization term explains (score vLLM/SGLang as if their kernel quantized)
    q = test[test.dtype == "fp8"]
    p_q = predict_table(q.assign(framework="trtllm-quant " + q["framework"]), hw)
    # oracle: TRT-LLM's own measured time for the same (dtype, M, N, K), same filters as the target
    g_or = oracle_ape(test, h[trt & layer], GEMM_KEYS)
    quant_us = hw.kernel_eff("fp8").quant_overhead_s * 1e6
    ref_q = h[trt & layer].assign(time_us=lambda x: x["time_us"] - np.where(x["dtype"] == "fp8", quant_us, 0.0))
    g_orq = oracle_ape(test, ref_q, GEMM_KEYS)
    _gemm_targets(p_cal, (g_or, g_orq), quant_us, targets, verdicts)
    e = hw.efficiency
    nums.update(ovh_us=f"{hw.kernel_overhead_s * 1e6:.2f}", bf16_bw=f"{e['bf16'].mem_bw_fraction:.3f}",
                bf16_peak=f"{e['bf16'].compute_max_fraction:.3f}", bf16_half=f"{e['bf16'].compute_half_flops:.1e}",
                fp8_bw=f"{e['fp8'].mem_bw_fraction:.3f}", fp8_peak=f"{e['fp8'].compute_max_fraction:.3f}",
                fp8_half=f"{e['fp8'].compute_half_flops:.1e}", fp8_quant_us=f"{e['fp8'].quant_overhead_s * 1e6:.1f}",
                bf16_p=f"{e['bf16'].roofline_sharpness:.2f}", fp8_p=f"{e['fp8'].roofline_sharpness:.2f}",
                bf16_klat=f"{e['bf16'].k_latency_s * 1e9:.2f}", fp8_klat=f"{e['fp8'].k_latency_s * 1e9:.2f}")
    p_cal["m_bin"] = pd.cut(p_cal["m"], [0, 16, 64, 128, 256, 1024, 4096]).astype(str)
    fp8c = p_cal[p_cal["dtype"] == "fp8"]
    nums["fp8_midm_median"] = span([med(fp8c["ape_pct"][fp8c["m_bin"] == b]) for b in ("(128, 256]", "(256, 1024]")])
    r = (test["time_us"] / p_cal["predicted_us"].to_numpy())[(test["dtype"] == "fp8") & (test["n"] == 1024) & (test["m"] == 256)]
    nums["fp8_n1024_m256_ratio"] = f"{med(r):.1f}"
    r = (test["time_us"] / p_cal["predicted_us"].to_numpy())[(test["dtype"] == "fp8") & (test["n"] >= 8192)]
    nums["fp8_bign_ratio"] = f"{med(r):.2f}"
    for f in ("sglang", "vllm"):
        nums[f"fp8_{f}_mape"] = f"{verdicts[f'gemm_fp8_{f}']['model']['mape']:.1f}"
        nums[f"fp8_{f}_mape_quant"] = f"{metrics(p_q['ape_pct'][(fw(q) == f).to_numpy()])['mape']:.1f}"
    tr = h[trt & layer].groupby(GEMM_KEYS)["time_us"].median().rename("trt_us")
    vb = test[(fw(test) == "vllm") & (test["dtype"] == "bf16")].join(tr, on=GEMM_KEYS).dropna(subset=["trt_us"])
    nums["vllm_vs_trt_bf16"] = f"{med(vb['time_us'] / vb['trt_us']):.3f}"
    vc = p_cal[(p_cal["fw"] == "vllm") & (p_cal["dtype"] == "bf16")]
    nums["vllm_bf16_bias"] = f"{med(vc['measured_us'] / vc['predicted_us']):.3f}"
    # ceiling of any model smoother than TRT-LLM itself: TRT-LLM's time averaged (geometric) with its two
    # neighbouring measured M of the same (N, K), used as the prediction of the vLLM rows
    tb = h[trt & layer & (h.dtype == "bf16")].groupby(["m", "n", "k"])["time_us"].median().reset_index()
    tb = tb.sort_values(["n", "k", "m"])
    tb["sm"] = np.exp(tb.groupby(["n", "k"])["time_us"].transform(
        lambda x: np.log(x).rolling(3, center=True, min_periods=1).mean()))
    vs = test[(fw(test) == "vllm") & (test.dtype == "bf16")].merge(tb, on=["m", "n", "k"], suffixes=("", "_t"))
    sm = metrics((vs["sm"] / vs["time_us"] - 1).abs().to_numpy() * 100)
    nums["vllm_bf16_smooth_oracle"] = f"{sm['mape']:.1f} / {sm['median_ape']:.1f}"
    gemm_lines = ["## GEMM (H100, layer-like rows: N, K >= 1024, M <= 4096, measured >= 5 us)", "",
                  f"Fitted on {info['rows']} TRT-LLM rows (seeded subset of {int((trt & layer).sum())}); "
                  f"scored on {len(test)} vLLM and SGLang rows. Targets: bf16 MAPE <= 8 %, median <= 6 %; "
                  "fp8 MAPE <= 20 %, median <= 15 %.", "", HEAD]
    for (f, d), gg in p_cal.groupby(["fw", "dtype"]):
        gemm_lines.append(row(f"calibrated, {f} {d}", gg["ape_pct"]))
    for (f, d), gg in p_spec.assign(fw=fw(test).to_numpy()).groupby(["fw", "dtype"]):
        gemm_lines.append(row(f"spec-sheet defaults, {f} {d}", gg["ape_pct"]))
    for f in ("sglang", "vllm"):
        gemm_lines.append(row(f"calibrated, {f} fp8 WITH the TRT-LLM quantization term",
                              p_q["ape_pct"][(fw(q) == f).to_numpy()]))
    gemm_lines.append("")
    p_cal["m_bin"] = pd.cut(p_cal["m"], [0, 16, 64, 128, 256, 1024, 4096]).astype(str)
    gemm_lines += table_by(p_cal, ["dtype", "regime"], "By dtype and regime (calibrated, vLLM + SGLang):")
    gemm_lines += table_by(p_cal, ["dtype", "m_bin"], "By dtype and M (calibrated, vLLM + SGLang):")
    scatter_plot(p_cal.assign(kind=p_cal["fw"] + " " + p_cal["dtype"]), OUT / "gemm_h100.png",
                 "H100 GEMM (layer-like), fitted on TRT-LLM, scored on vLLM/SGLang")
    md += gemm_lines
    return hw


def _attention_section(base, hw, md, fit_record, nums, targets, verdicts) -> HardwareProfile:
    """Decode attention above L2: fitted on TRT-LLM rows, scored on vLLM/SGLang; the profile with it."""
    # ---------------- decode attention ----------------
    a = pd.read_csv(MEAS / "attention_decode_h100_a100.csv.gz")
    ah = a[a["device"] == H100]
    big = attention_kv_bytes(ah) > base.l2_bytes
    fb = fallback_attention_rows(ah)
    atrt = fw(ah) == "trtllm"
    hw, ainfo = fit_attention(ah[atrt & big], hw)
    fit_record["attention"] = {"fitted_on": "TRT-LLM 1.3.0rc20 H100 decode-attention rows with KV bytes > L2, "
                               "fallback rows excluded", **hw.attention.model_dump(), **ainfo}
    atest = ah[~atrt & big & ~fb]
    pa, pas = predict_table(atest, hw), predict_table(atest, spec_sheet(base))
    pa["fw"] = fw(atest).to_numpy()
    pa["G"] = (atest.n_q_heads / atest.n_kv_heads).to_numpy()
    pa["batch"] = atest["batch"].to_numpy()
    pa["kv_len"] = atest["kv_len"].to_numpy()
    a_or = oracle_ape(atest, ah[atrt & big & ~fb], ATTN_KEYS)
    for d in ("kv_bf16", "kv_fp8"):
        for f in ("sglang", "vllm"):
            sel = ((pa["fw"] == f) & (pa["dtype"] == d)).to_numpy()
            line, v = target_row(f"Decode attention KV > L2, {d}, {f}", pa["ape_pct"].to_numpy()[sel], a_or[sel],
                                 TARGETS["attention"])
            targets.append(line)
            verdicts[f"attention_{d}_{f}"] = v
    at_ = hw.attention
    nums.update(att_bw=f"{at_.mem_bw_fraction:.3f}", att_bw_fp8=f"{at_.bw_fraction('fp8'):.3f}",
                cta_us=f"{at_.cta_overhead_s * 1e6:.2f}", sm=str(hw.sm_count))
    kvb = pd.cut(pa["kv_len"], [0, 128, 8192, 1e9]).astype(str)
    for d in ("kv_bf16", "kv_fp8"):
        x = pa[pa["dtype"] == d]
        nums[f"short_kv_{d}"] = f"{med(x['ape_pct'][kvb[x.index] == '(0.0, 128.0]']):.0f}"
        nums[f"long_kv_{d}"] = f"{med(x['ape_pct'][kvb[x.index] == '(8192.0, 1000000000.0]']):.0f}"
        nums[f"ratio_{d}"] = f"{med(x['measured_us'] / x['predicted_us']):.2f}"
        nums[f"b1_{d}"] = f"{med((x['measured_us'] / x['predicted_us'])[x['batch'] == 1]):.2f}"
        for f in ("sglang", "vllm"):
            v = verdicts[f"attention_{d}_{f}"]
            nums[f"or_{d}_{f}"] = f"{v['oracle']['mape']:.1f} / {v['oracle']['median_ape']:.1f}"
    short = pa[(pa["kv_len"] <= 16)]
    nums["kv16_ratio"] = f"{med(short['measured_us'] / short['predicted_us']):.1f}"
    tshort = ah[atrt & big & ~fb & (ah["kv_len"] <= 16)]
    nums["kv16_ratio_trt"] = f"{med(tshort['time_us'] / predict_table(tshort, hw)['predicted_us'].to_numpy()):.2f}"
    md += ["## Decode attention (H100, KV bytes above the 50 MB L2)", "",
           f"Fitted on {ainfo['rows']} TRT-LLM rows; scored on {len(atest)} vLLM and SGLang rows. "
           "Targets per kv dtype: MAPE <= 20 %, median <= 12 %.", "", HEAD]
    for (f, d), gg in pa.groupby(["fw", "dtype"]):
        md.append(row(f"calibrated, {f} {d}", gg["ape_pct"]))
    for (f, d), gg in pas.assign(fw=pa["fw"]).groupby(["fw", "dtype"]):
        md.append(row(f"spec-sheet defaults, {f} {d}", gg["ape_pct"]))
    md.append("")
    md += table_by(pa, ["dtype", "kernel"], "By kv dtype and kernel (calibrated):")
    pa["kv_bin"] = pd.cut(pa["kv_len"], [0, 128, 1024, 8192, 131072]).astype(str)
    md += table_by(pa, ["dtype", "kv_bin"], "By kv dtype and KV length (calibrated):")
    md += table_by(pa.assign(Gb=pd.cut(pa["G"], [0, 1, 4, 8, 16, 64]).astype(str)), ["dtype", "Gb"],
                   "By kv dtype and G = n_q_heads / n_kv_heads (calibrated):")
    scatter_plot(pa.assign(kind=pa["fw"] + " " + pa["dtype"]), OUT / "attention_h100.png",
                 "H100 decode attention, KV > L2, fitted on TRT-LLM, scored on vLLM/SGLang")
    fbrows = ah[fb]
    md += ["Excluded fallback-kernel rows (G >= 48 and KV read below 0.2 TB/s, KV > 8 MB): "
           f"{len(fbrows)} rows.", "", "| framework | kernel | G | rows | median KV TB/s |", "|---|---|---|---|---|"]
    fbrows = fbrows.assign(G=fbrows.n_q_heads / fbrows.n_kv_heads,
                           tbs=attention_kv_bytes(fbrows) / fbrows.time_us * 1e-6)
    for (f, k, G), gg in fbrows.groupby(["framework", "kernel", "G"]):
        md.append(f"| {f} | {k} | {G:g} | {len(gg)} | {gg['tbs'].median():.3f} |")
    md.append("")
    return hw


def _allreduce_section(hw, md, fit_record, nums) -> tuple[HardwareProfile, dict]:
    """All-reduce: bandwidth fractions and latency floors from TRT-LLM custom + NCCL 2.29.2 rows, the rest held out."""
    # ---------------- all-reduce ----------------
    r = pd.read_csv(MEAS / "allreduce_h100_a100.csv.gz")
    rh = r[r["device"] == H100]
    train = rh[(rh["kernel"] == "TRTLLM") | (rh["framework"] == "nccl 2.29.2")]
    floors = allreduce_latency_floors(train)  # latencies from the fit rows' own small-message floors only
    hw = hw.model_copy(update={"allreduce": hw.allreduce.model_copy(update=floors)})
    hw, rinfo = fit_allreduce(train, hw, fit_latency=False)
    fit_record["allreduce"] = {"fitted_on": "bandwidth fractions each on its own kernel's rows: nccl_bw_fraction (with nvls_latency_s where the profile has nvls) on the NCCL 2.29.2 H100 rows alone, custom_bw_fraction on the TRTLLM-kernel rows the one-shot kernel carries itself (messages <= oneshot_max_bytes, priced one-shot; calibrate.custom_kernel_rows); latencies = the small-message floors of the same TRTLLM + NCCL 2.29.2 rows (held out: vLLM / SGLang custom, NCCL 2.27.3)",
                               **hw.allreduce.model_dump(), **rinfo}
    rtest = rh[~rh.index.isin(train.index)]
    pr = predict_table(rtest, hw)
    md += ["## All-reduce (H100, 2-8 GPUs)", "", f"Fitted on {len(train)} TRT-LLM custom + NCCL 2.29.2 rows (bandwidth "
           f"fractions by least squares, each kernel on its own rows: NCCL's on the {rinfo['nccl_rows']} NCCL 2.29.2 "
           f"rows, the custom kernel's on the {rinfo['custom_kernel_rows']} TRTLLM rows it carries itself, messages "
           f"≤ {hw.allreduce.oneshot_max_bytes / 1e6:.2f} MB priced one-shot as TensorRT-LLM runs them, never on the "
           f"rows beyond, which run NCCL; latencies = those rows' small-message floors: custom "
           f"{hw.allreduce.custom_latency_s * 1e6:.2f} µs, NCCL {hw.allreduce.nccl_latency_s * 1e6:.2f} + "
           f"{hw.allreduce.nccl_latency_per_peer_s * 1e6:.2f} × (GPUs − 1) µs); scored on {len(rtest)} vLLM / SGLang "
           f"custom (graph and eager) and NCCL 2.27.3 rows, held out for every parameter.", ""]
    md += table_by(pr, ["kernel", "regime"])
    ar = {k: med(x["ape_pct"]) for k, x in pr.groupby(["kernel", "regime"])}
    bound_stats = {"allreduce": group_stats(pr, ["kernel", "regime"])}
    nums.update(ar_eager=span([v for (k, r_), v in ar.items() if "eager" in k and r_ == "latency"]),
                ar_graph_lat=span([v for (k, r_), v in ar.items() if "graph" in k and r_ == "latency"]),
                ar_graph_bw=span([v for (k, r_), v in ar.items() if "graph" in k and r_ == "bandwidth"]),
                nccl_bw=f"{ar[('NCCL', 'bandwidth')]:.1f}", nccl_lat=f"{ar[('NCCL', 'latency')]:.1f}",
                ar_custom=f"{hw.allreduce.custom_bw_fraction:.3f}", ar_nccl=f"{hw.allreduce.nccl_bw_fraction:.3f}")
    scatter_plot(pr, OUT / "allreduce_h100.png", "H100 all-reduce, fitted on TRT-LLM + NCCL 2.29.2")
    eng_md, fit_record["allreduce_engine"] = allreduce_engine_section(hw, rtest)
    md += eng_md
    md += nccl_protocol_section(r, train, hw, fit_record)
    nums["ar_eager_engine"] = f"{fit_record['allreduce_engine']['eager_median_after']:.1f}"
    return hw, bound_stats


def _one_ring(hw: HardwareProfile) -> HardwareProfile:
    """hw with the NCCL all-reduce priced as one ring at nccl_bw_fraction (no protocol choice, no NVLS)."""
    return hw.model_copy(update={"allreduce": hw.allreduce.model_copy(update={"nccl_ll_max_bw_bytes_s": None,
                                                                               "nvls": False})})


def _nccl_rows(pred: pd.DataFrame) -> pd.DataFrame:
    """NCCL rows of a prediction table with a message-size band (<= 64 KB, <= 8 MB, > 8 MB) for the tables."""
    p = pred[pred["kernel"] == "NCCL"].copy()
    p["size"] = np.select([p["message_bytes"] <= 65536, p["message_bytes"] <= 8e6], ["≤ 64 KB", "64 KB–8 MB"], "> 8 MB")
    return p


def nccl_protocol_section(r: pd.DataFrame, train: pd.DataFrame, hw: HardwareProfile, fit_record: dict) -> list[str]:
    """NCCL all-reduce priced as NCCL picks its protocol (LL / LL128 / Simple) against one ring at one fraction:
    H100 held-out NCCL 2.27.3 rows, the same with each GPU count left out of the fraction's fit, and A100."""
    nccl_train = train[train["kernel"] == "NCCL"]
    ring = fit_allreduce(nccl_train, _one_ring(hw), fit_latency=False)[0]  # the one-ring form's own fit
    h_test = r[(r["device"] == H100) & (r["framework"] == "nccl 2.27.3")]
    before, after = _nccl_rows(predict_table(h_test, ring)), _nccl_rows(predict_table(h_test, hw))
    lines = ["## NCCL all-reduce: NCCL's protocol choice (LL / LL128 / Simple) against one ring", "",
             f"`before`: one ring, latency floor + 2 (n − 1)/n × bytes / (link × {ring.allreduce.nccl_bw_fraction:.3f}) "
             f"(that form's own fit on the same rows). `after`: the cheapest of NCCL's ring protocols, each latency + "
             f"2 (n − 1)/n × bytes / busBw, busBw Simple = link × {hw.allreduce.nccl_bw_fraction:.3f} (fitted), "
             f"LL128 = 0.92 × Simple, LL = min({hw.allreduce.nccl_ll_max_bw_bytes_s / 1e9:.1f} GB/s, 0.5 × Simple) "
             "(NVIDIA/nccl src/tuning/ring.cc, cost_model.cc at 1fc949c5); LL's latency = the measured floor, "
             "LL128's and Simple's = the floor + NCCL's modelled difference to LL (baseLat + 2 (n − 1) hwLat); "
             "above 2 GPUs on NVSwitch the cheaper of those rings and NVLink SHARP (NVLS) for half / bfloat16 / "
             f"float messages (int8 stays on the rings): {hw.allreduce.nvls_latency_s * 1e6:.1f} µs (fitted) + "
             f"(1 + 1/n) × bytes / (link × {hw.allreduce.nccl_bw_fraction:.3f} × nvlsEfficiency "
             f"{hw.allreduce.nvls_efficiency:.2f} × 15/16) (src/tuning/nvls.cc at 1fc949c5, src/transport/nvls.cc; "
             "costs/comm.py nvls_terms). "
             "Fitted on the NCCL 2.29.2 H100 rows, scored on the held-out NCCL 2.27.3 rows.", "",
             "| rows | n | median APE % before | after | MAPE % before | after |", "|---|---|---|---|---|---|"]

    def line(label, b, a):
        mb, ma = metrics(b["ape_pct"]), metrics(a["ape_pct"])
        lines.append(f"| {label} | {mb['rows']} | {mb['median_ape']:.1f} | {ma['median_ape']:.1f} | "
                     f"{mb['mape']:.1f} | {ma['mape']:.1f} |")
        return {"before": mb, "after": ma}

    rec = {"h100_all": line("H100 NCCL 2.27.3, all", before, after)}
    for n in sorted(before["num_gpus"].unique()):
        line(f"H100 NCCL 2.27.3, {n} GPUs", before[before["num_gpus"] == n], after[after["num_gpus"] == n])
    for band in ("≤ 64 KB", "64 KB–8 MB", "> 8 MB"):
        line(f"H100 NCCL 2.27.3, {band}", before[before["size"] == band], after[after["size"] == band])
    # each GPU count left out of the fraction's fit (both forms refitted on the 2.29.2 rows of the other counts)
    lo_b, lo_a = [], []
    for n in sorted(nccl_train["num_gpus"].unique()):
        tr = nccl_train[nccl_train["num_gpus"] != n]
        te = h_test[h_test["num_gpus"] == n]
        lo_b.append(_nccl_rows(predict_table(te, fit_allreduce(tr, ring, fit_latency=False)[0])))
        lo_a.append(_nccl_rows(predict_table(te, fit_allreduce(tr, hw, fit_latency=False)[0])))
    rec["h100_gpu_count_left_out"] = line("H100 NCCL 2.27.3, its GPU count left out of the fit",
                                          pd.concat(lo_b), pd.concat(lo_a))
    # A100: never fitted; carries h100's Simple fraction and NCCL's Ampere LL cap (before: the profile's old one ring)
    a100 = load_hardware("a100-sxm-80gb")
    a_rows = r[(r["device"] == "a100-sxm-80gb") & (r["kernel"] == "NCCL")]
    a_before = a100.model_copy(update={"allreduce": a100.allreduce.model_copy(
        update={"nccl_ll_max_bw_bytes_s": None, "nccl_bw_fraction": AllReduceParams().nccl_bw_fraction})})
    ab, aa = _nccl_rows(predict_table(a_rows, a_before)), _nccl_rows(predict_table(a_rows, a100))
    rec["a100_all"] = line(f"A100 NCCL 2.27.3, all (not fitted; before: one ring at the schema's "
                           f"{AllReduceParams().nccl_bw_fraction:.2f})", ab, aa)
    for n in sorted(ab["num_gpus"].unique()):
        line(f"A100, {n} GPUs", ab[ab["num_gpus"] == n], aa[aa["num_gpus"] == n])
    from specplan.costs.comm import nccl_algorithm, nccl_allreduce_s
    mib = 2.0 ** 20
    sizes = {"8 KiB": 8192, "1 MiB": mib, "8 MiB": 8 * mib, "128 MiB": 128 * mib, "512 MiB": 512 * mib}
    picks = ", ".join(f"{k}: {nccl_algorithm(hw, b, 8)} {float(nccl_allreduce_s(hw, b, 8)) * 1e6:.1f} µs"
                      for k, b in sizes.items())
    lines += ["", f"H100, 8 GPUs, half precision, algorithm / protocol picked and time: {picks}. At 8 GPUs and "
              "≥ 64 MiB the measured half-precision rows run 12–23 % faster than the int8 rows of the same bytes "
              "(406–445 GB/s of bus bandwidth, above any ring protocol; int8 cannot use NVLS), at ≤ 32 MiB as fast "
              "(NCCL still on its rings there, while this price takes NVLS from about 8 MiB: the half rows at 8–32 MiB "
              "are priced 5–9 % low, the int8 ones on the rings 12–22 % high). Until session 20 NVLS was not priced "
              "and the 8-GPU half rows at ≥ 64 MiB were 25–35 % high.", ""]
    fit_record["allreduce_nccl_protocols"] = {**rec, "one_ring_fraction": ring.allreduce.nccl_bw_fraction,
                                              "simple_fraction": hw.allreduce.nccl_bw_fraction}
    return lines


def _validation_only_sections(hw, md, fit_record, nums, bound_stats) -> None:
    """MLA (its family fitted) and MoE, MLA decode, linear attention scored with nothing else fitted on them."""
    # ---------------- MLA: the mla-latent kernel family, 64-row tiles, efficiencies fitted on the H100 rows ----------------
    md += mla_section(hw, fit_record, nums)
    # ---------------- MoE: the grouped-GEMM block fitted on TRT-LLM rows, each row priced as its engine runs it ----------------
    moe = pd.read_csv(MEAS / "moe_h100_a100.csv.gz")
    hw, moe_md, fit_record["moe"] = moe_engine_section(hw, moe[moe["device"] == H100])
    md += moe_md
    nums["moe_loo"] = f"{fit_record['moe']['median_ape']['loo']:.1f}"
    nums["moe_before"] = f"{fit_record['moe']['median_ape']['before']:.1f}"
    # ---------------- MoE (engine auto), MLA, linear attention ----------------
    for name, fam, keys in (("moe_h100_a100.csv.gz", "MoE (fused experts, balanced routing)", ["framework", "dtype", "regime"]),
                            ("mla_decode_h100_a100.csv.gz", "MLA decode", ["dtype", "regime"]),
                            ("linear_attention_decode_h100_a100.csv.gz", "Linear attention decode", ["kind", "regime"])):
        t = pd.read_csv(MEAS / name)
        t = t[t["device"] == H100]
        moe_rows = name.startswith("moe")
        pt = predict_table(t, hw, kernel_family=MLA_FIT.get("family"), engine=AUTO_ENGINE if moe_rows else None)
        md += ([f"## {fam} (H100, after: the mla-latent family fitted above)", ""] if "MLA" in fam else
               [f"## {fam} (H100, each row's engine; grouped-GEMM fractions fitted on the TRT-LLM rows above)", ""]
               if moe_rows else [f"## {fam} (H100, validation only: nothing fitted on it)", ""])
        md += table_by(pt, keys)
        scatter_plot(pt, OUT / (name.split("_h100")[0] + "_h100.png"), f"H100 {fam}")
        fit_record[f"validate_{name.split('_h100')[0]}"] = metrics(pt["ape_pct"])
        key = name.split("_h100")[0]
        bound_stats[key] = group_stats(pt, keys)
        mm = metrics(pt["ape_pct"])
        nums[f"{key}_median"], nums[f"{key}_p90"] = f"{mm['median_ape']:.0f}", f"{mm['p90_ape']:.0f}"
        nums[f"{key}_ratio"] = f"{med(pt['measured_us'] / pt['predicted_us']):.2f}"
        for k, x in pt.groupby(keys):
            nums[f"{key}:" + "/".join(map(str, k))] = f"{med(x['ape_pct']):.1f}"
            nums[f"{key}:" + "/".join(map(str, k)) + ":ratio"] = f"{med(x['measured_us'] / x['predicted_us']):.2f}"


def _summary(md, fit_record, nums, targets, verdicts, bound_stats) -> None:
    """The narrative's summary numbers, the bounds verdict and the must-show table."""
    v = lambda key: float(nums[key])  # noqa: E731
    nums.update(
        mla_ovh=span([v(f"mla_decode:kv_{d}/overhead") for d in ("bf16", "fp8")], "{:.1f}"),
        mla_ovh_ratio=span([v(f"mla_decode:kv_{d}/overhead:ratio") for d in ("bf16", "fp8")], "{:.2f}"),
        mla_cmp=span([v(f"mla_decode:kv_{d}/compute") for d in ("bf16", "fp8")]),
        mla_cmp_ratio=span([v(f"mla_decode:kv_{d}/compute:ratio") for d in ("bf16", "fp8")], "{:.2f}"),
        mla_mem=span([v(f"mla_decode:kv_{d}/memory") for d in ("bf16", "fp8")]),
        conv_ovh=f"{v('linear_attention_decode:gdn_conv1d/overhead'):.0f}",
        conv_ovh_ratio=f"{v('linear_attention_decode:gdn_conv1d/overhead:ratio'):.2f}",
        rec_mem_ratio=f"{v('linear_attention_decode:gdn_recurrent/memory:ratio'):.2f}",
        rec_mem=f"{v('linear_attention_decode:gdn_recurrent/memory'):.0f}",
        mamba_conv=span([v(f"linear_attention_decode:mamba2_conv1d/{r}") for r in ("memory", "overhead")]),
        moe_mem_bf16=nums["moe:trtllm 1.3.0rc20/bf16/memory"], moe_mem_fp8=nums["moe:trtllm 1.3.0rc20/fp8/memory"],
        moe_cmp=span([v(f"moe:trtllm 1.3.0rc20/{d}/compute") for d in ("bf16", "fp8")]),
        moe_vllm_fp8=span([v(f"moe:vllm 0.24.0/fp8/{r}") for r in ("memory", "compute", "overhead")]),
        moe_vllm_cmp_ratio=span([v(f"moe:vllm 0.24.0/{d}/compute:ratio") for d in ("bf16", "fp8")], "{:.1f}"))
    md += other_devices(nums)
    fit_record["must_show"] = verdicts
    blines, fit_record["bounds"] = check_bounds(bound_stats)
    nums["bounds_table"] = "\n".join(blines)
    missed = [b["id"] for b in fit_record["bounds"] if not b["holds"]]
    nums["bounds_verdict"] = ("yes, all {} hold".format(len(BOUNDS)) if not missed else
                              f"**no**: {len(missed)} of {len(BOUNDS)} missed ({', '.join(missed)})")
    o = {k: f"{x['oracle']['mape']:.1f} / {x['oracle']['median_ape']:.1f}" for k, x in verdicts.items()}
    oq = {k: f"{x['oracle_minus_quant']['mape']:.1f} / {x['oracle_minus_quant']['median_ape']:.1f}"
          for k, x in verdicts.items() if "oracle_minus_quant" in x}
    nums.update(fp8_oracle=f"vLLM {o['gemm_fp8_vllm']}, SGLang {o['gemm_fp8_sglang']}",
                fp8_oracle_q=f"vLLM {oq['gemm_fp8_vllm']}, SGLang {oq['gemm_fp8_sglang']}",
                gemm_bf16_vllm_oracle=o["gemm_bf16_vllm"])
    nums["must_show_table"] = "\n".join(targets)


def other_devices(nums: dict) -> list[str]:
    """A100 (H100-learned defaults, never fitted on A100) and specplan's own H200 runs in bench_data/."""
    md = ["## Devices the fit never saw: A100 with the H100-learned defaults", "",
          "`a100-sxm-80gb.yaml` carries the H100 fractions (of its own spec-sheet peaks); scored on every A100 row.", ""]
    a100 = load_hardware("a100-sxm-80gb")
    g = pd.read_csv(MEAS / "gemm_h100_a100.csv.gz")
    g = g[(g.device == "a100-sxm-80gb") & (g.n >= 1024) & (g.k >= 1024) & (g.m <= 4096) & (g.time_us >= 5)]
    pg = predict_table(g, a100)
    a = pd.read_csv(MEAS / "attention_decode_h100_a100.csv.gz")
    a = a[(a.device == "a100-sxm-80gb")]
    a = a[(attention_kv_bytes(a) > a100.l2_bytes) & ~fallback_attention_rows(a)]
    pa = predict_table(a, a100)
    md += [HEAD, *[row(f"A100 GEMM layer-like, {f} {d}", x["ape_pct"]) for (f, d), x in pg.groupby(["framework", "dtype"])],
           *[row(f"A100 attention KV > L2, {f} {d}", x["ape_pct"]) for (f, d), x in pa.groupby(["framework", "dtype"])], ""]
    gm = {f: med(x["ape_pct"]) for f, x in pg.groupby("framework")}
    am = {f: med(x["ape_pct"]) for f, x in pa.groupby("framework")}
    nums.update(a100_gemm=span(gm.values()), a100_att_fa=span([v for f, v in am.items() if "trtllm" not in f]),
                a100_att_trt=span([v for f, v in am.items() if "trtllm" in f]))
    bd = ROOT / "bench_data"
    if not (bd / "h200_attention_qlen.csv").is_file():
        return md
    h200 = load_hardware("h200-sxm")
    md += ["## specplan's own harness on an H200 (bench_data/, H100-learned defaults)", ""]
    if (bd / "h200_gemm.csv").is_file():
        pg = predict_table(pd.read_csv(bd / "h200_gemm.csv"), h200)
        md += table_by(pg, ["dtype", "regime"], "GEMM (llama-3.1-8b shapes, M 1-4096; torch linear / torch._scaled_mm, "
                       "fp8 timed on pre-quantized inputs):")
        scatter_plot(pg.assign(kind=pg["dtype"]), OUT / "gemm_h200.png", "H200 GEMM (specplan harness)")
    at = pd.read_csv(bd / "h200_attention_qlen.csv")
    pa = predict_table(at, h200)
    pa["g_q"] = (at.n_q_heads / at.n_kv_heads * at.q_len).to_numpy()
    md += table_by(pa.assign(q=np.where(at.q_len.to_numpy() > 1, "q_len>1", "q_len=1")), ["kernel", "q", "regime"],
                   "Decode/verify attention, q_len 1-17 (sdpa_flash = torch SDPA flash; triton_packed = G*q_len rows "
                   "packed in 128-row tiles):")
    steps = attention_steps(at, pa)
    nums.update(h200_step_meas=f"{steps[1]:.2f}", h200_step_model=f"{steps[2]:.2f}", h200_step_n=str(steps[3]))
    sd = pa[(pa["kernel"] == "sdpa_flash") & (at["q_len"].to_numpy() > 1)]
    nums["sdpa_qlen_span"] = span([med(x["ape_pct"]) for _, x in sd.groupby("regime")])
    tp_ = pa[pa["kernel"] == "triton_packed"]
    nums["triton_b1_ratio"] = f"{med((tp_['measured_us'] / tp_['predicted_us'])[at.loc[tp_.index, 'batch'] == 1]):.1f}"
    md += steps[0]
    return md


def attention_steps(at: pd.DataFrame, pa: pd.DataFrame) -> tuple[list[str], float, float, int]:
    """Measured vs modeled step when G*q_len crosses 128 (packed kernel), plus a plot of time vs G*q_len."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = at.assign(G=at.n_q_heads // at.n_kv_heads, pred=pa["predicted_us"].to_numpy(), gq=pa["g_q"].to_numpy())
    d = d[d.kernel == "triton_packed"]
    keys = ["batch", "n_kv_heads", "head_dim", "kv_len", "G"]
    lines = ["Step when G*q_len crosses 128 (triton_packed): time at the first q_len with G*q_len > 128 over the "
             "time at the last q_len with G*q_len <= 128.", "",
             "| batch | n_kv | head_dim | kv_len | G | q_len below -> above | measured step | model step |",
             "|---|---|---|---|---|---|---|---|"]
    steps = []
    for k, x in d.groupby(keys):
        lo, hi = x[x.gq <= 128], x[x.gq > 128]
        if lo.empty or hi.empty:
            continue
        a, b = lo.loc[lo.q_len.idxmax()], hi.loc[hi.q_len.idxmin()]
        steps.append((*k, f"{a.q_len} -> {b.q_len}", b.time_us / a.time_us, b.pred / a.pred))
    for s in steps:
        lines.append("| " + " | ".join(str(v) for v in s[:6]) + f" | {s[6]:.2f} | {s[7]:.2f} |")
    ms, mm = np.array([s[6] for s in steps]), np.array([s[7] for s in steps])
    lines += ["", f"Median measured step {np.median(ms):.2f}x, modeled {np.median(mm):.2f}x over {len(steps)} "
              "configurations.", ""]
    big = d.groupby(keys[:-1]).size().idxmax()
    x = d[(d[keys[:-1]] == pd.Series(dict(zip(keys[:-1], big)))).all(axis=1)]
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for G, y in x.groupby("G"):
        y = y.sort_values("gq")
        line = ax.plot(y.gq, y.time_us, "o", ms=3, label=f"G={G} measured")[0]
        ax.plot(y.gq, y.pred, "-", color=line.get_color(), lw=1, label=f"G={G} model")
    for i, m in enumerate((128, 256, 384, 512)):
        ax.axvline(m, color="gray", lw=0.5, ls=":", label="tile edges: G·q_len = k × 128" if i == 0 else None)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("G * q_len (query rows per KV head)")
    ax.set_ylabel("time (us)")
    ax.set_title(f"H200 triton_packed, batch {big[0]}, n_kv {big[1]}, d {big[2]}, kv {big[3]} (points: measured, "
                 "lines: model)", fontsize=8)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(OUT / "attention_qlen_h200.png", dpi=110)
    plt.close(fig)
    return lines + ["![attention step](attention_qlen_h200.png)", ""], float(np.median(ms)), float(np.median(mm)), len(steps)


if __name__ == "__main__":
    main()

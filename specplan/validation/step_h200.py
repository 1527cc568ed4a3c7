"""Whole-step validation on the H200: `python scripts/validate_step.py` -> docs/validation/step_h200.md + PNGs.

Reads bench_data/h200_step_llama8b.csv (specplan/bench/step_bench.py: a Llama-3.1-8B-shaped decoder, random
bf16 weights, the whole decode/verify step captured in one CUDA graph) and predicts every row with
``step_time("llama-3.1-8b", "h200-sxm", 1, batch, q_len, context)``.  Reports per-row errors, MAPE / median
APE per attention kernel, and the speculation cost curve t(q_len) / t(1) measured against modeled.
Cross-checks with the kernel microbenchmarks of the same machine type (bench_data/h200_gemm.csv: the step's
five GEMMs at M = batch * q_len; bench_data/h200_attention_qlen.csv where a family matches) split each
measured step into GEMMs, attention and the rest (element-wise kernels and launch gaps).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]  # the repository (reports read reference/ and write docs/)

from specplan.costs.attention import AttentionHeads, attention_cost
from specplan.profiles.registry import load_hardware, load_model
from specplan.model.step import step_time

CSV = ROOT / "bench_data" / "h200_step_llama8b.csv"
GEMM_CSV = ROOT / "bench_data" / "h200_gemm.csv"
ATT_CSV = ROOT / "bench_data" / "h200_attention_qlen.csv"
OUT = ROOT / "docs" / "validation"
MODEL, HW = "llama-3.1-8b", "h200-sxm"
LAYERS = 32
LAYER_GEMMS = [(6144, 4096), (4096, 4096), (28672, 4096), (4096, 14336)]  # qkv, o, gate_up, down (N, K)
LM_HEAD = (128256, 4096)
ALPHA = 0.8  # acceptance rate of the implied-speedup table
KERNELS = ("sdpa_flash", "triton_packed")


def read(path: Path) -> list[dict]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def load_rows() -> list[dict]:
    rows = []
    for r in read(CSV):
        rows.append({"batch": int(r["batch"]), "q_len": int(r["q_len"]), "context": int(r["context"]),
                     "kernel": r["attention_kernel"], "meas_ms": float(r["time_us"]) / 1e3})
    b, q, c = (np.array([r[k] for r in rows], float) for k in ("batch", "q_len", "context"))
    res = step_time(MODEL, HW, 1, b, q, c)
    hw, model = load_hardware(HW), load_model(MODEL)
    hq, hkv, d = model.num_q_heads, model.num_kv_heads, model.head_dim

    def attn_busy(kvh):  # seconds of the 32 attention kernels' busy time (no launch overhead)
        k = attention_cost(hw, b, q, c + q, AttentionHeads(hq, kvh, d))
        return LAYERS * np.maximum(k.compute_s, k.memory_s)

    # what-if: torch SDPA flash for q_len > 1 reads the KV once per QUERY head (measured in
    # docs/h200_attention_qlen.md), i.e. the model with n_kv_heads = n_q_heads for those rows
    unpacked = res.total_s + np.where(q > 1, attn_busy(hq) - attn_busy(hkv), 0.0)
    gemm = {(int(g["m"]), int(g["n"]), int(g["k"])): float(g["time_us"]) / 1e3
            for g in read(GEMM_CSV) if g["dtype"] == "bf16"}
    att = {(int(a["batch"]), int(a["q_len"]), int(a["kv_len"]), a["kernel"]): float(a["time_us"]) / 1e3
           for a in read(ATT_CSV) if int(a["n_q_heads"]) == hq and int(a["n_kv_heads"]) == hkv
           and int(a["head_dim"]) == d}
    for i, r in enumerate(rows):
        m = r["batch"] * r["q_len"]
        r["pred_ms"] = float(res.total_s[i]) * 1e3
        r["pred_unpacked_ms"] = float(unpacked[i]) * 1e3
        for k in ("gemm", "attention", "elementwise", "overhead"):
            r[f"pred_{k}_ms"] = float(res.breakdown_s[k][i]) * 1e3
        try:
            r["gemm_bench_ms"] = LAYERS * sum(gemm[(m, n, k)] for n, k in LAYER_GEMMS) + gemm[(m, *LM_HEAD)]
        except KeyError:
            r["gemm_bench_ms"] = float("nan")
        a = att.get((r["batch"], r["q_len"], r["context"], r["kernel"]))  # kv_len 1024 vs ctx + q_len here
        r["att_bench_ms"] = LAYERS * a if a is not None else float("nan")
        r["ape"] = abs(r["pred_ms"] - r["meas_ms"]) / r["meas_ms"] * 100
    base = {(r["batch"], r["context"], r["kernel"]): r for r in rows if r["q_len"] == 1}
    for r in rows:
        r0 = base[(r["batch"], r["context"], r["kernel"])]
        r["meas_ratio"] = r["meas_ms"] / r0["meas_ms"]
        r["pred_ratio"] = r["pred_ms"] / r0["pred_ms"]
        r["unpacked_ratio"] = r["pred_unpacked_ms"] / r0["pred_unpacked_ms"]
        r["delta_meas_ms"] = r["meas_ms"] - r0["meas_ms"]
        r["delta_pred_ms"] = r["pred_ms"] - r0["pred_ms"]
        # a packed kernel as fast as flash at q_len = 1: SDPA's measured t(1) + the packed kernel's increment
        s0 = base.get((r["batch"], r["context"], "sdpa_flash"))
        r["hybrid_ratio"] = (s0["meas_ms"] + r["delta_meas_ms"]) / s0["meas_ms"] if s0 else float("nan")
    return rows


def stats(ape) -> str:
    a = np.asarray(ape, float)
    return f"{len(a)} rows, MAPE {a.mean():.1f} %, median {np.median(a):.1f} %, max {a.max():.1f} %"


def plots(rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ctxs, batches = sorted({r["context"] for r in rows}), sorted({r["batch"] for r in rows})
    for name, key, pkey, ylabel in (("step_h200.png", "meas_ms", "pred_ms", "step time (ms)"),
                                    ("step_h200_ratio.png", "meas_ratio", "pred_ratio", "t(q_len) / t(1)")):
        fig, axes = plt.subplots(len(ctxs), len(batches), figsize=(4 * len(batches), 3.4 * len(ctxs)), squeeze=False)
        for i, c in enumerate(ctxs):
            for j, b in enumerate(batches):
                ax = axes[i][j]
                for kern, mk, col in (("sdpa_flash", "s", "tab:blue"), ("triton_packed", "o", "tab:orange")):
                    sel = sorted((r for r in rows if r["context"] == c and r["batch"] == b and r["kernel"] == kern),
                                 key=lambda r: r["q_len"])
                    qs = [r["q_len"] for r in sel]
                    ax.plot(qs, [r[key] for r in sel], mk + "-", color=col, label=f"measured {kern}")
                    if kern == "triton_packed" and key == "meas_ratio":
                        ax.plot(qs, [r["hybrid_ratio"] for r in sel], "^:", color=col, mfc="none",
                                label="packed increment on flash t(1)")
                    if kern == "sdpa_flash":
                        ax.plot(qs, [r[pkey] for r in sel], "k--", label="model: step_time (KV shared by the G heads)")
                        ukey = "pred_unpacked_ms" if key == "meas_ms" else "unpacked_ratio"
                        ax.plot(qs, [r[ukey] for r in sel], ":", color="gray", label="model: step_time, KV read per query head")
                ax.set_xscale("log", base=2)
                ax.set_xticks([1, 2, 4, 8, 16], ["1", "2", "4", "8", "16"])
                ax.set_title(f"batch {b}, context {c}", fontsize=9)
                ax.set_xlabel("q_len = 1 + D")
                if j == 0:
                    ax.set_ylabel(ylabel)
                ax.set_ylim(bottom=0)
                ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=7.5, framealpha=0.95)
        fig.suptitle("H200, Llama-3.1-8B-shaped step (CUDA graph): measured vs specplan.model.step.step_time", fontsize=10)
        fig.tight_layout()
        fig.savefig(OUT / name, dpi=110)
        plt.close(fig)


def fmt(x, p=2) -> str:
    return "" if x != x else f"{x:.{p}f}"


def report(rows: list[dict]) -> str:
    L: list[str] = []
    by = {(r["context"], r["batch"], r["kernel"], r["q_len"]): r for r in rows}
    ctxs, batches = sorted({r["context"] for r in rows}), sorted({r["batch"] for r in rows})
    qs = sorted({r["q_len"] for r in rows})
    L.append("## Accuracy of the absolute step time\n")
    for kern in KERNELS:
        L.append(f"- `{kern}`: {stats([r['ape'] for r in rows if r['kernel'] == kern])}")
        for c in ctxs:
            sel = [r["ape"] for r in rows if r["kernel"] == kern and r["context"] == c]
            s1 = [r["ape"] for r in rows if r["kernel"] == kern and r["context"] == c and r["q_len"] == 1]
            L.append(f"  - context {c}: {stats(sel)}; q_len = 1 only: {stats(s1)}")
    L.append(f"- all rows: {stats([r['ape'] for r in rows])}\n")
    L.append("## The speculation cost curve t(q_len) / t(1)\n")
    L.append("Measured ratio / `step_time` ratio (`shared` style, the default). For `sdpa_flash` the third value is the "
             "model with the KV read once per query head for q_len > 1 (what torch's flash kernel does; see below).\n")
    L.append("| context | batch | kernel | t(1) meas ms | t(1) pred ms | " + " | ".join(f"q={q}" for q in qs[1:]) + " |")
    L.append("|---|---|---|---|---|" + "---|" * (len(qs) - 1))
    for c in ctxs:
        for b in batches:
            for kern in KERNELS:
                r1 = by[(c, b, kern, 1)]
                cells = []
                for q in qs[1:]:
                    r = by.get((c, b, kern, q))
                    if r is None:
                        cells.append("")
                        continue
                    cell = f"**{r['meas_ratio']:.2f}** / {r['pred_ratio']:.2f}"
                    if kern == "sdpa_flash":
                        cell += f" / {r['unpacked_ratio']:.2f}"
                    cells.append(cell)
                L.append(f"| {c} | {b} | {kern} | {r1['meas_ms']:.2f} | {r1['pred_ms']:.2f} | " + " | ".join(cells) + " |")
    L.append("\n### The increment t(q_len) − t(1) in ms (measured / predicted), and the packed kernel's curve on flash's t(1)\n")
    L.append("`hybrid` = (t(1) of `sdpa_flash` + the increment of `triton_packed`) / t(1) of `sdpa_flash`: the curve of a "
             "packed kernel that were as fast as flash at q_len = 1 (assumes its increment is the untuned one's).\n")
    L.append("| context | batch | kernel | " + " | ".join(f"q={q}" for q in qs[1:]) + " | hybrid t(16)/t(1) vs predicted |")
    L.append("|---|---|---|" + "---|" * len(qs))
    for c in ctxs:
        for b in batches:
            for kern in KERNELS:
                cells = [f"{by[(c, b, kern, q)]['delta_meas_ms']:.2f} / {by[(c, b, kern, q)]['delta_pred_ms']:.2f}"
                         for q in qs[1:]]
                last = by[(c, b, kern, qs[-1])]
                hyb = f"{last['hybrid_ratio']:.2f} vs {last['pred_ratio']:.2f}" if kern == "triton_packed" else ""
                L.append(f"| {c} | {b} | {kern} | " + " | ".join(cells) + f" | {hyb} |")
    L.append(f"\n### What the ratio error does to the speedup (acceptance α = {ALPHA}, draft cost left out)\n")
    L.append("Expected tokens per verify step E(D) = (1 − α^(D+1)) / (1 − α); verify-only speedup = E(D) / (t(1+D)/t(1)). "
             "Measured / predicted.\n")
    L.append("| context | batch | kernel | " + " | ".join(f"D={q - 1}" for q in qs[1:]) + " | best D meas / pred |")
    L.append("|---|---|---|" + "---|" * len(qs))
    for c in ctxs:
        for b in batches:
            for kern in KERNELS:
                sm, sp = [], []
                for q in qs[1:]:
                    r = by[(c, b, kern, q)]
                    e = (1 - ALPHA ** q) / (1 - ALPHA)
                    sm.append(e / r["meas_ratio"])
                    sp.append(e / r["pred_ratio"])
                bm, bp = qs[1 + int(np.argmax(sm))] - 1, qs[1 + int(np.argmax(sp))] - 1
                L.append(f"| {c} | {b} | {kern} | " + " | ".join(f"{m:.2f} / {p:.2f}" for m, p in zip(sm, sp))
                         + f" | {bm} / {bp} |")
    L.append("\n## Where the time goes: measured step vs the kernel microbenchmarks vs the model\n")
    L.append("`GEMM bench` = 32 × (QKV + O + gate_up + down) + LM head at M = batch · q_len from `bench_data/h200_gemm.csv` "
             "(isolated GEMMs, CUDA graph, L2 flushed); `rest` = measured − GEMM bench (attention, element-wise kernels, "
             "launch gaps); `att bench` = 32 × the same attention shape from `bench_data/h200_attention_qlen.csv` "
             "(only batch 64, kv_len 1024 matches); model columns are `step_time`'s breakdown.\n")
    L.append("| context | batch | q_len | kernel | measured ms | GEMM bench ms | rest ms | att bench ms | model GEMM ms | "
             "model attention ms | model elementwise + overhead ms | model total ms | error % |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (r["context"], r["batch"], r["kernel"], r["q_len"])):
        L.append(f"| {r['context']} | {r['batch']} | {r['q_len']} | {r['kernel']} | {r['meas_ms']:.2f} | "
                 f"{fmt(r['gemm_bench_ms'])} | {fmt(r['meas_ms'] - r['gemm_bench_ms'])} | {fmt(r['att_bench_ms'])} | "
                 f"{r['pred_gemm_ms']:.2f} | {r['pred_attention_ms']:.2f} | "
                 f"{r['pred_elementwise_ms'] + r['pred_overhead_ms']:.2f} | {r['pred_ms']:.2f} | "
                 f"{100 * (r['pred_ms'] - r['meas_ms']) / r['meas_ms']:+.1f} |")
    return "\n".join(L) + "\n"


def main() -> None:
    rows = load_rows()
    plots(rows)
    narrative = (Path(__file__).with_name("step_h200_narrative.md")).read_text()
    short = {"sdpa_flash": "s", "triton_packed": "t"}
    values = {f"{f}_{short[r['kernel']]}{r['context'] // 1024}k_b{r['batch']}_q{r['q_len']}": v
              for r in rows for f, v in r.items() if isinstance(v, float)}
    text = {k: (f"{v:.2f}" if abs(v) < 100 else f"{v:.0f}") for k, v in values.items()}
    for kern, k in short.items():
        for tag, sel in (("", lambda r: True), ("_q1", lambda r: r["q_len"] == 1)):
            ape = np.array([r["ape"] for r in rows if r["kernel"] == kern and sel(r)])
            text.update({f"mape_{k}{tag}": f"{ape.mean():.0f}", f"med_{k}{tag}": f"{np.median(ape):.0f}",
                         f"min_{k}{tag}": f"{ape.min():.0f}", f"max_{k}{tag}": f"{ape.max():.0f}"})
    flat = [r for r in rows if r["kernel"] == "triton_packed" and r["batch"] <= 8 and r["q_len"] == max(r["q_len"] for r in rows)]
    for f in ("meas", "pred"):
        text[f"flat_{f}_lo"] = f"{min(r[f + '_ratio'] for r in flat):.2f}"
        text[f"flat_{f}_hi"] = f"{max(r[f + '_ratio'] for r in flat):.2f}"
    text = narrative.format(n_rows=len(rows), **text)
    (OUT / "step_h200.md").write_text(text + "\n" + report(rows))
    print(f"wrote {OUT / 'step_h200.md'}, step_h200.png, step_h200_ratio.png ({len(rows)} rows)")


if __name__ == "__main__":
    main()

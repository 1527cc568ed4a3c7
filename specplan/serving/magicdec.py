"""MagicDec long-context batch sweeps (reference/specdec_public.csv magicdec-* rows): with AL fitted on each
sweep's batch-32 row, predict the batch-64 and batch-128 speedups (throughput ratio at fixed batch).

Set-up per row: TP 8 on the row's hardware, context = the prompt length (8000 / 32000 tokens), the row's D;
StreamingLLM self-speculation = mechanism `self`, a TinyLlama-1.1B draft = mechanism `external`, both reading
a StreamingLLM KV of DRAFT_KV_BUDGET tokens (the page's Figure 6 file is speedups_budget512.png; the table
rows do not state their budget: an assumption). AL at batch 32 is solved from the measured speedup
(speedup = T_base·AL / T_iter is linear in AL); other D use the i.i.d. α it implies (Acceptance.from_length).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from specplan.speculation.acceptance import Acceptance
from specplan.speculation.speedup import evaluate

CSV = Path(__file__).resolve().parents[2] / "reference" / "specdec_public.csv"
DRAFT_KV_BUDGET = 512
MODELS = {"togethercomputer/LLaMA-2-7B-32K": "llama-2-7b-32k", "llama-3.1-8b": "llama-3.1-8b"}


def sweeps(path: Path | str = CSV):
    """MagicDec rows grouped into sweeps (hardware, model, mechanism, prompt length), batch-sorted."""
    import pandas as pd

    d = pd.read_csv(path)
    d = d[d["case_id"].str.startswith("magicdec-")].copy()
    d["target"] = d["model"].map(MODELS)
    d["mech"] = np.where(d["mechanism"] == "external_draft", "external", "self")
    return [g.sort_values("batch") for _, g in d.groupby(["hardware", "target", "mech", "input_len"], sort=False)]


def _speedup(row, al_at_d: Acceptance | None, al_value=None):
    kw = dict(tp=int(row["tp"]), batch=int(row["batch"]), context_len=int(row["input_len"]),
              draft_len=int(row["draft_len"]), mechanism=row["mech"], draft_kv_budget=DRAFT_KV_BUDGET)
    if row["mech"] == "external":
        kw["draft_model"] = "tinyllama-1.1b"
    acc = al_at_d if al_at_d is not None else Acceptance.from_length(1.0 + 1e-9, int(row["draft_len"]))
    r = evaluate(row["target"], row["hardware"], acceptance=acc, **kw)
    return float(np.asarray(r["speedup"])), float(np.asarray(r["iter_s"]) / np.asarray(r["baseline_step_s"]))


def predict_sweeps(path: Path | str = CSV) -> list[dict]:
    """Per row: measured and predicted speedup, the AL fitted on the sweep's batch-32 row, error; rows of
    sweeps without a batch-32 row and a larger batch are skipped."""
    out = []
    for g in sweeps(path):
        if 32 not in set(g["batch"]) or len(g) < 2:
            continue
        ref = g[g["batch"] == 32].iloc[0]
        _, ratio = _speedup(ref, None)  # T_iter / T_base at batch 32 (AL does not enter)
        al = float(ref["speedup"]) * ratio
        d0 = int(ref["draft_len"])
        clamped = al > 1 + d0
        acc = Acceptance.from_length(min(al, 1 + d0 - 1e-6), d0)
        for _, row in g.iterrows():
            pred, _ = _speedup(row, acc)
            out.append({"case_id": row["case_id"], "hardware": row["hardware"], "target": row["target"],
                        "mechanism": row["mech"], "prompt": int(row["input_len"]), "batch": int(row["batch"]),
                        "draft_len": int(row["draft_len"]), "measured": float(row["speedup"]), "predicted": pred,
                        "fitted_al_at_b32": al, "al_clamped": bool(clamped), "fit_row": bool(row["batch"] == 32),
                        "error": pred / float(row["speedup"]) - 1.0})
    return out


def trend_right(rows: list[dict]) -> dict[str, bool]:
    """Per sweep: does the predicted speedup order the batches as the measured one does?"""
    res = {}
    for key in {(r["hardware"], r["target"], r["mechanism"], r["prompt"]) for r in rows}:
        s = sorted((r for r in rows if (r["hardware"], r["target"], r["mechanism"], r["prompt"]) == key),
                   key=lambda r: r["batch"])
        m = np.sign(np.diff([r["measured"] for r in s]))
        p = np.sign(np.diff([r["predicted"] for r in s]))
        res[" ".join(map(str, key))] = bool(np.all(m == p))
    return res

"""MagicDec long-context batch sweeps (reference/specdec_public.csv magicdec-* rows): with AL fitted on each
sweep's batch-32 row, predict the batch-64 and batch-128 speedups (throughput ratio at fixed batch).

Set-up per row: TP 8 on the row's hardware, context = the prompt length (8000 / 32000 tokens), the row's D;
StreamingLLM self-speculation = mechanism `self`, a TinyLlama-1.1B draft = mechanism `external`, both reading
a StreamingLLM KV of DRAFT_KV_BUDGET tokens (the page's Figure 6 file is speedups_budget512.png; the table
rows do not state their budget: an assumption). AL at batch 32 is solved from the measured speedup; other D use
the i.i.d. α it implies (Acceptance.from_length).

Per-forward time h: MagicDec's gpt-fast loop runs every forward pass (a baseline decode, the verification, and
each of the D draft steps) as its own torch.compile'd call from Python, with its sampling and, per iteration,
the accept/reject decision; that costs a batch-independent time per forward that the roofline does not hold.
With T_b, T_v, T_d the roofline times of the baseline step, the verification and the D draft steps:

    speedup = AL · (T_b + h) / (T_v + T_d + (1 + D) · h)

h is one number for all sweeps, fitted on the held-out (batch 64 / 128) rows of the OTHER sweeps (leave one sweep
out), so no row is predicted with an h that saw it; the all-sweep fit is reported beside the folds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from specplan.speculation.acceptance import Acceptance, al_from_rate
from specplan.speculation.speedup import evaluate, evaluate_kw

CSV = Path(__file__).resolve().parents[2] / "reference" / "specdec_public.csv"
DRAFT_KV_BUDGET = 512
MODELS = {"togethercomputer/LLaMA-2-7B-32K": "llama-2-7b-32k", "llama-3.1-8b": "llama-3.1-8b"}
HOST_GRID_S = np.linspace(0.0, 10e-3, 1001)  # per-forward time searched, 10 us steps up to 10 ms


def sweeps(path: Path | str = CSV):
    """MagicDec rows grouped into sweeps (hardware, model, mechanism, prompt length), batch-sorted."""
    import pandas as pd

    d = pd.read_csv(path)
    d = d[d["case_id"].str.startswith("magicdec-")].copy()
    d["target"] = d["model"].map(MODELS)
    d["mech"] = np.where(d["mechanism"] == "external_draft", "external", "self")
    return [g.sort_values("batch") for _, g in d.groupby(["hardware", "target", "mech", "input_len"], sort=False)]


def speedup_with_host(al, base_s, iter_s, draft_len, host_s):
    """AL·(T_b + h) / (T_iter + (1 + D)·h): the roofline step times plus a per-forward time h."""
    return al * (base_s + host_s) / (iter_s + (1.0 + draft_len) * host_s)


def al_from_speedup(speedup, base_s, iter_s, draft_len, host_s):
    """The AL that makes speedup_with_host equal the measured speedup (it is linear in AL)."""
    return speedup * (iter_s + (1.0 + draft_len) * host_s) / (base_s + host_s)


def _times(row) -> tuple[float, float]:
    """Roofline seconds of the baseline step and of one speculative iteration (verify + D draft steps)."""
    kw = dict(tp=int(row["tp"]), batch=int(row["batch"]), context_len=int(row["input_len"]),
              draft_len=int(row["draft_len"]), mechanism=row["mech"], draft_kv_budget=DRAFT_KV_BUDGET)
    if row["mech"] == "external":
        kw["draft_model"] = "tinyllama-1.1b"
    r = evaluate_kw(row["target"], row["hardware"], acceptance=Acceptance.from_length(1.0 + 1e-9, int(row["draft_len"])),
                 **kw)
    return float(np.asarray(r.baseline_step_s)), float(np.asarray(r.iter_s))


def _rate_from_length(al: np.ndarray, d: int) -> np.ndarray:
    """The i.i.d. α with AL(α, D) = al, element-wise (bisection; AL rises with α), as Acceptance.from_length."""
    lo, hi = np.zeros_like(al), np.ones_like(al)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        up = al_from_rate(mid, d) < al
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    return 0.5 * (lo + hi)


def _sweep_tables(path) -> list[dict]:
    """Per sweep: its rows and arrays of batch, D, measured speedup, T_b, T_iter (h-independent)."""
    out = []
    for g in sweeps(path):
        if 32 not in set(g["batch"]) or len(g) < 2:
            continue
        t = np.array([_times(row) for _, row in g.iterrows()])
        out.append({"rows": g, "batch": g["batch"].to_numpy(int), "d": g["draft_len"].to_numpy(int),
                    "measured": g["speedup"].to_numpy(float), "base_s": t[:, 0], "iter_s": t[:, 1]})
    return out


def _predict(s: dict, host_s) -> tuple[np.ndarray, float, bool]:
    """Predicted speedups of one sweep at per-forward time(s) `host_s` (array: one row of predictions per h),
    with the AL solved on its batch-32 row; also that AL and whether it was clamped to 1 + D."""
    h = np.atleast_1d(np.asarray(host_s, dtype=float))[:, None]
    i = int(np.flatnonzero(s["batch"] == 32)[0])
    d0 = int(s["d"][i])
    al = al_from_speedup(s["measured"][i], s["base_s"][i], s["iter_s"][i], d0, h[:, 0])
    al_c = np.minimum(al, 1 + d0 - 1e-6)
    preds = np.empty((h.shape[0], len(s["d"])))
    for k, d in enumerate(s["d"]):
        al_d = al_from_rate(_rate_from_length(al_c, d0), d) if d != d0 else al_c
        preds[:, k] = speedup_with_host(al_d, s["base_s"][k], s["iter_s"][k], d, h[:, 0])
    return preds, al, bool(np.any(al > 1 + d0))


def fit_host_s(tables: list[dict], grid=HOST_GRID_S) -> float:
    """The per-forward time minimizing the squared log error of the held-out (batch != 32) rows of `tables`."""
    loss = np.zeros(len(grid))
    for s in tables:
        p, _, _ = _predict(s, grid)
        held = s["batch"] != 32
        loss += np.sum(np.log(p[:, held] / s["measured"][held]) ** 2, axis=1)
    return float(grid[int(np.argmin(loss))])


def predict_sweeps(path: Path | str = CSV) -> list[dict]:
    """Per row: measured and predicted speedup, the AL fitted on the sweep's batch-32 row, the per-forward time
    used (fitted on the other sweeps) and the error; sweeps without a batch-32 row and a larger one are skipped."""
    tables = _sweep_tables(path)
    host_all = fit_host_s(tables)
    out = []
    for j, s in enumerate(tables):
        host = fit_host_s([t for k, t in enumerate(tables) if k != j]) if len(tables) > 1 else 0.0
        p, al, clamped = _predict(s, host)
        for k, (_, row) in enumerate(s["rows"].iterrows()):
            out.append({"case_id": row["case_id"], "hardware": row["hardware"], "target": row["target"],
                        "mechanism": row["mech"], "prompt": int(row["input_len"]), "batch": int(row["batch"]),
                        "draft_len": int(row["draft_len"]), "measured": float(row["speedup"]),
                        "predicted": float(p[0, k]), "fitted_al_at_b32": float(al[0]), "al_clamped": clamped,
                        "fit_row": bool(row["batch"] == 32), "host_s": host, "host_all_s": host_all,
                        "error": float(p[0, k]) / float(row["speedup"]) - 1.0})
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

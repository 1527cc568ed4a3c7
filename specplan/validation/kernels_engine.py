"""Kernel rows priced as their engines run them (issue 41): eager all-reduce floors and the MoE grouped-GEMM block.

Called by `specplan validate-kernels` (kernels_report.main) after the H100 fit:
- all-reduce: each engine's host floor of an eager collective (EngineProfile.allreduce_eager_s) is the median of its
  eager rows at messages <= 64 KB; scored with every framework version left out of its own floor;
- MoE: the grouped-GEMM compute fractions (HardwareProfile.moe) are fitted on the TRT-LLM rows priced as
  TensorRT-LLM runs them (its MoE kernel counts), scored with each model shape (hidden, inter, experts, top-k) left
  out of the fit; the Triton kernels' bf16 fraction (moe.triton_compute_fraction) on vLLM's Triton bf16 rows, scored
  the same way; the vLLM rows of the tables stay priced as vLLM's profile runs them (the cutlass fractions).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specplan.bench.calibrate import MOE_SHAPE_COLUMNS, fit_allreduce_eager, fit_moe_grouped, moe_format
from specplan.bench.families import AUTO_ENGINE, predict_table
from specplan.profiles.hardware import HardwareProfile
from specplan.profiles.registry import engine_ids, load_engine


def _table(rows: pd.DataFrame, keys: list[str], cols: dict[str, str]) -> list[str]:
    """Markdown: one line per group of `keys`, median of each APE column in `cols` (label -> column)."""
    lines = ["| " + " / ".join(keys) + " | n | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]
    for k, g in rows.groupby(keys, sort=True):
        label = " / ".join(map(str, k if isinstance(k, tuple) else (k,)))
        lines.append(f"| {label} | {len(g)} | " + " | ".join(f"{np.median(g[c]):.1f}" for c in cols.values()) + " |")
    return lines + [""]


def engine_of(framework: pd.Series) -> pd.Series:
    """The engine word of framework cells ('vllm 0.24.0' -> 'vllm')."""
    return framework.astype(str).str.strip().str.split().str[0].str.lower()


def allreduce_engine_section(hw: HardwareProfile, rtest: pd.DataFrame) -> tuple[list[str], dict]:
    """(markdown, record): held-out all-reduce rows priced with no engine and as each row's engine runs them, the
    eager floors fitted with the row's own framework version left out."""
    shipped = fit_allreduce_eager(rtest)
    before = predict_table(rtest, hw)
    after = pd.Series(np.nan, index=rtest.index)
    eng_col = engine_of(rtest["framework"])
    for fw, g in rtest.groupby("framework"):
        name = eng_col[g.index[0]]
        others = rtest[(eng_col == name) & (rtest["framework"] != fw)]
        floor = fit_allreduce_eager(others).get(name)
        eng = load_engine(name) if name in engine_ids() else None  # NCCL rows: no engine
        if eng is not None and floor is not None:
            eng = eng.model_copy(update={"allreduce_eager_s": floor})
        p = predict_table(g, hw, engine=eng if eng is not None else AUTO_ENGINE)
        after[g.index] = p["ape_pct"].to_numpy()
    rows = before.assign(after=after.to_numpy(), before=before["ape_pct"].to_numpy())
    md = ["## All-reduce priced as each row's engine runs it (`specplan validate --engine auto`)", "",
          "The same held-out rows as above. `before`: no engine (every custom row graphed, the H100 fit's rule). "
          "`after`: each row's family from its kernel (TRTLLM one-shot, custom, NCCL), and `*_eager` rows as eager "
          "collectives: max(the engine's host floor, graphed time + the copy into the registered buffer) "
          "(costs/comm.py eager_allreduce_s). Each engine's floor (`allreduce_eager_s`) is the median of its eager "
          "rows at messages up to 64 KB; scored here with the row's own framework version left out of that median. "
          "Shipped floors (all versions): " + ", ".join(f"{k} {v * 1e6:.1f} µs" for k, v in sorted(shipped.items()))
          + ".", ""]
    md += _table(rows, ["kernel", "regime"], {"median APE % before": "before", "after (version left out)": "after"})
    rec = {"allreduce_eager_s": shipped,
           "median_ape_before": float(np.median(rows["before"])), "median_ape_after": float(np.median(rows["after"])),
           "eager_median_after": float(np.median(rows.loc[rows["kernel"].str.contains("eager"), "after"]))}
    return md, rec


def moe_engine_section(hw: HardwareProfile, moe: pd.DataFrame) -> tuple[HardwareProfile, list[str], dict]:
    """(hw with the fitted MoE block, markdown, record): TRT-LLM rows fit the grouped-GEMM fractions (scored with
    each model shape left out), vLLM rows are scored with them, every row priced as its engine runs it."""
    hw = hw.model_copy(update={"moe": hw.moe.model_copy(update={"compute_fraction": {}})})  # before: dense-GEMM rule
    trt_eng = load_engine("trtllm")
    train = moe[engine_of(moe["framework"]) == "trtllm"]
    fitted, info = fit_moe_grouped(train, hw, trt_eng)
    shape = train[MOE_SHAPE_COLUMNS].astype(str).agg("_".join, axis=1)
    loo = pd.Series(np.nan, index=train.index)
    for s in shape.unique():
        held = (shape == s).to_numpy()
        part, _ = fit_moe_grouped(train[~held], hw, trt_eng)
        loo[train.index[held]] = predict_table(train[held], part, engine=trt_eng)["ape_pct"].to_numpy()
    before = predict_table(moe, hw)
    after = predict_table(moe, fitted, engine=AUTO_ENGINE)
    rows = after.assign(fmt=moe_format(moe["dtype"]).to_numpy(), before=before["ape_pct"].to_numpy(),
                        after=after["ape_pct"].to_numpy(), loo=loo.reindex(moe.index).to_numpy())
    rows["loo"] = rows["loo"].fillna(rows["after"])  # vLLM rows: never fitted on, out of sample as they are
    fitted, tri_md, tri_rec = triton_fraction_section(fitted, moe)
    fr = fitted.moe.compute_fraction
    md = ["## MoE priced with its grouped-GEMM block and each engine's kernels (`specplan validate --engine auto`)", "",
          f"Grouped-GEMM compute (costs/moe.py grouped_gemm_compute_s): every expert's rows cut into "
          f"{fitted.moe.tile_rows} x {fitted.moe.tile_cols} tiles run in waves over the {hw.sm_count} SMs, a full "
          f"tile at a fraction of the dense peak fitted on the {len(train)} TensorRT-LLM rows priced as TensorRT-LLM "
          f"runs them (its MoE kernel counts, engine_profiles/trtllm.yaml): "
          + ", ".join(f"{k} {v:.3f}" for k, v in sorted(fr.items())) +
          f". `before`: no engine, dense-GEMM efficiency (today's rule); `after`: the block and each row's engine "
          f"(in sample for TRT-LLM); `out of sample`: TRT-LLM rows scored with their own model shape "
          f"({', '.join(MOE_SHAPE_COLUMNS)}; {shape.nunique()} shapes) left out of the fit, vLLM rows as they are "
          f"(never fitted on). Regimes are the after model's.", ""]
    md += _table(rows, ["framework", "fmt", "regime"], {"median APE % before": "before", "after": "after",
                                                         "out of sample": "loo"})
    overall = {k: float(np.median(rows[k])) for k in ("before", "after", "loo")}
    md += [f"All {len(rows)} H100 MoE rows: median APE {overall['before']:.1f} % before, {overall['after']:.1f} % "
           f"after, {overall['loo']:.1f} % out of sample; MAPE {rows['before'].mean():.1f} / {rows['after'].mean():.1f}"
           f" / {rows['loo'].mean():.1f} %.", ""] + tri_md
    rec = {"compute_fraction": fr, "tile_rows": fitted.moe.tile_rows, "tile_cols": fitted.moe.tile_cols,
           "triton_compute_fraction": dict(fitted.moe.triton_compute_fraction), "triton": tri_rec,
           "fitted_on": f"{len(train)} TensorRT-LLM rows of reference/measured/moe_h100_a100.csv.gz priced with "
                        f"engine trtllm's MoE kernel counts; {info['formats']}",
           "median_ape": overall, "mape": {k: float(rows[k].mean()) for k in ("before", "after", "loo")}}
    return fitted, md, rec


TRITON_MOE_KERNEL = "vllm_unquantizedfusedmoe_triton_tritonexperts"  # vLLM's Triton fused-MoE kernel, bf16 weights


def fit_triton_fraction(rows: pd.DataFrame, hw: HardwareProfile) -> float:
    """The bf16 full-tile fraction of a Triton grouped-GEMM MoE kernel: fit_moe_grouped on Triton fused-MoE rows
    priced as vLLM runs them (its MoE kernel counts, the profile's tile shape)."""
    fitted, _ = fit_moe_grouped(rows, hw, load_engine("vllm"))
    return float(fitted.moe.compute_fraction["bf16"])


def triton_fraction_section(hw: HardwareProfile, moe: pd.DataFrame) -> tuple[HardwareProfile, list[str], dict]:
    """(hw with moe.triton_compute_fraction bf16, markdown, record): the fraction fitted on vLLM's Triton bf16
    fused-MoE rows; those rows scored at the cutlass fraction and at the Triton one with their model shape left out."""
    tri = moe[(moe["kernel"] == TRITON_MOE_KERNEL) & (moe_format(moe["dtype"]) == "bf16").to_numpy()]
    frac = fit_triton_fraction(tri, hw)
    vllm = load_engine("vllm")
    shape = tri[MOE_SHAPE_COLUMNS].astype(str).agg("_".join, axis=1)
    loo = pd.Series(np.nan, index=tri.index)
    for s in shape.unique():
        held = (shape == s).to_numpy()
        f = fit_triton_fraction(tri[~held], hw)
        part = hw.model_copy(update={"moe": hw.moe.model_copy(
            update={"compute_fraction": {**hw.moe.compute_fraction, "bf16": f}})})
        loo[tri.index[held]] = predict_table(tri[held], part, engine=vllm)["ape_pct"].to_numpy()
    cut = predict_table(tri, hw, engine=vllm)
    rows = cut.assign(cutlass=cut["ape_pct"].to_numpy(), loo=loo.to_numpy())
    out = hw.model_copy(update={"moe": hw.moe.model_copy(update={"triton_compute_fraction": {"bf16": frac}})})
    md = [f"Triton grouped GEMMs (`moe.triton_compute_fraction`, costs/moe.py tile_fraction): a full tile at {frac:.3f} "
          f"of the bf16 dense peak, fitted on the {len(tri)} vLLM Triton fused-MoE rows ({TRITON_MOE_KERNEL}, bf16) "
          f"priced as vLLM runs them; used for the engine MoE kernels a row-tile rule names (triton_kernels' "
          f"matmul_ogs: SGLang 0.5.12's MXFP4 experts on Hopper), whose MMA runs in bf16. Those rows at the cutlass "
          f"fraction and at the Triton one fitted with their model shape left out ({shape.nunique()} shapes):", ""]
    md += _table(rows, ["regime"], {"median APE % cutlass fraction": "cutlass", "Triton fraction, shape left out": "loo"})
    rec = {"bf16": frac, "rows": int(len(tri)), "fitted_on": f"{len(tri)} vLLM 0.24.0 rows of "
           f"reference/measured/moe_h100_a100.csv.gz ({TRITON_MOE_KERNEL}, bf16) priced with engine vllm's MoE kernel "
           f"counts", "median_ape": {"cutlass": float(np.median(rows["cutlass"])), "loo": float(np.median(rows["loo"]))}}
    return out, md, rec

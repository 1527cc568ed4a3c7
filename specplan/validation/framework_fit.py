"""Per-framework kernel numbers: fit them on half of a framework's H100 kernel rows, score them on the other half.

The H100 profile's GEMM and attention efficiencies are fitted on TensorRT-LLM's rows. Where vLLM's and SGLang's
kernels differ (FlashAttention-3 reads fp8 KV more slowly than TRT-LLM's XQA; vLLM's cuBLAS bf16 GEMMs are faster,
its and SGLang's CUTLASS fp8 GEMMs slower at mid M), the engine carries its own numbers:
- the `fa3` kernel family (vLLM and SGLang decode / verify): kv_mem_bw_fraction per KV dtype and cta_overhead_s,
  fitted jointly on the vLLM and SGLang rows (both run FA3);
- per engine and compute dtype, gemm_mem_bw_scale and gemm_compute_scale (EngineProfile), fitted on that
  framework's rows; shipped only where they lower the held-out median APE; and, fitted with them,
  gemm_compute_half_n (a compute rate that falls with few output columns N: t_c x (1 + half_n / N)), shipped only
  where it lowers the held-out median APE further (the same MIN_GAIN_PCT rule);
- per engine and compute dtype where the engine's code dispatches a larger-tile kernel at large M and K
  (EngineProfile.gemm_large_tile: the thresholds are read in its code), that kernel's compute scale, fitted on the
  rows in its range (M >= min_m and K >= min_k, outside the M <= 4096 rows above) with the numbers above held; shipped
  by the same MIN_GAIN_PCT rule.

Split (deterministic, by shape): attention rows are grouped by (n_q_heads, n_kv_heads, head_dim), GEMM rows by
(N, K); the groups are sorted and numbered 0, 1, 2, ...; even-numbered groups are fitted on, odd-numbered ones are
held out and scored. Rows are filtered as in docs/validation/README.md (attention: KV bytes above L2, fallback
kernels excluded; GEMM: N, K >= 1024, M <= 4096, measured >= 5 us). "Before" is the TRT-LLM-fitted profile alone.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specplan.bench.calibrate import _solve, fallback_attention_rows
from specplan.bench.families import attention_kv_bytes, predict_table
from specplan.profiles.engine import GEMM_SCALE_RANGE, EngineProfile, GemmTileSwitch, KernelFamily, engine_hardware
from specplan.profiles.hardware import HardwareProfile

ATTN_SHAPE = ("n_q_heads", "n_kv_heads", "head_dim")
GEMM_SHAPE = ("n", "k")
ATTN_FAMILY, ATTN_FRAMEWORKS = "fa3", ("vllm", "sglang")
GEMM_ENGINES = ("vllm", "sglang")
GEMM_DTYPES = ("bf16", "fp8")
DEVICE = "h100-sxm"
MIN_GAIN_PCT = 0.5  # a GEMM scale ships when it lowers the held-out median APE by at least this (points)
HALF_N_MAX = 65536.0  # upper bound of the fitted compute_half_n (output columns; the widest GEMM rows' N)


def framework_of(df: pd.DataFrame) -> pd.Series:
    """Framework name without version ('vllm 0.24.0' -> 'vllm')."""
    return df["framework"].astype(str).str.split().str[0].str.lower()


def shape_group(df: pd.DataFrame, keys) -> np.ndarray:
    """Number of each row's shape group: the sorted distinct `keys` tuples numbered 0, 1, 2, ..."""
    tup = list(zip(*(df[k].to_numpy() for k in keys)))
    index = {t: i for i, t in enumerate(sorted(set(tup)))}
    return np.array([index[t] for t in tup], dtype=int)


def fit_half(df: pd.DataFrame, keys) -> np.ndarray:
    """True for the rows fitted on: even-numbered shape groups (odd-numbered ones are held out)."""
    return shape_group(df, keys) % 2 == 0


def attention_rows(df: pd.DataFrame, hw: HardwareProfile) -> pd.DataFrame:
    """Decode-attention rows of `hw`'s device scored in docs/validation: KV bytes above L2, no fallback kernel."""
    d = df[df["device"] == hw.id] if "device" in df else df
    return d[(attention_kv_bytes(d) > hw.l2_bytes) & ~fallback_attention_rows(d)]


def gemm_rows(df: pd.DataFrame, hw: HardwareProfile, large: GemmTileSwitch | None = None) -> pd.DataFrame:
    """Layer-like GEMM rows of `hw`'s device: N, K >= 1024, M <= 4096, measured >= 5 us; with `large`, the rows in
    that kernel's range instead (M >= large.min_m, K >= large.min_k)."""
    d = df[df["device"] == hw.id] if "device" in df else df
    d = d[(d["n"] >= 1024) & (d["k"] >= 1024) & (d["time_us"] >= 5)]
    if large is not None:
        return d[(d["m"] >= large.min_m) & (d["k"] >= large.min_k)]
    return d[d["m"] <= 4096]


def _log_resid(p: pd.DataFrame) -> np.ndarray:
    return np.log(np.maximum(p["predicted_us"].to_numpy(), 1e-3) / p["measured_us"].to_numpy())


def fit_attention_family(df: pd.DataFrame, hw: HardwareProfile, family: KernelFamily) -> tuple[KernelFamily, dict]:
    """`family` with kv_mem_bw_fraction (one per KV dtype in `df`), mem_bw_fraction (= the 16-bit KV one) and
    cta_overhead_s fitted by robust least squares on log time of decode rows."""
    kvs = sorted(df["kv_dtype"].astype(str).unique())

    def build(x) -> KernelFamily:
        kv = {d: float(x[i]) for i, d in enumerate(kvs)}
        return family.model_copy(update={"kv_mem_bw_fraction": kv, "mem_bw_fraction": kv.get("bf16", kv[kvs[0]]),
                                         "cta_overhead_s": float(x[-1]) * 1e-6})

    x0 = [hw.attention.bw_fraction(d) for d in kvs] + [hw.attention.cta_overhead_s * 1e6]
    x = _solve(lambda x: _log_resid(predict_table(df, hw, "attention", kernel_family=build(x))), x0,
               [0.05] * len(kvs) + [0.0], [1.0] * len(kvs) + [50.0])
    return build(x), {"rows": int(len(df)), "kv_dtypes": kvs}


def scaled_engine(engine: EngineProfile, dtype: str, mem_scale: float, compute_scale: float,
                  half_n: float | None = None) -> EngineProfile:
    """`engine` with the GEMM scales (and, if given, compute_half_n) of one compute dtype replaced (the other
    dtypes' kept)."""
    upd = {"gemm_mem_bw_scale": {**engine.gemm_mem_bw_scale, dtype: float(mem_scale)},
           "gemm_compute_scale": {**engine.gemm_compute_scale, dtype: float(compute_scale)}}
    if half_n is not None:
        upd["gemm_compute_half_n"] = {**engine.gemm_compute_half_n, dtype: float(half_n)}
    return engine.model_copy(update=upd)


def _bare_engine(name: str) -> EngineProfile:
    """The `ideal` engine renamed: no costs, no GEMM scales."""
    from specplan.profiles.registry import load_engine

    return load_engine("ideal").model_copy(update={"id": name})


def fit_gemm_scale(df: pd.DataFrame, hw: HardwareProfile, dtype: str, half_n: bool = False) -> tuple[float, ...]:
    """(gemm_mem_bw_scale, gemm_compute_scale) of one compute dtype fitted by robust least squares on log time;
    with `half_n`, (mem scale, compute scale, gemm_compute_half_n) fitted jointly."""
    base = _bare_engine("fit")
    x0, lo, hi = ([1.0, 1.0, 1000.0], [0.3, 0.3, 0.0], [3.0, 3.0, HALF_N_MAX]) if half_n else \
        ([1.0, 1.0], [0.3, 0.3], [3.0, 3.0])
    x = _solve(lambda x: _log_resid(predict_table(df, engine_hardware(hw, scaled_engine(base, dtype, *x)), "gemm")),
               x0, lo, hi)
    return tuple(float(v) for v in x)


def with_large_tile(engine: EngineProfile, dtype: str, tile: GemmTileSwitch, scale: float) -> EngineProfile:
    """`engine` with the larger-tile kernel `tile` of one compute dtype at compute scale `scale`."""
    return engine.model_copy(update={"gemm_large_tile": {
        **engine.gemm_large_tile, dtype: tile.model_copy(update={"compute_scale": float(scale)})}})


def fit_large_tile_scale(df: pd.DataFrame, hw: HardwareProfile, engine: EngineProfile, dtype: str,
                         tile: GemmTileSwitch) -> float:
    """The larger-tile kernel's compute_scale of one compute dtype, fitted by robust least squares on log time of
    rows in its range with `engine`'s other GEMM numbers held."""
    lo, hi = GEMM_SCALE_RANGE
    x = _solve(lambda x: _log_resid(predict_table(df, engine_hardware(hw, with_large_tile(engine, dtype, tile, x[0])),
                                                  "gemm")), [1.0], [lo], [hi])
    return float(x[0])


def fit_large_tile_numbers(gemm: pd.DataFrame, hw: HardwareProfile, fitted: list[dict]) -> list[dict]:
    """Per engine and dtype whose shipped YAML names a larger-tile kernel (gemm_large_tile): its compute_scale
    fitted on the even (N, K) groups of that framework's rows in the kernel's range, with the engine's fitted
    (or, if not shipped, the TRT-LLM) GEMM numbers held; scored on the odd groups before (scale 1) and after;
    `ship` = the held-out median APE goes down by MIN_GAIN_PCT points or more."""
    from specplan.profiles.registry import load_engine

    out = []
    for g in fitted:
        tile = load_engine(g["engine"]).gemm_large_tile.get(g["dtype"])
        if tile is None:
            continue
        f, d = g["engine"], g["dtype"]
        base = _bare_engine(f)
        if g["ship"]:
            v = g["values"]
            base = scaled_engine(base, d, v[f"gemm_mem_bw_scale.{d}"], v[f"gemm_compute_scale.{d}"],
                                 v.get(f"gemm_compute_half_n.{d}"))
        rows = gemm_rows(gemm, hw, tile)
        r = rows[(framework_of(rows) == f).to_numpy() & (rows["dtype"].astype(str) == d).to_numpy()]
        fit = fit_half(r, GEMM_SHAPE)
        held = r[~fit]
        x = fit_large_tile_scale(r[fit], hw, base, d, tile)
        b, a = (scores(predict_table(held, engine_hardware(hw, with_large_tile(base, d, tile, s)), "gemm"))
                for s in (1.0, x))
        by_m = {int(m): {"before": scores(predict_table(held[held["m"] == m], engine_hardware(
                    hw, with_large_tile(base, d, tile, 1.0)), "gemm")),
                         "after": scores(predict_table(held[held["m"] == m], engine_hardware(
                    hw, with_large_tile(base, d, tile, x)), "gemm"))} for m in sorted(held["m"].unique())}
        out.append({"engine": f, "dtype": d, "min_m": tile.min_m, "min_k": tile.min_k,
                    "values": {f"gemm_large_tile.{d}.compute_scale": x},
                    "fitted_on": {"rows": int(fit.sum()), "framework": sorted(r["framework"].unique()),
                                  "shape_groups": len(_groups_text(r[fit], GEMM_SHAPE))},
                    "held_out": {"rows": int((~fit).sum()), "shape_groups": len(_groups_text(held, GEMM_SHAPE)),
                                 "before": b, "after": a, "by_m": by_m},
                    "ship": a["median_ape"] <= b["median_ape"] - MIN_GAIN_PCT})
    return out


def scores(p: pd.DataFrame) -> dict:
    """Rows, MAPE, median and p90 APE (%), median measured / predicted of a predict_table result."""
    ape = p["ape_pct"].to_numpy()
    return {"rows": int(len(p)), "mape": float(ape.mean()), "median_ape": float(np.median(ape)),
            "p90_ape": float(np.percentile(ape, 90)),
            "ratio": float(np.median(p["measured_us"].to_numpy() / p["predicted_us"].to_numpy()))}


def _groups_text(df: pd.DataFrame, keys) -> list[str]:
    return ["x".join(str(int(v)) for v in t) for t in sorted(set(zip(*(df[k].to_numpy() for k in keys))))]


def fit_attention_numbers(attn: pd.DataFrame, hw: HardwareProfile, family: KernelFamily) -> dict:
    """Fit the attention family on the even shape groups of ATTN_FRAMEWORKS' rows; score every framework / KV
    dtype on the odd groups before (hardware block) and after (fitted family)."""
    rows = attention_rows(attn, hw)
    rows = rows[framework_of(rows).isin(ATTN_FRAMEWORKS).to_numpy()]
    fit = fit_half(rows, ATTN_SHAPE)
    fam, info = fit_attention_family(rows[fit], hw, family.model_copy(update={"kv_mem_bw_fraction": {},
                                                                             "mem_bw_fraction": None,
                                                                             "cta_overhead_s": None}))
    held = rows[~fit]
    before, after = predict_table(held, hw, "attention"), predict_table(held, hw, "attention", kernel_family=fam)
    key = (framework_of(held) + " kv " + held["kv_dtype"].astype(str)).to_numpy()
    scored = {k: {"before": scores(before[key == k]), "after": scores(after[key == k])} for k in sorted(set(key))}
    return {"family": family.id, "frameworks": list(ATTN_FRAMEWORKS),
            "values": {**{f"kv_mem_bw_fraction.{d}": v for d, v in fam.kv_mem_bw_fraction.items()},
                       "mem_bw_fraction": fam.mem_bw_fraction, "cta_overhead_s": fam.cta_overhead_s},
            "fitted_on": {**info, "framework": sorted(rows[fit]["framework"].astype(str).unique()),
                          "shape_groups": _groups_text(rows[fit], ATTN_SHAPE)},
            "held_out": {"rows": int(len(held)), "shape_groups": len(_groups_text(held, ATTN_SHAPE)), **scored},
            "fitted_family": fam}


def fit_gemm_numbers(gemm: pd.DataFrame, hw: HardwareProfile) -> list[dict]:
    """Per engine and dtype: GEMM scales fitted on the even (N, K) groups of its framework's rows, scored on the
    odd ones; `ship` = the held-out median APE goes down by MIN_GAIN_PCT points or more. The scales are fitted
    twice, alone and with gemm_compute_half_n; the half_n fit is taken (`half_n`) where its held-out median APE is
    MIN_GAIN_PCT points or more below the scales' alone (`scales_only`: that fit's held-out score)."""
    rows = gemm_rows(gemm, hw)
    out = []
    for f in GEMM_ENGINES:
        for d in GEMM_DTYPES:
            r = rows[(framework_of(rows) == f).to_numpy() & (rows["dtype"].astype(str) == d).to_numpy()]
            fit = fit_half(r, GEMM_SHAPE)
            held = r[~fit]
            b = scores(predict_table(held, hw, "gemm"))
            two, three = fit_gemm_scale(r[fit], hw, d), fit_gemm_scale(r[fit], hw, d, half_n=True)
            a2, a3 = (scores(predict_table(held, engine_hardware(hw, scaled_engine(_bare_engine(f), d, *x)), "gemm"))
                      for x in (two, three))
            use_n = a3["median_ape"] <= a2["median_ape"] - MIN_GAIN_PCT
            x, a = (three, a3) if use_n else (two, a2)
            values = {f"gemm_mem_bw_scale.{d}": x[0], f"gemm_compute_scale.{d}": x[1]}
            if use_n:
                values[f"gemm_compute_half_n.{d}"] = x[2]
            out.append({"engine": f, "dtype": d, "values": values, "half_n": use_n,
                        "tried_half_n": {"values": list(three), "held_out": a3}, "scales_only": a2,
                        "fitted_on": {"rows": int(fit.sum()), "framework": sorted(r["framework"].unique()),
                                      "shape_groups": _groups_text(r[fit], GEMM_SHAPE)},
                        "held_out": {"rows": int((~fit).sum()), "shape_groups": len(_groups_text(held, GEMM_SHAPE)),
                                     "before": b, "after": a},
                        "ship": a["median_ape"] <= b["median_ape"] - MIN_GAIN_PCT})
    return out


def framework_fits(gemm: pd.DataFrame, attn: pd.DataFrame, hw: HardwareProfile, family: KernelFamily) -> dict:
    """Every per-framework number: {'attention': {...}, 'gemm': [...]} (see fit_attention_numbers / fit_gemm_numbers)."""
    fitted = fit_gemm_numbers(gemm, hw)
    return {"device": hw.id, "attention": fit_attention_numbers(attn, hw, family), "gemm": fitted,
            "large_tile": fit_large_tile_numbers(gemm, hw, fitted)}


def _m(x: dict) -> str:
    return f"{x['mape']:.1f} / {x['median_ape']:.1f} / {x['p90_ape']:.1f} · {x['ratio']:.3f}"


def report_markdown(res: dict, tables: dict) -> str:
    """docs/validation/frameworks.md: each number, the rows it was fitted on, its held-out score before/after."""
    a = res["attention"]
    head = "| | held-out rows | before: MAPE / median / p90 % · meas/pred | after: MAPE / median / p90 % · meas/pred |"
    md = ["# Per-framework kernel numbers (H100): fitted on half of each framework's rows, scored on the rest", "",
          "Generated by `python scripts/make_validation_report.py` (`specplan.validation.framework_fit`); do not edit.", "",
          "The H100 profile (`hardware_profiles/h100-sxm.yaml`) is fitted on TensorRT-LLM's kernel rows only "
          "(README.md). The numbers below are the engines' own, used only when that engine is selected "
          "(`--engine vllm|sglang`; `specplan step` without an engine is unchanged). **Split:** rows are grouped by "
          "shape, attention by (n_q_heads, n_kv_heads, head_dim), GEMM by (N, K); the distinct shapes are sorted "
          "and numbered 0, 1, 2, ...; each number is fitted (robust least squares on log time, "
          "`specplan.bench.calibrate._solve`) on the **even-numbered** shape groups of its framework's rows and "
          "scored on the **odd-numbered** ones, which it never saw. The shipped value is the half-fit value, so the "
          "held-out score is the score of the number in the YAML. \"Before\" = the TRT-LLM-fitted profile alone. "
          "Row filters as in README.md: attention KV bytes above the 50 MB L2, fallback kernels excluded; GEMM "
          "N, K ≥ 1024, M ≤ 4096, measured ≥ 5 µs.", "",
          f"Sources: `{tables['attention']}` and `{tables['gemm']}` (device {res['device']}).", "",
          f"## Decode attention: kernel family `{a['family']}` (engine_profiles/kernels/{a['family']}.yaml; "
          "vLLM and SGLang decode and verify)", "",
          "Fitted jointly on the even shape groups of the vLLM and SGLang rows (both run FlashAttention-3): "
          f"{a['fitted_on']['rows']} rows of {', '.join(a['fitted_on']['framework'])}, "
          f"{len(a['fitted_on']['shape_groups'])} shape groups (n_q_heads x n_kv_heads x head_dim): "
          f"{', '.join(a['fitted_on']['shape_groups'])}. Held out: {a['held_out']['rows']} rows, "
          f"{a['held_out']['shape_groups']} shape groups.", "",
          "| number | TRT-LLM-fitted profile (before) | fitted |", "|---|---|---|"]
    for k, v in a["values"].items():
        was = tables["hw_attention"].get(k)
        md.append(f"| {k} | {was:.4g} | {v:.4g} |" if was is not None else f"| {k} | | {v:.4g} |")
    md += ["", head, "|---|---|---|---|"]
    for k, v in a["held_out"].items():
        if isinstance(v, dict):
            md.append(f"| {k} | {v['before']['rows']} | {_m(v['before'])} | {_m(v['after'])} |")
    md += ["", "## GEMM: per-engine scales of the hardware's GEMM fractions (engine_profiles/<engine>.yaml)", "",
           "Per engine and compute dtype, `gemm_mem_bw_scale` and `gemm_compute_scale` multiply the hardware "
           "profile's mem_bw_fraction and compute_max_fraction (capped at 1) for that engine's GEMM kernels; fitted "
           "on the even (N, K) groups of that framework's rows, scored on the odd ones. Shipped only where the "
           f"held-out median APE goes down by {MIN_GAIN_PCT:g} points or more (smaller changes are within what "
           "another split would move); otherwise the engine keeps the TRT-LLM fit.", "",
           "| engine / dtype | fitted on | mem_bw scale | compute scale | compute_half_n | shipped? |",
           "|---|---|---|---|---|---|"]
    for g in res["gemm"]:
        v = list(g["values"].values())
        half = f"{v[2]:.4g}" if g["half_n"] else f"- (fitted {g['tried_half_n']['values'][2]:.0f}: not taken)"
        md.append(f"| {g['engine']} {g['dtype']} | {g['fitted_on']['rows']} rows of "
                  f"{', '.join(g['fitted_on']['framework'])}, {len(g['fitted_on']['shape_groups'])} (N, K) groups | "
                  f"{v[0]:.4f} | {v[1]:.4f} | {half} | "
                  f"{'yes' if g['ship'] else f'**no**: held-out median down by less than {MIN_GAIN_PCT:g} points'} |")
    md += ["", "`gemm_compute_half_n` (a compute rate that falls with few output columns: the compute term times "
           "(1 + half_n / N)) is fitted jointly with the two scales and taken only where it lowers the held-out "
           f"median APE by {MIN_GAIN_PCT:g} points or more below the two scales alone (column \"scales alone\"); "
           "vLLM's and SGLang's CUTLASS fp8 GEMMs are slow at narrow N and mid-to-large M, barely at wide N "
           "(docs/notes/issue39_fp8_gemm.md).", "",
           "| | held-out rows | before: MAPE / median / p90 % · meas/pred | scales alone | after (shipped) |",
           "|---|---|---|---|---|"]
    for g in res["gemm"]:
        h = g["held_out"]
        md.append(f"| {g['engine']} {g['dtype']} | {h['rows']} ({h['shape_groups']} groups) | {_m(h['before'])} | "
                  f"{_m(g['scales_only'])} | {_m(h['after'])} |")
    md += ["", "(N, K) groups fitted on (the same even-numbered list for every framework and dtype that has them): "
           + ", ".join(res["gemm"][0]["fitted_on"]["shape_groups"]) + ".", ""]
    md += large_tile_markdown(res.get("large_tile", []))
    md += tables.get("shipped", [])
    return "\n".join(md) + "\n"


def large_tile_markdown(fits: list[dict]) -> list[str]:
    """frameworks.md's section on the larger-tile kernels (gemm_large_tile): range, fitted scale, held-out scores."""
    if not fits:
        return []
    md = ["## GEMM: the larger-tile kernel an engine dispatches at large M and K (gemm_large_tile)", "",
          "Where an engine's code dispatches another kernel at large M and K (vLLM's SM90 fp8 dispatch: M >= 8192 and "
          "K >= 6144 run a 256x128x128 cooperative tile instead of the 128x128x128 ping-pong default, "
          "csrc/quantization/w8a8/cutlass/c3x/scaled_mm_sm90_fp8_dispatch.cuh in vLLM 0.24.0 and 0.34.0), its "
          "compute term is divided by `compute_scale`, fitted on the even (N, K) groups of the framework's rows in "
          "that range (rows the M <= 4096 fits above never see) with the engine's numbers above held, scored on the "
          f"odd ones; shipped where the held-out median APE goes down by {MIN_GAIN_PCT:g} points or more. "
          "Before = the same engine numbers without the switch (scale 1).", "",
          "| engine / dtype | range | fitted on | compute_scale | held-out rows | before: MAPE / median / p90 % · "
          "meas/pred | after | shipped? |", "|---|---|---|---|---|---|---|---|"]
    for g in fits:
        h = g["held_out"]
        md.append(f"| {g['engine']} {g['dtype']} | M >= {g['min_m']}, K >= {g['min_k']} | {g['fitted_on']['rows']} "
                  f"rows of {', '.join(g['fitted_on']['framework'])}, {g['fitted_on']['shape_groups']} (N, K) groups | "
                  f"{list(g['values'].values())[0]:.4g} | {h['rows']} ({h['shape_groups']} groups) | {_m(h['before'])} "
                  f"| {_m(h['after'])} | {'yes' if g['ship'] else '**no**'} |")
        for m, v in h["by_m"].items():
            md.append(f"| - at M = {m} | | | | {v['before']['rows']} | {_m(v['before'])} | {_m(v['after'])} | |")
    return md + [""]


SHIPPED_RTOL = 2e-3  # YAML numbers are the fit rounded to 4 significant digits


def shipped_check(res: dict) -> list[dict]:
    """Each fitted number beside the value the shipped YAML holds (None = absent) and whether they agree."""
    from specplan.profiles.registry import load_engine, load_kernel_family

    a, fam = res["attention"], load_kernel_family(res["attention"]["family"])
    out = []
    for k, v in a["values"].items():
        have = fam.kv_mem_bw_fraction.get(k.split(".")[1]) if k.startswith("kv_mem_bw_fraction.") else getattr(fam, k)
        out.append({"where": f"engine_profiles/kernels/{fam.id}.yaml", "number": k, "fitted": v, "shipped": have,
                    "ok": have is not None and abs(have / v - 1) <= SHIPPED_RTOL})
    for g in res["gemm"]:
        eng = load_engine(g["engine"])
        for k in (f"{f}.{g['dtype']}" for f in ("gemm_mem_bw_scale", "gemm_compute_scale", "gemm_compute_half_n")):
            field, d = k.split(".")
            v = g["values"].get(k) if g["ship"] else None  # None: the YAML must not hold the number
            have = getattr(eng, field).get(d)
            ok = have is None if v is None else (have is not None and abs(have / v - 1) <= SHIPPED_RTOL)
            out.append({"where": f"engine_profiles/{eng.id}.yaml", "number": k, "fitted": v, "shipped": have,
                        "ok": ok})
    for g in res.get("large_tile", []):
        k = next(iter(g["values"]))
        v = g["values"][k] if g["ship"] else None
        tile = load_engine(g["engine"]).gemm_large_tile.get(g["dtype"])
        have = tile.compute_scale if tile is not None else None
        ok = have is None if v is None else (have is not None and abs(have / v - 1) <= SHIPPED_RTOL)
        out.append({"where": f"engine_profiles/{g['engine']}.yaml", "number": k, "fitted": v, "shipped": have,
                    "ok": ok})
    return out


def _g(x) -> str:
    return "-" if x is None else f"{x:.4g}"


def write_report(out_dir, meas_dir) -> dict:
    """Fit every per-framework number on the H100 tables in `meas_dir`; write frameworks.md and frameworks.json
    to `out_dir`; return the results (with the shipped-YAML check under 'shipped')."""
    import json
    from pathlib import Path

    from specplan.profiles.registry import load_hardware, load_kernel_family

    out_dir, meas_dir = Path(out_dir), Path(meas_dir)
    names = {"gemm": "gemm_h100_a100.csv.gz", "attention": "attention_decode_h100_a100.csv.gz"}
    hw = load_hardware(DEVICE)
    res = framework_fits(pd.read_csv(meas_dir / names["gemm"]), pd.read_csv(meas_dir / names["attention"]), hw,
                         load_kernel_family(ATTN_FAMILY))
    res["shipped"] = shipped_check(res)
    res["attention"].pop("fitted_family")
    att = hw.attention
    tables = {k: f"reference/measured/{v}" for k, v in names.items()}
    tables["hw_attention"] = {"kv_mem_bw_fraction.bf16": att.bw_fraction("bf16"),
                              "kv_mem_bw_fraction.fp8": att.bw_fraction("fp8"),
                              "mem_bw_fraction": att.mem_bw_fraction, "cta_overhead_s": att.cta_overhead_s}
    bad = [c for c in res["shipped"] if not c["ok"]]
    tables["shipped"] = ["## The shipped YAMLs hold these fits", "",
                         "| file | number | fitted | shipped | equal? |", "|---|---|---|---|---|"] + [
        f"| {c['where']} | {c['number']} | {_g(c['fitted'])} | {_g(c['shipped'])} | "
        f"{'yes' if c['ok'] else '**no**'} |" for c in res["shipped"]] + [
        "", "All shipped numbers equal the fit." if not bad else f"**{len(bad)} shipped numbers differ from the fit.**",
        ""]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "frameworks.md").write_text(report_markdown(res, tables))
    (out_dir / "frameworks.json").write_text(json.dumps(res, indent=1, default=float))
    return res

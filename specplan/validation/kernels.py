"""Validate a hardware profile against measured kernel times: per-row predictions, error metrics, a plot.

Errors are absolute percentage errors, APE = |predicted - measured| / measured * 100 (percent).
Metrics per group: rows, MAPE (mean APE), median APE, p90 APE.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from specplan.core.records import record
from specplan.bench.calibrate import fallback_attention_rows
from specplan.bench.families import attention_kv_bytes, check_measured, detect_family, predict_table
from specplan.core.dtypes import canonical_dtype
from specplan.core.errors import SpecplanError
from specplan.profiles.hardware import HardwareProfile


@record
class Filters:
    """Row filters of `specplan validate` (None = no filter)."""

    device: str | None = None
    framework: str | None = None  # substring match, e.g. 'vllm' or 'trtllm 1.3'
    kernel: str | None = None  # substring match
    dtype: str | None = None  # GEMM/MoE dtype or attention kv dtype
    min_time_us: float | None = None
    min_nk: int | None = None  # GEMM: N and K >= this
    max_m: int | None = None  # GEMM: M <= this
    kv_exceeds_l2: bool = False  # attention: KV bytes above the profile's L2
    exclude_fallback: bool = True  # attention: drop rows served by a fallback kernel (listed separately)


def metrics(ape) -> dict:
    """rows, mape, median_ape, p90_ape (percent) of an array of APEs."""
    a = np.asarray(ape, dtype=float)
    if a.size == 0:
        return {"rows": 0, "mape": float("nan"), "median_ape": float("nan"), "p90_ape": float("nan")}
    return {"rows": int(a.size), "mape": float(a.mean()), "median_ape": float(np.median(a)),
            "p90_ape": float(np.percentile(a, 90))}


def oracle_ape(scored: pd.DataFrame, reference: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """APE (percent) of the oracle that predicts each scored row with the reference rows' own measured time for
    the same shape (`keys`; median over duplicates); NaN where the reference has no row of that shape.

    With the TRT-LLM rows as reference it is what a model reproducing TRT-LLM exactly, shape by shape, would
    score on the vLLM / SGLang rows: the best any model fitted only on TRT-LLM can expect to do.
    """
    ref = reference.groupby(keys)["time_us"].median().rename("_oracle_us")
    t = scored[keys + ["time_us"]].join(ref, on=keys)
    return (np.abs(t["_oracle_us"] - t["time_us"]) / t["time_us"] * 100.0).to_numpy()


def apply_filters(df: pd.DataFrame, family: str, hw: HardwareProfile, f: Filters) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(kept rows, excluded fallback rows) of a measured table after the filters."""
    keep = np.ones(len(df), dtype=bool)
    col = lambda c: df[c].astype(str).str.lower()  # noqa: E731
    if f.device and "device" in df:
        keep &= (col("device") == f.device.lower()).to_numpy()
    if f.framework and "framework" in df:
        keep &= col("framework").str.contains(f.framework.lower(), regex=False).to_numpy()
    if f.kernel:
        kc = "kernel" if "kernel" in df else "kernel_source"
        keep &= df[kc].astype(str).str.lower().str.contains(f.kernel.lower(), regex=False).to_numpy()
    if f.dtype:
        want = canonical_dtype(f.dtype)
        dcol = "kv_dtype" if family in ("attention", "mla") else "dtype"
        keep &= df[dcol].astype(str).map(canonical_dtype).eq(want).to_numpy()
    if f.min_time_us is not None:
        keep &= (df["time_us"] >= f.min_time_us).to_numpy()
    if f.min_nk is not None and family == "gemm":
        keep &= ((df["n"] >= f.min_nk) & (df["k"] >= f.min_nk)).to_numpy()
    if f.max_m is not None and family == "gemm":
        keep &= (df["m"] <= f.max_m).to_numpy()
    if f.kv_exceeds_l2 and family == "attention":
        keep &= attention_kv_bytes(df) > hw.l2_bytes
    fallback = np.zeros(len(df), dtype=bool)
    if f.exclude_fallback and family == "attention":
        fallback = fallback_attention_rows(df) & keep
    return df[keep & ~fallback], df[fallback]


def summarize(rows: pd.DataFrame) -> dict:
    """Overall metrics plus by_kind, by_dtype, by_regime, by_framework and by kind/dtype/regime (percent)."""
    out = {"family": rows["family"].iloc[0] if len(rows) else None, **metrics(rows["ape_pct"])}
    out["bias_pct"] = float(np.median(rows["predicted_us"] / rows["measured_us"] - 1) * 100) if len(rows) else float("nan")
    for name, keys in (("by_kind", ["kind"]), ("by_dtype", ["dtype"]), ("by_regime", ["regime"]),
                       ("by_framework", ["framework"]), ("by_class", ["kind", "dtype", "regime"])):
        out[name] = {"/".join(map(str, k if isinstance(k, tuple) else (k,))): metrics(g["ape_pct"])
                     for k, g in rows.groupby(keys if len(keys) > 1 else keys[0], sort=True)}
    return out


def validate(df: pd.DataFrame, hw: HardwareProfile, filters: Filters | None = None,
             source: str = "measured table", engine=None) -> tuple[pd.DataFrame, dict, pd.DataFrame]:
    """(per-row predictions, summary dict, excluded fallback rows) for one measured table; `engine` (None, an
    EngineProfile or families.AUTO_ENGINE: each row's framework column) prices the rows as that engine runs them
    (families.predict_table); the summary's `notes` say where a kernel or framework fell back to a nearest family.

    The table is checked first (`families.check_measured`): a non-numeric or blank value, a negative size or a
    non-positive time_us is a one-line error naming `source` (the file), the column and the first bad row."""
    if df.empty:
        raise SpecplanError(f"{source}: no data rows")
    family = detect_family(df.columns)
    df = check_measured(df, family, source)
    try:
        kept, fallback = apply_filters(df, family, hw, filters or Filters())
        if kept.empty:
            raise SpecplanError("validate: no rows left after the filters")
        rows = predict_table(kept, hw, family, engine=engine)
    except KeyError as exc:  # a text column the family needs (dtype, kv_dtype, kernel, ...)
        raise SpecplanError(f"{source}: missing column {exc} of a {family} table") from None
    summary = summarize(rows)
    summary["hardware"] = hw.id
    summary["fallback_rows_excluded"] = int(len(fallback))
    summary["engine"] = engine if engine is None or isinstance(engine, str) else engine.id
    summary["notes"] = list(rows.attrs.get("notes", []))
    return rows, summary, fallback


def format_summary(s: dict) -> str:
    """Plain-text table of a summary: one line per kind/dtype/regime class."""
    lines = [f"{s['family']} on {s['hardware']}: {s['rows']} rows  MAPE {s['mape']:.1f}%  median {s['median_ape']:.1f}%"
             f"  p90 {s['p90_ape']:.1f}%  (median bias {s['bias_pct']:+.1f}%)"]
    if s.get("engine"):
        lines.append(f"priced as engine {s['engine']} runs the rows" + (" (each row's framework column)"
                                                                       if s["engine"] == "auto" else ""))
    lines += [f"note: {n}" for n in s.get("notes", [])]
    if s.get("fallback_rows_excluded"):
        lines.append(f"excluded {s['fallback_rows_excluded']} fallback-kernel rows (G >= 48, KV read < 0.2 TB/s)")
    lines.append(f"{'class (kind/dtype/regime)':<44}{'rows':>8}{'MAPE%':>8}{'med%':>8}{'p90%':>8}")
    for k, m in s["by_class"].items():
        lines.append(f"{k:<44}{m['rows']:>8}{m['mape']:>8.1f}{m['median_ape']:>8.1f}{m['p90_ape']:>8.1f}")
    return "\n".join(lines)


def scatter_plot(rows: pd.DataFrame, path, title: str = "", color_by: str = "kind") -> Path:
    """Log-log predicted-vs-measured scatter (microseconds) with y = x and +-20% lines; returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 5.5))
    for key, g in rows.groupby(color_by, sort=True):
        n = len(g)
        g = g.sample(n=min(n, 6000), random_state=0)  # plotted points; the label counts all rows
        ax.scatter(g["measured_us"], g["predicted_us"], s=3, alpha=0.35, label=f"{key} ({n} rows)")
    lo = float(min(rows["measured_us"].min(), rows["predicted_us"].min()))
    hi = float(max(rows["measured_us"].max(), rows["predicted_us"].max()))
    xs = np.array([lo, hi])
    ax.plot(xs, xs, "k-", lw=1, label="predicted = measured")
    ax.plot(xs, xs * 1.2, "k:", lw=0.8, label="±20 %")
    ax.plot(xs, xs / 1.2, "k:", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured time (us)")
    ax.set_ylabel("predicted time (us)")
    ax.set_title(title or f"{rows['family'].iloc[0]}: median APE {np.median(rows['ape_pct']):.1f}%", fontsize=9)
    leg = ax.legend(fontsize=7.5, markerscale=4, loc="upper left", framealpha=0.95,
                    title="rows (colour) and reference lines", title_fontsize=7.5)
    for h in leg.legend_handles:  # legend markers opaque although the points are translucent
        h.set_alpha(1.0)
    fig.tight_layout()
    import io

    from specplan.core.io import atomic_write_bytes

    path = Path(path)
    buf = io.BytesIO()
    fig.savefig(buf, dpi=110, format=path.suffix.lstrip(".") or "png")
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return path


def write_report_dir(rows: pd.DataFrame, summary: dict, fallback: pd.DataFrame, out_dir) -> list[Path]:
    """Write rows.csv, summary.json, fallback_rows.csv (if any) and scatter.png into `out_dir`."""
    import json

    from specplan.core.io import atomic_write_text

    d = Path(out_dir)
    paths = [d / "rows.csv", d / "summary.json"]
    atomic_write_text(paths[0], rows.to_csv(index=False))
    atomic_write_text(paths[1], json.dumps(summary, indent=1, default=float, allow_nan=False))
    if len(fallback):
        paths.append(d / "fallback_rows.csv")
        atomic_write_text(paths[-1], fallback.to_csv(index=False))
    paths.append(scatter_plot(rows, d / "scatter.png"))
    return paths

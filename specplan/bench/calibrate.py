"""Fit a hardware profile's efficiencies to measured kernel times: least squares on log time.

- GEMM rows: per compute dtype mem_bw_fraction, compute_max_fraction, compute_half_flops, roofline_sharpness,
  k_latency_s; the profile's
  kernel_overhead_s (shared by all dtypes); for fp8/fp4/int8 the activation-quantization overhead
  quant_overhead_s where the measured framework's kernel includes it (families.QUANT_IN_KERNEL_PREFIXES).
- Decode-attention rows: attention.mem_bw_fraction and attention.compute_fraction (rows a framework serves
  with a fallback kernel excluded, see `fallback_attention_rows`).
- All-reduce rows: custom and NCCL latencies and bandwidth fractions.
The fitted profile records what it was fitted on in `calibration` and `sources`.
"""

from __future__ import annotations

from datetime import date

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from specplan.bench.families import attention_kv_bytes, detect_family, predict_table, quant_in_kernel
from specplan.costs.gemm import LOW_PRECISION
from specplan.core.dtypes import canonical_dtype
from specplan.core.errors import SpecplanError
from specplan.profiles.hardware import HardwareProfile

MAX_FIT_ROWS = 20000  # rows used per fit (a seeded random subset of larger tables)
FALLBACK_TB_S = 0.2  # decode attention below this KV bandwidth (TB/s) at G >= 48 = fallback kernel


def fallback_attention_rows(df: pd.DataFrame) -> np.ndarray:
    """Boolean mask of attention rows served by a fallback kernel: G >= 48 and KV read below 0.2 TB/s."""
    g = (df["n_q_heads"] / df["n_kv_heads"]).to_numpy()
    tb_s = attention_kv_bytes(df) / df["time_us"].to_numpy(float) * 1e-6
    big = attention_kv_bytes(df) > 8e6  # ignore tiny KV, where the launch floor dominates anyway
    return (g >= 48) & (tb_s < FALLBACK_TB_S) & big


def _subset(df: pd.DataFrame, n: int = MAX_FIT_ROWS, seed: int = 0) -> pd.DataFrame:
    """At most n rows, a seeded random subset."""
    return df if len(df) <= n else df.sample(n=n, random_state=seed)


def _update(hw: HardwareProfile, **blocks) -> HardwareProfile:
    """A copy of `hw` with whole fields replaced (validated through the schema)."""
    data = hw.model_dump()
    data.update(blocks)
    return HardwareProfile.model_validate(data)


def _solve(residual, x0, lo, hi, extra_starts=()) -> np.ndarray:
    """Robust least squares (soft-L1 on log-time residuals) within bounds; best of several starts."""
    best = None
    for start in [x0, *extra_starts]:
        x = np.clip(np.asarray(start, float), np.asarray(lo) + 1e-9, np.asarray(hi) - 1e-9)
        r = least_squares(residual, x, bounds=(lo, hi), loss="soft_l1", f_scale=0.1, x_scale="jac", max_nfev=200)
        if best is None or r.cost < best.cost:
            best = r
    return best.x


def _log_resid(df: pd.DataFrame, hw: HardwareProfile, family: str) -> np.ndarray:
    """log(predicted / measured) for every row."""
    p = predict_table(df, hw, family)
    return np.log(np.maximum(p["predicted_us"].to_numpy(), 1e-3) / p["measured_us"].to_numpy())


def _gemm_data_start(df: pd.DataFrame, hw: HardwareProfile, layout) -> list[float]:
    """A start read off the data: overhead = half the fastest row, bandwidth from small M, compute from large M."""
    t = df["time_us"].to_numpy(float) * 1e-6
    ovh = 0.5 * float(t.min())
    x = [ovh * 1e6]
    for d, q in layout:
        sel = (df["dtype"].astype(str).map(canonical_dtype) == d).to_numpy()
        m, n, k = (df.loc[sel, c].to_numpy(float) for c in ("m", "n", "k"))
        ts = np.maximum(t[sel] - ovh, 1e-7)
        small, large = m <= np.percentile(m, 25), m >= np.percentile(m, 75)
        bw = np.median((n * k * 2.0 + m * k * 2.0 + m * n * 2.0)[small] / ts[small]) / hw.mem_bandwidth_bytes_s
        cf = np.median((2.0 * m * n * k)[large] / ts[large]) / hw.peak(d)
        x += [float(np.clip(bw, 0.02, 0.99)), float(np.clip(cf, 0.003, 0.99)), 8.0, 4.0, 0.1] + ([1.0] if q else [])
    return x


def fit_gemm(df: pd.DataFrame, hw: HardwareProfile) -> tuple[HardwareProfile, dict]:
    """Fit per-dtype GEMM efficiencies, kernel_overhead_s and quant overheads on GEMM rows."""
    df = _subset(df)
    dtypes = sorted({canonical_dtype(d) for d in df["dtype"].astype(str)})
    quant_seen = bool(quant_in_kernel(df["framework"]).any()) if "framework" in df else False
    # x = [overhead_us, then per dtype: mbw, cmax, log10(half_flops), roofline sharpness p, K latency (ns per
    #      element of K), (quant_us if low precision)]
    x0, lo, hi, layout = [hw.kernel_overhead_s * 1e6], [0.0], [50.0], []
    for d in dtypes:
        e = hw.kernel_eff(d)
        q = d in LOW_PRECISION and quant_seen
        layout.append((d, q))
        x0 += [e.mem_bw_fraction, e.compute_max_fraction, np.log10(max(e.compute_half_flops, 1e3)),
               e.roofline_sharpness or 4.0, e.k_latency_s * 1e9]
        lo += [0.01, 0.002, 3.0, 1.0, 0.0]
        hi += [1.0, 1.0, 13.0, 50.0, 20.0]
        if q:
            x0.append(max(e.quant_overhead_s * 1e6, 1.0))
            lo.append(0.0)
            hi.append(50.0)

    def build(x) -> HardwareProfile:
        eff = {k: v.model_dump() for k, v in hw.efficiency.items()}
        i = 1
        for d, q in layout:
            blk = dict(eff.get(d, eff["default"]))
            blk.update(mem_bw_fraction=x[i], compute_max_fraction=x[i + 1], compute_half_flops=10 ** x[i + 2],
                       roofline_sharpness=x[i + 3], k_latency_s=x[i + 4] * 1e-9)
            i += 5
            if q:
                blk["quant_overhead_s"] = x[i] * 1e-6
                i += 1
            eff[d] = blk
        return _update(hw, efficiency=eff, kernel_overhead_s=x[0] * 1e-6)

    x = _solve(lambda x: _log_resid(df, build(x), "gemm"), x0, lo, hi, [_gemm_data_start(df, hw, layout)])
    out = build(x)
    info = {"kernel_overhead_us": round(x[0], 3), "dtypes": dtypes, "rows": int(len(df))}
    return out, info


def fit_attention(df: pd.DataFrame, hw: HardwareProfile, per_kv_dtype: bool = True) -> tuple[HardwareProfile, dict]:
    """Fit decode-attention bandwidth (one per KV dtype present when `per_kv_dtype`) and, when the profile has
    an SM count, the per-CTA fixed cost, on decode-attention rows (fallback rows excluded).

    compute_fraction is kept: decode rows (q_len = 1) never bind on compute, so it is not identifiable.
    """
    fb = fallback_attention_rows(df)
    df = _subset(df[~fb])
    a = hw.attention
    kvs = sorted({canonical_dtype(d) for d in df["kv_dtype"].astype(str)}) if per_kv_dtype else []
    cta = bool(hw.sm_count)
    # x = [mem_bw_fraction, (cta_overhead_us), (bw fraction per kv dtype ...)]
    x0, lo, hi = [a.mem_bw_fraction], [0.05], [1.0]
    if cta:
        x0, lo, hi = x0 + [max(a.cta_overhead_s * 1e6, 0.5)], lo + [0.0], hi + [50.0]
    for d in kvs:
        x0, lo, hi = x0 + [a.bw_fraction(d)], lo + [0.05], hi + [1.0]

    def build(x) -> HardwareProfile:
        blk = {**a.model_dump(), "mem_bw_fraction": x[0]}
        i = 1
        if cta:
            blk["cta_overhead_s"] = x[1] * 1e-6
            i = 2
        blk["kv_mem_bw_fraction"] = {d: x[i + j] for j, d in enumerate(kvs)}
        return _update(hw, attention=blk)

    x = _solve(lambda x: _log_resid(df, build(x), "attention"), x0, lo, hi)
    out = build(x)
    if kvs and "bf16" in kvs:  # the default bandwidth is the 16-bit KV one
        out = _update(out, attention={**out.attention.model_dump(), "mem_bw_fraction": out.attention.bw_fraction("bf16")})
    return out, {"rows": int(len(df)), "fallback_rows_excluded": int(fb.sum()), "kv_dtypes": kvs}


def custom_kernel_rows(df: pd.DataFrame, hw: HardwareProfile) -> np.ndarray:
    """Boolean mask of the non-NCCL all-reduce rows the custom kernel itself carries: the row's family from its
    kernel name (families.allreduce_row_families: TRTLLM one-shot, else custom) and a message within that kernel's
    reach (oneshot_max_bytes, custom_max_bytes); the rows beyond run NCCL, so they never fit the kernel's numbers."""
    from specplan.bench.families import allreduce_row_families

    nbytes = _allreduce_bytes(df)
    fam, _ = allreduce_row_families(df["kernel"], None, hw)
    limit = np.where(fam == "oneshot", hw.allreduce.oneshot_max_bytes, hw.allreduce.custom_max_bytes)
    return (fam != "nccl") & (nbytes <= limit)


def _allreduce_bytes(df: pd.DataFrame) -> np.ndarray:
    """Message bytes of all-reduce rows."""
    from specplan.core.dtypes import dtype_bytes

    return df["message_elems"].to_numpy(float) * df["dtype"].map(lambda d: dtype_bytes(canonical_dtype(str(d)))).to_numpy(float)


def _custom_log_resid(df: pd.DataFrame, hw: HardwareProfile) -> np.ndarray:
    """log(predicted / measured) of custom-kernel rows, each priced as its kernel's family (graphed)."""
    from specplan.bench.families import allreduce_row_families
    from specplan.costs.comm import allreduce_time_s

    nbytes, tp = _allreduce_bytes(df), df["num_gpus"].to_numpy(int)
    fam, _ = allreduce_row_families(df["kernel"], None, hw)
    t = np.zeros(len(df))
    for f in np.unique(fam):
        for n in np.unique(tp):
            sel = (fam == f) & (tp == n)
            t[sel] = allreduce_time_s(hw, nbytes[sel], int(n), str(f))
    return np.log(np.maximum(t * 1e6, 1e-3) / df["time_us"].to_numpy(float))


def fit_allreduce(df: pd.DataFrame, hw: HardwareProfile, fit_latency: bool = True) -> tuple[HardwareProfile, dict]:
    """Fit custom/NCCL latencies (us; kept when not fit_latency) and bandwidth fractions on all-reduce rows, each
    kernel on its own rows: NCCL's on the NCCL rows, the custom kernel's on the rows it carries itself
    (custom_kernel_rows, priced as their kernel runs them), so neither moves when the other's rows change."""
    df = df[df["num_gpus"] <= hw.scaleup_domain] if hw.scaleup_domain > 1 else df
    nccl = (df["kernel"].astype(str).str.upper() == "NCCL").to_numpy()
    custom = custom_kernel_rows(df, hw)

    def fit_group(hw: HardwareProfile, rows: pd.DataFrame, names: list[str], lo: list[float], hi: list[float],
                  resid) -> HardwareProfile:
        p = hw.allreduce
        x0 = [getattr(p, n) * 1e6 if n.endswith("_s") else getattr(p, n) for n in names]

        def build(x) -> HardwareProfile:
            blk = p.model_dump()
            for n, v in zip(names, x):
                blk[n] = v * 1e-6 if n.endswith("_s") else v
            return _update(hw, allreduce=blk)

        return build(_solve(lambda x: resid(rows, build(x)), x0, lo, hi))

    if nccl.any():
        names = ["nccl_bw_fraction"] + (["nccl_latency_s", "nccl_latency_per_peer_s"] if fit_latency else [])
        lo, hi = [0.01, 0.0, 0.0][:len(names)], [1.0, 100.0, 50.0][:len(names)]
        if hw.allreduce.nvls:  # NVLS's latency (us), fitted with the rings' numbers on the same NCCL rows
            names, lo, hi = names + ["nvls_latency_s"], lo + [0.0], hi + [500.0]
        hw = fit_group(hw, df[nccl], names, lo, hi, lambda rows, h: _log_resid(rows, h, "allreduce"))
    if custom.any():
        names = ["custom_bw_fraction"] + (["custom_latency_s"] if fit_latency else [])
        hw = fit_group(hw, df[custom], names, [0.01, 0.0][:len(names)], [1.0, 50.0][:len(names)], _custom_log_resid)
    return hw, {"rows": int(len(df)), "nccl_rows": int(nccl.sum()), "custom_kernel_rows": int(custom.sum())}


FITTERS = {"gemm": fit_gemm, "attention": fit_attention, "allreduce": fit_allreduce}


def describe_rows(df: pd.DataFrame) -> str:
    """Short text naming the devices, frameworks and row count of a table."""
    dev = ",".join(sorted({str(x) for x in df["device"].unique()})) if "device" in df else "?"
    fw = ",".join(sorted({str(x) for x in df["framework"].unique()})) if "framework" in df else "?"
    return f"{len(df)} rows; device {dev}; framework {fw}"


def calibrate(tables: list[tuple[str, pd.DataFrame]], hw: HardwareProfile, new_id: str | None = None) -> HardwareProfile:
    """Fit every family present in `tables` ([(name, df)]), GEMM first; return the fitted profile."""
    order = {"gemm": 0, "attention": 1, "allreduce": 2}
    fams = sorted(((detect_family(df.columns), name, df) for name, df in tables), key=lambda t: order.get(t[0], 9))
    record, sources = {"date": str(date.today()), "base_profile": hw.id, "fits": {}}, dict(hw.sources)
    for fam, name, df in fams:
        if fam not in FITTERS or df.empty:
            continue
        try:
            hw, info = FITTERS[fam](df, hw)
        except KeyError as exc:  # a text column the family needs (dtype, kv_dtype, kernel, ...)
            raise SpecplanError(f"{name}: missing column {exc} of a {fam} table") from None
        what = f"fitted by specplan calibrate (least squares on log time) on {name}: {describe_rows(df)}"
        record["fits"][fam] = {"file": name, **info, "rows_described": describe_rows(df)}
        keys = {"gemm": ("efficiency", "kernel_overhead_s"), "attention": ("attention",), "allreduce": ("allreduce",)}[fam]
        for k in keys:
            sources[k] = what
    data = hw.model_dump()
    data.update(calibration=record, sources=sources)
    if new_id:
        data.update(id=new_id, name=f"{hw.name} (calibrated)")
    return HardwareProfile.model_validate(data)


def profile_yaml(hw: HardwareProfile) -> str:
    """The profile as YAML text (floats in plain notation)."""
    import yaml

    return yaml.safe_dump(hw.model_dump(mode="json"), sort_keys=False, width=120)


def allreduce_latency_floors(df: pd.DataFrame, max_bytes: float = 8192.0) -> dict:
    """Small-message latency floors of all-reduce rows (fastest time at messages <= `max_bytes`, per framework
    and GPU count): custom_latency_s = median of the custom-kernel floors; nccl_latency_s and
    nccl_latency_per_peer_s = least-squares line of the NCCL floors against (GPUs - 1). Keys absent when the rows
    have no such kernel."""
    small = df[_allreduce_bytes(df) <= max_bytes]
    floors = small.groupby(["framework", "kernel", "num_gpus"])["time_us"].min().reset_index()
    nccl = floors["kernel"].astype(str).str.upper() == "NCCL"
    out: dict = {}
    if (~nccl).any():
        out["custom_latency_s"] = float(np.median(floors.loc[~nccl, "time_us"])) * 1e-6
    if nccl.any():
        x = floors.loc[nccl, "num_gpus"].to_numpy(float) - 1.0
        y = floors.loc[nccl, "time_us"].to_numpy(float)
        slope, base = np.polyfit(x, y, 1) if np.unique(x).size > 1 else (0.0, float(np.mean(y)))
        out["nccl_latency_s"] = max(0.0, float(base)) * 1e-6
        out["nccl_latency_per_peer_s"] = max(0.0, float(slope)) * 1e-6
    return out


EAGER_FLOOR_MAX_BYTES = 65536.0  # messages up to 64 KB: every eager row there sits on its host floor (H100 table)


def fit_allreduce_eager(df: pd.DataFrame, max_bytes: float = EAGER_FLOOR_MAX_BYTES) -> dict[str, float]:
    """{engine: allreduce_eager_s} from eager all-reduce rows ('eager' in the kernel name): the median time of an
    engine's rows at messages <= `max_bytes` (seconds), where the host's dispatch, not the GPU, sets the time;
    the engine is the framework cell's first word. Engines without such rows are absent."""
    eager = df[df["kernel"].astype(str).str.lower().str.contains("eager", regex=False)]
    small = eager[_allreduce_bytes(eager) <= max_bytes]
    engine = small["framework"].astype(str).str.strip().str.split().str[0].str.lower()
    return {str(e): float(np.median(g["time_us"])) * 1e-6 for e, g in small.groupby(engine)}


def moe_format(dtype: pd.Series) -> pd.Series:
    """MoE weight format of measured rows: bf16, fp8 (per-tensor scales) or fp8_block (128-wide block scales)."""
    raw = dtype.astype(str).str.lower()
    return raw.map(lambda d: "fp8_block" if "block" in d else canonical_dtype(d))


MOE_SHAPE_COLUMNS = ["hidden", "inter", "num_experts", "topk"]  # one model's MoE layer: a group for leave-out


def fit_moe_grouped(df: pd.DataFrame, hw: HardwareProfile, engine=None) -> tuple[HardwareProfile, dict]:
    """hw with hw.moe.compute_fraction fitted per weight format (moe_format) on fused-MoE rows (soft-L1 least
    squares on log time, the tile shape kept), every row priced as `engine` runs it (its MoE kernel counts)."""
    from specplan.bench.families import predict_moe
    from specplan.profiles.engine import engine_hardware

    fmt = moe_format(df["dtype"])
    fracs = dict(hw.moe.compute_fraction)
    for f in sorted(fmt.unique()):
        sub = df[(fmt == f).to_numpy()]

        def build(x, f=f) -> HardwareProfile:
            return _update(hw, moe={**hw.moe.model_dump(), "compute_fraction": {**fracs, f: float(x[0])}})

        def resid(x, sub=sub) -> np.ndarray:
            p = predict_moe(sub, engine_hardware(build(x), engine), engine)
            return np.log(np.maximum(p["predicted_us"].to_numpy(), 1e-3) / p["measured_us"].to_numpy())

        fracs[f] = float(_solve(resid, [0.5], [0.02], [1.0])[0])
    out = _update(hw, moe={**hw.moe.model_dump(), "compute_fraction": fracs})
    return out, {"rows": int(len(df)), "formats": sorted(fmt.unique())}


def fit_mla(df: pd.DataFrame, hw: HardwareProfile, kernel_family, tile_rows: int | None = None):
    """Fit an MLA KernelFamily's mem_bw_fraction and compute_fraction (robust least squares on log time) on MLA
    decode rows, at a given tile height (default: the family's); returns (family, info)."""
    fam = kernel_family if tile_rows is None else kernel_family.model_copy(update={"tile_rows": int(tile_rows)})
    att = hw.attention

    def build(x):
        return fam.model_copy(update={"mem_bw_fraction": float(x[0]), "compute_fraction": float(x[1]),
                                      "kv_mem_bw_fraction": {}})

    def resid(x):
        p = predict_table(df, hw, "mla", kernel_family=build(x))
        return np.log(np.maximum(p["predicted_us"].to_numpy(), 1e-3) / p["measured_us"].to_numpy())

    x0 = [fam.mem_bw_fraction or att.mem_bw_fraction, fam.compute_fraction or att.compute_fraction]
    x = _solve(resid, x0, [0.05, 0.05], [1.0, 1.0], extra_starts=([0.8, 0.8], [0.6, 0.3]))
    return build(x), {"rows": int(len(df)), "tile_rows": int(build(x).tile_rows or att.tile_rows)}

"""Kernel families of measured tables: detect from columns, normalize, predict every row with specplan.costs.

Families (the tables of reference/measured/ and the harness's CSVs): gemm, attention (decode/verify),
allreduce, moe, mla, linear_attention. `predict_table` returns one row per measured row with columns
kind, dtype, regime, framework, kernel, device, measured_us, predicted_us (vectorized per dtype group).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from specplan.costs.attention import AttentionHeads, attention_cost, recurrent_state_cost
from specplan.costs.comm import (NCCL_NVLS_DTYPES, allreduce_time_s, custom_allreduce_s, eager_allreduce_s,
                                 nccl_allreduce_s)
from specplan.costs.gemm import LOW_PRECISION, compute_dtype_for, elementwise_cost, gemm_cost
from specplan.costs.moe import ExpertLayer, MoeKernel, moe_experts_cost
from specplan.costs.roofline import REGIME_NAMES
from specplan.core.dtypes import canonical_dtype, dtype_bytes
from specplan.core.errors import SpecplanError, brief
from specplan.profiles.hardware import HardwareProfile

FAMILIES = ("gemm", "attention", "allreduce", "moe", "mla", "linear_attention")

# Frameworks whose measured fp8 GEMM includes the activation-quantization kernel (bf16 -> fp8 per call).
# TRT-LLM's torch_flow fp8 op quantizes x inside the op (a ~6 us floor above vLLM/SGLang at M = 1);
# vLLM's CutlassFP8ScaledMMLinearKernel and SGLang's sgl_kernel fp8_scaled_mm are timed on fp8 inputs.
QUANT_IN_KERNEL_PREFIXES = ("trtllm",)

# MLA (DeepSeek-V3 dims): latent 512 + rope 64 read per cached token, V = first 512 columns.
MLA_KV_WIDTH, MLA_V_WIDTH = 576, 512
# Linear-attention state dtypes: recurrent state fp32, conv state bf16; FLOPs per token per state element.
GDN_STATE_BYTES, CONV_STATE_BYTES, GDN_FLOPS_PER_ELEM = 4.0, 2.0, 8.0


def detect_family(columns) -> str:
    """Kernel family of a measured table from its column names (one-line error when unknown)."""
    c = set(columns)
    if "message_elems" in c:
        return "allreduce"
    if "num_experts" in c:
        return "moe"
    if {"isl", "step"} <= c:
        return "mla"
    if "op_name" in c or "kernel_source" in c:
        return "linear_attention"
    if {"kv_len", "n_kv_heads", "batch"} <= c:
        return "attention"
    if {"m", "n", "k"} <= c:
        return "gemm"
    if {"model", "context", "time_us"} <= c:  # specplan.bench.step_bench: one whole decode step per row
        raise SpecplanError("measured table: this is a whole-step CSV (model, context, ...: one decode step per "
                            "row, from scripts/bench_step.py), not a kernel table; validate it with "
                            "`python scripts/validate_step.py` (writes docs/validation/step_h200.md)")
    raise SpecplanError(f"measured table: cannot tell the kernel family from columns {sorted(c)} (kernel tables: "
                        f"{', '.join(FAMILIES)}; whole-step CSVs: python scripts/validate_step.py)")


# Numeric columns of each family: required (no blanks) and optional (blank allowed; linear-attention rows of
# one kernel kind leave the other kind's dimensions empty). All must be numbers >= 0; time_us must be > 0.
SHAPE_COLUMNS = {
    "gemm": ("m", "n", "k"),
    "attention": ("batch", "q_len", "kv_len", "n_q_heads", "n_kv_heads", "head_dim"),
    "allreduce": ("message_elems", "num_gpus"),
    "moe": ("num_tokens", "hidden", "inter", "topk", "num_experts", "moe_tp", "moe_ep"),
    "mla": ("batch", "num_heads", "isl", "step"),
    "linear_attention": ("batch_size",),
}
MAX_SIZE = 1e12  # any size column (elements, tokens, heads): far above any kernel, far below float overflow
# Shape columns where 0 is not a measurement (a GEMM with no rows, attention with no heads): must be > 0.
POSITIVE_COLUMNS = {
    "gemm": ("m", "n", "k"),
    "attention": ("batch", "q_len", "n_q_heads", "n_kv_heads", "head_dim"),
}
OPTIONAL_COLUMNS = {
    "linear_attention": ("d_conv", "num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim", "d_state", "nheads",
                         "head_dim", "n_groups"),
}


def read_measured(path) -> pd.DataFrame:
    """Read a measured CSV (.csv or .csv.gz) into a DataFrame; an empty file is a one-line error."""
    import gzip
    import zlib

    try:
        df = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise SpecplanError(f"{path}: empty file (no header, no rows)") from None
    except pd.errors.ParserError as exc:
        raise SpecplanError(f"{path}: not a readable CSV ({str(exc).strip().splitlines()[-1]})") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise SpecplanError(f"{path}: compressed file truncated or corrupt ({exc})") from None
    except UnicodeDecodeError as exc:
        raise SpecplanError(f"{path}: not UTF-8 text (byte at offset {exc.start}); save it as UTF-8 CSV") from None
    except (OSError, ValueError) as exc:
        if isinstance(exc, (FileNotFoundError, IsADirectoryError, PermissionError)):
            raise SpecplanError(f"{path}: {exc.strerror}") from None
        raise SpecplanError(f"{path}: not a readable CSV ({' '.join(str(exc).split())[:200]})") from None
    if df.empty:
        raise SpecplanError(f"{path}: no data rows")
    for c in df.columns:  # blank text cells as '' (pandas 3 keeps NaN through astype(str))
        if not pd.api.types.is_numeric_dtype(df[c]):
            df[c] = df[c].astype(object).where(df[c].notna(), "")
    return df


def _float_or_nan(x) -> float:
    try:
        return float(str(x).strip())  # a 400-digit number is inf here (then refused), text is NaN
    except ValueError:
        return float("nan")


def _numeric(raw: pd.Series) -> pd.Series:
    """A column as floats (NaN where not a number); numbers too large for a float become inf, not an error."""
    try:
        return pd.to_numeric(raw, errors="coerce")
    except (OverflowError, ValueError):
        return raw.map(_float_or_nan).astype(float)


def check_measured(df: pd.DataFrame, family: str, source: str = "measured table") -> pd.DataFrame:
    """The table with its numeric columns as floats, or a one-line error naming `source`, the column and the first
    bad data row (1 = the first row under the header, line 2 of the file; assumes `df` is the file as read, before
    any filtering): a non-numeric or blank value, a negative size, or a non-positive or blank time_us (such rows
    are an error, not dropped: a measurement of 0 us is a broken one and would make the APE infinite)."""
    out = df.copy()

    def bad(col: str, mask: np.ndarray, what: str, show: bool = True):
        i = int(np.argmax(mask))
        got = f", got '{brief(str(df[col].iloc[i]), 40)}'" if show else ""
        raise SpecplanError(f"{source}: column '{col}', data row {i + 1} (line {i + 2}): {what}{got} "
                            f"({int(mask.sum())} bad row{'s' if mask.sum() > 1 else ''})")

    cols = [(c, True) for c in (*SHAPE_COLUMNS.get(family, ()), "time_us")]
    cols += [(c, False) for c in OPTIONAL_COLUMNS.get(family, ())]
    for col, required in cols:
        if col not in df:
            if required:
                raise SpecplanError(f"{source}: missing column '{col}' of a {family} table")
            continue
        raw = df[col]
        num = _numeric(raw)
        blank = raw.isna().to_numpy() | raw.astype(str).str.strip().eq("").to_numpy()
        v = num.to_numpy(dtype=float)
        if np.any(~blank & np.isnan(v)):
            bad(col, ~blank & np.isnan(v), "not a number")
        if required and np.any(blank):
            bad(col, blank, "blank", show=False)
        if col == "time_us":
            if np.any(~(v > 0)):
                bad(col, ~(v > 0), "time must be > 0 us")
            if np.any(np.isinf(v)):
                bad(col, np.isinf(v), "time must be finite")
        else:
            if np.any(v < 0) or np.any(np.isinf(v)):
                bad(col, (v < 0) | np.isinf(v), "must be a finite number >= 0")
            if np.any(v > MAX_SIZE):
                bad(col, v > MAX_SIZE, f"must be <= {MAX_SIZE:.0e} (not a kernel size)")
            if col in POSITIVE_COLUMNS.get(family, ()) and np.any(v == 0):
                bad(col, v == 0, "must be > 0 (a kernel of size 0 is not a measurement)")
        if not pd.api.types.is_numeric_dtype(raw):
            out[col] = num.astype(float)  # e.g. ' 12' read as text; numeric columns keep their dtype
    return out


def _dtype_col(s: pd.Series) -> pd.Series:
    """Canonical dtype names ('bfloat16' -> 'bf16', 'fp8_block' -> 'fp8')."""
    return s.astype(str).map(lambda x: canonical_dtype(x))


def quant_in_kernel(framework: pd.Series) -> np.ndarray:
    """True where the framework's measured fp8 GEMM includes activation quantization."""
    f = framework.astype(str).str.lower()
    return f.str.startswith(QUANT_IN_KERNEL_PREFIXES).to_numpy()


def _base(df: pd.DataFrame, kind, dtype) -> pd.DataFrame:
    """Common output columns."""
    out = pd.DataFrame(index=df.index)
    out["device"] = df.get("device", pd.Series("?", index=df.index)).astype(str)
    out["framework"] = df.get("framework", pd.Series("?", index=df.index)).astype(str)
    kern = df["kernel"] if "kernel" in df else df.get("kernel_source", pd.Series("?", index=df.index))
    out["kernel"] = kern.astype(str)
    out["kind"] = kind
    out["dtype"] = dtype
    out["measured_us"] = df["time_us"].astype(float)
    return out


def _regime_names(codes) -> np.ndarray:
    return np.vectorize(REGIME_NAMES.get)(np.asarray(codes))


def predict_gemm(df: pd.DataFrame, hw: HardwareProfile) -> pd.DataFrame:
    """GEMM rows: gemm_cost per dtype; fp8 quantization overhead only where the framework's kernel has it."""
    dt = _dtype_col(df["dtype"])
    out = _base(df, "gemm", dt)
    pred = np.zeros(len(df))
    reg = np.empty(len(df), dtype=object)
    quant = quant_in_kernel(out["framework"])
    for d in dt.unique():
        sel = (dt == d).to_numpy()
        g = df[sel]
        cost = gemm_cost(hw, g["m"].to_numpy(), g["n"].to_numpy(), g["k"].to_numpy(), d, d, "bf16",
                         activation_quant=True)
        t = np.asarray(cost.time_s, dtype=float)
        c = compute_dtype_for(hw, d, d)
        if c in LOW_PRECISION:
            t = t - np.where(quant[sel], 0.0, hw.kernel_eff(c).quant_overhead_s)
        pred[sel] = t
        reg[sel] = _regime_names(cost.regime)
    out["predicted_us"] = pred * 1e6
    out["regime"] = reg
    out["n_min_k"] = np.minimum(df["n"], df["k"]).to_numpy()
    return out


def attention_kv_bytes(df: pd.DataFrame) -> np.ndarray:
    """KV bytes of a decode-attention row: batch * kv_len * n_kv_heads * head_dim * 2 * bytes(kv_dtype)."""
    b = _dtype_col(df["kv_dtype"]).map(dtype_bytes).to_numpy()
    return (df["batch"] * df["kv_len"] * df["n_kv_heads"] * df["head_dim"]).to_numpy(float) * 2.0 * b


def predict_attention(df: pd.DataFrame, hw: HardwareProfile, kernel_family=None, style: str = "shared") -> pd.DataFrame:
    """Decode/verify attention rows: attention_cost per (dtype, kv_dtype); `kernel_family` (a KernelFamily, e.g.
    an engine's decode family) overrides the hardware's attention block, None keeps it."""
    kvd = _dtype_col(df["kv_dtype"])
    cd = _dtype_col(df["dtype"])
    out = _base(df, "attention", "kv_" + kvd)
    pred = np.zeros(len(df))
    reg = np.empty(len(df), dtype=object)
    key = cd + "|" + kvd
    for k in key.unique():
        sel = (key == k).to_numpy()
        g = df[sel]
        c, kv = k.split("|")
        cost = attention_cost(hw, g["batch"].to_numpy(), g["q_len"].to_numpy(), g["kv_len"].to_numpy(),
                              AttentionHeads(g["n_q_heads"].to_numpy(), g["n_kv_heads"].to_numpy(),
                                             g["head_dim"].to_numpy()),
                              kv_dtype=kv, compute_dtype=c, style=style, family=kernel_family)
        pred[sel] = cost.time_s
        reg[sel] = _regime_names(cost.regime)
    out["predicted_us"] = pred * 1e6
    out["regime"] = reg
    out["kv_bytes"] = attention_kv_bytes(df)
    out["group"] = (df["n_q_heads"] / df["n_kv_heads"]).to_numpy()
    out["g_q"] = out["group"] * df["q_len"].to_numpy()
    out["achieved_tb_s"] = out["kv_bytes"] / out["measured_us"] * 1e-6
    return out


# All-reduce kernel names of the measured tables -> the family that kernel is (costs/comm.py); a name not listed
# takes the engine's family (EngineProfile.allreduce_algorithm), else the hardware's, with a note.
ALLREDUCE_KERNEL_FAMILIES = (("nccl", "nccl"), ("trtllm", "oneshot"), ("custom", "custom"))


def allreduce_row_families(kernel: pd.Series, engine_family: str | None, hw: HardwareProfile) -> tuple[np.ndarray, list[str]]:
    """(family per row, notes) of all-reduce rows priced under an engine: the family the kernel name says
    (ALLREDUCE_KERNEL_FAMILIES), else the engine's, else the hardware's."""
    k = kernel.astype(str).str.lower()
    fallback = engine_family or hw.allreduce.algorithm
    fam = np.full(len(k), "", dtype=object)
    for needle, family in ALLREDUCE_KERNEL_FAMILIES:
        fam[(fam == "") & k.str.contains(needle, regex=False).to_numpy()] = family
    notes = [f"all-reduce kernel '{n}' is not a known family: priced as {fallback} (the nearest: the "
             f"{'engine' if engine_family else 'hardware'}'s family)" for n in sorted(set(kernel.astype(str)[fam == ""]))]
    fam[fam == ""] = fallback
    return fam, notes


def predict_allreduce(df: pd.DataFrame, hw: HardwareProfile, engine=None) -> pd.DataFrame:
    """All-reduce rows. No engine: NCCL ring for kernel NCCL, the custom kernel otherwise (the H100 fit's rule).
    With an engine (EngineProfile): each row's family from its kernel name, else the engine's; rows whose kernel
    runs outside a CUDA graph ('eager' in its name) priced as eager collectives (costs/comm.py eager_allreduce_s,
    the engine's allreduce_eager_s as the host floor)."""
    dt = _dtype_col(df["dtype"])
    nbytes = df["message_elems"].to_numpy(float) * dt.map(dtype_bytes).to_numpy()
    tp = df["num_gpus"].to_numpy(float)
    nvls_ok = dt.isin(NCCL_NVLS_DTYPES).to_numpy()  # NCCL runs NVLS on these dtypes only (costs/comm.py)
    p = hw.allreduce
    if engine is None:
        nccl = (df["kernel"].astype(str).str.upper() == "NCCL").to_numpy()
        fam = np.where(nccl, "nccl", "custom")
        t = np.where(nccl, nccl_allreduce_s(hw, nbytes, tp, nvls_ok), custom_allreduce_s(hw, nbytes, tp, nvls_ok))
        eager = np.zeros(len(df), dtype=bool)
        notes: list[str] = []
    else:
        fam, notes = allreduce_row_families(df["kernel"], engine.allreduce_algorithm, hw)
        eager = df["kernel"].astype(str).str.lower().str.contains("eager", regex=False).to_numpy()
        t = np.zeros(len(df))
        for f in np.unique(fam):
            for n in np.unique(tp):
                sel = (fam == f) & (tp == n)
                t[sel] = np.where(eager[sel], eager_allreduce_s(hw, nbytes[sel], int(n), f, engine.allreduce_eager_s,
                                                                nvls_ok[sel]),
                                  allreduce_time_s(hw, nbytes[sel], int(n), f, nvls_ok[sel]))
    lat = np.where(fam == "nccl", p.nccl_latency_s + (tp - 1) * p.nccl_latency_per_peer_s, p.custom_latency_s)
    if engine is not None:
        lat = np.where(eager, np.maximum(lat, engine.allreduce_eager_s), lat)
    out = _base(df, np.where(fam == "nccl", "allreduce_nccl", "allreduce_" + fam.astype(str)), dt)
    out["predicted_us"] = t * 1e6
    out["regime"] = np.where(t < 2 * lat, "latency", "bandwidth")
    out["message_bytes"] = nbytes
    out["num_gpus"] = tp.astype(int)
    out.attrs["notes"] = notes
    return out


def predict_moe(df: pd.DataFrame, hw: HardwareProfile, engine=None) -> pd.DataFrame:
    """Fused-MoE rows (balanced routing as collected); non-gated kernels read 2 of the 3 expert matrices. Under
    an engine, `hw` carries its MoE kernel counts (hw.moe_kernels per weight format, else MOE_KERNELS)."""
    dt = _dtype_col(df["dtype"])
    out = _base(df, "moe", dt)
    gated = ~df["kernel"].astype(str).str.contains("nongated").to_numpy()
    inter = df["inter"].to_numpy(float) * np.where(gated, 1.0, 2.0 / 3.0)
    pred = np.zeros(len(df))
    reg = np.empty(len(df), dtype=object)
    cols = ["hidden", "num_experts", "topk", "moe_tp", "moe_ep"]
    block = df["dtype"].astype(str).str.lower().str.contains("block", regex=False).to_numpy()  # fp8_block
    keyframe = df[cols].astype(int).assign(dtype=dt, inter=inter, block=block)
    for key, g in keyframe.groupby(cols + ["dtype", "inter", "block"], sort=False):
        h, e, k, tp, ep, d, f, b = key
        sel = df.index.isin(g.index)
        cost = moe_experts_cost(hw, df.loc[sel, "num_tokens"].to_numpy(float), ExpertLayer(h, f, e, k), d, d,
                                routing="balanced", tp=tp, ep=ep,
                                kernel=MoeKernel(hw.moe_kernels.get(d), block_scaled=bool(b)))
        pred[sel] = cost.time_s
        reg[sel] = _regime_names(cost.regime)
    out["predicted_us"] = pred * 1e6
    out["regime"] = reg
    return out


def predict_mla(df: pd.DataFrame, hw: HardwareProfile, kernel_family=None) -> pd.DataFrame:
    """MLA decode rows: latent attention, num_heads per device over one 576-wide latent KV of isl+step tokens,
    plus the RoPE + KV-cache-append kernel of the op (an element-wise kernel, as the step model counts it).
    `kernel_family`: the MLA KernelFamily (default: the built-in `mla-latent` the step prices MLA with)."""
    if kernel_family is None:
        from specplan.profiles.registry import load_kernel_family

        kernel_family = load_kernel_family("mla-latent")
    kvd = _dtype_col(df["kv_dtype"])
    cd = _dtype_col(df["dtype"])
    out = _base(df, "mla", "kv_" + kvd)
    out["kernel"] = "trtllm_mla"
    pred = np.zeros(len(df))
    reg = np.empty(len(df), dtype=object)
    kv_len = (df["isl"] + df["step"]).to_numpy(float)
    for k in (cd + "|" + kvd).unique():
        sel = ((cd + "|" + kvd) == k).to_numpy()
        c, kv = k.split("|")
        g = df[sel]
        cost = attention_cost(hw, g["batch"].to_numpy(), 1, kv_len[sel],
                              AttentionHeads(g["num_heads"].to_numpy(), 1, MLA_KV_WIDTH, head_dim_v=MLA_V_WIDTH,
                                             latent=True),
                              kv_dtype=kv, compute_dtype=c, family=kernel_family)
        rope = elementwise_cost(hw, g["batch"].to_numpy(float) * (g["num_heads"].to_numpy(float) + 1) * MLA_KV_WIDTH * 2.0 * 2)
        pred[sel] = cost.time_s + rope.time_s
        reg[sel] = _regime_names(cost.regime)
    out["predicted_us"] = pred * 1e6
    out["regime"] = reg
    return out


def linear_state(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(kind, state bytes per sequence, FLOPs per token) of linear-attention rows."""
    src = df["kernel_source"].astype(str)
    conv = src.str.contains("conv1d").to_numpy()
    mamba = (df["op_name"].astype(str) == "mamba2").to_numpy()
    nk, dk = df["num_k_heads"].fillna(0).to_numpy(float), df["head_k_dim"].fillna(0).to_numpy(float)
    nv, dv = df["num_v_heads"].fillna(0).to_numpy(float), df["head_v_dim"].fillna(0).to_numpy(float)
    get = lambda c: df[c].fillna(0).to_numpy(float) if c in df else np.zeros(len(df))  # noqa: E731
    conv_dim = np.where(mamba, get("nheads") * get("head_dim") + 2 * get("n_groups") * get("d_state"),
                        2 * nk * dk + nv * dv)
    d_conv = df["d_conv"].fillna(4).to_numpy(float)
    conv_bytes = conv_dim * (d_conv - 1) * CONV_STATE_BYTES
    rec_elems = nv * dk * dv
    state = np.where(conv, conv_bytes, rec_elems * GDN_STATE_BYTES)
    flops = np.where(conv, 2.0 * conv_dim * d_conv, GDN_FLOPS_PER_ELEM * rec_elems)
    kind = np.where(conv, np.where(mamba, "mamba2_conv1d", "gdn_conv1d"), "gdn_recurrent")
    return kind, state, flops


def predict_linear_attention(df: pd.DataFrame, hw: HardwareProfile) -> pd.DataFrame:
    """Linear-attention decode rows (one token): recurrent_state_cost over the state each kernel updates."""
    kind, state, flops = linear_state(df)
    out = _base(df, kind, "bf16")
    cost = recurrent_state_cost(hw, df["batch_size"].to_numpy(float), 1, state, flops, checkpoint=False)
    out["predicted_us"] = np.asarray(cost.time_s) * 1e6
    out["regime"] = _regime_names(cost.regime)
    out["state_bytes"] = state * df["batch_size"].to_numpy(float)
    return out


PREDICTORS = {
    "gemm": predict_gemm,
    "attention": predict_attention,
    "allreduce": predict_allreduce,
    "moe": predict_moe,
    "mla": predict_mla,
    "linear_attention": predict_linear_attention,
}


AUTO_ENGINE = "auto"  # validate --engine auto: each row's engine from its framework column


def engine_for_framework(framework: str):
    """(EngineProfile or None, note or None) of a table's framework cell ('vllm 0.24.0' -> vllm): a built-in
    engine named by the cell's first word; a collective library (NCCL) or an empty cell has none (no note); any
    other name has none, with a note (priced with the hardware's own families, never refused). A version the
    profile does not name is priced with that engine (its nearest), with a note."""
    from specplan.profiles.registry import engine_ids, load_engine

    words = str(framework).strip().lower().split()
    name = words[0] if words else ""
    if name in ("", "?", "nccl", "rccl"):
        return None, None
    if name in engine_ids() and name != "ideal":
        eng = load_engine(name)
        version = words[1] if len(words) > 1 else ""
        if version and version not in eng.version:
            return eng, (f"framework '{framework}': engine profile {eng.id} describes version '{eng.version}', "
                         f"not {version}; priced with it (the nearest)")
        return eng, None
    return None, (f"framework '{framework}' has no engine profile (known: {', '.join(i for i in engine_ids() if i != 'ideal')}); "
                  f"priced with the hardware profile's own kernel families")


def _engine_groups(df: pd.DataFrame, engine) -> tuple[list[tuple[np.ndarray, object]], list[str]]:
    """([(row mask, EngineProfile or None)], notes): one group per engine (`auto`: per framework cell)."""
    if engine != AUTO_ENGINE:
        return [(np.ones(len(df), dtype=bool), engine)], []
    fw = df.get("framework", pd.Series("", index=df.index)).astype(str)
    groups: dict[str, tuple[np.ndarray, object]] = {}
    notes: list[str] = []
    for cell in fw.unique():
        eng, note = engine_for_framework(cell)
        if note:
            notes.append(note)
        key = eng.id if eng is not None else ""
        mask = (fw == cell).to_numpy()
        groups[key] = (groups[key][0] | mask, eng) if key in groups else (mask, eng)
    return list(groups.values()), notes


def predict_table(df: pd.DataFrame, hw: HardwareProfile, family: str | None = None,
                  kernel_family=None, engine=None) -> pd.DataFrame:
    """Predict every row of a measured table; adds ape_pct = |pred - meas| / meas * 100. `kernel_family` (a
    KernelFamily) replaces the MLA table's default `mla-latent` family, or the attention table's hardware block.

    `engine`: None prices every row with the hardware profile alone (how the H100 fit sees them); an
    EngineProfile prices every row as that engine runs it; AUTO_ENGINE reads each row's engine from its framework
    column (engine_for_framework). Under an engine: the engine's GEMM scales, all-reduce family and MoE kernel
    counts on this GPU generation (profiles/engine.py engine_hardware), its decode / MLA attention families (unless
    `kernel_family` is given), eager all-reduce rows as eager collectives. Notes on fallbacks: out.attrs['notes']."""
    family = family or detect_family(df.columns)
    if family not in PREDICTORS:
        raise SpecplanError(f"kernel family: must be one of {', '.join(FAMILIES)}, got '{family}'")
    if engine is None:
        out = _predict_one(df, hw, family, kernel_family, None)
        notes = out.attrs.get("notes", [])
    else:
        from specplan.profiles.engine import engine_hardware

        groups, notes = _engine_groups(df, engine)
        parts, where = [], []
        for mask, eng in groups:
            part = _predict_one(df[mask], engine_hardware(hw, eng), family, kernel_family, eng)
            notes += part.attrs.get("notes", [])
            parts.append(part)
            where.append(np.flatnonzero(mask))
        # back in the table's row order (by position: an index with repeated labels stays in order too)
        out = pd.concat(parts).iloc[np.argsort(np.concatenate(where), kind="stable")] if len(parts) > 1 else parts[0]
    out.insert(0, "family", family)
    out["ape_pct"] = np.abs(out["predicted_us"] - out["measured_us"]) / out["measured_us"] * 100.0
    out.attrs["notes"] = list(dict.fromkeys(notes))
    return out


def _predict_one(df: pd.DataFrame, hw: HardwareProfile, family: str, kernel_family, engine) -> pd.DataFrame:
    """One predictor call: `hw` already carries the engine's changes; the engine picks the attention families."""
    if family in ("mla", "attention"):
        if kernel_family is None and engine is not None:
            from specplan.profiles.registry import load_kernel_family

            fam = engine.family_id("mla_attention" if family == "mla" else "decode_attention", hw)
            kernel_family = None if fam == "default" else load_kernel_family(fam)
        return PREDICTORS[family](df, hw, kernel_family)
    if family in ("allreduce", "moe"):
        return PREDICTORS[family](df, hw, engine)
    return PREDICTORS[family](df, hw)

"""The numbers each figure draws, as frozen records: specplan.plots draws them and computes nothing.

- `frontier_figure`: the frontier with and without speculation per device (and context) of a batch grid;
- `attention_tiles` (and `attention_tile_curves`, one context): attention runtime against D for several G;
- `step_breakdown`: the target's step time by kernel class at each D;
- `energy_figure`: the lowest J/token and $/Mtok at or above each tokens/s per user of a serving grid;
- `study_figures` / `serving_study_figures`: what a study's figures draw.
"""

from __future__ import annotations

import numpy as np

from specplan.core.records import Record, record
from specplan.planning.frontier import frontier, lower_envelope, throughput_column


@record(eq=False)
class FrontierCurve(Record):
    """One curve pair: its name (device, or device and context), the D = 0 and the speculation frontier rows."""

    name: str
    baseline: object
    speculation: object


@record(eq=False)
class FrontierFigure(Record):
    """The frontier figure's curves, the throughput they rank ('gpu' or 'device') and its column."""

    per: str
    throughput_column: str
    curves: tuple


def frontier_figure(df, per: str = "gpu") -> FrontierFigure:
    """Frontier curve pairs per device, and per (device, context) when several contexts are swept (as frontier.csv)."""
    col = throughput_column(per)
    ctxs = sorted(int(c) for c in df["context_len"].unique())
    groups = [(str(h), c) for h in df["hardware"].unique() for c in (ctxs if len(ctxs) > 1 else [None])]
    curves = []
    for h, c_len in groups:
        sub = df[df["hardware"] == h] if c_len is None else df[(df["hardware"] == h) & (df["context_len"] == c_len)]
        f = frontier(sub, sets=["baseline", "overall"], per=per)
        name = h if c_len is None else f"{h}, context {c_len:,}"
        curves.append(FrontierCurve(name, f[f["set"] == "baseline"], f[f["set"] == "overall"].reset_index(drop=True)))
    return FrontierFigure(per, col, tuple(curves))


def attention_tile_curves(hw, groups=(4, 8, 16, 32), context_len=32768, batch=8, head_dim=128, kv_heads=8,
                          max_draft_len=40, kv_dtype="bf16"):
    """(D, {G: runtime_s}) of one decode/verify attention kernel (costs.attention) as D grows."""
    from specplan.costs.attention import attention_time_s
    from specplan.profiles.registry import load_hardware

    hw = load_hardware(hw)
    d = np.arange(0, max_draft_len + 1)
    out = {}
    for g in groups:
        q = 1 + d
        out[g] = attention_time_s(hw, batch, q, context_len + q, g * kv_heads, kv_heads, head_dim,
                                  kv_dtype=kv_dtype, compute_dtype="bf16")
    return d, out


@record(eq=False)
class AttentionTiles(Record):
    """Attention runtime per layer: runtime_s[context_len][G] (s) over draft_len, on one device and attention shape."""

    hardware_id: str
    batch: int
    kv_heads: int
    head_dim: int
    max_draft_len: int
    groups: tuple
    contexts: tuple
    draft_len: np.ndarray
    runtime_s: dict


def attention_tiles(hw, groups=(4, 8, 16, 32), contexts=(32768, 131072), batch=8, head_dim=128, kv_heads=8,
                    max_draft_len=40) -> AttentionTiles:
    """The attention tile figure's curves: `attention_tile_curves` at each context."""
    from specplan.profiles.registry import load_hardware

    hw = load_hardware(hw)
    d, runtime = np.arange(0, max_draft_len + 1), {}
    for ctx in contexts:
        d, runtime[ctx] = attention_tile_curves(hw, groups, ctx, batch, head_dim, kv_heads, max_draft_len)
    return AttentionTiles(hw.id, batch, kv_heads, head_dim, max_draft_len, tuple(groups), tuple(contexts), d, runtime)


@record(eq=False)
class StepBreakdown(Record):
    """The target's step time by kernel class (s over draft_len, model.step.CLASSES order) at one TP, batch, context."""

    model_id: str
    hardware_id: str
    tp: int
    batch: int
    context_len: int
    draft_len: np.ndarray
    breakdown_s: dict


def step_breakdown(model, hw, tp=1, batch=8, context_len=8192, draft_lens=(0, 1, 2, 3, 4, 7, 8, 15, 16),
                   layout=None) -> StepBreakdown:
    """`model.step.step_time` at q_len = 1 + D for each D of `draft_lens`, by kernel class."""
    from specplan.model.step import CLASSES, step_time
    from specplan.profiles.registry import load_hardware, load_model

    m, h = load_model(model), load_hardware(hw)
    d = np.asarray(draft_lens)
    r = step_time(m, h, tp, batch, 1 + d, context_len, layout=layout)
    return StepBreakdown(m.id, h.id, tp, batch, context_len, d, {c: r.breakdown_s[c] for c in CLASSES})


@record(eq=False)
class EnvelopeCurve(Record):
    """Lowest J/token or $/Mtok at or above each tokens/s per user, per device (or None) and speculation."""

    hardware: object
    speculative: bool
    tok_s_user: np.ndarray
    value: np.ndarray


@record(eq=False)
class EnergyPanel(Record):
    """One panel of the energy figure: its column, the rows a log axis shows (positive, finite) and the curves."""

    column: str
    tok_s_user: np.ndarray
    value: np.ndarray
    curves: tuple


@record(eq=False)
class EnergyFigure(Record):
    """The energy and cost figure: the devices in grid order (colours) and a panel per cost column present."""

    devices: tuple
    panels: tuple


def energy_figure(df) -> EnergyFigure:
    """Lower envelopes of J/token and $/Mtok over a serving grid's SLA-meeting rows, per device and speculation."""
    ok = df[df["meets_sla"]] if "meets_sla" in df else df
    devices = tuple(dict.fromkeys(ok["hardware"])) if "hardware" in ok else (None,)
    panels = []
    for col in (c for c in ("joules_per_token", "usd_per_mtok") if c in ok):
        x_all, y_all = ok["tokens_per_s_per_user"].to_numpy(dtype=float), ok[col].to_numpy(dtype=float)
        keep = np.isfinite(x_all) & (x_all > 0) & np.isfinite(y_all) & (y_all > 0)  # what log axes can show
        pos = ok[keep]
        curves = []
        for hw in devices if len(pos) else ():
            on = pos if hw is None else pos[pos["hardware"] == hw]
            for speculative, sub in ((False, on[on["draft_len"] == 0]), (True, on[on["draft_len"] > 0])):
                if len(sub):
                    curves.append(EnvelopeCurve(hw, speculative,
                                                *lower_envelope(sub["tokens_per_s_per_user"], sub[col])))
        panels.append(EnergyPanel(col, x_all[keep], y_all[keep], tuple(curves)))
    return EnergyFigure(devices, tuple(panels))


@record(eq=False)
class StudyFigures(Record):
    """A study's figure numbers: frontiers per GPU (and per device), best rows per batch, D limits, tiles, serving."""

    fronts: tuple
    device_fronts: object
    per_batch: tuple
    d_limits: tuple
    tiles: object
    serving_front: object


def best_per_batch(df, context_len: int | None):
    """(highest-speedup fitting D >= 1 row per batch, context) at context_len (None: smallest); (None, None) if none."""
    fit = df[df["fits"] & (df["draft_len"] >= 1)]
    if fit.empty:
        return None, None
    ctx = context_len if context_len is not None else int(df["context_len"].min())
    fit = fit[fit["context_len"] == ctx]
    idx = fit.groupby("batch")["speedup"].idxmax()
    return fit.loc[idx.to_numpy()].sort_values("batch"), ctx


def study_figures(st, scenarios, grids, fronts) -> StudyFigures:
    """The numbers of a batch study's figures (`st.plots` says which are drawn; attention tiles only when named)."""
    extra = any(int(df["draft_devices"].max()) > 0 for df in grids)
    device_fronts = tuple(frontier(df, sets=["baseline", "overall"], per="device") for df in grids) if extra else None
    per_batch = []
    for sc, df in zip(scenarios, grids):
        rows, ctx = best_per_batch(df, st.summary_context)
        if rows is not None:
            per_batch.append((sc["name"], rows, ctx))
    tiles = None
    if "attention" in st.plots:
        m = scenarios[0]["model"]
        tiles = attention_tiles(scenarios[0]["hardware"][0], groups=tuple(sorted({s["model"].group_size
                                                                                  for s in scenarios})),
                                head_dim=m.head_dim, kv_heads=max(1, min(s["model"].num_kv_heads for s in scenarios)))
    return StudyFigures(tuple(fronts), device_fronts, tuple(per_batch),
                        tuple(int(df["draft_len"].max()) for df in grids), tiles, None)


def serving_study_figures(front) -> StudyFigures:
    """A serving study's figure numbers: its serving frontier table."""
    return StudyFigures((), None, (), (), None, front)

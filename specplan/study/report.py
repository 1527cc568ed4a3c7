"""Outputs of a study: results and frontier tables, summary.md / summary.json (figures: `specplan.plots.study_plots`).

Metrics per variant (all over memory-feasible points):
- best speedup: highest `speedup` and where (B, D, TP, mechanism, context);
- frontier shift: throughput of the speculation frontier (best of D >= 0) at reference interactivity levels,
  as a ratio to the same variant without speculation and to the base (first) variant;
- devices: target + draft devices at the highest tok/s/GPU point, and the highest tok/s/device (draft devices
  counted) with and without speculation: tok/s/GPU leaves an external draft's devices out;
- recommended D: at each report batch, the D (and mechanism, TP) with the best speedup at `summary_context`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from specplan.planning.figures import serving_study_figures, study_figures
from specplan.planning.frontier import envelope, frontier
from specplan.core.io import atomic_write_text


def _best(df):
    fit = df[df["fits"]]
    if fit.empty:
        return None
    r = fit.loc[fit["speedup"].idxmax()]
    return {"speedup": float(r["speedup"]), "batch": int(r["batch"]), "draft_len": int(r["draft_len"]),
            "tp": _layout_of(r), "mechanism": str(r["mechanism"]), "context_len": int(r["context_len"]),
            "hardware": str(r["hardware"])}


def _layout_of(r):
    """The TP degree of a grid row, or its layout's spelling (e.g. 'dp8ep8') when it has more than TP."""
    lay = str(r["layout"]) if "layout" in r else ""
    return int(r["tp"]) if lay in ("", f"tp{int(r['tp'])}") else lay


def _recommend(df, batches, context):
    out = {}
    fit = df[df["fits"] & (df["context_len"] == context)]
    grid_b = np.sort(df["batch"].unique())
    for b in batches:
        near = int(grid_b[np.argmin(np.abs(np.log(grid_b) - np.log(b)))])  # nearest batch of the grid
        s = fit[fit["batch"] == near]
        if s.empty:
            out[str(b)] = None
            continue
        r = s.loc[s["speedup"].idxmax()]
        out[str(b)] = {"batch": near, "draft_len": int(r["draft_len"]), "mechanism": str(r["mechanism"]),
                       "tp": _layout_of(r), "speedup": float(r["speedup"])}
    return out


def _levels(front0) -> list[float]:
    """Three round interactivity levels inside the base variant's speculation frontier (log-spaced)."""
    f = front0[front0["set"] == "overall"]
    if f.empty:
        return []
    lo, hi = np.log10(f["tok_s_user"].min()), np.log10(f["tok_s_user"].max())
    out = []
    for q in (0.25, 0.5, 0.75):
        v = 10 ** (lo + q * (hi - lo))
        mag = 10 ** np.floor(np.log10(v))
        out.append(float(np.floor(v / mag) * mag))
    return sorted(set(out))


def summarize(st, scenarios, grids, fronts) -> dict:
    """Per-variant metrics (JSON-ready)."""
    levels = _levels(fronts[0]) if fronts else []
    ref_env = None
    rows = []
    for sc, df, fr in zip(scenarios, grids, fronts):
        ctx = st.summary_context if st.summary_context is not None else int(df["context_len"].min())
        base = fr[fr["set"] == "baseline"]
        spec = fr[fr["set"] == "overall"]
        env_s = envelope(spec["tok_s_user"], spec["tok_s_gpu"], levels)
        env_b = envelope(base["tok_s_user"], base["tok_s_gpu"], levels)
        if ref_env is None:
            ref_env = env_s
        m = sc["model"]
        rows.append({
            "variant": sc["name"],
            "model": m.id, "G": m.group_size, "kv_heads": m.num_kv_heads, "layers": m.num_layers,
            "hardware": [h.id for h in sc["hardware"]],
            "mem_bandwidth_tb_s": [h.mem_bandwidth_bytes_s / 1e12 for h in sc["hardware"]],
            "draft": "" if "external" not in set(df["mechanism"].astype(str)) else (f"{sc['draft_model'].id}" if sc["draft_model"] else "") +
                     (f" on {sc['draft_hardware'].id}" if sc["draft_hardware"] else ""),
            "mechanisms": sorted(set(df["mechanism"].astype(str)) - {"none"}),
            "points": int(len(df)), "feasible_points": int(df["fits"].sum()),
            "best": _best(df[df["draft_len"] >= 1]),
            "max_tok_s_user": {"baseline": float(base["tok_s_user"].max()) if len(base) else None,
                               "speculation": float(spec["tok_s_user"].max()) if len(spec) else None},
            "max_tok_s_gpu": {"baseline": float(base["tok_s_gpu"].max()) if len(base) else None,
                              "speculation": float(spec["tok_s_gpu"].max()) if len(spec) else None},
            "devices_at_max_tok_s_gpu": _devices_at_max(spec),
            "max_tok_s_device": {"baseline": float(base["tok_s_device"].max()) if len(base) else None,
                                 "speculation": _max_device(df)},
            "frontier_at": [{"tok_s_user": lv, "tok_s_gpu": _f(es), "vs_no_spec": _ratio(es, eb),
                             "vs_base_variant": _ratio(es, er)}
                            for lv, es, eb, er in zip(levels, env_s, env_b, ref_env)],
            "recommended_d": _recommend(df, st.report_batches, ctx),
            "summary_context": ctx,
            "max_draft_len_searched": int(df["draft_len"].max()),
            **_dataset_lines(sc),
        })
    return {"study": st.name, "description": st.description, "levels_tok_s_user": levels, "variants": rows}


def _devices_at_max(spec) -> dict | None:
    """Target and draft devices of the overall frontier's highest tok/s/GPU point (draft devices are free there)."""
    if spec.empty:
        return None
    r = spec.loc[spec["tok_s_gpu"].idxmax()]
    return {"target": int(r["target_devices"]), "draft": int(r["draft_devices"]), "batch": int(r["batch"]),
            "draft_len": int(r["draft_len"]), "tok_s_device": float(r["tok_s_device"])}


def _max_device(df):
    """Highest tok/s/device (draft devices counted) among feasible speculative points (D >= 1)."""
    fit = df[df["fits"] & (df["draft_len"] >= 1)]
    return float(fit["tok_s_device"].max()) if len(fit) else None


def _f(x):
    return None if x is None or not np.isfinite(x) else float(x)


def _ratio(a, b):
    return None if not (np.isfinite(a) and np.isfinite(b) and b > 0) else float(a / b)


def _near(r, b) -> str:
    return "" if str(r["batch"]) == str(b) else f"B = {r['batch']}, "


def _num(x, fmt="{:.3g}"):
    return "-" if x is None else fmt.format(x)


def _limit(v: dict, point: dict) -> str:
    """' — at the search limit' when a chosen D is the largest D the variant searched."""
    return " — at the search limit" if point and point["draft_len"] >= v["max_draft_len_searched"] else ""


def md_cell(text) -> str:
    """User text (a variant or study name) safe in one Markdown table cell or heading: no line breaks, '|' escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _dataset_lines(sc: dict) -> dict:
    """A variant's `dataset` choice (profile per mechanism, what it borrowed), only when the study gives one."""
    return {"acceptance_dataset": sc["acceptance_dataset"]} if sc.get("acceptance_dataset") else {}


def dataset_section(variants: list[dict]) -> list[str]:
    """summary.md lines: each variant's per-dataset acceptance profiles (none without a `dataset` field)."""
    out = [f"- {md_cell(v['variant'])}: {md_cell(x)}" for v in variants for x in v.get("acceptance_dataset", [])]
    return ["", "Acceptance by dataset (`dataset`):", ""] + out if out else []


def markdown(summary: dict) -> str:
    """summary.md: variants side by side (one column each)."""
    vs = summary["variants"]
    head = "| | " + " | ".join(f"**{md_cell(v['variant'])}**" for v in vs) + " |"
    sep = "|---|" + "---|" * len(vs)
    lines = [f"# Study: {md_cell(summary['study'])}", "", summary["description"].strip(), "", head, sep]

    def row(label, fn):
        lines.append(f"| {label} | " + " | ".join(fn(v) for v in vs) + " |")

    row("model (G, KV heads, layers)", lambda v: f"{v['model']} (G {v['G']}, {v['kv_heads']}, {v['layers']})")
    row("hardware", lambda v: ", ".join(v["hardware"]))
    row("memory bandwidth (TB/s)", lambda v: ", ".join(f"{x:.3g}" for x in v["mem_bandwidth_tb_s"]))
    row("external draft", lambda v: v["draft"] or "-")
    row("mechanisms", lambda v: ", ".join(v["mechanisms"]))
    row("grid points (feasible)", lambda v: f"{v['points']:,} ({v['feasible_points']:,})")
    row("best speedup (x)", lambda v: _num(v["best"] and v["best"]["speedup"], "{:.2f}"))
    row("... at (B, D, TP)", lambda v: "-" if not v["best"] else
        f"({v['best']['batch']}, {v['best']['draft_len']}, {v['best']['tp']})" + _limit(v, v["best"]))
    row("... mechanism, context", lambda v: "-" if not v["best"] else
        f"{v['best']['mechanism']}, {v['best']['context_len']:,}")
    row("max tok/s/user, no spec → spec", lambda v: f"{_num(v['max_tok_s_user']['baseline'], '{:.0f}')} → "
        f"{_num(v['max_tok_s_user']['speculation'], '{:.0f}')}")
    row("max tok/s/GPU, no spec → spec", lambda v: f"{_num(v['max_tok_s_gpu']['baseline'], '{:.0f}')} → "
        f"{_num(v['max_tok_s_gpu']['speculation'], '{:.0f}')}")
    row("... devices there: target + draft (B, D)", lambda v: "-" if not v["devices_at_max_tok_s_gpu"] else
        f"{v['devices_at_max_tok_s_gpu']['target']} + {v['devices_at_max_tok_s_gpu']['draft']} "
        f"({v['devices_at_max_tok_s_gpu']['batch']}, {v['devices_at_max_tok_s_gpu']['draft_len']})")
    row("max tok/s/device (draft devices counted), no spec → spec (D ≥ 1)", lambda v: (
        f"{_num(v['max_tok_s_device']['baseline'], '{:.0f}')} → {_num(v['max_tok_s_device']['speculation'], '{:.0f}')}"))
    for i, lv in enumerate(summary["levels_tok_s_user"]):
        row(f"tok/s/GPU at ≥ {lv:g} tok/s/user (x no spec; x base)", lambda v, i=i: (
            f"{_num(v['frontier_at'][i]['tok_s_gpu'], '{:.0f}')} "
            f"(x{_num(v['frontier_at'][i]['vs_no_spec'], '{:.2f}')}; "
            f"x{_num(v['frontier_at'][i]['vs_base_variant'], '{:.2f}')})"))
    for b in (vs[0]["recommended_d"] if vs else {}):
        row(f"recommended D at B = {b} (mechanism, TP, speedup)", lambda v, b=b: "-" if not v["recommended_d"][b]
            else (f"{v['recommended_d'][b]['draft_len']} ({_near(v['recommended_d'][b], b)}"
                  f"{v['recommended_d'][b]['mechanism']}, "
                  f"TP {v['recommended_d'][b]['tp']}, x{v['recommended_d'][b]['speedup']:.2f})"
                  + _limit(v, v["recommended_d"][b])))
    ctx = vs[0]["summary_context"] if vs else 0
    lines += ["", f"Recommended D at context {ctx:,} tokens (at the nearest batch of the grid). Frontier "
              "throughput is the best tokens/s per GPU among feasible points at or above the given interactivity; "
              "tokens/s per GPU divides by the target's devices only (an external draft's devices are free in it); "
              "tokens/s per device also counts the draft devices: compare variants by it when drafts run on other "
              "hardware. \"x no spec\" compares with the same variant at D = 0 (\"x-\": D = 0 cannot reach that "
              "interactivity), \"x base\" with the first variant's speculation frontier. \"at the search limit\": the D "
              "chosen is the largest searched (raise max_draft_len to see past it). \"-\" for a "
              "recommended D: no feasible point at that batch (memory).", ""] + dataset_section(vs)
    return "\n".join(lines)


def write_outputs(st, scenarios, grids, outdir: Path, plot=None) -> dict:
    """Write results.csv/.parquet, frontier.csv, summary.md/.json; return the summary.

    `plot(st, scenarios, figs, outdir)` draws the figures' numbers (`planning.figures.study_figures`) and returns
    their paths (listed in the summary); this layer draws none itself (`specplan.plots.study_plots.write_study_plots`
    is the one the CLI uses).
    """
    import pandas as pd

    outdir.mkdir(parents=True, exist_ok=True)
    fronts = []
    for df in grids:
        fronts.append(frontier(df))
    allg = pd.concat(grids, ignore_index=True)
    allf = pd.concat(fronts, ignore_index=True)
    from specplan.core.tables import write_table

    write_table(allg, outdir / "results", parquet=True)
    write_table(allf, outdir / "frontier", parquet=False)
    summary = summarize(st, scenarios, grids, fronts)
    figs = study_figures(st, scenarios, grids, fronts) if plot else None
    summary["plots"] = [Path(p).name for p in (plot(st, scenarios, figs, outdir) if plot else [])]
    atomic_write_text(outdir / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    atomic_write_text(outdir / "summary.md", markdown(summary))
    return summary


SERVING_ROW = ("mechanism", "draft_len", "concurrency", "tp", "hardware", "pools", "tokens_per_s_per_gpu",
               "tokens_per_s_per_user", "tpot_ms", "ttft_ms", "acceptance_length")


def _serving_best(df, spec: bool) -> dict | None:
    """The most tokens/s/GPU among a serving grid's rows meeting the SLA, with (spec) or without speculation."""
    ok = df[df["meets_sla"].astype(bool) & ((df["draft_len"] >= 1) if spec else (df["draft_len"] == 0))]
    if ok.empty:
        return None
    r = ok.loc[ok["tokens_per_s_per_gpu"].idxmax()]
    out = {k: (r[k].item() if hasattr(r[k], "item") else r[k]) for k in SERVING_ROW if k in r.index}
    out["pools"] = None if out.get("pools") is None or (isinstance(out["pools"], float) and np.isnan(out["pools"])) \
        else str(out["pools"])
    return out


def summarize_serving(st, scenarios, grids) -> dict:
    """Per-variant serving metrics (JSON-ready): the best configuration meeting the SLA with and without
    speculation, the gain, and the best's throughput over the first variant's."""
    rows, ref = [], None
    for i, (sc, df) in enumerate(zip(scenarios, grids)):
        g = sc["grid"]
        best, base = _serving_best(df, True), _serving_best(df, False)
        top = max((x for x in (best, base) if x), key=lambda x: x["tokens_per_s_per_gpu"], default=None)
        if i == 0:  # the first variant is the reference, whether or not anything meets its SLA
            ref = top
        rows.append({
            **_dataset_lines(sc),
            "variant": sc["name"], "model": sc["model"].id, "hardware": [h.id for h in sc["hardware"]],
            "engine": g.get("engine") or "ideal", "mode": g.get("mode") or "agg", "tp": g.get("tp") or [1],
            "isl": g["isl"], "osl": g["osl"], "max_ttft_ms": g.get("max_ttft_ms"), "max_tpot_ms": g.get("max_tpot_ms"),
            "mechanisms": sorted(set(df["mechanism"].astype(str)) - {"none"}),
            "points": int(len(df)), "meeting_sla": int(df["meets_sla"].astype(bool).sum()),
            "best": best, "best_without_speculation": base,
            "speculation_gain": _ratio(best["tokens_per_s_per_gpu"], base["tokens_per_s_per_gpu"])
            if best and base else None,
            "vs_base_variant": _ratio(top["tokens_per_s_per_gpu"], ref["tokens_per_s_per_gpu"])
            if top and ref else None,
        })
    return {"study": st.name, "description": st.description, "kind": "serving", "variants": rows}


def _point(p) -> str:
    """'eagle3 D 3 at C 110, TP 1 on h100-sxm (1P1D)' of a serving best row, or '-'."""
    if not p:
        return "-"
    pools = f" ({p['pools']})" if p.get("pools") else ""
    return (f"{p['mechanism']} D {int(p['draft_len'])} at C {p['concurrency']:g}, TP {int(p['tp'])} on "
            f"{p['hardware']}{pools}")


def serving_markdown(summary: dict) -> str:
    """summary.md of a serving study: variants side by side (one column each)."""
    vs = summary["variants"]
    head = "| | " + " | ".join(f"**{md_cell(v['variant'])}**" for v in vs) + " |"
    lines = [f"# Serving study: {md_cell(summary['study'])}", "", summary["description"].strip(), "", head,
             "|---|" + "---|" * len(vs)]

    def row(label, fn):
        lines.append(f"| {label} | " + " | ".join(fn(v) for v in vs) + " |")

    row("model", lambda v: v["model"])
    row("hardware (TP)", lambda v: f"{', '.join(v['hardware'])} (TP {', '.join(map(str, v['tp']))})")
    row("engine, mode", lambda v: f"{v['engine']}, {v['mode']}")
    row("ISL / OSL", lambda v: f"{v['isl']:,} / {v['osl']:,}")
    row("SLA", lambda v: ", ".join(x for x in (f"TTFT <= {v['max_ttft_ms']:g} ms" if v["max_ttft_ms"] else "",
                                                f"TPOT <= {v['max_tpot_ms']:g} ms" if v["max_tpot_ms"] else "") if x)
        or "-")
    row("configurations (meeting the SLA)", lambda v: f"{v['points']:,} ({v['meeting_sla']:,})")
    row("best with speculation", lambda v: _point(v["best"]))
    row("... tok/s/GPU, tok/s/user", lambda v: "-" if not v["best"] else
        f"{v['best']['tokens_per_s_per_gpu']:,.0f}, {v['best']['tokens_per_s_per_user']:,.1f}")
    row("... TPOT, TTFT (ms)", lambda v: "-" if not v["best"] else
        f"{v['best']['tpot_ms']:.2f}, {v['best']['ttft_ms']:.1f}")
    row("best without speculation", lambda v: _point(v["best_without_speculation"]))
    row("... tok/s/GPU", lambda v: "-" if not v["best_without_speculation"] else
        f"{v['best_without_speculation']['tokens_per_s_per_gpu']:,.0f}")
    row("speculation gain (tok/s/GPU)", lambda v: _num(v["speculation_gain"], "x{:.2f}"))
    row("best tok/s/GPU vs the first variant", lambda v: _num(v["vs_base_variant"], "x{:.2f}"))
    lines += ["", "Each variant's configurations are recommend's serving search (mechanism, D, concurrency, pools, "
              "over every device and TP of the variant); the best is the most tokens/s per GPU among those meeting "
              "the SLA. serving_results.csv holds every configuration, serving_frontier.csv the frontiers "
              "(tokens/s/GPU against tokens/s/user) overall and per (variant, hardware, mode).", ""] + dataset_section(vs)
    return "\n".join(lines)


def write_serving_outputs(st, scenarios, grids, outdir: Path, plot=None) -> dict:
    """A serving study's serving_results.csv, serving_frontier.csv, summary.md/.json; `plot(st, scenarios, figs,
    outdir)` (figures: `planning.figures.serving_study_figures`) as in write_outputs. Returns the summary."""
    import pandas as pd

    from specplan.planning.frontier import serving_frontier

    outdir.mkdir(parents=True, exist_ok=True)
    allg = pd.concat(grids, ignore_index=True)
    front = serving_frontier(allg, by=("variant", "hardware", "mode"))
    atomic_write_text(outdir / "serving_results.csv", allg.to_csv(index=False))  # as pareto's serving_grid.csv
    atomic_write_text(outdir / "serving_frontier.csv", front.to_csv(index=False))
    summary = summarize_serving(st, scenarios, grids)
    figs = serving_study_figures(front) if plot else None
    summary["plots"] = [Path(p).name for p in (plot(st, scenarios, figs, outdir) if plot else [])]
    atomic_write_text(outdir / "summary.json", json.dumps(summary, indent=2, sort_keys=True) + "\n")
    atomic_write_text(outdir / "summary.md", serving_markdown(summary))
    return summary

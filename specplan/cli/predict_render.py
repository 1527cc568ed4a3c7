"""predict's plain-text answers: one serving point, a sweep over loads, one step point (what planning computed)."""

from __future__ import annotations

import numpy as np

from specplan.cli.output import TERMS, energy_phrase, layout_phrase, table
from specplan.speculation.guidelines import g1_phrase


def print_serving(s: dict) -> None:
    load = f"concurrency {s['concurrency']:g}" if "concurrency" in s else f"{s['request_rate']:g} requests/s"
    pools = f" {s['pools']}" if "pools" in s else ""
    lay = (f", prefill {s['prefill_layout']}, decode {s['decode_layout']}" if "decode_layout" in s else
           f", layout {s['layout']}" if "layout" in s else "")
    print(f"serving ({s['mode']}{pools}{lay}, engine {s['engine']}): ISL {s['isl']}, OSL {s['osl']}, {load}")
    rows, where = [], {}
    dash = lambda v: "-" if v is None else v  # noqa: E731
    names = [n for n in ("baseline", "speculative") if n in s]
    for name in names:
        x = s[name]
        rows.append([name, dash(x["tpot_ms"]), dash(x["ttft_ms"]), dash(x.get("ttft_p50_ms")),
                     dash(x.get("ttft_p90_ms")),
                     dash(x["request_latency_ms"]), dash(x["tokens_per_s_per_user"]),
                     dash(x["tokens_per_s_per_gpu"]), x["decode_batch"], "yes" if x["fits"] else "no"])
        if x.get("note"):
            where.setdefault(x["note"], []).append(name)
    print(table(rows, ["", "TPOT ms", "TTFT ms", "TTFT p50 ms", "TTFT p90 ms", "latency ms", "tok/s/user", "tok/s/GPU",
                       "decode batch", "fits"]))
    for n, w in where.items():  # a note of both rows once; one row's note names its row
        print(f"note: {n}" if len(w) == len(names) else f"note: {w[0]}: {n}")
    if s.get("speedup_tpot") is not None:
        print(f"serving speedup: TPOT {s['speedup_tpot']:.3f}, throughput {s['speedup_throughput']:.3f} "
              f"(same load)")


def pays_line(points: list, key: str, label: str) -> str:
    """Where speculation stops paying over a sweep: the speedup at the same load (throughput for a closed loop,
    TPOT for an open loop, whose throughput is the arrival rate either way) against 1, in load order."""
    kind = "throughput" if key == "concurrency" else "TPOT"
    loads = lambda ps: ", ".join(f"{p[key]:g}" for p in ps)  # noqa: E731
    pts = sorted((p for p in points if p.get(f"speedup_{kind.lower()}") is not None), key=lambda p: p[key])
    none = sorted((p for p in points if p.get(f"speedup_{kind.lower()}") is None), key=lambda p: p[key])
    rest = f"; no steady state at {label} {loads(none)}" if none else ""
    if not pts:
        return f"speculation: no {kind} speedup at any listed load{rest}"
    sp = [p[f"speedup_{kind.lower()}"] for p in pts]
    if all(x > 1.0 for x in sp):
        return (f"speculation pays at every listed load with a steady state ({kind} speedup {min(sp):.3f}x-"
                f"{max(sp):.3f}x, the lowest at {label} {pts[int(np.argmin(sp))][key]:g}){rest}")
    lose = [p for p, x in zip(pts, sp) if x <= 1.0]
    win = [p for p, x in zip(pts, sp) if x > 1.0]
    where = f"; it pays at {label} {loads(win)}" if win else ""
    return f"speculation does not pay ({kind} speedup <= 1) at {label} {loads(lose)}{where}{rest}"


def print_sweep(r: dict) -> None:
    """predict's table over several loads (concurrencies or request rates): baseline and speculative serving at
    each, and the speedups."""
    s = r["serving"]
    spec = r["mechanism"] != "none"
    key, label = ("concurrency", "concurrency") if "concurrency" in s["points"][0] else ("request_rate", "req/s")
    pools = f" {s['points'][0]['pools']}" if "pools" in s["points"][0] else ""
    lay = (f"prefill {s['prefill_layout']}, decode {s['decode_layout']}" if "decode_layout" in s else
           f"layout {s['layout']}" if "layout" in s else f"tp {r['tp']}")
    print(f"{r['model']} on {r['hardware']} ({lay}), engine {s['engine']}, ISL {s['isl']}, OSL {s['osl']}, "
          f"{s['mode']}{pools}; {r['mechanism']} D = {r['draft_len']}; compute {r['precision']['compute']}, "
          f"kv {r['precision']['kv']}")
    if r["acceptance_source"]:
        print(f"acceptance: {r['acceptance_source']}")
    dash = lambda v: "-" if v is None else v  # noqa: E731
    rows, where = [], {}  # each row note once, with the rows it belongs to (all rows: no list)
    for p in s["points"]:
        b = p["baseline"]
        row = [p[key], dash(b["tpot_ms"]), dash(b["ttft_ms"]), dash(b["tokens_per_s_per_user"]),
               dash(b["tokens_per_s_per_gpu"])]
        x = p.get("speculative")
        if x is not None:
            row += [dash(x["tpot_ms"]), dash(x["ttft_ms"]), dash(x["tokens_per_s_per_user"]),
                    dash(x["tokens_per_s_per_gpu"]), dash(p["speedup_tpot"]), dash(p["speedup_throughput"])]
        fits = b["fits"] and (x is None or x["fits"])
        rows.append(row + [b["decode_batch"]] + ([] if x is None else [x["decode_batch"]]) + ["yes" if fits else "no"])
        for side, n in (("baseline", b.get("note")), ("speculative", None if x is None else x.get("note"))):
            if n:
                where.setdefault(n, []).append(f"{label} {p[key]:g} {side}" if spec else f"{label} {p[key]:g}")
    head = [label, "TPOT ms", "TTFT ms", "tok/s/user", "tok/s/GPU"]
    if spec:
        head = ([label, "base TPOT ms", "base TTFT ms", "base tok/s/user", "base tok/s/GPU", "spec TPOT ms",
                 "spec TTFT ms", "spec tok/s/user", "spec tok/s/GPU", "TPOT speedup", "throughput speedup"])
    print(table(rows, head + (["base decode batch", "spec decode batch"] if spec else ["decode batch"]) + ["fits"]))
    if spec:
        print(pays_line(s["points"], key, label))
    n_rows = len(s["points"]) * (2 if spec else 1)
    notes = [n if len(w) == n_rows else f"{'; '.join(w)}: {n}" for n, w in where.items()]
    for n in notes + list(r["notes"]):
        print(f"note: {n}")


def print_point(r: dict) -> None:
    """predict's plain-text answer for one point: baseline vs speculative, devices, memory, energy, guidelines."""
    print(f"{r['model']} on {r['hardware']} ({layout_phrase(r['layout'])}), batch {r['batch']}, "
          f"context {r['context_len']}; "
          f"{r['mechanism']} D = {r['draft_len']} ({r['verify_tokens']:g} verified "
          f"token{'' if r['verify_tokens'] == 1 else 's'}); "
          f"compute {r['precision']['compute']}, kv {r['precision']['kv']}")
    if r["acceptance_source"]:
        print(f"acceptance: {r['acceptance_source']}")
    lpu = r["hardware_kind"] == "lpu"
    unit = "tok/s/chip" if lpu else "tok/s/GPU"  # per target device (chip on an LPU)
    drafts = r["devices"]["draft"] > 0
    b, s = r["baseline"], r["speculative"]
    rows = [["baseline (D = 0)", b["step_ms"], "-", b["step_ms"], 1.0, b["tokens_per_s_per_user"],
             b["tokens_per_s_per_gpu"]],
            ["speculative", s["step_ms"], s["draft_ms"], s["verify_ms"], r["acceptance_length"],
             r["tokens_per_s_per_user"], r["tokens_per_s_per_gpu"]]]
    head = ["", "iter ms", "draft ms", "verify ms", "AL", "tok/s/user", unit]
    if drafts:
        rows[0].append(b["tokens_per_s_per_gpu"])
        rows[1].append(r["tokens_per_s_per_device"])
        head.append("tok/s/device")
    print(table(rows, head))
    dev = r["devices"]
    if drafts:
        print(f"devices: {dev['target']:g} target + {dev['draft']:g} draft; {unit} divides by the target "
              f"{'chips' if lpu else 'GPUs'} only, tok/s/device by all {dev['target'] + dev['draft']:g} devices")
    elif lpu:
        print(f"devices: {dev['target']:g} target chips; {unit} is per chip")
    mem = r["memory"]
    if lpu:
        where = (f"memory {mem['total_gb']:.2f} GB over {mem['chips']} chips of {mem['chip_sram_gb']:.2f} GB SRAM "
                 f"({mem['capacity_gb']:.2f} GB usable each; the chip count grows with the bytes)")
    else:
        where = (f"memory {mem['total_gb']:.2f} GB of {mem['capacity_gb']:.2f} GB per device "
                 f"(state {mem['state_gb']:.2f}), fits: {str(mem['fits']).lower()}")
    print(f"speedup {r['speedup']:.3f}  (break-even AL {r['break_even_al']:.3f}); {where}")
    en = (r.get("serving") or {}).get("energy") or r.get("energy")
    if en:
        where_e = "serving, prefill included" if (r.get("serving") or {}).get("energy") else "decode steps"
        spec_e = f"; speculative {energy_phrase(en['speculative'])}" if "speculative" in en else ""
        print(f"energy/cost ({where_e}): baseline {energy_phrase(en['baseline'])}{spec_e}")
    g = r["guidelines"]
    if g["gemm_compute_bound_applies_to"] == "experts":
        g1 = (f"expert GEMMs {g['moe_regime']} (compute-bound from {g1_phrase(g)}; spec sheet "
              f"{g1_phrase(g, 'gemm_compute_bound_from_d_spec_sheet')}), dense GEMMs {g['gemm_regime']} "
              f"(compute-bound from D = {g['dense_gemm_compute_bound_from_d']}; spec sheet "
              f"{g['dense_gemm_compute_bound_from_d_spec_sheet']})")
    else:
        g1 = (f"verify GEMMs {g['gemm_regime']} (compute-bound from D = {g['gemm_compute_bound_from_d']}; spec sheet "
              f"{g['gemm_compute_bound_from_d_spec_sheet']})")
    tiles = ("attention tiles n/a (LPU)" if lpu else
             f"attention tile D {g['attention_tile_d']}, tile aligned {str(g['tile_aligned']).lower()}")
    print(f"guidelines: G_dev {g['g_dev']}, {tiles}, {g1}, attention share {100 * g['attention_share']:.0f}%, "
          f"draft/target step time {g['rho_time']:.3f} (layer ratio ρ {g['rho']:.4f}, ρD {g['rho_d']:.3f})")
    if r["binding"]["guideline"] != "-":
        print(f"binding at D = {r['draft_len']}: [{r['binding']['guideline']}] {r['binding']['line']}")
    for n in r["notes"]:
        print(f"note: {n}")
    print(TERMS)

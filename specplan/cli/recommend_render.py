"""recommend's plain-text answers, one per mode (what planning computed; exit 1 where nothing meets the targets)."""

from __future__ import annotations

import json

import typer

from specplan.cli.output import TERMS, energy_phrase, layout_phrase, or_dash, table
from specplan.speculation.guidelines import g1_phrase


def print_recommendation(r: dict, batch, target_tps, launch) -> None:
    """recommend's plain-text answer (no workload): best of each mechanism, runners-up, notes, the binding
    guideline; exit 1 when nothing fits or meets the target."""
    lpu = r["hardware_kind"] == "lpu"
    unit = "tok/s/chip" if lpu else "tok/s/GPU"
    where = (f"batch {batch}" if batch is not None else f"tokens/s/user >= {target_tps:g}" if target_tps is not None
             else f"best {unit} over every batch that fits")
    print(f"{r['model']} on {r['hardware']} ({layout_phrase(r['layout'])}), context {r['context_len']}, {where}")
    if r["best"] is None:
        ranked_table(r["ranked"], unit, lpu)
        for n in r["notes"]:
            print(f"note: {n}")
        print(f"infeasible: {r['infeasible']}")
        raise typer.Exit(1)
    print(f"best of each mechanism (its best D and batch; ranked by {unit}):")
    ranked_table(r["per_mechanism"], unit, lpu, why=True)
    if r["runners_up"]:
        print("runners-up (other D):")
        ranked_table(r["runners_up"], unit, lpu)
    for n in r["notes"]:
        print(f"note: {n}")
    b, g = r["best"], r["guidelines"]
    extra = (f", {b['tokens_per_s_per_device']:.1f} tok/s/device over {b['target_devices']} target + "
             f"{b['draft_devices']} draft devices" if b["draft_devices"] > 0 else "")
    print(f"best: {b['mechanism']} D = {b['draft_len']} at batch {b['batch']} "
          f"(speedup {b['speedup']:.3f}, {b['tokens_per_s_per_gpu']:.1f} {unit}{extra})")
    if "joules_per_token" in b:
        print(f"energy/cost (decode steps): {energy_phrase(b)}")
    print(f"why: [{r['binding']['guideline']}] {r['binding']['line']}")
    if r.get("near_best"):
        close = ", ".join(f"{x['mechanism']} D = {x['draft_len']} (B {x['batch']}, -{x['below_best_pct']:.1f}%)"
                          for x in r["near_best"])
        tile = [x for x in r["near_best"] if x["draft_len"] == g["attention_tile_d"] and not lpu]
        hint = f"; includes G2's D = {g.get('tile_rows', 128)}/G − 1 = {g['attention_tile_d']}" if tile else ""
        print(f"within 2% of the best (not separable at the model's accuracy): {close}{hint}")
    g2 = ("attention tiles n/a (LPU)" if lpu else f"G2 start D = {g.get('tile_rows', 128)}/G − 1 = {g['attention_tile_d']}")
    print(f"guidelines: G_dev {g['g_dev']} -> {g2} (full attention "
          f"{100 * g['attention_share']:.0f}% of the D = 0 step); G1 {g['g1_line']} (spec-sheet ridge "
          f"{g['ridge_tokens_spec_sheet']:.0f} tokens -> {g1_phrase(g, 'gemm_compute_bound_from_d_spec_sheet')})")
    if not lpu and b["draft_len"] > 0:
        print(f"G2 vs the choice: {g2_relation(b['draft_len'], g['attention_tile_d'], r['binding']['guideline'], g.get('tile_rows', 128))}")
    print(TERMS)
    if launch is not None:
        print(launch["text"])


def print_energy(r: dict) -> None:
    """Energy and cost of the best point and of the best no-speculation point (recommend with --isl/--osl)."""
    b = r["best"]
    base = next((x for x in r["ranked"] if x["mechanism"] == "none" and x["feasible"]), None)
    print(f"energy/cost ({r.get('objective', 'tokens-per-gpu')} objective): best {energy_phrase(b)}")
    if base is not None and b["mechanism"] != "none":
        print(f"  no speculation (D = 0, concurrency {base['concurrency']:g}): {energy_phrase(base)}")


def g2_relation(d: int, tile_d: int, binding: str, tile_rows: int = 128) -> str:
    """One line relating the recommended D to G2's start D = tile_rows/G − 1 (128; MLA kernels 64)."""
    if d < tile_d:
        first = f"[{binding}] binds first" if binding not in ("-", "G2", "G3") else "its AL gain runs out first"
        return (f"D = {d} < {tile_d}: attention would stay within one {tile_rows}-row tile up to D = {tile_d}, but "
                f"{first}")
    if d == tile_d:
        return f"D = {d} = {tile_rows}/G − 1: the last D before the attention step (G2's start D)"
    return (f"D = {d} > {tile_d}: past the first attention tile; the added tile costs less than the AL gained "
            f"(G3: prefer G·(1 + D) a multiple of {tile_rows})")


def ranked_table(rows: list[dict], unit: str, lpu: bool, why: bool = False) -> None:
    """Rows of recommend (mechanism, D, batch, AL, speedup, throughputs, draft/verify ms[, vs best])."""
    drafts = any(x["draft_devices"] > 0 for x in rows)
    body = [[x["mechanism"], x["draft_len"], x["batch"], x["acceptance_length"], x["speedup"],
             x["tokens_per_s_per_user"], x["tokens_per_s_per_gpu"]]
            + ([x["draft_devices"], x["tokens_per_s_per_device"]] if drafts else [])
            + [1e3 * x["draft_s"], 1e3 * x["verify_s"]]
            + ([x["why_lost"]] if why else ["yes" if x["feasible"] else "no"]) for x in rows]
    print(table(body, ["mechanism", "D", "batch", "AL", "speedup", "tok/s/user", unit]
                + (["draft dev", "tok/s/device"] if drafts else []) + ["draft ms", "verify ms"]
                + ([f"vs best ({unit})"] if why else ["feasible"])))
    if drafts:
        print(f"{unit} divides by the {'target chips' if lpu else 'target GPUs'} only; tok/s/device also counts the "
              f"draft devices (draft dev)")


def speculation_verdict(best: dict, where: str) -> str | None:
    """One line: does speculation pay at the answer (its throughput over the best without speculation on the same
    layout, `speedup_vs_none`), or None where the answer does not say."""
    x = best.get("speedup_vs_none")
    if x is None or x != x:
        return None
    if best["mechanism"] == "none":
        return f"speculation does not pay here: no draft mechanism beats the baseline on {where}"
    return (f"speculation pays: x {x:.2f} the tokens/s/GPU of the best without speculation on {where} "
            f"({best['mechanism']} D = {best['draft_len']})")


def warn_without_sla(max_ttft_ms, max_tpot_ms, best: dict) -> None:
    """A warning line when no SLA bounds the answer: the most tokens/s/GPU at any latency is rarely a deployment
    anyone runs (a TTFT of minutes)."""
    if max_ttft_ms is not None or max_tpot_ms is not None:
        return
    tpot = or_dash(best.get("tpot_ms"))
    print(f"warning: no SLA given (--max-ttft-ms / --max-tpot-ms): this answer maximizes tokens/s/GPU at any latency "
          f"(TTFT {best['ttft_ms']:,.0f} ms, TPOT {tpot if tpot == '-' else f'{tpot:.1f}'} ms); give the SLA you "
          f"serve under")


def print_d_schedule(s: dict, mechanism: str) -> None:
    """recommend's D by load: the best D per concurrency band, the engines' schedule forms, the winner re-priced."""
    print(f"D by load ({mechanism}; each concurrency band priced at its own steady state, most tok/s/GPU):")
    print(table([[f"{lo}-{hi}" if hi > lo else f"{lo}", f"{c:.1f}", k, f"{t:.1f}", f"{x:.3f}", f"{tp:.2f}", f"{tt:.1f}"]
                 for (lo, hi, c, k, t, x), (tp, tt) in zip(s["bands"], s["band_tpot_ttft_ms"])],
                ["concurrency", "priced at", "D", "tok/s/GPU", "x D=0", "TPOT ms", "TTFT ms"]))
    print("vLLM speculative_config num_speculative_tokens_per_batch_size: "
          + json.dumps([list(v) for v in s["vllm"]]))
    if s["trtllm"] is not None:
        print("TensorRT-LLM draft_len_schedule: " + json.dumps({str(k): v for k, v in s["trtllm"].items()}))
    a = s["at_best"]
    print(f"at concurrency {a['concurrency']:g} the schedule's D = {a['draft_len']}: {a['tokens_per_s_per_gpu']:.1f} "
          f"tok/s/GPU, TPOT {a['tpot_ms']:.2f} ms (fixed D = {a['fixed_draft_len']}: "
          f"{a['fixed_tokens_per_s_per_gpu']:.1f} tok/s/GPU, TPOT {a['fixed_tpot_ms']:.2f} ms)")
    for n in s["notes"]:
        print(f"note: {n}")


def print_gpus_for_load(r: dict, max_ttft_ms, launch) -> None:
    """recommend --target-tps in plain text: the counts, the aggregated line, the answer and why not fewer; exit 1
    when nothing meets the targets."""
    load = f"ISL {r['isl']}, OSL {r['osl']}; " if r["isl"] else ""
    print(f"{r['model']} on {r['hardware']}: {r['target_tps']:,.0f} output tokens/s at >= "
          f"{r['target_tps_per_user']:g} tokens/s/user ({load}decode at context {r['context_len']}; whole nodes of "
          f"{r['node_gpus']}, up to {r['max_gpus']} GPUs)")
    rows = [[t["gpus"], t["prefill_gpus"], t["decode_gpus"], t.get("layout", "-"), t.get("instances", "-"),
             f"{t['mechanism']} D = {t['draft_len']}" if "mechanism" in t else "-", t.get("batch", "-"),
             f"{t['tokens_per_s_per_user']:.1f}" if "tokens_per_s_per_user" in t else "-", f"{t['tps']:,.0f}",
             "yes" if t["meets"] else "no"]
            for t in r["counts"]]
    print(table(rows, ["GPUs", "prefill", "decode", "layout", "instances", "mechanism", "batch/inst",
                       "tok/s/user", "tok/s total", "meets"]))
    b = r["best"]
    a = r.get("aggregated")
    if a is not None:
        print(f"aggregated (serving model): {a['gpus']} GPUs = {a['replicas']} x TP {a['tp']} replicas, "
              f"{a['mechanism']} D = {a['draft_len']} at concurrency {a['concurrency_per_replica']:g} per replica, "
              f"TPOT {a['tpot_ms']:.1f} ms, TTFT {a['ttft_ms']:.0f} ms, {a['tokens_per_s_per_replica']:,.0f} "
              f"tokens/s per replica" + ("" if a["fits_budget"] else f" (over --max-gpus {r['max_gpus']})"))
    if r.get("prefill_unreachable"):
        print(f"note: disaggregated: {r['prefill_unreachable']}")
    ans = r["answer"]
    if b is None:
        print(f"infeasible (disaggregated): {r['infeasible']}")
        if ans is None:
            raise typer.Exit(1)
    else:
        from specplan.model.parallel import parse_layout

        lay = parse_layout(b["layout"])
        flags = f"--tp {lay.tp} --dp {lay.dp} --ep {lay.ep}" + (f" --pp {lay.pp}" if lay.pp > 1 else "")
        pre = (f"prefill {b['prefill_gpus']} GPUs (TP {r['node_gpus']} groups, {1e3 * r['prefill_s_per_request']:.1f} "
               f"ms of prefill per request) + " if b["prefill_gpus"] else "")
        lead = "answer" if ans is not None and ans["mode"] == "disagg" else "disaggregated"
        print(f"{lead}: {b['gpus']} GPUs ({b['gpus'] // r['node_gpus']} nodes): {pre}decode {b['decode_gpus']} GPUs = "
              f"{b['instances']} x {b['layout']} ({flags}, docs/parallel.md for engine flags)")
        print(f"  {b['mechanism']} D = {b['draft_len']}, batch {b['batch']} per instance, "
              f"{b['tokens_per_s_per_user']:.1f} tokens/s/user (AL {b['acceptance_length']:.2f}, iteration "
              f"{b['iter_ms']:.1f} ms), {b['tps']:,.0f} tokens/s total, {b['memory_gb']:.1f} GB per GPU")
        print(f"why not fewer{' (disaggregated)' if ans is not None and ans['mode'] == 'agg' else ''}: "
              f"{r['smaller_fails']}")
    if ans is None:  # the disaggregated count has no prefill pool (prefill_unreachable above)
        print("infeasible: no prefill pool meets the TTFT target and no aggregated replicas meet the targets")
        raise typer.Exit(1)
    if ans["mode"] == "agg":
        than = (f"fewer than the disaggregated {b['gpus']}" if b is not None else
                "the disaggregated search meets the targets with none")
        print(f"answer: {a['gpus']} GPUs, aggregated: {a['replicas']} x TP {a['tp']} replicas ({than}; "
              f"the aggregated line above)")
        if a.get("smaller_fails"):
            print(f"why not fewer (aggregated): {a['smaller_fails']}")
        if max_ttft_ms is None and b is not None:  # the modes' TTFTs were not held to one target
            print(f"note: no --max-ttft-ms: the aggregated replicas' TTFT is {a['ttft_ms']:.0f} ms, the disaggregated "
                  f"prefill pool is sized to {r['prefill_ttft_target_ms']:.0f} ms; --max-ttft-ms holds both to one")
    ttft = r.get("prefill_ttft_target_ms")
    print("assumptions: decode instances of one layout at the mean context ISL + OSL / 2; prefill pool of whole "
          "nodes sized to the request rate (target / OSL) at the roofline prefill time with its M/D/1 wait"
          + (f", TTFT <= {ttft:.0f} ms" if ttft else "") + " (docs/parallel.md)")
    if launch is not None:
        print(launch["text"])


def print_deployment_search(r: dict, sla_ms: tuple, gpus: int, workload: tuple, priced: bool, launch) -> None:
    """recommend --gpus in plain text: each mode and layout's best and why it lost, the answer, the speculation
    verdict; exit 1 when no layout meets the SLA."""
    max_ttft_ms, max_tpot_ms = sla_ms
    isl, osl = workload
    sla = ", ".join(x for x in (f"TTFT <= {max_ttft_ms:g} ms" if max_ttft_ms else "",
                                f"TPOT <= {max_tpot_ms:g} ms" if max_tpot_ms else "") if x) or "no SLA"
    print(f"{r['model']} on up to {gpus} x {r['hardware']} (TP up to {r['gpus_per_node']}), engine {r['engine']}, "
          f"ISL {isl}, OSL {osl}; {sla}")
    rows = []
    for x in r["layouts"]:
        b = x["best"] or {}
        rows.append([x["mode"], x["dtype"], x.get("label") or x.get("layout", f"TP {x['tp']}"), x.get("gpus_used", "-"),
                     f"{b['mechanism']} D = {b['draft_len']}" if b else "-", x.get("total_concurrency", "-"),
                     or_dash(b.get("tpot_ms")), or_dash(b.get("ttft_ms")), b.get("tokens_per_s_per_gpu", "-"),
                     x["verdict"]])
    print(table(rows, ["mode", "dtype", "layout", "GPUs", "mechanism", "concurrency", "TPOT ms", "TTFT ms",
                       "tok/s/GPU", "verdict"]))
    notes = sorted({n for x in r["layouts"] for n in x.get("notes", [])})
    for n in notes:
        print(f"note: {n}")
    print(f"assumptions: {r['assumptions']}")
    if r["best"] is None:
        print("infeasible: no layout meets the SLA (each layout's line says why)")
        raise typer.Exit(1)
    for m_, x in r["best_by_mode"].items():
        b = x["best"]
        print(f"best {m_}: {x.get('label') or x['layout']} ({x['dtype']}), {b['mechanism']} D = {b['draft_len']}, concurrency "
              f"{x['total_concurrency']:g} in all: {b['tokens_per_s_per_gpu']:.1f} tok/s/GPU on {x['gpus_used']} GPUs, "
              + (f"TPOT {b['tpot_ms']:.2f} ms, " if or_dash(b["tpot_ms"]) != "-" else "no TPOT (OSL 1), ")
          + f"TTFT {b['ttft_ms']:.1f} ms")
    for k, x in (r.get("best_by_family") or {}).items():  # MoE: the best of each layout family and why it lost
        print(f"best of {k}: {x.get('label') or x['layout']}, {x['best']['tokens_per_s_per_gpu']:.1f} tok/s/GPU "
              f"({x['verdict']})")
    x = r["best"]
    print(f"answer: {x['mode']} {x.get('label') or x['layout']} ({x['dtype']})")
    verdict = speculation_verdict(x["best"], f"{x['mode']} {x.get('label') or x['layout']}") if priced else None
    if verdict:
        print(verdict)
    warn_without_sla(max_ttft_ms, max_tpot_ms, x["best"])
    if launch is not None:
        print(launch["text"])


def print_serving_recommendation(r: dict, hardware: str, tp: int, sla_ms: tuple, prefill_layout, launch) -> None:
    """recommend --isl/--osl in plain text: the ranked serving configurations, the best, energy, D by load; exit 1
    (explained) when none meets the SLA."""
    max_ttft_ms, max_tpot_ms = sla_ms
    sla = ", ".join(x for x in (f"TTFT <= {max_ttft_ms:g} ms" if max_ttft_ms else "",
                                f"TPOT <= {max_tpot_ms:g} ms" if max_tpot_ms else "") if x) or "no SLA"
    where = f"tp {tp}" if "layout" not in r and prefill_layout is None else " ".join(
        x for x in (f"layout {r.get('layout', f'tp{tp}')}", f"prefill {prefill_layout.name}"
                    if prefill_layout is not None else "") if x)
    print(f"{r['model']} on {hardware} ({where}), engine {r['engine']}, {r['mode']}, ISL {r['isl']}, OSL {r['osl']}; {sla}")
    rows = [[x["mechanism"], x["draft_len"], x["concurrency"], x["pools"] or "-", x["acceptance_length"],
             or_dash(x["tpot_ms"]), x["ttft_ms"], or_dash(x["tokens_per_s_per_user"]), x["tokens_per_s_per_gpu"],
             "-" if x.get("speedup_vs_none") is None else f"{x['speedup_vs_none']:.3f}",
             "yes" if x["feasible"] else "no"] for x in r["ranked"]]
    print(table(rows, ["mechanism", "D", "concurrency", "pools", "AL", "TPOT ms", "TTFT ms", "tok/s/user",
                       "tok/s/GPU", "x none", "meets SLA"]))
    for n in r["notes"]:
        print(f"note: {n}")
    if r["best"] is None:
        print(f"infeasible: {r['infeasible']}")
        raise typer.Exit(1)
    b = r["best"]
    print(f"best: {b['mechanism']} D = {b['draft_len']} at concurrency {b['concurrency']:g}"
          f"{' ' + b['pools'] if b['pools'] else ''}: {b['tokens_per_s_per_gpu']:.1f} tok/s/GPU, "
          + (f"TPOT {b['tpot_ms']:.2f} ms, " if or_dash(b["tpot_ms"]) != "-" else "no TPOT (OSL 1), ")
          + f"TTFT {b['ttft_ms']:.1f} ms"
          + (f" ({b['speedup_vs_none']:.2f}x the best without speculation)" if b.get("speedup_vs_none") and
             b["mechanism"] != "none" else ""))
    print_energy(r)
    warn_without_sla(max_ttft_ms, max_tpot_ms, b)
    if r.get("d_by_load"):  # not in the --emit launch, which runs the ranked answer's fixed D
        print_d_schedule(r["d_by_load"], b["mechanism"])
    if launch is not None:
        print(launch["text"])


def print_devices(res: dict, hardware: list, tp: int, workload) -> None:
    """recommend over several devices in plain text: each device's best, the one the objective prefers; exit 1 when
    no device meets the SLA."""
    out, model, objective, wl = res["devices"], res["model"], res["objective"], workload
    ok = [x for x in out if x["best"] is not None]
    rows = [[x["hardware"], x["best"]["mechanism"], x["best"]["draft_len"], x["best"]["concurrency"],
             x["best"]["tokens_per_s_per_gpu"], x["best"].get("power_w_per_gpu", "-"),
             x["best"].get("joules_per_token", "-"), x["best"].get("usd_per_mtok", "-")]
            for x in ok]
    print(f"{model} over {', '.join(hardware)} (tp {tp}), ISL {wl.isl}, OSL {wl.osl}; each device's best by "
          f"{objective}")
    print(table(rows, ["hardware", "mechanism", "D", "concurrency", "tok/s/GPU", "W/GPU", "J/token", "$/Mtok"]))
    for x in out:
        if x["best"] is None:
            print(f"{x['hardware']}: no configuration meets the SLA")
    if not ok:
        raise typer.Exit(1)
    print(f"best by {objective}: {ok[0]['hardware']} ({energy_phrase(ok[0]['best'])})")

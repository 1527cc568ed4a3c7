"""One prepared GPU run: decode attention with q_len 1..17, decode GEMMs, a bandwidth probe.

Run it BY FILE PATH so that ``specplan/__init__.py`` (which may import pydantic) is not
imported; this script puts its own folder on ``sys.path`` and imports ``harness`` and
``packed_attention`` from there::

    PYTHONUNBUFFERED=1 python3 specplan/bench/device_run.py --out $OUT 2>&1 | tee $OUT/log.txt

Parts, in priority order, each in its own try/except and with its own deadline (seconds
after the start, ``--budget-s`` scales them), CSVs rewritten after every block so that a
kill keeps what was measured:

1. attention, head_dim 128, n_kv_heads 8, G in {1,2,4,8,16,32}, q_len 1..17, ten
   (batch, kv_len) pairs: SDPA (first backend that runs) and the packed Triton kernel
   -> ``attention.csv`` (+ ``attention_checks.csv``: packed vs SDPA max abs error)
2. GEMMs of llama-3.1-8b decode, M = 1..4096, bf16 then fp8 (torch._scaled_mm) -> ``gemm.csv``
3. attention extras: head_dim 64 / 256, n_kv_heads 1 / 2 / 4 -> ``attention.csv``
4. probe: device-to-device copy bandwidth and an 8192^3 bf16 matmul -> ``probe.json``

``--smoke`` runs a tiny grid (works on CPU: ``--device cpu --smoke``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import harness  # noqa: E402  (plain import: no specplan/__init__ needed)
import packed_attention  # noqa: E402

GROUPS = [1, 2, 4, 8, 16, 32]
QLENS = list(range(1, 18))
MAIN_PAIRS = [(8, 4096), (32, 4096), (1, 32768), (64, 16384), (8, 32768), (1, 4096),
              (64, 1024), (32, 16384), (1, 1024), (8, 1024)]


def log(msg: str) -> None:
    sys.stdout.write(f"[{time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stdout.flush()


def nvidia_smi() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,"
             "temperature.gpu,power.draw,memory.used", "--format=csv"],
            capture_output=True, text=True, timeout=10)
        return out.stdout.strip()
    except Exception as exc:  # pragma: no cover
        return f"nvidia-smi failed: {exc}"


def correctness(torch, device) -> list[dict]:
    """Packed kernels against a float64 reference on fresh random inputs (relative L2 error)."""
    res = []
    cases = [(2, 2, 4, 3, 300, 64), (1, 8, 8, 17, 2000, 128), (1, 1, 32, 5, 1030, 128),
             (3, 2, 16, 9, 777, 256), (64, 8, 1, 1, 128, 128), (1, 8, 16, 17, 40000, 128)]
    for ci, (b, hkv, g, ql, s, d) in enumerate(cases):
        for dt in (("fp32", "bf16") if ci == 0 else ("bf16",)):
            tdt = harness.torch_dtype(torch, dt)
            q = torch.randn(b, g * hkv, ql, d, device=device).to(tdt)
            k = torch.randn(b, hkv, s, d, device=device).to(tdt)
            v = torch.randn(b, hkv, s, d, device=device).to(tdt)
            ref = packed_attention.reference_attention(q, k, v)
            row = {"batch": b, "n_kv_heads": hkv, "group": g, "q_len": ql, "kv_len": s,
                   "head_dim": d, "dtype": dt}
            impls = {"torch_packed": lambda: packed_attention.torch_packed_attention(q, k, v)}
            if packed_attention.HAVE_TRITON and torch.device(device).type == "cuda":
                impls["triton_packed"] = lambda: packed_attention.TritonPackedAttention(q, k, v)()
                impls["triton_packed_nosplit"] = lambda: packed_attention.TritonPackedAttention(
                    q, k, v, num_splits=1)()
            for name, f in impls.items():
                try:
                    out = f().double()
                    rel = ((out - ref).norm() / ref.norm()).item()
                    row[name + "_rel_l2"] = rel
                    row[name + "_finite"] = bool(torch.isfinite(out).all().item())
                except Exception as exc:
                    row[name + "_error"] = f"{type(exc).__name__}: {str(exc)[:300]}"
            res.append(row)
            log(f"correctness {row}")
    return res


def probe(torch, device) -> dict:
    out: dict = {}
    dev = torch.device(device)
    if dev.type != "cuda":
        return out
    n = 2 << 30  # 2 GiB each way
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    ts = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        dst.copy_(src)
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) / 1e3)
    out["copy_bytes_each_way"] = n
    out["copy_time_s_median"] = statistics.median(ts)
    out["copy_tb_s_read_plus_write"] = 2 * n / statistics.median(ts) / 1e12
    del src, dst
    torch.cuda.empty_cache()
    for dt in ("bf16", "fp8"):
        m = 8192
        try:
            a = torch.randn(m, m, device=dev, dtype=torch.bfloat16)
            b = torch.randn(m, m, device=dev, dtype=torch.bfloat16)
            if dt == "fp8":
                a8 = a.to(torch.float8_e4m3fn)
                b8 = b.to(torch.float8_e4m3fn).t()
                one = torch.ones((), device=dev)

                def f():
                    return torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            else:
                def f():
                    return a @ b
            for _ in range(3):
                f()
            torch.cuda.synchronize()
            ts = []
            for _ in range(10):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                f()
                e.record()
                torch.cuda.synchronize()
                ts.append(s.elapsed_time(e) / 1e3)
            out[f"matmul_{dt}_8192_time_s_median"] = statistics.median(ts)
            out[f"matmul_{dt}_8192_tflops"] = 2 * m ** 3 / statistics.median(ts) / 1e12
        except Exception as exc:
            out[f"matmul_{dt}_error"] = f"{type(exc).__name__}: {exc}"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--budget-s", type=float, default=285.0,
                    help="total wall budget; part deadlines scale with it")
    ap.add_argument("--smoke", action="store_true", help="tiny grid (CPU test of this script)")
    ap.add_argument("--no-abort", action="store_true",
                    help="go on (with torch_packed) when the Triton kernel fails its check")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    scale = args.budget_s / 285.0

    def deadline(sec: float) -> float:
        return t0 + sec * scale

    os.makedirs(args.out, exist_ok=True)
    torch = harness.require_torch()
    dev = torch.device(args.device)
    info = harness.device_info(torch, dev)
    env = {"info": info, "python": sys.version, "nvidia_smi_before": nvidia_smi(),
           "have_triton": packed_attention.HAVE_TRITON, "argv": sys.argv}
    log(f"env {json.dumps(info)}")

    def dump_env():
        with open(os.path.join(args.out, "env.json"), "w") as fh:
            json.dump(env, fh, indent=1, default=str)

    dump_env()
    att_rows: list[dict] = []
    checks: list[dict] = []
    notes: list[str] = []
    gemm_rows: list[dict] = []
    att_path = os.path.join(args.out, "attention.csv")
    chk_path = os.path.join(args.out, "attention_checks.csv")
    gemm_path = os.path.join(args.out, "gemm.csv")

    def flush_att():
        if att_rows:
            harness.write_csv(att_rows, att_path, harness.ATTENTION_COLUMNS)
        if checks:
            harness.write_csv(checks, chk_path, harness.CHECK_COLUMNS)

    # 0. correctness of the packed kernels (float64 reference), also compiles Triton
    try:
        if args.smoke:
            env["correctness"] = []
        else:
            env["correctness"] = correctness(torch, dev)
    except Exception:
        env["correctness_error"] = traceback.format_exc()
        log(env["correctness_error"])
    dump_env()
    log(f"t={time.monotonic() - t0:.1f}s correctness done")
    if dev.type == "cuda" and packed_attention.HAVE_TRITON and not args.smoke and not args.no_abort:
        bad = [r for r in env.get("correctness", [])
               if "triton_packed_error" in r or r.get("triton_packed_rel_l2", 1.0) > 2e-2
               or not r.get("triton_packed_finite", False)]
        if bad or "correctness_error" in env:
            log(f"ABORT: Triton packed kernel failed its correctness check: {bad}")
            return 3

    if args.smoke:
        main_blocks = [dict(batch=1, kv_len=256, n_kv_heads=2, head_dim=64, group=[1, 4, 8],
                            q_len=[1, 2, 3, 17])]
        extra_blocks = [dict(batch=2, kv_len=128, n_kv_heads=1, head_dim=32, group=[2], q_len=[1, 5])]
        gemm_shapes = [(256, 128, "a")]
        gemm_m = [1, 8, 64]
    else:
        main_blocks = [dict(batch=b, kv_len=s, n_kv_heads=8, head_dim=128, group=GROUPS, q_len=QLENS)
                       for b, s in MAIN_PAIRS]
        extra_blocks = (
            [dict(batch=b, kv_len=s, n_kv_heads=8, head_dim=d, group=GROUPS, q_len=QLENS)
             for d in (64, 256) for b, s in ((8, 4096), (32, 16384))]
            + [dict(batch=b, kv_len=s, n_kv_heads=h, head_dim=128, group=GROUPS, q_len=QLENS)
               for h in (1, 4, 2) for b, s in ((8, 4096), (32, 16384))]
        )
        gemm_shapes = list(harness.LLAMA31_8B_GEMMS)
        gemm_m = list(harness.DEFAULT_M_VALUES)

    def run_blocks(blocks, dl, label):
        for i, blk in enumerate(blocks):
            if time.monotonic() > dl:
                log(f"{label}: deadline, skipping {len(blocks) - i} blocks")
                notes.append(f"{label}: deadline, skipped {blocks[i:]}")
                break
            try:
                t = time.monotonic()
                rows = harness.bench_attention([blk], device=args.device, dtype="bf16", checks=checks, notes=notes,
                                               timing=harness.TimingPlan(deadline=dl, progress=True))
                att_rows.extend(rows)
                flush_att()
                log(f"{label} block {i + 1}/{len(blocks)} {blk.get('batch')}x{blk.get('kv_len')} "
                    f"hkv={blk.get('n_kv_heads')} d={blk.get('head_dim')}: {len(rows)} rows in "
                    f"{time.monotonic() - t:.1f}s (t={time.monotonic() - t0:.1f}s)")
            except Exception:
                notes.append(f"{label} block {blk} failed: {traceback.format_exc()[-800:]}")
                log(notes[-1])

    # 1. attention, main grid
    run_blocks(main_blocks, deadline(150), "attention-main")

    # 2. GEMMs
    for dt, dl in (("bf16", 185), ("fp8", 210)):
        try:
            t = time.monotonic()
            rows = harness.bench_gemm(gemm_shapes, gemm_m, device=args.device, dtype=dt, notes=notes,
                                      timing=harness.TimingPlan(deadline=deadline(dl), progress=True))
            gemm_rows.extend(rows)
            if gemm_rows:
                harness.write_csv(gemm_rows, gemm_path, harness.GEMM_COLUMNS)
            log(f"gemm {dt}: {len(rows)} rows in {time.monotonic() - t:.1f}s (t={time.monotonic() - t0:.1f}s)")
        except Exception:
            notes.append(f"gemm {dt} failed: {traceback.format_exc()[-800:]}")
            log(notes[-1])

    # 3. attention extras
    run_blocks(extra_blocks, deadline(265), "attention-extra")

    # 4. probe
    try:
        env["probe"] = probe(torch, dev)
        with open(os.path.join(args.out, "probe.json"), "w") as fh:
            json.dump({"info": info, **env["probe"]}, fh, indent=1)
        log(f"probe {env['probe']}")
    except Exception:
        env["probe_error"] = traceback.format_exc()
        log(env["probe_error"])
    env["nvidia_smi_after"] = nvidia_smi()
    env["notes"] = notes
    env["elapsed_s"] = time.monotonic() - t0
    dump_env()
    flush_att()

    # short summary for the log tail
    try:
        summarize(att_rows, gemm_rows)
    except Exception:
        log(traceback.format_exc())
    log(f"done: {len(att_rows)} attention rows, {len(checks)} checks, {len(gemm_rows)} gemm rows, "
        f"{len(notes)} notes, {time.monotonic() - t0:.1f}s")
    for n in notes[:30]:
        log(f"note: {n[:300]}")
    return 0


def summarize(att_rows, gemm_rows) -> None:
    by = {}
    for r in att_rows:
        key = (r["batch"], r["kv_len"], r["n_kv_heads"], r["head_dim"], r["kernel"].split("_")[0])
        by.setdefault(key, {})[(r["n_q_heads"] // r["n_kv_heads"], r["q_len"])] = (r["time_us"], r["kernel"])
    for key in sorted(by):
        d = by[key]
        kernels = sorted({v[1] for v in d.values()})
        log(f"b={key[0]} kv={key[1]} hkv={key[2]} d={key[3]} {','.join(kernels)}  t(q)/t(1) for q=1,2,4,5,8,9,16,17 [t(1) us]")
        for g in GROUPS:
            if (g, 1) not in d:
                continue
            t1 = d[(g, 1)][0]
            ratios = " ".join(f"{d[(g, q)][0] / t1:5.2f}" if (g, q) in d else "  -  " for q in (1, 2, 4, 5, 8, 9, 16, 17))
            log(f"   G={g:2d} [{t1:9.1f}] {ratios}")
    for r in gemm_rows:
        if r["m"] in (1, 16, 256, 4096):
            log(f"gemm {r['dtype']} m={r['m']} n={r['n']} k={r['k']} {r['time_us']:.1f}us")


def qlen_report(csv_path: str) -> str:
    """Markdown tables of an attention CSV: t(q_len)/t(1) per G and kernel, steps at 128 rows.

    ``python3 specplan/bench/device_run.py --report bench_data/h200_attention_qlen.csv``
    """
    rows = harness.read_csv(csv_path)
    fams: dict = {}
    for r in rows:
        key = (r["batch"], r["kv_len"], r["n_kv_heads"], r["head_dim"])
        g = r["n_q_heads"] // r["n_kv_heads"]
        fams.setdefault(key, {}).setdefault(r["kernel"], {})[(g, r["q_len"])] = r["time_us"]
    out = []
    qs = list(range(1, 18))
    for key in sorted(fams):
        b, s, hkv, d = key
        kv_mb = b * s * hkv * d * 4 / 1e6
        out.append(f"\n#### batch {b}, kv_len {s}, n_kv_heads {hkv}, head_dim {d} (KV {kv_mb:.0f} MB)\n")
        out.append("| kernel | G | t(1) us | " + " | ".join(str(q) for q in qs) + " |")
        out.append("|---|---|---|" + "---|" * len(qs))
        for kernel in sorted(fams[key]):
            t = fams[key][kernel]
            for g in GROUPS:
                if (g, 1) not in t:
                    continue
                t1 = t[(g, 1)]
                cells = []
                for q in qs:
                    if (g, q) not in t:
                        cells.append("")
                        continue
                    c = f"{t[(g, q)] / t1:.2f}"
                    if kernel.endswith("packed") and (g * q) > 128 and (g * (q - 1)) <= 128:
                        c = f"**{c}**"
                    cells.append(c)
                out.append(f"| {kernel} | {g} | {t1:.1f} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--report":
        sys.stdout.write(qlen_report(sys.argv[2]))
        sys.exit(0)
    sys.exit(main())

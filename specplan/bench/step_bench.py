"""A whole decode / verify step of a Llama-3.1-8B-shaped decoder, timed end to end.

Random bf16 weights (no downloads), a preallocated KV cache ``[layers, batch, n_kv, S_max, head_dim]``;
one step with q_len = 1 + D new tokens per sequence on a context of ``context`` cached tokens is::

    embed -> layers x (RMSNorm, fused QKV GEMM, RoPE stand-in (one element-wise multiply of q and k),
    KV append at positions context..context+q_len-1, attention over kv_len = context + q_len with the
    END-aligned causal mask (query i sees j <= context + i), O GEMM + residual, RMSNorm, gate_up GEMM,
    SiLU * up, down GEMM + residual) -> final RMSNorm -> LM head (logits of every new token)

Attention kernels: ``triton_packed`` (``packed_attention.TritonPackedAttention``: G * q_len rows of a KV
head in 128-row tiles, written straight into the O GEMM's input), ``sdpa_flash`` (torch SDPA, flash
backend forced, ``enable_gqa``, ``causal_lower_right`` mask for q_len > 1; plain ``sdpa`` if flash
refuses), ``torch_packed`` (CPU path).  Timing: ``timing.measure`` -- the WHOLE step captured in one
CUDA graph, warm-up, events around each replay, median (no L2 flush: a step reads >= 16 GB).

Run BY FILE PATH on the GPU machine (no pydantic / pandas needed; torch is imported inside functions)::

    PYTHONUNBUFFERED=1 python3 specplan/bench/step_bench.py --out $OUT --budget-s 190
    python3 specplan/bench/step_bench.py --out /tmp/s --device cpu --smoke   # tiny config, seconds
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
if __package__:
    from . import packed_attention
    from .timing import measure
    from .torch_env import device_info, require_torch
else:  # plain module from the bench folder (GPU machine: no specplan/__init__, no pydantic)
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    import packed_attention  # type: ignore[no-redef]
    from timing import measure  # type: ignore[no-redef]
    from torch_env import device_info, require_torch  # type: ignore[no-redef]

LLAMA31_8B = dict(name="llama-3.1-8b", layers=32, hidden=4096, heads=32, kv_heads=8, head_dim=128,
                  ffn=14336, vocab=128256, eps=1e-5)
TINY = dict(name="tiny", layers=2, hidden=256, heads=8, kv_heads=2, head_dim=32, ffn=512, vocab=1000,
            eps=1e-5)
COLUMNS = ("model", "device", "batch", "q_len", "context", "attention_kernel", "time_us", "torch_version",
           "device_name", "reps", "finite", "method")
BATCHES, QLENS, CONTEXTS = (1, 8, 32, 64), (1, 2, 4, 8, 16), (1024, 8192)


def log(msg: str) -> None:
    sys.stdout.write(f"[{time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stdout.flush()


class StepModel:
    """Random weights and a KV cache for up to ``max_batch`` sequences of ``max_kv`` tokens."""

    def __init__(self, cfg: dict, device="cpu", dtype="bf16", max_batch=1, max_kv=64, seed=0):
        torch = require_torch()
        self.torch, self.cfg, self.dev = torch, dict(cfg), torch.device(device)
        self.dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
                      "fp64": torch.float64}[dtype]
        c = self.cfg
        h, d, hq, hkv, f, n = c["hidden"], c["head_dim"], c["heads"], c["kv_heads"], c["ffn"], c["layers"]
        torch.manual_seed(seed)
        kw = dict(device=self.dev, dtype=self.dtype)

        def w(*shape):  # ~unit-variance outputs: N(0, 1/fan_in)
            return torch.randn(*shape, **kw).mul_(1.0 / math.sqrt(shape[-1]))

        self.embed = torch.randn(c["vocab"], h, **kw)
        self.lm_head = w(c["vocab"], h)
        self.norm_f = torch.ones(h, **kw)
        self.layers = [dict(ln1=torch.ones(h, **kw), wqkv=w((hq + 2 * hkv) * d, h), wo=w(h, hq * d),
                            ln2=torch.ones(h, **kw), wgu=w(2 * f, h), wd=w(h, f)) for _ in range(n)]
        self.k_cache = torch.empty(n, max_batch, hkv, max_kv, d, **kw)
        self.v_cache = torch.empty(n, max_batch, hkv, max_kv, d, **kw)
        for i in range(n):  # per layer: no single random kernel over > 2^31 elements
            self.k_cache[i].normal_()
            self.v_cache[i].normal_()
        self.max_batch, self.max_kv = max_batch, max_kv


class StepRunner:
    """Static buffers of one (batch, q_len, context, kernel) step; ``runner()`` runs the step."""

    def __init__(self, m: StepModel, batch: int, q_len: int, context: int, kernel: str = "auto"):
        torch, c = m.torch, m.cfg
        if batch > m.max_batch or context + q_len > m.max_kv:
            raise ValueError(f"batch {batch} / kv_len {context + q_len} exceed the cache "
                             f"({m.max_batch}, {m.max_kv})")
        self.m, self.b, self.q, self.ctx, self.kv_len = m, batch, q_len, context, context + q_len
        h, d, hq, hkv, f = c["hidden"], c["head_dim"], c["heads"], c["kv_heads"], c["ffn"]
        self.h, self.d, self.hq, self.hkv, self.f = h, d, hq, hkv, f
        t = batch * q_len
        kw = dict(device=m.dev, dtype=m.dtype)
        gen = torch.Generator(device=m.dev).manual_seed(1234)
        self.ids = torch.randint(0, c["vocab"], (t,), device=m.dev, generator=gen)
        self.x = torch.empty(t, h, **kw)  # residual stream
        self.qkv = torch.empty(t, (hq + 2 * hkv) * d, **kw)
        self.rope = (1.0 + 0.01 * torch.randn(t, (hq + hkv) * d, device=m.dev, generator=gen)).to(m.dtype)
        self.attn = torch.empty(t, hq * d, **kw)
        self.o = torch.empty(t, h, **kw)
        self.gu = torch.empty(t, 2 * f, **kw)
        self.logits = torch.empty(t, c["vocab"], **kw)
        qkv4 = self.qkv.view(batch, q_len, hq + 2 * hkv, d)
        self.q4 = qkv4[:, :, :hq].transpose(1, 2)  # [B, Hq, L, d] view
        self.k_new = qkv4[:, :, hq:hq + hkv].transpose(1, 2)
        self.v_new = qkv4[:, :, hq + hkv:].transpose(1, 2)
        self.out4 = self.attn.view(batch, q_len, hq, d).transpose(1, 2)  # [B, Hq, L, d] view
        if kernel == "auto":
            kernel = "triton_packed" if m.dev.type == "cuda" and packed_attention.HAVE_TRITON else "torch_packed"
        self.kernel, self.mask, self.triton = kernel, None, None
        if kernel == "triton_packed":
            self.triton = packed_attention.TritonPackedAttention(self.q4, *self.kv(0), out=self.out4)
        elif kernel == "torch_packed":
            self.mask = packed_attention.packed_causal_mask(hq // hkv, q_len, self.kv_len, m.dev)
        elif kernel.startswith("sdpa"):
            if q_len > 1:
                from torch.nn.attention.bias import causal_lower_right

                self.mask = causal_lower_right(q_len, self.kv_len)
        else:
            raise ValueError(f"unknown attention kernel {kernel!r}")

    def kv(self, layer: int):
        """K and V of one layer for this step's batch: [B, Hkv, kv_len, d] views of the cache."""
        m = self.m
        return (m.k_cache[layer, :self.b, :, :self.kv_len], m.v_cache[layer, :self.b, :, :self.kv_len])

    def attention(self, layer: int) -> None:
        """Attention of one layer: reads q from the QKV buffer, writes [T, Hq*d] into self.attn."""
        torch = self.m.torch
        k, v = self.kv(layer)
        if self.triton is not None:
            self.triton.k, self.triton.v = k, v
            self.triton()
            return
        if self.kernel == "torch_packed":
            out = packed_attention.torch_packed_attention(self.q4, k, v, mask=self.mask)
        else:
            F = torch.nn.functional
            if self.kernel == "sdpa_flash":
                from torch.nn.attention import SDPBackend, sdpa_kernel

                with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                    out = F.scaled_dot_product_attention(self.q4, k, v, attn_mask=self.mask, enable_gqa=True)
            else:
                out = F.scaled_dot_product_attention(self.q4, k, v, attn_mask=self.mask, enable_gqa=True)
        self.out4.copy_(out)

    def layer(self, i: int) -> None:
        """One decoder layer on the residual stream self.x (in place), KV appended to the cache."""
        torch, m = self.m.torch, self.m
        F, p, eps = torch.nn.functional, m.layers[i], m.cfg["eps"]
        xn = F.rms_norm(self.x, (self.h,), p["ln1"], eps)
        torch.mm(xn, p["wqkv"].t(), out=self.qkv)
        self.qkv[:, :(self.hq + self.hkv) * self.d].mul_(self.rope)  # RoPE stand-in: one element-wise op
        m.k_cache[i, :self.b, :, self.ctx:self.kv_len].copy_(self.k_new)
        m.v_cache[i, :self.b, :, self.ctx:self.kv_len].copy_(self.v_new)
        self.attention(i)
        torch.mm(self.attn, p["wo"].t(), out=self.o)
        self.x.add_(self.o)
        xn = F.rms_norm(self.x, (self.h,), p["ln2"], eps)
        torch.mm(xn, p["wgu"].t(), out=self.gu)
        act = F.silu(self.gu[:, :self.f]) * self.gu[:, self.f:]
        torch.mm(act, p["wd"].t(), out=self.o)
        self.x.add_(self.o)

    def __call__(self):
        torch, m = self.m.torch, self.m
        torch.index_select(m.embed, 0, self.ids, out=self.x)
        for i in range(len(m.layers)):
            self.layer(i)
        xn = torch.nn.functional.rms_norm(self.x, (self.h,), m.norm_f, m.cfg["eps"])
        torch.mm(xn, m.lm_head.t(), out=self.logits)
        return self.logits


def sdpa_label(m: StepModel) -> str:
    """'sdpa_flash' when the flash backend runs a GQA verify step here, else 'sdpa' (default choice)."""
    if m.dev.type != "cuda":
        return "sdpa"
    try:
        r = StepRunner(m, 1, 2, 64, "sdpa_flash")
        r.attention(0)
        return "sdpa_flash"
    except Exception as exc:
        log(f"flash SDPA refused ({type(exc).__name__}: {str(exc)[:200]}); using default SDPA")
        return "sdpa"


def check_kernels(m: StepModel, batch: int, q_len: int, context: int, kernels) -> dict:
    """Layer-0 attention of each kernel vs the float64 reference (max abs error), same inputs."""
    out: dict = {"batch": batch, "q_len": q_len, "context": context}
    r0 = StepRunner(m, batch, q_len, context, kernels[0])
    r0.qkv.normal_()
    k, v = r0.kv(0)
    ref = packed_attention.reference_attention(r0.q4, k, v)
    for kern in kernels:
        r = StepRunner(m, batch, q_len, context, kern)
        r.qkv.copy_(r0.qkv)
        r.attention(0)
        out[kern] = float((r.out4.double() - ref).abs().max().item())
    out["ref_max_abs"] = float(ref.abs().max().item())
    return out


def nvidia_smi() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem,"
                               "temperature.gpu,power.draw,memory.used", "--format=csv"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception as exc:  # pragma: no cover
        return f"nvidia-smi failed: {exc}"


def run_env(torch, device: str, out: str, t0: float) -> tuple[dict, object]:
    """(env, dump): the run's environment record (device info, nvidia-smi, checks, skips, errors) and a function
    that writes it to out/env.json with the elapsed time."""
    os.makedirs(out, exist_ok=True)
    env: dict = {"info": device_info(torch, device), "argv": sys.argv, "nvidia_smi_before": nvidia_smi(),
                 "checks": [], "skipped": [], "errors": []}
    path = os.path.join(out, "env.json")

    def dump():
        env["elapsed_s"] = time.monotonic() - t0
        with open(path, "w") as fh:
            json.dump(env, fh, indent=1, default=str)

    return env, dump


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder for step.csv, env.json")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--budget-s", type=float, default=190.0, help="no new configuration after this")
    ap.add_argument("--smoke", action="store_true", help="tiny 2-layer config and grid (CPU test)")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    torch = require_torch()
    env, dump_env = run_env(torch, args.device, args.out, t0)
    info = env["info"]
    csv_path = os.path.join(args.out, "step.csv")

    if args.smoke:
        dtype = "bf16" if args.device != "cpu" else "fp32"
        cfg, batches, qlens, contexts = TINY, (1, 3), (1, 4), (16, 40)
    else:
        cfg, dtype, batches, qlens, contexts = LLAMA31_8B, "bf16", BATCHES, QLENS, CONTEXTS
    max_kv = max(contexts) + max(qlens)
    log(f"env {json.dumps(info)}; building {cfg['name']} ({dtype}) cache {max(batches)} x {max_kv}")
    m = StepModel(cfg, args.device, dtype, max(batches), max_kv)
    if m.dev.type == "cuda":
        torch.cuda.synchronize()
        env["memory_allocated_gb"] = torch.cuda.memory_allocated() / 1e9
    log(f"model built t={time.monotonic() - t0:.1f}s")
    kernels = ["triton_packed" if m.dev.type == "cuda" and packed_attention.HAVE_TRITON else "torch_packed",
               sdpa_label(m)]
    env["kernels"] = kernels
    for b, q, ctx in ((min(8, max(batches)), 4, min(contexts)), (1, max(qlens), max(contexts))):
        try:
            env["checks"].append(check_kernels(m, b, q, ctx, kernels))
            log(f"check {env['checks'][-1]}")
        except Exception:
            env["errors"].append(traceback.format_exc()[-1500:])
            log(env["errors"][-1])
    dump_env()
    with open(csv_path, "w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        wr.writeheader()
        fh.flush()
        n_ok = n_fail = 0
        for ctx in contexts:
            for b in batches:
                for kern in kernels:
                    for q in qlens:
                        if time.monotonic() - t0 > args.budget_s:
                            env["skipped"].append([b, q, ctx, kern, "time guard"])
                            continue
                        try:
                            r = StepRunner(m, b, q, ctx, kern)
                            res = measure(r, args.device, reps=args.reps, warmup=2, flush_bytes=0,
                                          slow_call_s=0.02)
                            finite = bool(torch.isfinite(r.logits).all().item())
                        except Exception as exc:
                            n_fail += 1
                            env["errors"].append(f"{b} {q} {ctx} {kern}: {traceback.format_exc()[-1200:]}")
                            log(f"FAILED b={b} q={q} ctx={ctx} {kern}: {type(exc).__name__}: {str(exc)[:300]}")
                            if n_fail >= 4 and n_ok == 0:
                                log("ABORT: the first 4 configurations failed")
                                dump_env()
                                return 3
                            continue
                        finally:
                            r = None
                        n_ok += 1
                        wr.writerow(dict(model=cfg["name"], device=info["device"], batch=b, q_len=q, context=ctx,
                                         attention_kernel=kern, time_us=f"{res['time_us']:.2f}",
                                         torch_version=info["torch_version"], device_name=info["device_name"],
                                         reps=res["reps"], finite=finite, method=res["method"]))
                        fh.flush()
                        log(f"b={b:3d} q={q:2d} ctx={ctx:5d} {kern:14s} {res['time_us'] / 1e3:9.3f} ms "
                            f"finite={finite} t={time.monotonic() - t0:.1f}s")
                dump_env()
    env["nvidia_smi_after"] = nvidia_smi()
    dump_env()
    log(f"done in {time.monotonic() - t0:.1f}s; {len(env['skipped'])} skipped, {len(env['errors'])} errors")
    return 0


if __name__ == "__main__":
    sys.exit(main())

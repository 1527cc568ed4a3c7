"""One speculative round of a Llama-3.1-8B-shaped target with an EAGLE-3-shaped head, timed part by part (issue 19).

Random weights (no downloads), the target's KV cache as in step_bench. For batch B, draft length D and a context of
``context`` cached tokens, a chain round is::

    draft    EAGLE-3 head: the fc fusion 3h -> h over the B·(1 + D) positions the target verified, the head layer
             over them (extend: its KV written there, q_len 1 + D) and the draft LM head (draft vocabulary 32000)
             at the last position; then D - 1 serial steps at q_len 1 (head layer, draft LM head, argmax)
    verify   the target over q_len = 1 + D tokens per sequence (step_bench.StepRunner: logits of every position)
    reject   greedy: argmax of the B·(1 + D) target logits against the D draft tokens, the accepted prefix length;
             probabilistic: softmax of the target logits in fp32 (read + write), p/q at the draft tokens against
             pre-drawn uniforms, the accepted prefix, and the residual max(0, p - q) at the first rejected position
    decode   the D = 0 baseline: the target at q_len 1

Each part is timed on its own (``timing.measure``: warm-up, one CUDA graph per part, events around each replay),
and the whole round (draft + verify + greedy reject) in one graph. The head's shapes follow
model_profiles/eagle3-llama-3.1-8b.yaml (q/k/v over 2h inputs, fc 3h -> h, draft vocabulary 32000).

Run BY FILE PATH on the GPU machine (no pydantic / pandas needed; torch is imported inside functions)::

    PYTHONUNBUFFERED=1 python3 specplan/bench/round_bench.py --out $OUT --budget-s 400
    python3 specplan/bench/round_bench.py --out /tmp/r --device cpu --smoke   # tiny config, seconds
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
if __package__:
    from .step_bench import LLAMA31_8B, TINY, StepModel, StepRunner, log, nvidia_smi, run_env
    from .timing import measure
    from .torch_env import require_torch
else:  # plain module from the bench folder (GPU machine: no specplan/__init__, no pydantic)
    if HERE not in sys.path:
        sys.path.insert(0, HERE)
    from step_bench import LLAMA31_8B, TINY, StepModel, StepRunner, log, nvidia_smi, run_env  # type: ignore
    from timing import measure  # type: ignore[no-redef]
    from torch_env import require_torch  # type: ignore[no-redef]

DRAFT_VOCAB = {"llama-3.1-8b": 32000, "tiny": 100}  # model_profiles/eagle3-llama-3.1-8b.yaml draft_vocab_size
COLUMNS = ("model", "device", "batch", "draft_len", "context", "part", "time_us", "torch_version", "device_name",
           "reps", "finite", "method")
PARTS = ("decode", "verify", "draft", "reject_greedy", "reject_prob", "round")
BATCHES, DRAFT_LENS, CONTEXT = (1, 4, 16, 32, 64, 128), (1, 2, 3, 4, 5, 6, 7), 1024


class HeadModel:
    """Random weights of an EAGLE-3 head (one decoder layer whose q/k/v read 2h inputs, fc 3h -> h, a draft LM
    head) and its own one-layer KV cache."""

    def __init__(self, target: StepModel, draft_vocab: int, max_batch: int, max_kv: int, seed: int = 1):
        torch, c = target.torch, target.cfg
        self.torch, self.cfg, self.dev, self.dtype = torch, c, target.dev, target.dtype
        h, d, hq, hkv, f = c["hidden"], c["head_dim"], c["heads"], c["kv_heads"], c["ffn"]
        torch.manual_seed(seed)
        kw = dict(device=self.dev, dtype=self.dtype)

        def w(*shape):
            return torch.randn(*shape, **kw).mul_(1.0 / math.sqrt(shape[-1]))

        self.fc = w(h, 3 * h)
        self.ln_e, self.ln_h = torch.ones(h, **kw), torch.ones(h, **kw)
        self.wqkv = w((hq + 2 * hkv) * d, 2 * h)
        self.wo, self.ln2, self.wgu, self.wd = w(h, hq * d), torch.ones(h, **kw), w(2 * f, h), w(h, f)
        self.norm_f, self.lm_head = torch.ones(h, **kw), w(draft_vocab, h)
        self.k_cache = torch.randn(max_batch, hkv, max_kv, d, **kw)
        self.v_cache = torch.randn(max_batch, hkv, max_kv, d, **kw)
        self.draft_vocab = draft_vocab


class DraftRunner:
    """Static buffers of the draft part of one round (extend over 1 + D positions, then D - 1 serial steps)."""

    def __init__(self, head: HeadModel, target: StepModel, batch: int, draft_len: int, context: int):
        torch, c = head.torch, head.cfg
        self.hd, self.tg, self.b, self.dl, self.ctx = head, target, batch, draft_len, context
        h, d, hq, hkv = c["hidden"], c["head_dim"], c["heads"], c["kv_heads"]
        self.h, self.d, self.hq, self.hkv = h, d, hq, hkv
        kw = dict(device=head.dev, dtype=head.dtype)
        gen = torch.Generator(device=head.dev).manual_seed(99)
        q = 1 + draft_len
        self.fused = torch.randn(batch * q, 3 * h, device=head.dev, generator=gen).to(head.dtype)  # 3 target layers
        self.ids = torch.randint(0, c["vocab"], (batch * q,), device=head.dev, generator=gen)
        self.tokens = torch.zeros(batch, max(draft_len, 1), dtype=torch.long, device=head.dev)
        self.steps = [self._buffers(q, **kw)] + [self._buffers(1, **kw) for _ in range(max(draft_len - 1, 0))]

    def _buffers(self, q: int, **kw) -> dict:
        torch, t = self.hd.torch, self.b * q
        buf = dict(q=q, x2=torch.empty(t, 2 * self.h, **kw), hid=torch.empty(t, self.h, **kw),
                   qkv=torch.empty(t, (self.hq + 2 * self.hkv) * self.d, **kw),
                   attn=torch.empty(t, self.hq * self.d, **kw),
                   o=torch.empty(t, self.h, **kw), logits=torch.empty(self.b, self.hd.draft_vocab, **kw))
        qkv4 = buf["qkv"].view(self.b, q, self.hq + 2 * self.hkv, self.d)
        buf["q4"] = qkv4[:, :, :self.hq].transpose(1, 2)
        buf["k_new"] = qkv4[:, :, self.hq:self.hq + self.hkv].transpose(1, 2)
        buf["v_new"] = qkv4[:, :, self.hq + self.hkv:].transpose(1, 2)
        buf["out4"] = buf["attn"].view(self.b, q, self.hq, self.d).transpose(1, 2)
        return buf

    def _layer(self, buf: dict, pos: int, ids) -> None:
        """The head's decoder layer on buf['hid'] (the fused hidden states) with token embeddings `ids`."""
        torch, hd = self.hd.torch, self.hd
        F, eps, h, q = torch.nn.functional, self.hd.cfg["eps"], self.h, buf["q"]
        torch.cat([F.rms_norm(self.tg.embed.index_select(0, ids), (h,), hd.ln_e, eps),
                   F.rms_norm(buf["hid"], (h,), hd.ln_h, eps)], dim=1, out=buf["x2"])
        torch.mm(buf["x2"], hd.wqkv.t(), out=buf["qkv"])
        kv_len = pos + q
        hd.k_cache[:self.b, :, pos:kv_len].copy_(buf["k_new"])
        hd.v_cache[:self.b, :, pos:kv_len].copy_(buf["v_new"])
        k, v = hd.k_cache[:self.b, :, :kv_len], hd.v_cache[:self.b, :, :kv_len]
        g = self.hq // self.hkv
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        mask = None
        if q > 1:
            from torch.nn.attention.bias import causal_lower_right

            mask = causal_lower_right(q, kv_len)
        buf["out4"].copy_(F.scaled_dot_product_attention(buf["q4"], k, v, attn_mask=mask))
        torch.mm(buf["attn"], hd.wo.t(), out=buf["o"])
        buf["hid"].add_(buf["o"])
        xn = F.rms_norm(buf["hid"], (h,), hd.ln2, eps)
        gu = torch.mm(xn, hd.wgu.t())
        f = gu.shape[1] // 2
        torch.mm(F.silu(gu[:, :f]) * gu[:, f:], hd.wd.t(), out=buf["o"])
        buf["hid"].add_(buf["o"])

    def __call__(self):
        torch, hd = self.hd.torch, self.hd
        F, eps = torch.nn.functional, hd.cfg["eps"]
        first = self.steps[0]
        torch.mm(self.fused, hd.fc.t(), out=first["hid"])  # fc 3h -> h over the B·(1 + D) verified positions
        self._layer(first, self.ctx, self.ids)
        last = first["hid"].view(self.b, first["q"], self.h)[:, -1]
        torch.mm(F.rms_norm(last, (self.h,), hd.norm_f, eps), hd.lm_head.t(), out=first["logits"])
        self.tokens[:, 0] = first["logits"].argmax(dim=1)
        prev = last
        for j, buf in enumerate(self.steps[1:], start=1):  # D - 1 serial steps at q_len 1
            buf["hid"].copy_(prev)
            self._layer(buf, self.ctx + first["q"] + j - 1, self.tokens[:, j - 1])
            torch.mm(F.rms_norm(buf["hid"], (self.h,), hd.norm_f, eps), hd.lm_head.t(), out=buf["logits"])
            self.tokens[:, j] = buf["logits"].argmax(dim=1)
            prev = buf["hid"]
        return self.tokens


class RejectRunner:
    """Rejection over B x (1 + D) target logits: greedy (argmax match) or probabilistic (p/q against uniforms)."""

    def __init__(self, logits, draft_tokens, draft_len: int, probabilistic: bool, seed: int = 7):
        torch = require_torch()
        self.torch, self.dl, self.prob = torch, draft_len, probabilistic
        b = draft_tokens.shape[0]
        self.logits = logits.view(b, draft_len + 1, -1)
        self.tokens = draft_tokens[:, :draft_len]
        gen = torch.Generator(device=logits.device).manual_seed(seed)
        self.u = torch.rand(b, draft_len, device=logits.device, generator=gen)
        self.q = torch.full((b, draft_len), 0.5, device=logits.device)  # the draft's probability of its token
        # Exp(1) draws: argmax(r / E) samples the residual r (exponential race), no RNG inside the graph
        self.e = torch.empty(b, self.logits.shape[-1], device=logits.device).exponential_(generator=gen) \
            if probabilistic else None
        self.accepted = torch.zeros(b, dtype=torch.long, device=logits.device)
        self.resampled = torch.zeros(b, dtype=torch.long, device=logits.device)

    def __call__(self):
        torch = self.torch
        head = self.logits[:, :self.dl]
        if not self.prob:
            ok = head.argmax(dim=-1) == self.tokens
        else:
            p = torch.softmax(self.logits.float(), dim=-1)  # fp32 probabilities of every position
            pt = p[:, :self.dl].gather(-1, self.tokens.unsqueeze(-1)).squeeze(-1)
            ok = self.u < torch.clamp(pt / self.q, max=1.0)
        n = torch.cumprod(ok.long(), dim=1).sum(dim=1)  # accepted prefix length, 0 ... D
        self.accepted.copy_(n)
        if self.prob:  # a token from the residual max(0, p - q) at the first rejected position (q spread uniformly)
            row = p[torch.arange(p.shape[0], device=p.device), n]
            resid = torch.clamp(row - 1.0 / row.shape[-1], min=0.0)
            self.resampled.copy_((resid / self.e).argmax(dim=-1))
        return self.accepted


def reference_accepted(target_argmax, draft_tokens) -> list[int]:
    """Greedy accepted prefix lengths by a plain loop (tests)."""
    out = []
    for t_row, d_row in zip(target_argmax.tolist(), draft_tokens.tolist()):
        n = 0
        for t, d in zip(t_row, d_row):
            if t != d:
                break
            n += 1
        out.append(n)
    return out


def part_runners(m: StepModel, head: HeadModel, batch: int, draft_len: int, context: int) -> dict:
    """Zero-argument callables of every part of one (B, D) round (decode only at D = 0)."""
    if draft_len == 0:
        return {"decode": StepRunner(m, batch, 1, context)}
    ver = StepRunner(m, batch, 1 + draft_len, context)
    dr = DraftRunner(head, m, batch, draft_len, context)
    greedy = RejectRunner(ver.logits, dr.tokens, draft_len, False)
    prob = RejectRunner(ver.logits, dr.tokens, draft_len, True)

    def whole():
        dr()
        ver()
        return greedy()

    return {"verify": ver, "draft": dr, "reject_greedy": greedy, "reject_prob": prob, "round": whole}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder for round.csv, env.json")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--budget-s", type=float, default=400.0, help="no new configuration after this")
    ap.add_argument("--smoke", action="store_true", help="tiny 2-layer config and grid (CPU test)")
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    torch = require_torch()
    env, dump_env = run_env(torch, args.device, args.out, t0)
    info = env["info"]
    csv_path = os.path.join(args.out, "round.csv")

    if args.smoke:
        cfg, dtype, batches, drafts, context = TINY, ("bf16" if args.device != "cpu" else "fp32"), (1, 3), (0, 1, 3), 16
    else:
        cfg, dtype, batches, drafts, context = LLAMA31_8B, "bf16", BATCHES, (0,) + DRAFT_LENS, CONTEXT
    max_kv = context + 2 * (max(drafts) + 1)
    log(f"env {json.dumps(info)}; building {cfg['name']} ({dtype}) cache {max(batches)} x {max_kv} + EAGLE-3 head")
    m = StepModel(cfg, args.device, dtype, max(batches), max_kv)
    head = HeadModel(m, DRAFT_VOCAB[cfg["name"]], max(batches), max_kv)
    log(f"models built t={time.monotonic() - t0:.1f}s")
    dump_env()
    with open(csv_path, "w", newline="") as fh:
        wr = csv.DictWriter(fh, fieldnames=COLUMNS, lineterminator="\n")
        wr.writeheader()
        n_ok = n_fail = 0
        for b in batches:
            for dl in drafts:
                if time.monotonic() - t0 > args.budget_s:
                    env["skipped"].append([b, dl, "time guard"])
                    continue
                try:
                    runners = part_runners(m, head, b, dl, context)
                except Exception:
                    n_fail += 1
                    env["errors"].append(f"{b} {dl}: {traceback.format_exc()[-1200:]}")
                    continue
                for part, fn in runners.items():
                    try:
                        res = measure(fn, args.device, reps=args.reps, warmup=2, flush_bytes=0, slow_call_s=0.02)
                        out = fn()
                        finite = bool(torch.isfinite(out.float()).all().item())
                    except Exception as exc:
                        n_fail += 1
                        env["errors"].append(f"{b} {dl} {part}: {traceback.format_exc()[-1200:]}")
                        log(f"FAILED b={b} D={dl} {part}: {type(exc).__name__}: {str(exc)[:300]}")
                        if n_fail >= 4 and n_ok == 0:
                            log("ABORT: the first 4 measurements failed")
                            dump_env()
                            return 3
                        continue
                    n_ok += 1
                    wr.writerow(dict(model=cfg["name"], device=info["device"], batch=b, draft_len=dl, context=context,
                                     part=part, time_us=f"{res['time_us']:.2f}", torch_version=info["torch_version"],
                                     device_name=info["device_name"], reps=res["reps"], finite=finite,
                                     method=res["method"]))
                    fh.flush()
                    log(f"b={b:3d} D={dl} {part:13s} {res['time_us'] / 1e3:9.3f} ms t={time.monotonic() - t0:.1f}s")
                runners = None
            dump_env()
    env["nvidia_smi_after"] = nvidia_smi()
    dump_env()
    log(f"done in {time.monotonic() - t0:.1f}s; {len(env['skipped'])} skipped, {len(env['errors'])} errors")
    return 0 if n_ok else 3


if __name__ == "__main__":
    sys.exit(main())

"""Regenerate the computed blocks of docs/speculation.md: `python scripts/make_speculation_tables.py`.

Every number between a `<!-- generated:NAME begin ... -->` and `<!-- generated:NAME end -->` marker in
docs/speculation.md is computed here from specplan's own cost model (no number typed by hand), so the page
cannot drift from the code: rerun this script after a change to the profiles or the cost functions.
`--check` exits 1 (and rewrites nothing) when the committed page differs from what the code gives now.

Blocks:
- `pricing`: one verify step (B sequences, q_len 1 + D) against B·(1 + D) independent single-token decodes,
  for cases that fit in memory (checked with `memory_usage` at q_len = 1 + D; a case that does not fit is an error).
- `qwen128k`: what `recommend` says about Qwen3.5-122B-A10B on B200 TP 2 at 128K (issue "Must-show 3").
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specplan.memory import kv_bytes_per_seq, memory_usage, state_bytes_per_seq  # noqa: E402
from specplan.profiles.registry import load_hardware, load_model  # noqa: E402
from specplan.recommend import parse_acceptance, recommend  # noqa: E402
from specplan.speculation.speedup import evaluate  # noqa: E402
from specplan.step import step_time  # noqa: E402

DOC = ROOT / "docs" / "speculation.md"

# (model, hardware, tp, batch, context, dtype, kv_dtype, D): each must fit at q_len = 1 + D
PRICING_CASES = [
    ("llama-3.1-8b", "h100-sxm", 1, 8, 32768, None, None, 3),
    ("llama-3.1-8b", "h100-sxm", 1, 8, 32768, None, None, 7),
    ("llama-3.3-70b", "h100-sxm", 8, 16, 131072, None, "fp8", 7),
    ("qwen3.5-122b-a10b", "b200", 2, 64, 131072, "fp4", "fp8", 7),
]

# Must-show 3: the recommend call the section quotes
Q = dict(model="qwen3.5-122b-a10b", hardware="b200", tp=2, dtype="fp4", kv_dtype="fp8", context_len=131072)
Q_BATCH, Q_RATE = 64, "0.8"


def gb(x) -> str:
    return f"{float(x) / 1e9:.1f}"


def pricing() -> str:
    """The pricing table plus the range of its ratios, as markdown."""
    lines = ["| case | D | D = 0 step | verify (ours) | B·(1+D) decodes | ratio | memory at q_len 1 + D (GB / usable GB per device) |",
             "|---|---|---|---|---|---|---|"]
    ratios = []
    for m, h, tp, b, ctx, dt, kv, d in PRICING_CASES:
        base = step_time(m, h, tp, b, 1, ctx, dt, kv)
        ver = step_time(m, h, tp, b, 1 + d, ctx, precision=base.precision)
        ind = step_time(m, h, tp, b * (1 + d), 1, ctx, precision=base.precision)
        mem = memory_usage(load_model(m), load_hardware(h), tp, b, ctx, base.precision, q_len=1 + d)
        if not bool(mem.fits):
            raise SystemExit(f"pricing case {m} on {h} TP {tp} B {b} ctx {ctx} D {d} does not fit in memory "
                             f"({gb(mem.total_bytes)} GB > {gb(mem.capacity_bytes)} GB): choose another case")
        t0, tv, ti = (float(x.total_s) * 1e3 for x in (base, ver, ind))
        ratios.append(ti / tv)
        label = (f"{m}, {h}" + (f" TP {tp}" if tp > 1 else "") + f", B {b}, {ctx // 1024}K"
                 + (f", {dt} weights" if dt else "") + (f", {kv} KV" if kv else ""))
        lines.append(f"| {label} | {d} | {t0:.2f} | {tv:.2f} | {ti:.2f} | {ti / tv:.2f} | "
                     f"{gb(mem.total_bytes)} / {gb(mem.capacity_bytes)} |")
    lo, hi = min(ratios), max(ratios)
    return "\n".join(lines) + (
        f"\n\nOn these cases the alternative prices verification {lo:.1f}–{hi:.1f}× higher than the verify step "
        "does; at long context it would never recommend speculation where attention dominates, which is exactly "
        "where Guideline 2 says it pays.")


def qwen128k() -> str:
    """The Must-show 3 paragraph, every number from `recommend` / `evaluate`."""
    acc = parse_acceptance(Q_RATE)
    ng = recommend(**Q, mechanisms=["ngram"], acceptance={"ngram": Q_RATE}, batch=Q_BATCH)
    mt = recommend(**Q, mechanisms=["mtp"], acceptance={"mtp": Q_RATE}, batch=Q_BATCH)
    g = mt["guidelines"]
    g_dev, tile_d = int(g["g_dev"]), int(g["attention_tile_d"])
    e = evaluate(**Q, batch=Q_BATCH, draft_len=np.array([tile_d, tile_d + 1]), mechanism="ngram", acceptance=acc)
    step_pct = 100 * (float(e["speedup"][1]) / float(e["speedup"][0]) - 1)
    bs = np.arange(1, 2049, dtype=float)
    share = evaluate(**Q, batch=bs, draft_len=0, mechanism="none", guidelines=True)["guidelines"]["attention_share"]
    share = np.broadcast_to(share, bs.shape)
    b70 = bs[share >= 0.70]
    d1 = evaluate(**Q, batch=bs, draft_len=1, mechanism="mtp", acceptance=acc)
    b_fit = int(bs[np.asarray(d1["fits"], bool)].max()) if np.any(d1["fits"]) else 0
    m = load_model(Q["model"])
    kv_seq = float(kv_bytes_per_seq(m, Q["tp"], Q["kv_dtype"], Q["context_len"]))
    st_seq = state_bytes_per_seq(m, Q["tp"])
    b, bn = mt["best"], ng["best"]
    return (
        f"`specplan recommend --model {Q['model']} --hardware {Q['hardware']} --tp {Q['tp']} --dtype {Q['dtype']} "
        f"--kv-dtype {Q['kv_dtype']} --context {Q['context_len']} --mechanisms mtp --acceptance mtp={Q_RATE} "
        f"--batch {Q_BATCH}`: G_dev = {g_dev}, G2 start D = {tile_d}. The verify step steps up at D = {tile_d + 1} "
        f"(a second 128-row tile: {step_pct:+.0f}% speedup with a free drafter). With a drafter that is free on the "
        f"GPU (`ngram`, α = {Q_RATE}) recommend picks D = {bn['draft_len']} and names {ng['binding']['guideline']}. "
        f"With MTP it picks D = {b['draft_len']} (speedup {b['speedup']:.2f}) and names "
        f"{mt['binding']['guideline']}: \"{mt['binding']['line']}\". The MTP module is a full-attention layer "
        f"drafting serially over the {Q['context_len'] // 1024}K-token context. The full-attention kernels are "
        f"{100 * float(share[Q_BATCH - 1]):.0f}% of the D = 0 step at batch {Q_BATCH}; "
        + (f"70% needs batch ≥ {int(b70.min())}" if b70.size else "no batch up to 2048 reaches 70%")
        + f". The KV is {gb(kv_seq)} GB per sequence per device and the recurrent-state checkpoints "
        f"{st_seq / 1e6:.0f} MB per sequence per device per verified token (fp32 state); with MTP at D = 1 the "
        f"largest batch that fits is {b_fit}"
        + (f", so batch {int(b70.min())} does not fit" if b70.size and b70.min() > b_fit else "") + ".")


BLOCKS = {"pricing": pricing, "qwen128k": qwen128k}


def render(text: str) -> str:
    for name, fn in BLOCKS.items():
        pat = re.compile(rf"(<!-- generated:{name} begin[^>]*-->\n).*?(<!-- generated:{name} end -->)", re.S)
        if not pat.search(text):
            raise SystemExit(f"{DOC}: marker pair for block '{name}' not found")
        body = fn() + "\n"
        text = pat.sub(lambda mm: mm.group(1) + body + mm.group(2), text)
    return text


def main(argv: list[str]) -> int:
    old = DOC.read_text()
    new = render(old)
    if "--check" in argv:
        if new != old:
            print(f"{DOC.relative_to(ROOT)} is stale: run python scripts/make_speculation_tables.py")
            return 1
        return 0
    DOC.write_text(new)
    print(new[new.index("<!-- generated:pricing begin"):])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

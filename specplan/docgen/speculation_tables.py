"""Regenerate the computed blocks of docs/speculation.md, docs/hardware_profiles.md and docs/cost_model.md:
`python scripts/make_speculation_tables.py`.

Every number between a `<!-- generated:NAME begin ... -->` and `<!-- generated:NAME end -->` marker in those
pages is computed here from specplan's own profiles and cost model (no number typed by hand), so the pages
cannot drift from the code: rerun this script after a change to the profiles or the cost functions.
`--check` exits 1 (and rewrites nothing) when a committed page differs from what the code gives now.

Blocks:
- `pricing`: one verify step (B sequences, q_len 1 + D) against B·(1 + D) independent single-token decodes,
  for cases that fit in memory (checked with `memory_usage` at q_len = 1 + D; a case that does not fit is an error).
- `qwen128k`: what `recommend` says about Qwen3.5-122B-A10B on B200 TP 2 at 128K (issue "Must-show 3").
- `devices` (hardware_profiles.md): the built-in profiles' spec-sheet fields, read from hardware_profiles/*.yaml.
- `fitted` (hardware_profiles.md): the efficiencies, kernel overhead and all-reduce parameters each profile carries.
- `h100_allreduce` (cost_model.md): the H100 profile's all-reduce latencies as the cost model prices them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
from specplan.core.records import record
from specplan.costs.precision import Dtypes
from specplan.model.deployment import Deployment
from specplan.speculation.spec import DraftSearch, Speculation

ROOT = Path(__file__).resolve().parents[2]  # the repository (reports read reference/ and write docs/)

from specplan.model.memory import kv_bytes_per_seq, memory_usage, state_bytes_per_seq
from specplan.costs.comm import nccl_allreduce_s
from specplan.profiles.registry import load_hardware, load_model
from specplan.speculation.acceptance_spec import parse_acceptance
from specplan.planning.recommend import recommend
from specplan.speculation.speedup import evaluate
from specplan.model.step import step_time

DOC = ROOT / "docs" / "speculation.md"
HW_DOC = ROOT / "docs" / "hardware_profiles.md"
COST_DOC = ROOT / "docs" / "cost_model.md"
HW_IDS = ["h100-sxm", "h200-sxm", "b200", "gb200", "b300", "gb300", "a100-sxm-80gb", "mi300x", "mi325x", "mi355x", "groq-lpu", "groq-3-lpu", "cpu-generic"]

# (model, hardware, tp, batch, context, dtype, kv_dtype, D): each must fit at q_len = 1 + D
PRICING_CASES = [
    ("llama-3.1-8b", "h100-sxm", 1, 8, 32768, None, None, 3),
    ("llama-3.1-8b", "h100-sxm", 1, 8, 32768, None, None, 7),
    ("llama-3.3-70b", "h100-sxm", 8, 16, 131072, None, "fp8", 7),
    ("qwen3.5-122b-a10b", "b200", 2, 64, 131072, "fp4", "fp8", 7),
]

@record
class Question:
    """A recommend call a section quotes: model, hardware, TP, weight and KV dtypes, context (tokens), batch and
    the acceptance rate of its drafter."""

    model: str
    hardware: str
    tp: int
    dtype: str
    kv_dtype: str
    context_len: int
    batch: int
    rate: str

    def deployment(self) -> Deployment:
        """The deployment it prices."""
        return Deployment(self.model, self.hardware, tp=self.tp, dtypes=Dtypes(self.dtype, self.kv_dtype))

    def recommend(self, mechanism: str) -> dict:
        """recommend at the batch with one mechanism at the rate, D up to 32."""
        return recommend(self.model, self.hardware, tp=self.tp, batch=self.batch, context_len=self.context_len,
                         dtype=self.dtype, kv_dtype=self.kv_dtype,
                         drafts=DraftSearch(mechanisms=[mechanism], acceptance={mechanism: self.rate},
                                            max_draft_len=32))

    def evaluate(self, spec: Speculation, batch=None, guidelines: bool = False):
        """evaluate at the batch (or `batch`) and context: a SpeedupGrid."""
        return evaluate(self.deployment(), spec, batch=self.batch if batch is None else batch,
                        context_len=self.context_len, guidelines=guidelines)


# Must-show 3: the recommend call the section quotes
Q = Question(model="qwen3.5-122b-a10b", hardware="b200", tp=2, dtype="fp4", kv_dtype="fp8", context_len=131072,
             batch=64, rate="0.8")


def gb(x) -> str:
    return f"{float(x) / 1e9:.1f}"


def pricing() -> str:
    """The pricing table plus the range of its ratios, as markdown."""
    lines = ["| case | D | D = 0 step | verify (ours) | B·(1+D) decodes | ratio | memory at q_len 1 + D (GB / usable GB per device) |",
             "|---|---|---|---|---|---|---|"]
    ratios = []
    for m, h, tp, b, ctx, dt, kv, d in PRICING_CASES:
        base = step_time(m, h, tp, b, 1, ctx, precision=Dtypes(dtype=dt, kv_dtype=kv))
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


def _named(guideline: str) -> str:
    """How the paragraph names a binding: a guideline id, or the marginal trade / state / memory in words."""
    return {"marginal": "no guideline (the marginal trade of D + 1)", "state": "the recurrent-state checkpoints",
            "memory": "memory", "off": "speculation off"}.get(guideline, guideline)


def qwen128k() -> str:
    """The Must-show 3 paragraph, every number from `recommend` / `evaluate`."""
    acc = parse_acceptance(Q.rate)
    ng, mt = Q.recommend("ngram"), Q.recommend("mtp")  # recommend's answers, read by key (planning's)
    bs = np.arange(1, 2049, dtype=float)
    diag = Q.evaluate(Speculation(), batch=bs, guidelines=True).guidelines  # G_dev and G2's D as recommend has them
    g_dev, tile_d = int(diag.g_dev), int(diag.attention_tile_d)
    e = Q.evaluate(Speculation("ngram", np.array([tile_d, tile_d + 1]), acc))
    step_pct = 100 * (float(e.speedup[1]) / float(e.speedup[0]) - 1)
    share = np.broadcast_to(diag.attention_share, bs.shape)
    b70 = bs[share >= 0.70]
    d1 = Q.evaluate(Speculation("mtp", 1, acc), batch=bs)
    b_fit = int(bs[np.asarray(d1.fits, bool)].max()) if np.any(d1.fits) else 0
    m = load_model(Q.model)
    kv_seq = float(kv_bytes_per_seq(m, Q.tp, Q.kv_dtype, Q.context_len))
    st_seq = state_bytes_per_seq(m, Q.tp)
    b, bn = mt["best"], ng["best"]
    return (
        f"`specplan recommend --model {Q.model} --hardware {Q.hardware} --tp {Q.tp} --dtype {Q.dtype} "
        f"--kv-dtype {Q.kv_dtype} --context {Q.context_len} --mechanisms mtp --acceptance mtp={Q.rate} "
        f"--batch {Q.batch}`: G_dev = {g_dev}, G2 start D = {tile_d}. The verify step steps up at D = {tile_d + 1} "
        f"(a second 128-row tile: {step_pct:+.0f}% speedup with a free drafter). With a drafter that is free on the "
        f"GPU (`ngram`, α = {Q.rate}) recommend picks D = {bn['draft_len']} and names {ng['binding']['guideline']}. "
        f"With MTP it picks D = {b['draft_len']} (speedup {b['speedup']:.2f}) and names "
        f"{_named(mt['binding']['guideline'])}: \"{mt['binding']['line']}\". The MTP module is a full-attention layer "
        f"drafting serially over the {Q.context_len // 1024}K-token context. The full-attention kernels are "
        f"{100 * float(share[Q.batch - 1]):.0f}% of the D = 0 step at batch {Q.batch}; "
        + (f"70% needs batch ≥ {int(b70.min())}" if b70.size else "no batch up to 2048 reaches 70%")
        + f". The KV is {gb(kv_seq)} GB per sequence per device and the recurrent-state checkpoints "
        f"{st_seq / 1e6:.0f} MB per sequence per device per verified token ({m.state_dtype} state); with MTP at D = 1 the "
        f"largest batch that fits is {b_fit}"
        + (f", so batch {int(b70.min())} does not fit" if b70.size and b70.min() > b_fit else "") + ".")


def _csv_row(h) -> str:
    mm = re.search(r"hardware_specs\.csv row (\w+)", h.sources.get("peak_flops", ""))
    return mm.group(1) if mm else "(example)" if h.kind == "cpu" else "–"


def _num(x: float) -> str:
    return f"{x:.5g}"


def devices() -> str:
    """Spec-sheet fields of every built-in profile, straight from the YAMLs."""
    cols = ("fp32", "tf32", "bf16", "fp8", "fp4", "int8")
    lines = ["| id | csv row | dense TFLOPS " + " / ".join(cols) + " | memory: bytes = GiB (GB) | bandwidth TB/s "
             "| L2 bytes = MiB (MB) | scale-up per direction, domain, topology | ridge FLOP/B |",
             "|---|---|---|---|---|---|---|---|"]
    for i in HW_IDS:
        h = load_hardware(i)
        pk = " / ".join(_num(h.peak_flops[c] / 1e12) if c in h.peak_flops else "–" for c in cols)
        if h.kind == "lpu":
            pk = ", ".join(f"{c} {_num(v / 1e12)}" for c, v in h.peak_flops.items() if c != "fp16" or "bf16" not in h.peak_flops)
        first = next(c for c in ("bf16", "fp16", "fp8", "int8") if c in h.peak_flops)
        mem = f"{h.mem_capacity_bytes:,.0f} = {h.mem_capacity_bytes / 2**30:.2f} GiB ({h.mem_capacity_bytes / 1e9:.1f} GB)"
        if h.kind == "lpu":
            mem = f"{h.mem_capacity_bytes:,.0f} SRAM per chip ({h.mem_capacity_bytes / 1e9:.2f} GB)"
        l2 = "–" if not h.l2_bytes else f"{h.l2_bytes:,.0f} = {h.l2_bytes / 2**20:.1f} MiB ({h.l2_bytes / 1e6:.1f} MB)"
        up = "–" if h.scaleup_domain <= 1 else (
            f"{h.scaleup_bandwidth_bytes_s / 1e9:.4g} GB/s, {h.scaleup_domain}, {h.scaleup_topology}")
        lines.append(f"| `{i}` | {_csv_row(h)} | {pk} | {mem} | {h.mem_bandwidth_bytes_s / 1e12:.4g} | {l2} | {up} "
                     f"| {first} {h.ridge_flops_per_byte(first):.1f} |")
    return "\n".join(lines)


def fitted() -> str:
    """The efficiency, overhead and all-reduce values every built-in profile carries (µs; fractions)."""
    lines = ["| id | kernel overhead µs | GEMM bf16: bandwidth / compute fraction | attention: bandwidth fraction, "
             "µs per CTA wave | all-reduce custom latency µs | NCCL latency at TP 2 / 4 / 8 µs "
             "(base + per peer × (TP − 1)) | all-reduce bus-bandwidth fraction custom / NCCL |",
             "|---|---|---|---|---|---|---|"]
    for i in HW_IDS:
        h = load_hardware(i)
        e, a, r = h.kernel_eff("bf16" if "bf16" in h.peak_flops else next(iter(h.peak_flops))), h.attention, h.allreduce
        head = (f"| `{i}` | {h.kernel_overhead_s * 1e6:.2f} | {e.mem_bw_fraction:.3f} / {e.compute_max_fraction:.3f} "
                f"| {a.mem_bw_fraction:.3f}, {a.cta_overhead_s * 1e6:.2f} |")
        if h.kind == "lpu" or h.scaleup_domain <= 1:
            why = "TP 1 only: layers are pipelined over chips" if h.kind == "lpu" else "scale-up domain 1"
            lines.append(f"{head} – | – ({why}; unused) | – |")
            continue
        tps = [t for t in (2, 4, 8) if t <= h.scaleup_domain]
        nccl = " / ".join(f"{float(nccl_allreduce_s(h, 0.0, t)) * 1e6:.1f}" for t in tps)
        lines.append(f"{head} {r.custom_latency_s * 1e6:.2f} | {nccl} "
                     f"({r.nccl_latency_s * 1e6:.2f} + {r.nccl_latency_per_peer_s * 1e6:.2f} × (TP − 1)) "
                     f"| {r.custom_bw_fraction:.3f} / {r.nccl_bw_fraction:.3f} |")
    return "\n".join(lines) + "\n\n" + latency_rule()


def latency_rule() -> str:
    """Which GPU profiles carry H100's measured all-reduce latencies, their own, or the schema defaults."""
    from specplan.profiles.hardware import AllReduceParams

    key = lambda r: (r.custom_latency_s, r.nccl_latency_s, r.nccl_latency_per_peer_s)  # noqa: E731
    h100, default = key(load_hardware("h100-sxm").allreduce), key(AllReduceParams())
    reuse, schema, own = [], [], []  # GPU ids with H100's latencies, the schema defaults, their own
    for i in HW_IDS:
        h = load_hardware(i)
        if h.kind != "gpu" or i == "h100-sxm":
            continue
        k = key(h.allreduce)
        (reuse if k == h100 else schema if k == default else own).append(f"`{i}`")
    def who(ids: list[str], one: str, many: str) -> str:
        return f"{', '.join(ids)} " + (one if len(ids) == 1 else many)

    parts = ["All-reduce latencies (each profile's `sources` say where they come from): `h100-sxm` carries its "
             "measured floors"]
    if reuse:
        parts.append(who(reuse, "reuses them", "reuse them"))
    if own:
        parts.append(who(own, "carries its own", "carry their own"))
    if schema:
        parts.append(who(schema, "carries", "carry") + f" the schema defaults: custom {default[0] * 1e6:.2f} µs, "
                     f"NCCL {default[1] * 1e6:.2f} + {default[2] * 1e6:.2f} · (TP − 1) µs")
    return "; ".join(parts) + "."


def h100_allreduce() -> str:
    """The H100 profile's all-reduce latencies, as the cost model prices them (zero-byte message)."""
    h = load_hardware("h100-sxm")
    r = h.allreduce
    tps = (2, 4, 8)
    nccl = " / ".join(f"{float(nccl_allreduce_s(h, 0.0, t)) * 1e6:.1f}" for t in tps)
    return (f"  H100: custom {r.custom_latency_s * 1e6:.2f} µs; NCCL {r.nccl_latency_s * 1e6:.2f} + "
            f"{r.nccl_latency_per_peer_s * 1e6:.2f} · (TP − 1) µs = {nccl} µs at TP 2 / 4 / 8; bus-bandwidth "
            f"fractions {r.custom_bw_fraction:.3f} (custom) and {r.nccl_bw_fraction:.3f} (NCCL).")


BLOCKS = {"pricing": (DOC, pricing), "qwen128k": (DOC, qwen128k), "devices": (HW_DOC, devices),
          "fitted": (HW_DOC, fitted), "h100_allreduce": (COST_DOC, h100_allreduce)}


def render(doc: Path, text: str) -> str:
    for name, (path, fn) in BLOCKS.items():
        if path != doc:
            continue
        pat = re.compile(rf"(<!-- generated:{name} begin[^>]*-->\n).*?(<!-- generated:{name} end -->)", re.S)
        if not pat.search(text):
            raise SystemExit(f"{doc}: marker pair for block '{name}' not found")
        body = fn() + "\n"
        text = pat.sub(lambda mm: mm.group(1) + body + mm.group(2), text)
    return text


def main(argv: list[str]) -> int:
    stale = []
    for doc in dict.fromkeys(path for path, _ in BLOCKS.values()):
        old = doc.read_text()
        new = render(doc, old)
        if new != old:
            stale.append(str(doc.relative_to(ROOT)))
            if "--check" not in argv:
                doc.write_text(new)
    if "--check" in argv and stale:
        print(f"stale: {', '.join(stale)}: run python scripts/make_speculation_tables.py")
        return 1
    print("updated: " + (", ".join(stale) if stale else "nothing (already current)"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

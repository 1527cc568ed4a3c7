"""Draft length that changes with load: the best D per concurrency band, as the engines take it.

Each band [lo, hi] of concurrency is priced at its own steady state (aggregated serving at the band's geometric-mean
concurrency, every D at once) and gets the D with the most tokens/s/GPU among those that fit. The schedule is given
in the two forms engines accept:
- vLLM `speculative_config.num_speculative_tokens_per_batch_size`: inclusive ranges [(start, end, K), ...] starting
  at 1, sorted, non-overlapping (vllm 0.34.0 vllm/v1/spec_decode/dynamic/utils.py
  validate_and_normalize_dynamic_sd_schedule);
- TensorRT-LLM `draft_len_schedule`: {batch_size_threshold: draft_len} (batch >= threshold uses draft_len), which must
  hold {1: max_draft_len} (tensorrt_llm/llmapi/llm_args.py DecodingBaseConfig.draft_len_schedule): when the best D
  at the lowest band is not the largest, no TensorRT-LLM schedule is given and a note says why.
Both engines key the schedule on the running batch; here the bands are concurrencies (the running batch is the
concurrency less the requests waiting for their first token), stated in the result.
"""

from __future__ import annotations

import numpy as np

from dataclasses import dataclass

from specplan.core.errors import SpecplanError
from specplan.core.records import Record, record
from specplan.serving.api import serve
from specplan.serving.workload import Workload
from specplan.speculation.spec import DraftSearch

DEFAULT_EDGES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@record
class DSchedule(Record):
    """The best D per concurrency band: bands [(lo, hi, concurrency priced, D, tokens/s/GPU, speedup over D = 0)],
    each band's (TPOT, TTFT) in ms at its D, the schedule in vLLM's [(lo, hi, D)] and TensorRT-LLM's {hi: D} forms
    (None when it cannot be expressed), notes; `at_best`: a recommendation's point priced with its band's D."""

    bands: list
    band_tpot_ttft_ms: list
    vllm: list
    trtllm: dict | None
    notes: list
    at_best: object = None

    OPTIONAL = ("at_best",)


def bands_from_edges(edges) -> list[tuple[int, int]]:
    """Inclusive concurrency bands [e_i, e_{i+1} - 1] from increasing edges, the last band [e_n, e_n]."""
    e = [int(x) for x in edges]
    if not e or e[0] != 1 or any(b <= a for a, b in zip(e, e[1:])):
        raise SpecplanError(f"D schedule bands: edges must start at 1 and increase, got {e}")
    return [(a, b - 1) for a, b in zip(e, e[1:])] + [(e[-1], e[-1])]


def d_schedule(model, hardware, isl: int, osl: int, *, drafts: DraftSearch, edges=DEFAULT_EDGES, tp: int = 1,
               engine=None, **kw) -> DSchedule:
    """Best D per concurrency band (each priced at its geometric-mean concurrency) and the schedule in vLLM's and
    TensorRT-LLM's forms, for the one mechanism of `drafts` (its acceptance, D up to its largest). Keys: bands
    [(lo, hi, concurrency priced, D, tokens/s/GPU, speedup over D = 0)], band_tpot_ttft_ms [(TPOT, TTFT) of each
    band at its D], vllm, trtllm (None when it cannot be expressed), notes."""
    (mechanism,) = drafts.mechanisms
    acceptance, max_draft_len = (drafts.acceptance or {}).get(mechanism), drafts.max_draft_len
    bands = bands_from_edges(edges)
    conc = np.array([np.sqrt(lo * hi) for lo, hi in bands])
    d = np.arange(0, int(max_draft_len) + 1, dtype=float)
    wl = Workload(isl=isl, osl=osl, concurrency=conc[:, None])
    r = serve(model, hardware, wl, tp=tp, engine=engine, mechanism=mechanism, draft_len=d[None, :],
                   acceptance=acceptance, **kw)
    base = serve(model, hardware, Workload(isl=isl, osl=osl, concurrency=conc), tp=tp, engine=engine, **kw)
    tps = np.where(np.asarray(r.fits) & np.asarray(r.stable), np.asarray(r.tokens_per_s_per_gpu), -np.inf)
    best = np.argmax(tps, axis=1)
    rows = [(lo, hi, float(c), int(d[j]), float(tps[i, j]), float(tps[i, j] / base.tokens_per_s_per_gpu[i]))
            for i, ((lo, hi), c, j) in enumerate(zip(bands, conc, best))]
    i = np.arange(len(bands))
    tpot, ttft = (1e3 * np.asarray(r[k], dtype=float)[i, best] for k in ("tpot_s", "ttft_s"))
    latency = [[float(a), float(b)] for a, b in zip(tpot, ttft)]  # each band's TPOT and TTFT at its D, ms
    vllm = []
    for lo, hi, _, k, _, _ in rows:  # merge neighbouring bands with the same D
        if vllm and vllm[-1][2] == k:
            vllm[-1] = (vllm[-1][0], hi, k)
        else:
            vllm.append((lo, hi, k))
    notes = ["bands are client concurrencies; vLLM and TensorRT-LLM key the schedule on the running batch"]
    top = max(k for _, _, k in vllm)
    trt = None
    if vllm[0][2] == top:  # keys are upper batch limits; speculation stops above the last (llm_args.py @ 0004396)
        trt = {hi: k for _, hi, k in vllm}
    else:
        notes.append(f"no TensorRT-LLM draft_len_schedule: its smallest key must carry max_draft_len, the largest D, "
                     f"but the best D at the smallest batches is {vllm[0][2]} and {top} further up")
    return DSchedule(rows, latency, vllm, trt, notes)


def parse_schedule(text: str, flag: str = "--d-schedule") -> tuple[tuple[int, int, int], ...]:
    """'LO-HI:K,LO-HI:K,...' (batch sizes, inclusive; vLLM's num_speculative_tokens_per_batch_size) -> ranges,
    checked as vLLM checks them (vllm/v1/spec_decode/dynamic/utils.py validate_and_normalize_dynamic_sd_schedule:
    positive, start <= end, K >= 0, sorted without overlap, the first starting at 1); one line naming the flag."""
    out = []
    for part in str(text).split(","):
        rng, _, k = part.strip().partition(":")
        lo, _, hi = rng.partition("-")
        try:
            lo_i, hi_i, k_i = int(lo), int(hi or lo), int(k)
        except ValueError:
            raise SpecplanError(f"{flag}: expected LO-HI:K,... (batch sizes and draft lengths), got '{text}'") from None
        if lo_i <= 0 or hi_i < lo_i or k_i < 0 or k_i > 64:
            raise SpecplanError(f"{flag}: each range needs 1 <= LO <= HI and 0 <= K <= 64, got '{part.strip()}'")
        out.append((lo_i, hi_i, k_i))
    out.sort()
    if out[0][0] != 1 or any(b[0] <= a[1] for a, b in zip(out, out[1:])):
        raise SpecplanError(f"{flag}: ranges must start at batch 1 and not overlap, got '{text}'")
    return tuple(out)


def dense_schedule(ranges, max_batch: int) -> np.ndarray:
    """K per batch size 0 ... max_batch from inclusive (lo, hi, K) ranges, as vLLM expands them
    (build_dynamic_sd_schedule_lookup): a gap takes the K before it, batches past the last range the last K;
    index 0 (no request) takes the first K."""
    k = np.zeros(int(max_batch) + 1, dtype=np.int64)
    last = ranges[0][2]
    nxt = 1
    for lo, hi, kk in sorted(ranges):
        k[nxt:min(lo, max_batch + 1)] = last
        k[max(lo, nxt):min(hi, max_batch) + 1] = kk
        nxt, last = max(nxt, hi + 1), kk
    k[nxt:] = last
    k[0] = ranges[0][2]
    return k

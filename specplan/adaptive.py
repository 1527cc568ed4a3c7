"""Adaptive speculation policies simulated over a time-varying workload.

A workload trace is a list of segments (acceptance rate α, batch, iterations). Iteration times for every
(batch, D) come from one vectorized `evaluate` call; the simulation then steps through iterations (a loop over
time, not over configurations), drawing each sequence's accepted drafts from a truncated geometric law.

Policies (the engine picks one D per iteration for the whole batch):
- `static:D`   fixed draft length.
- `ema`        SGLang-style: an exponential moving average of accepted draft tokens per verify, switching
               among pre-captured tiers (default 1, 3, 7): the smallest tier above the EMA + 1 (our reading
               of SGLang's rule: keep one token of headroom so that a rising acceptance is seen).
- `model`      AdaSpec-style: estimate α from observed acceptance (EMA of the per-position MLE) and choose
               the D that maximizes expected tokens/s with the performance model, subject to an optional
               TPOT SLO. While it runs at D = 0 it learns nothing, so every `probe_every` iterations it
               drafts one token to re-measure α (otherwise a low estimate would switch speculation off for good).
- `oracle`     knows the true α of the iteration and picks the best D (an upper bound).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specplan.errors import SpecplanError
from specplan.speculation.acceptance import al_from_rate, check_rate


@dataclass(frozen=True)
class Segment:
    """A stretch of `iterations` target iterations at acceptance rate `alpha` with `batch` sequences."""

    alpha: float
    batch: int
    iterations: int


def parse_trace(text: str, default_batch: int = 1) -> list[Segment]:
    """Parse 'alpha[@batch]xITER,...' e.g. '0.9@8x300,0.5@32x300' into segments."""
    segs = []
    for i, part in enumerate(p.strip() for p in text.split(",") if p.strip()):
        try:
            head, iters = part.split("x")
            alpha, _, batch = head.partition("@")
            seg = Segment(float(alpha), int(batch) if batch else default_batch, int(iters))
        except ValueError:
            raise SpecplanError(f"trace[{i}]: expected 'alpha[@batch]xITERATIONS', got '{part}'") from None
        check_rate(seg.alpha, where=f"trace[{i}].alpha")
        if seg.batch < 1 or seg.iterations < 1:
            raise SpecplanError(f"trace[{i}]: batch and iterations must be >= 1, got '{part}'")
        segs.append(seg)
    if not segs:
        raise SpecplanError("trace: no segments")
    return segs


def parse_policy(text: str) -> tuple[str, int | None]:
    """'static:3' -> ('static', 3); 'ema', 'model', 'oracle' -> (name, None)."""
    name, _, arg = text.partition(":")
    if name == "static":
        if not arg.isdigit():
            raise SpecplanError(f"policy: static needs a draft length, e.g. static:3, got '{text}'")
        return name, int(arg)
    if name in ("ema", "model", "oracle") and not arg:
        return name, None
    raise SpecplanError(f"policy: unknown '{text}' (static:D, ema, model, oracle)")


def best_d(alpha: float, iter_s_by_d: np.ndarray, slo_tpot_s: float | None = None) -> int:
    """D maximizing AL(α, D) / T_iter(D); with an SLO, only D whose TPOT = T_iter / AL meets it (if any)."""
    d = np.arange(len(iter_s_by_d))
    al = al_from_rate(alpha, d)
    rate = al / iter_s_by_d
    if slo_tpot_s is not None:
        ok = iter_s_by_d / al <= slo_tpot_s
        if np.any(ok):
            rate = np.where(ok, rate, -np.inf)
    return int(np.argmax(rate))


def draw_accepted(rng: np.random.Generator, alpha: float, d: int, n: int) -> np.ndarray:
    """Accepted draft tokens of n sequences: truncated geometric, P(k) = α^k (1 − α) for k < D, α^D at D."""
    if d == 0:
        return np.zeros(n, dtype=int)
    if alpha >= 1.0:
        return np.full(n, d)
    if alpha <= 0.0:
        return np.zeros(n, dtype=int)
    return np.minimum(rng.geometric(1.0 - alpha, n) - 1, d)


def simulate(
    trace: list[Segment],
    iter_s: dict[int, np.ndarray],
    policy: str,
    tiers: tuple[int, ...] = (1, 3, 7),
    ema_beta: float = 0.8,
    slo_tpot_s: float | None = None,
    seed: int = 0,
    probe_every: int = 16,
) -> dict:
    """Run one policy over the trace; `iter_s[batch][D]` are iteration seconds (D = 0 is no speculation).

    Returns tokens per sequence, seconds, tokens/s/user, mean D and the D chosen at every iteration.
    """
    name, static_d = parse_policy(policy)
    rng = np.random.default_rng(seed)
    max_d = len(next(iter(iter_s.values()))) - 1
    if static_d is not None and static_d > max_d:
        raise SpecplanError(f"policy: static:{static_d} exceeds the largest D evaluated ({max_d})")
    tiers = tuple(t for t in tiers if t <= max_d) or (max_d,)
    ema_acc = float(tiers[-1])  # optimistic start
    alpha_hat = 0.5
    since_seen = 0
    time_s = tokens = 0.0
    chosen = []
    for seg in trace:
        costs = iter_s[seg.batch]
        for _ in range(seg.iterations):
            if name == "static":
                d = static_d
            elif name == "ema":
                d = next((t for t in tiers if t >= ema_acc + 1.0), tiers[-1])
            elif name == "model":
                d = best_d(alpha_hat, costs, slo_tpot_s)
                if d == 0 and since_seen >= probe_every:
                    d = 1  # probe: one drafted token re-measures α
            else:
                d = best_d(seg.alpha, costs, slo_tpot_s)
            acc = draw_accepted(rng, seg.alpha, d, seg.batch)
            tokens += float(np.mean(acc + 1))
            time_s += float(costs[d])
            chosen.append(d)
            since_seen = 0 if d > 0 else since_seen + 1
            if d > 0:
                ema_acc = ema_beta * ema_acc + (1 - ema_beta) * float(np.mean(acc))
                trials = float(np.sum(np.minimum(acc + 1, d)))  # positions tested
                rejects = float(np.sum(acc < d))
                mle = 1.0 - rejects / trials if trials else alpha_hat
                alpha_hat = ema_beta * alpha_hat + (1 - ema_beta) * min(max(mle, 0.0), 0.999)
    chosen = np.asarray(chosen)
    return {
        "policy": policy,
        "tokens_per_seq": tokens,
        "time_s": time_s,
        "tokens_per_s_per_user": tokens / time_s,
        "mean_d": float(chosen.mean()),
        "chosen_d": chosen,
    }


def iteration_table(model, hardware, trace: list[Segment], max_d: int, mechanism: str, **kw) -> dict[int, np.ndarray]:
    """Iteration seconds for every batch in the trace and D = 0..max_d, from one vectorized evaluate call."""
    from specplan.speculation.acceptance import Acceptance
    from specplan.speculation.speedup import evaluate

    batches = np.array(sorted({s.batch for s in trace}))
    d = np.arange(max_d + 1)
    r = evaluate(model, hardware, batch=batches[:, None], draft_len=d[None, :], mechanism=mechanism,
                 acceptance=Acceptance.from_rate(0.5), **kw)
    iter_s = np.where(d[None, :] == 0, r["baseline_step_s"], r["iter_s"])
    return {int(b): iter_s[i] for i, b in enumerate(batches)}


def compare_policies(model, hardware, trace, policies, max_d: int = 8, mechanism: str = "eagle3",
                     tiers=(1, 3, 7), slo_tpot_s=None, seed: int = 0, **kw) -> list[dict]:
    """Simulate each policy over the same trace and random draws; speedup is against no speculation."""
    table = iteration_table(model, hardware, trace, max_d, mechanism, **kw)
    base = simulate(trace, table, "static:0", seed=seed)
    out = []
    for p in policies:
        r = simulate(trace, table, p, tiers, slo_tpot_s=slo_tpot_s, seed=seed)
        r["speedup"] = r["tokens_per_s_per_user"] / base["tokens_per_s_per_user"]
        out.append(r)
    return out

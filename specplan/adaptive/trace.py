"""The `--trace` shorthand: segments of (α, batch, iterations) at a fixed context, load and acceptance given.

The schedule is exogenous (iteration t has batch B_t and rate α_t whatever the policy does), which makes two
exact bounds possible (metric: tokens/s/user = Σ_t tok_t / Σ_t T_t, tok_t the mean tokens per sequence):
- `oracle` knows α_t of every iteration (not the draws) and maximizes the *expected* metric
  Σ_t AL(α_t, D_t) / Σ_t T_t(D_t). Choosing each iteration's best AL/T is not optimal for a ratio of sums;
  Dinkelbach's method is: with λ the optimum, D_t = argmax AL − λ T, iterated to a fixed point. Any policy,
  adaptive or not, has Σ_t (E[AL_t(D_t)] − λ* T_t(D_t)) <= 0, so its expected metric is <= λ* on every seed.
- `clairvoyant` knows the draws too: the same method on the realized tokens bounds every policy's realized
  tokens/s/user on that seed (draws are per (iteration, sequence, draft position): common random numbers).
Both price steps without eager launches or SGLang's draft-extend, which only add time to other policies.
"""

from __future__ import annotations

import numpy as np

from specplan.core.records import record
from specplan.adaptive.costs import GraphSet
from specplan.adaptive.records import TraceRow, finite_or_none
from specplan.adaptive.policies import Policy, StepView
from specplan.adaptive.workload import Segment
from specplan.speculation.acceptance import al_from_rate


def trace_costs(model, hardware, segs: list[Segment], d_max: int, context_len: int, mechanism: str,
                engine="sglang", *, tp: int = 1, dtypes=None, draft=None):
    """(T[b][D] step seconds per trace batch (D = 0: plain decode), one draft forward per batch, devices, ρ,
    fits[b][D] in memory); the engine's speculative host costs via `evaluate`, its host time and graph launches
    per step added; the target on `tp` devices at `dtypes` (None: the checkpoint's), the draft placed by `draft`
    (speculation/spec.DraftPlacement; None: the mechanism's own)."""
    from specplan.profiles.registry import load_engine
    from specplan.speculation.acceptance import Acceptance
    from specplan.speculation.serving import ServingProfile
    from specplan.costs.precision import Dtypes
    from specplan.model.deployment import Deployment
    from specplan.model.step import step_time
    from specplan.speculation.spec import DraftPlacement, Speculation
    from specplan.speculation.speedup import evaluate

    eng = load_engine(engine)
    srv = ServingProfile(eng.spec_iteration_overhead_s, eng.spec_draft_step_overhead_s, f"engine {eng.id}")
    bs = np.array(sorted({s.batch for s in segs}), dtype=float)
    d = np.arange(d_max + 1, dtype=float)
    r = evaluate(Deployment(model, hardware, tp, dtypes=dtypes or Dtypes(), serving=srv),
                 Speculation(mechanism, d[None, :], Acceptance.from_rate(0.5), draft or DraftPlacement()),
                 batch=bs[:, None], context_len=context_len)
    kern = step_time(model, hardware, tp, 1, 1, context_len, precision=r.precision).kernels
    rho0 = float(np.asarray(r.rho).flat[0])
    t = np.where(d[None, :] == 0, r.baseline_step_s, r.iter_s)
    t = t + eng.host_step_s + kern * (1.0 + rho0 * d[None, :]) * eng.graph_launch_s
    d1 = r.draft_s[:, min(1, d_max)]
    dev = float(np.asarray(r.target_devices).flat[0])
    rho = float(np.asarray(r.rho).flat[0])
    fits = {int(b): np.asarray(r.fits[i], bool) for i, b in enumerate(bs)}
    return ({int(b): t[i] for i, b in enumerate(bs)}, {int(b): float(d1[i]) for i, b in enumerate(bs)}, dev, rho,
            fits)


def runs(segs: list[Segment], d_max: int, seed: int, relax: float = 0.0) -> list[np.ndarray]:
    """Per segment, the leading accepted run (<= d_max) of each (iteration, sequence): common random numbers."""
    rng = np.random.default_rng([seed, 6])
    out = []
    for s in segs:
        u = rng.random((s.iterations, s.batch, max(d_max, 1)), dtype=np.float32)
        thr = s.alpha + relax * (1.0 - s.alpha)
        out.append(np.cumprod(u < thr, axis=2).sum(axis=2).astype(np.int16) if d_max else
                   np.zeros((s.iterations, s.batch), np.int16))
    return out


def dinkelbach(gain: np.ndarray, cost: np.ndarray, weight: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """max over per-row choices D_t of Σ w_t gain[t, D_t] / Σ w_t cost[t, D_t]: (choices, optimum)."""
    w = np.ones(gain.shape[0]) if weight is None else weight
    rows = np.arange(gain.shape[0])
    d = np.zeros(gain.shape[0], dtype=int)
    lam = float(np.sum(w * gain[rows, d]) / np.sum(w * cost[rows, d]))
    for _ in range(100):
        d = np.argmax(gain - lam * cost, axis=1)
        new = float(np.sum(w * gain[rows, d]) / np.sum(w * cost[rows, d]))
        if new <= lam * (1 + 1e-12):
            return d, max(new, lam)
        lam = new
    return d, lam


@record
class TraceCosts:
    """What a trace's iterations cost, priced once (trace_costs): seconds per (batch, D) (`table`), the first
    draft step's (`draft1`), the eager launch seconds per D, the devices per instance, and which D fit in memory
    per batch (None: all)."""

    table: dict
    draft1: dict
    eager: np.ndarray
    devices: float = 1.0
    fits: dict | None = None


def simulate_trace(segs: list[Segment], costs: TraceCosts, policy: Policy | str, graphs: GraphSet, d_max: int,
                   seed: int = 0, slo_tpot_s: float | None = None) -> TraceRow:
    """Run one policy (or 'oracle' / 'clairvoyant') over the trace; realized and expected tokens/s/user.
    Adaptive policies and the bounds pick only D that fit in memory (`costs.fits`; when none fits, any D); a fixed
    D that does not fit still runs and the row says `fits: false`."""
    table, draft1, eager, devices, fits = costs.table, costs.draft1, costs.eager, costs.devices, costs.fits
    fit = {s.batch: (fits[s.batch] if fits is not None and fits[s.batch].any() else np.ones(d_max + 1, bool))
           for s in segs}
    rel = getattr(policy, "relax", 0.0)
    strict = runs(segs, d_max, seed)
    loose = runs(segs, d_max, seed, rel) if rel > 0 else strict
    al_tab = {s.alpha: al_from_rate(s.alpha, np.arange(d_max + 1)) for s in segs}
    rng = np.random.default_rng([seed, 7])
    plan = None
    if isinstance(policy, str):  # the bounds: per-iteration choices from Dinkelbach's method
        cost = np.concatenate([np.tile(table[s.batch], (s.iterations, 1)) for s in segs])
        if policy == "oracle":
            gain = np.concatenate([np.tile(al_tab[s.alpha], (s.iterations, 1)) for s in segs])
        else:
            gain = np.concatenate([np.minimum(r[:, :, None], np.arange(d_max + 1)).mean(axis=1) + 1.0
                                   for r in strict])
        ok = np.concatenate([np.tile(fit[s.batch], (s.iterations, 1)) for s in segs])
        plan, _ = dinkelbach(np.where(ok, gain, -np.inf), cost)
    d_seq, tok, exp_tok, time_s, batch = [], [], [], [], []
    i = 0
    lossy = 0.0
    all_fit = True
    for s, r_s, l_s in zip(segs, strict, loose):
        cost = table[s.batch]
        has = np.array([graphs.has(x, s.batch) for x in range(d_max + 1)])
        allowed = has & fit[s.batch] if (has & fit[s.batch]).any() else (fit[s.batch] if has.any() else has)
        alpha = np.full(s.batch, s.alpha)
        for it in range(s.iterations):
            step = cost + np.where(has, 0.0, eager)
            if plan is not None:
                d, step = int(plan[i]), cost
            else:
                if policy.draft_extend_at_zero:
                    step = step.copy()
                    step[0] += draft1[s.batch]
                view = StepView(s.batch, step, alpha, (), allowed if allowed.any() else fit[s.batch], slo_tpot_s,
                                rng)
                d = int(policy.choose(view))
            acc = np.minimum(l_s[it], d).astype(np.int64)
            d_run = int(min(d, acc.max() + 1)) if (plan is None and policy.lossy and d) else d
            if plan is None:
                policy.observe(acc, d, s.batch)
            lossy += float(np.sum(acc - np.minimum(r_s[it], d)))
            all_fit = all_fit and bool(fits is None or fits[s.batch][d])
            d_seq.append(d)
            tok.append(float(acc.mean()) + 1.0)
            exp_tok.append(float(al_tab[s.alpha][d]))
            time_s.append(float(step[d_run]))
            batch.append(s.batch)
            i += 1
    d_seq, tok, exp_tok, time_s, batch = map(np.asarray, (d_seq, tok, exp_tok, time_s, batch))
    total = float(time_s.sum())
    tpot = time_s / tok
    name = policy if isinstance(policy, str) else policy.name
    lossy_policy = bool(getattr(policy, "lossy", False))
    return finite_or_none(TraceRow(
        policy=name, lossy=lossy_policy, bound=isinstance(policy, str),
        tokens_per_s_per_user=float(tok.sum()) / total,
        expected_tokens_per_s_per_user=float(exp_tok.sum()) / total,
        tokens_per_s_per_gpu=float((batch * tok).sum()) / total / devices,
        tpot_p50_ms=1e3 * float(np.percentile(tpot, 50)), tpot_p90_ms=1e3 * float(np.percentile(tpot, 90)),
        tpot_p99_ms=1e3 * float(np.percentile(tpot, 99)), ttft_p50_ms=None,
        slo_attainment=None if slo_tpot_s is None else float(np.mean(tpot <= slo_tpot_s)),
        mean_draft_len=float(d_seq.mean()), time_s=total, fits=all_fit, chosen_d=d_seq,
        relaxed_token_fraction=lossy / float((batch * tok).sum()) if lossy_policy else None))

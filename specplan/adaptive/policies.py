"""Draft-length policies: one D per step for the whole decode batch (as SGLang and vLLM run it).

- `fixed:D`       always D (`static:D` is accepted as the old name).
- `sglang[:CFG]`  SGLang 0.5.23's adaptive rule (sglang_policy.py), optionally its JSON config file.
- `model[:acc=S/time=E/slo=0]`  AdaSpec-style: predict each in-flight request's acceptance (its true α plus
                  a N(0, S) error, default S = 0.05, as a draft-confidence estimate would give) and the step time
                  from the performance model (times 1 + E), then pick D maximizing the step's expected tokens/s;
                  with a TPOT target (unless slo=0), first maximize the number of requests whose predicted
                  per-token time T(D)/AL_i(D) meets it, then tokens/s.
                  `model:acc=0` is this rule with the true acceptance law and step times (no prediction error);
                  it is not a bound at request level (its choices change which requests share later batches).
- `oracle`        not a policy that runs: a bound. At request level the per-step best D with known acceptance
                  (the draws), per request, at the least step cost (bounds.py; the same bound as `clairvoyant`);
                  over trace segments Dinkelbach's optimum of the expected tokens/s/user (trace.py).
- `adasd[:max=D/relax=R]`  AdaSD-style lossy decoding (reported separately): each sequence drafts until the first
                  token its (relaxed) test rejects — an ideal entropy stop —, at most D; the batch drafts until its
                  last sequence stops; a draft the exact rule rejects is accepted with probability R (the
                  Jensen–Shannon threshold), i.e. α' = α + R (1 − α).
- `clairvoyant`   not a policy that runs: the bound of every lossless policy's realized metrics (bounds.py, trace.py).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import numpy as np

from specplan.core.records import record
from specplan.core.errors import SpecplanError
from specplan.speculation.acceptance import al_from_per_position

MODEL_ACC_ERR = 0.05  # default std of the model policy's α prediction (a draft-confidence estimate is not exact)
NAMES = ("fixed", "sglang", "model", "oracle", "adasd", "clairvoyant")
BOUNDS = ("oracle", "clairvoyant")  # computed, not simulated


@dataclass
class StepView:
    """What a policy may see before a step: batch, step seconds per D, acceptance of the in-flight requests."""

    batch: int
    step_s: np.ndarray  # seconds of this step for D = 0..d_max (prefill and eager launches included)
    alpha: np.ndarray | None  # true current α of each in-flight request (None with per-position acceptance)
    per_position: tuple[float, ...]
    allowed: np.ndarray  # draft lengths with a captured graph (boolean over D)
    slo_tpot_s: float | None
    rng: np.random.Generator
    slo_step_s: np.ndarray | None = None  # step seconds per D for the TPOT test (decode + mean prefill share)


def expected_al(alpha: np.ndarray | None, per_position: tuple, d_max: int) -> np.ndarray:
    """AL_i(D) for each request i and D = 0..d_max: (1 − α^(D+1)) / (1 − α), or the per-position sum."""
    d = np.arange(d_max + 1)
    if alpha is None:
        return al_from_per_position(per_position, d)[None, :]
    return np.cumsum(alpha[:, None] ** d[None, :], axis=1)  # 1 + α + … + α^D, exact at α = 1 too


def slo_choice(al: np.ndarray, step_s: np.ndarray, allowed: np.ndarray, slo_tpot_s: float | None,
               slo_step_s: np.ndarray | None = None) -> int:
    """D maximizing Σ_i AL_i(D) / T(D); with a TPOT target, first the number of requests i whose per-token time
    at this D, T'(D) / AL_i(D), meets it (T' = decode step + mean prefill per step: the rate the request would
    see if D were kept), then tokens/s."""
    rate = al.sum(axis=0) / step_s
    score = np.where(allowed, rate, -np.inf)
    if slo_tpot_s is not None:
        t = step_s if slo_step_s is None else slo_step_s
        meet = (t[None, :] / al <= slo_tpot_s).sum(axis=0).astype(float)
        meet = np.where(allowed, meet, -1.0)
        score = np.where(meet == meet.max(), score, -np.inf)
    return int(np.argmax(score))


class Policy:
    """A policy picks D before each step and sees the accepted drafts after it."""

    name = "policy"
    speculates = True  # a policy that never drafts (fixed:0) is a server launched without speculation
    lossy = False
    draft_extend_at_zero = False  # SGLang still runs the draft's draft-extend at D = 0
    relax = 0.0

    def choose(self, view: StepView) -> int:
        raise NotImplementedError

    def observe(self, accepted: np.ndarray, d: int, batch: int) -> None:
        """Accepted draft tokens of each request in the last step (default: ignored)."""

    def graph_ds(self, d_max: int) -> list[int] | None:
        """Draft lengths to capture graphs for (None: every D the user allows)."""
        return None


class Fixed(Policy):
    def __init__(self, d: int, text: str):
        self.d, self.name = d, text
        self.speculates = d > 0

    def choose(self, view: StepView) -> int:
        return self.d

    def graph_ds(self, d_max: int) -> list[int]:
        return [self.d]


class SGLang(Policy):
    draft_extend_at_zero = True

    def __init__(self, text: str, cfg_path: str | None, initial_steps: int | None, cuda_graph_bs: list[int]):
        from specplan.adaptive.sglang_policy import AdaptiveSpeculativeParams

        self.name = text
        self.params = AdaptiveSpeculativeParams(initial_steps, cfg_path, cuda_graph_bs)

    def choose(self, view: StepView) -> int:
        return self.params.get_steps_for_batch(view.batch)

    def observe(self, accepted: np.ndarray, d: int, batch: int) -> None:
        self.params.on_verify_complete(accepted, batch)

    def graph_ds(self, d_max: int) -> list[int]:
        return sorted({s for v in self.params.slot_steps.values() for s in v})


class ModelBased(Policy):
    def __init__(self, text: str, acc_err: float = 0.0, time_err: float = 0.0, use_slo: bool = True):
        self.name, self.acc_err, self.time_err, self.use_slo = text, acc_err, time_err, use_slo

    def choose(self, view: StepView) -> int:
        a = view.alpha
        if a is not None and self.acc_err > 0:
            a = np.clip(a + view.rng.normal(0.0, self.acc_err, a.shape), 0.0, 1.0)
        al = expected_al(a, view.per_position, view.step_s.size - 1)
        if a is None:
            al = np.repeat(al, view.batch, axis=0)
        slo_t = None if view.slo_step_s is None else view.slo_step_s * (1.0 + self.time_err)
        return slo_choice(al, view.step_s * (1.0 + self.time_err), view.allowed,
                          view.slo_tpot_s if self.use_slo else None, slo_t)


class AdaSD(Policy):
    lossy = True

    def __init__(self, text: str, d: int, relax: float):
        self.name, self.d, self.relax = text, d, relax

    def choose(self, view: StepView) -> int:
        return self.d

    def graph_ds(self, d_max: int) -> list[int]:
        return list(range(self.d + 1))


@record
class ModelArgs:
    """`model:acc=S/time=E/slo=0`: std of the α prediction, relative step-time error, whether to aim at the SLO."""

    acc: float = MODEL_ACC_ERR
    time: float = 0.0
    slo: float = 1.0


@record
class AdaSDArgs:
    """`adasd:max=D/relax=R`: the most drafts per step and the relaxed test's R."""

    max: float = 7.0
    relax: float = 0.3


def _kv(text: str, arg: str, defaults):
    """The policy's `k=v/k=v` arguments over `defaults` (ModelArgs or AdaSDArgs), every value a number."""
    names = [f.name for f in fields(defaults)]
    given = {}
    for part in (p for p in arg.split("/") if p):
        k, eq, v = part.partition("=")
        if not eq or k not in names:
            raise SpecplanError(f"policy '{text}': expected {'/'.join(f'{x}=V' for x in names)}, got '{part}'")
        try:
            given[k] = float(v)
        except ValueError:
            raise SpecplanError(f"policy '{text}': {k} must be a number, got '{v}'") from None
    return replace(defaults, **given)


def make_policy(text: str, d_max: int, *, sglang_config: str | None = None, sglang_initial: int | None = None,
                cuda_graph_bs: list[int] | None = None) -> Policy:
    """A policy from its name ('fixed:3', 'sglang', 'sglang:cfg.json', 'model:acc=0.05', 'adasd')."""
    name, _, arg = text.partition(":")
    if name in ("fixed", "static"):
        if not arg.isdigit():
            raise SpecplanError(f"policy: fixed needs a draft length, e.g. fixed:3, got '{text}'")
        if int(arg) > d_max:
            raise SpecplanError(f"policy '{text}': D exceeds --max-draft-len {d_max}")
        return Fixed(int(arg), f"fixed:{int(arg)}")
    if name == "sglang":
        return SGLang(text, arg or sglang_config, sglang_initial, cuda_graph_bs or [])
    if name == "model":
        kv = _kv(text, arg, ModelArgs())
        if kv.acc < 0 or kv.time <= -1 or kv.slo not in (0.0, 1.0):
            raise SpecplanError(f"policy '{text}': acc must be >= 0, time > -1, slo 0 or 1")
        return ModelBased(text, kv.acc, kv.time, bool(kv.slo))
    if name in BOUNDS:
        raise SpecplanError(f"policy '{text}': {name} is a bound, not a policy to run (no arguments)")
    if name == "adasd":
        kv = _kv(text, arg, AdaSDArgs(max=float(min(7, d_max))))
        if not (0 <= kv.relax <= 1) or kv.max != int(kv.max) or not (1 <= kv.max <= d_max):
            raise SpecplanError(f"policy '{text}': relax must be in [0, 1] and max an integer 1..{d_max}")
        return AdaSD(text, int(kv.max), kv.relax)
    raise SpecplanError(f"policy: unknown '{text}' (fixed:D, sglang[:CONFIG.json], model[:acc=S/time=E], oracle, "
                        f"adasd[:max=D/relax=R], clairvoyant)")

"""Engine costs a roofline cannot see: exactly two named parameters of a serving profile.

1. `iteration_overhead_s`: host work of one *speculative* iteration beyond a plain decode step — rejection
   sampling, draft-token bookkeeping, building the verify metadata (tree/causal masks, slot mappings), the extra
   scheduler pass. Added to T_iter when D > 0; never to the D = 0 baseline (whose engine costs cancel in the
   speedup ratio because the measured baseline already includes them).
2. `draft_step_overhead_s`: host work per *serial* draft step — launching and synchronizing one draft forward
   (the Python loop around the drafter, sampling of its logits). Multiplied by the number of serial draft steps
   of the mechanism (D for EAGLE-3/MTP/external/self, 1 for DFlash/Medusa, 0 for n-gram).

Defaults are 0 (pure roofline). The values now live in the engine profiles (engine_profiles/*.yaml,
`spec_iteration_overhead_s`, `spec_draft_step_overhead_s`); `--serving NAME` is kept for one release as an alias:
`roofline` = the `ideal` engine, `vllm-v1-eagle-2025` = the `vllm-0.10` engine's two values (fitted in
docs/eagle3_llama8b_validation.md by scripts/eagle3_sweep_report.py), and any engine id or YAML path works.
"""

from __future__ import annotations

from specplan.core.records import record
from specplan.core.errors import SpecplanError


@record
class ServingProfile:
    """Two engine parameters (seconds) with the source of their values."""

    iteration_overhead_s: float = 0.0
    draft_step_overhead_s: float = 0.0
    source: str = "pure roofline (no engine overheads)"

    def __post_init__(self):
        for name in ("iteration_overhead_s", "draft_step_overhead_s"):
            v = getattr(self, name)
            if not (v >= 0):
                raise SpecplanError(f"serving profile: {name} must be >= 0, got {v}")


PURE_ROOFLINE = ServingProfile()

ALIASES = {"roofline": "ideal", "vllm-v1-eagle-2025": "vllm-0.10"}  # --serving names of the previous release


def from_engine(engine) -> ServingProfile:
    """The two speculative host costs of an engine profile (id, path or EngineProfile)."""
    from specplan.profiles.registry import load_engine

    eng = load_engine(engine)
    return ServingProfile(eng.spec_iteration_overhead_s, eng.spec_draft_step_overhead_s,
                          source=f"engine profile {eng.id}: {eng.sources.get('spec_iteration_overhead_s', 'zero')}")


# `VLLM_V1_EAGLE_2025`: fitted on all six rows of the vLLM V1 EAGLE-3 llama-3.1-8b batch-1 sweep on H100
# (reference/specdec_public.csv rows vllm20780-l31-8b-eagle3-k2..k7) by scripts/eagle3_sweep_report.py; held in
# engine_profiles/vllm-0.10.yaml. It and `PROFILES` (the --serving names) are read from that profile on first use
# (module __getattr__), not at import: a command that names no engine does not parse the engine YAML.
PROFILE_NAMES = ("roofline", "vllm-v1-eagle-2025")


def __getattr__(name: str):
    if name == "VLLM_V1_EAGLE_2025":
        return from_engine("vllm-0.10")
    if name == "PROFILES":
        return {"roofline": PURE_ROOFLINE, "vllm-v1-eagle-2025": from_engine("vllm-0.10")}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_serving(ref) -> ServingProfile:
    """A ServingProfile from an instance, an alias name, an engine id / path / EngineProfile, or None."""
    from specplan.profiles.engine import EngineProfile

    if ref is None:
        return PURE_ROOFLINE
    if isinstance(ref, ServingProfile):
        return ref
    if isinstance(ref, EngineProfile):
        return from_engine(ref)
    if ref == "roofline":
        return PURE_ROOFLINE
    if ref == "vllm-v1-eagle-2025":
        return from_engine("vllm-0.10")
    try:
        return from_engine(ref)
    except SpecplanError:
        raise SpecplanError(f"unknown serving profile '{ref}' (known: {', '.join(PROFILE_NAMES)}, or an engine "
                            f"id)") from None

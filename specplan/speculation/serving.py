"""Engine costs a roofline cannot see: exactly two named parameters of a serving profile.

1. `iteration_overhead_s`: host work of one *speculative* iteration beyond a plain decode step — rejection
   sampling, draft-token bookkeeping, building the verify metadata (tree/causal masks, slot mappings), the extra
   scheduler pass. Added to T_iter when D > 0; never to the D = 0 baseline (whose engine costs cancel in the
   speedup ratio because the measured baseline already includes them).
2. `draft_step_overhead_s`: host work per *serial* draft step — launching and synchronizing one draft forward
   (the Python loop around the drafter, sampling of its logits). Multiplied by the number of serial draft steps
   of the mechanism (D for EAGLE-3/MTP/external/self, 1 for DFlash/Medusa, 0 for n-gram).

Defaults are 0 (pure roofline). Fitted values are documented in docs/eagle3_llama8b_validation.md and produced
by scripts/eagle3_sweep_report.py (least squares on the measured vLLM EAGLE-3 sweep, leaving each D out).
"""

from __future__ import annotations

from dataclasses import dataclass

from specplan.errors import SpecplanError


@dataclass(frozen=True)
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

# Fitted on all six rows of the vLLM V1 EAGLE-3 llama-3.1-8b batch-1 sweep on H100 (reference/specdec_public.csv
# rows vllm20780-l31-8b-eagle3-k2..k7) by scripts/eagle3_sweep_report.py; see docs/eagle3_llama8b_validation.md.
VLLM_V1_EAGLE_2025 = ServingProfile(
    iteration_overhead_s=1.075e-3,
    draft_step_overhead_s=0.592e-3,
    source="fitted: vLLM V1 mid-2025, EAGLE-3 on llama-3.1-8b, H100, batch 1 (docs/eagle3_llama8b_validation.md)",
)

PROFILES = {"roofline": PURE_ROOFLINE, "vllm-v1-eagle-2025": VLLM_V1_EAGLE_2025}


def get_serving(ref) -> ServingProfile:
    """A ServingProfile from an instance, a name in PROFILES, or None (pure roofline)."""
    if ref is None:
        return PURE_ROOFLINE
    if isinstance(ref, ServingProfile):
        return ref
    if ref in PROFILES:
        return PROFILES[ref]
    raise SpecplanError(f"unknown serving profile '{ref}' (known: {', '.join(PROFILES)})")

"""Speculative decoding: acceptance, draft mechanisms, speedup, guideline diagnostics and engine overheads."""

from specplan.speculation.acceptance import Acceptance
from specplan.speculation.serving import ServingProfile
from specplan.speculation.speedup import evaluate, evaluate_kw, mechanism_names

__all__ = ["Acceptance", "ServingProfile", "evaluate", "evaluate_kw", "mechanism_names"]

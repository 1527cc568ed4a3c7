"""A model deployed on devices, as one object that flows down to the step and speculation pricing."""

from __future__ import annotations

from dataclasses import dataclass, field

from specplan.costs.precision import Dtypes
from specplan.model.step import StepKernels


@dataclass(frozen=True)
class Deployment:
    """A model on devices: the model and hardware (profiles, or ids resolved where priced), the instance's TP or a
    Layout (DP attention, EP, PP), the dtypes as a user names them and optionally the resolved Precision (it wins
    for the target's steps; the dtypes still name a draft's default), the kernel choices, the engine
    (EngineProfile, id or path; None: no engine costs) and `serving`, the source of the speculative host costs
    (None: the engine's; an old alias such as 'roofline')."""

    model: object
    hardware: object
    tp: int = 1
    layout: object = None
    dtypes: Dtypes = field(default_factory=Dtypes)
    precision: object = None
    kernels: StepKernels = field(default_factory=StepKernels)
    engine: object = None
    serving: object = None

"""A model deployed on devices, as one object that flows down to the step and speculation pricing."""

from __future__ import annotations

from dataclasses import field

from specplan.core.records import record
from specplan.costs.precision import Dtypes
from specplan.model.parallel import Layout
from specplan.model.step import StepKernels


@record
class Deployment:
    """A model on devices: the model and hardware (profiles, or ids resolved where priced), the instance's TP or a
    Layout (DP attention, EP, PP), the dtypes as a user names them and optionally the resolved Precision (it wins
    for the target's steps; the dtypes still name a draft's default), the kernel choices, the engine
    (EngineProfile, id or path; None: no engine costs) and `serving`, the source of the speculative host costs
    (None: the engine's; an old alias such as 'roofline'). A Layout given as `tp` is taken as the layout. For
    disaggregated serving, `tp` / `layout` are the decode pool's and `prefill_layout` the prefill pool's (a TP or a
    Layout; None: the decode pool's)."""

    model: object
    hardware: object
    tp: int = 1
    layout: object = None
    dtypes: Dtypes = field(default_factory=Dtypes)
    precision: object = None
    kernels: StepKernels = field(default_factory=StepKernels)
    engine: object = None
    serving: object = None
    prefill_layout: object = None

    def __post_init__(self):
        if isinstance(self.tp, Layout):  # the serving model's `tp` may be a Layout: keep it where evaluate reads it
            object.__setattr__(self, "layout", self.tp)
            object.__setattr__(self, "tp", self.tp.tp)

    def instance(self):
        """The serving instance's TP (an int) or its Layout (data-parallel attention, experts), as given."""
        return self.tp if self.layout is None else self.layout

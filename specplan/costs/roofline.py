"""The roofline combiner shared by every kernel family: time = max(compute, memory) + overhead, with regime."""

from __future__ import annotations

import numpy as np

from specplan.core.records import record

# Regime codes (kept as small ints in arrays; names for display).
MEMORY, COMPUTE, OVERHEAD = 0, 1, 2
REGIME_NAMES = {MEMORY: "memory", COMPUTE: "compute", OVERHEAD: "overhead"}


@record
class KernelCost:
    """Seconds of one kernel (per launch) split into its roofline terms; arrays broadcast together."""

    compute_s: np.ndarray
    memory_s: np.ndarray
    overhead_s: np.ndarray | float

    @property
    def time_s(self) -> np.ndarray:
        """Total seconds: max(compute, memory) + fixed overhead."""
        return np.maximum(self.compute_s, self.memory_s) + self.overhead_s

    @property
    def regime(self) -> np.ndarray:
        """Regime code per point: the largest of the max(compute, memory) term and the overhead."""
        busy = np.maximum(self.compute_s, self.memory_s)
        r = np.where(self.compute_s > self.memory_s, COMPUTE, MEMORY)
        return np.where(np.broadcast_to(self.overhead_s, np.shape(busy)) > busy, OVERHEAD, r)

    def scaled(self, factor: float) -> "KernelCost":
        """The same kernel repeated `factor` times (e.g. once per layer)."""
        return KernelCost(self.compute_s * factor, self.memory_s * factor, self.overhead_s * factor)


def roofline(compute_s, memory_s, overhead_s=0.0) -> KernelCost:
    """Wrap compute and memory seconds (arrays) and a fixed overhead into a KernelCost."""
    return KernelCost(np.asarray(compute_s, dtype=float), np.asarray(memory_s, dtype=float), overhead_s)

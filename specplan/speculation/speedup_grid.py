"""What `evaluate` returns: baseline and speculative step economics over a broadcast (batch, context, D) grid."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import numpy as np

from specplan.core.records import FieldMapping

# the arrays, shaped like the grid, in the order the answer lists them
ARRAY_FIELDS = ("baseline_step_s", "verify_s", "draft_s", "iter_s", "acceptance_length", "engine_baseline_step_s",
                "engine_iter_s", "speedup", "tokens_per_s_per_user", "tokens_per_s_per_gpu",
                "tokens_per_s_per_device", "memory_total_bytes", "memory_state_bytes", "fits", "break_even_al",
                "target_devices", "baseline_devices", "draft_devices", "rho", "rho_d", "rho_time", "verify_tokens",
                "verify_attention_s", "verify_state_s", "verify_gemm_s", "memory_capacity_bytes", "max_batch")


@dataclass(frozen=True, eq=False)
class SpeedupGrid(FieldMapping):
    """Step times (s), acceptance length, speedup, throughputs (tokens/s), memory (bytes), devices and ρ over the
    grid, each an array of the grid's shape (`fits` bool); `guidelines` (the guideline diagnostics, when asked;
    else None), the resolved `precision`, the `notes`, and where the acceptance came from (`acceptance_source`,
    the largest D its data cover: `acceptance_d_max`). Read fields as attributes; it is also a read-only mapping
    by field name (scripts and notebooks written against the dict answer), without `guidelines` when not asked."""

    baseline_step_s: np.ndarray
    verify_s: np.ndarray
    draft_s: np.ndarray
    iter_s: np.ndarray
    acceptance_length: np.ndarray
    engine_baseline_step_s: np.ndarray
    engine_iter_s: np.ndarray
    speedup: np.ndarray
    tokens_per_s_per_user: np.ndarray
    tokens_per_s_per_gpu: np.ndarray
    tokens_per_s_per_device: np.ndarray
    memory_total_bytes: np.ndarray
    memory_state_bytes: np.ndarray
    fits: np.ndarray
    break_even_al: np.ndarray
    target_devices: np.ndarray
    baseline_devices: np.ndarray
    draft_devices: np.ndarray
    rho: np.ndarray
    rho_d: np.ndarray
    rho_time: np.ndarray
    verify_tokens: np.ndarray
    verify_attention_s: np.ndarray
    verify_state_s: np.ndarray
    verify_gemm_s: np.ndarray
    memory_capacity_bytes: np.ndarray
    max_batch: np.ndarray
    guidelines: object = None  # guidelines.Diagnostics when asked
    precision: object = None
    notes: list = field(default_factory=list)
    acceptance_source: str = ""
    acceptance_d_max: float | None = None

    def _names(self) -> list[str]:
        return [n for n in _FIELD_NAMES if not (n == "guidelines" and self.guidelines is None)]

    def __getitem__(self, key: str):
        if key not in _FIELD_SET or (key == "guidelines" and self.guidelines is None):
            raise KeyError(key)
        return getattr(self, key)

    def select(self, keep: np.ndarray) -> "SpeedupGrid":
        """The grid with only the D columns (last axis of 2-D arrays) where `keep` is True."""
        return replace(self, **{k: getattr(self, k)[:, keep] for k in ARRAY_FIELDS if np.ndim(getattr(self, k)) == 2})


_FIELD_NAMES = tuple(f.name for f in fields(SpeedupGrid))  # computed once: __getitem__ runs per lookup
_FIELD_SET = frozenset(_FIELD_NAMES)

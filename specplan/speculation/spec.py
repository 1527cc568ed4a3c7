"""What speculation a deployment runs or a search prices, as objects that flow down instead of their fields."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DraftSearch:
    """The speculation a search prices: mechanisms (None: those with acceptance data), acceptance by mechanism
    ({mechanism: spec as `parse_acceptance` reads it}), the largest D searched, and whether D may go past the range
    the acceptance data covers."""

    mechanisms: object = None
    acceptance: dict | None = None
    max_draft_len: int = 16
    extrapolate: bool = False


@dataclass(frozen=True)
class DraftPlacement:
    """Where an external draft model runs: its model (id, YAML or profile; None: the mechanism's own), its hardware
    (None: the target's devices) and its dtype (None: the target's)."""

    model: object = None
    hardware: object = None
    dtype: str | None = None

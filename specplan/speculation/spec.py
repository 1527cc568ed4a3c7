"""What speculation a deployment runs or a search prices, as objects that flow down instead of their fields."""

from __future__ import annotations

from dataclasses import field

from specplan.core.records import record


@record
class DraftPlacement:
    """Where an external draft model runs: its model (id, YAML or profile; None: the mechanism's own), its hardware
    (None: the target's devices), its dtype (None: the target's) and the KV tokens it reads (None: all)."""

    model: object = None
    hardware: object = None
    dtype: str | None = None
    kv_budget: int | None = None


@record
class Speculation:
    """One speculative configuration: the mechanism ("none": no drafter), its draft length D (a number or an array
    to broadcast), its acceptance (an Acceptance, a spec `parse_acceptance` reads, or None: the shipped profile),
    where its draft runs, the verified tokens of a tree (None: the profile's tree, else a chain of 1 + D) and the
    Medusa heads of the trained drafter (None: the profile's)."""

    mechanism: str = "none"
    draft_len: object = 0
    acceptance: object = None
    draft: DraftPlacement = field(default_factory=DraftPlacement)
    tree_tokens: object = None
    draft_heads: int | None = None

    @classmethod
    def of(cls, mechanism="none", draft_len=0, acceptance=None, draft_model=None, draft_hardware=None,
           draft_dtype=None, draft_kv_budget=None, tree_tokens=None, draft_heads=None) -> "Speculation":
        """A Speculation from the keyword options the serving model passes along (draft_model, ... by name)."""
        return cls(mechanism, draft_len, acceptance, DraftPlacement(draft_model, draft_hardware, draft_dtype,
                                                                    draft_kv_budget), tree_tokens, draft_heads)


@record
class DraftSearch:
    """The speculation a search prices: mechanisms (None: those with acceptance data), acceptance by mechanism
    ({mechanism: spec as `parse_acceptance` reads it}), the largest D searched, and whether D may go past the range
    the acceptance data covers."""

    mechanisms: object = None
    acceptance: dict | None = None
    max_draft_len: int = 16
    extrapolate: bool = False

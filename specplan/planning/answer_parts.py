"""What the step answers of `predict` and `recommend` share: a layout as numbers, a binding guideline, the MLA
TP note (kept apart so that recommend does not import predict's answer records)."""

from __future__ import annotations

from dataclasses import dataclass

from specplan.core.records import Record, record
from specplan.model.parallel import layout_for


@record
class LayoutNumbers(Record):
    """A Layout as plain numbers for --json: TP, DP, EP, PP, expert TP, GPUs and its name."""

    tp: int
    dp: int
    ep: int
    pp: int
    expert_tp: int
    gpus: int
    name: str

    @classmethod
    def of(cls, lay) -> "LayoutNumbers":
        """The numbers of Layout `lay`."""
        return cls(lay.tp, lay.dp, lay.ep, lay.pp, lay.expert_tp, lay.gpus, lay.name)


@record
class Binding(Record):
    """A guideline that binds (or the choice it explains) and its one-line reason."""

    guideline: str
    line: str



def mla_tp_note(m, hw, tp: int, context_len, prec, layout=None) -> str | None:
    """Why an MLA model does not fit under TP: the latent KV is replicated on every TP rank; the largest batch."""
    lay = layout_for(tp, layout)
    if m.mla is None or lay.tp <= 1 or hw.kind == "lpu":
        return None
    from specplan.model.memory import memory_usage

    mem = memory_usage(m, hw, lay.tp, 1, context_len, prec, layout=lay)
    if mem.weights_bytes >= mem.capacity_bytes:  # the weights alone: the KV layout is not the reason
        return (f"{m.id} does not fit: its weights take {mem.weights_bytes / 1e9:.1f} GB per device at {lay.name}, "
                f"over the {mem.capacity_bytes / 1e9:.1f} GB usable, before any KV cache (more devices, or "
                f"lower-precision weights)")
    mb = int(min(float(mem.max_batch), 1e9))
    fit = (f"the largest batch that fits at context {int(context_len):,} is {mb} (D = 0)" if mb >= 1 else
           f"not even batch 1 fits at context {int(context_len):,} (D = 0)")
    return (f"{m.id} uses MLA: its latent KV cache is replicated on every one of the {lay.tp} TP ranks of a DP "
            f"rank (TP splits heads, not the shared latent), so TP does not shrink the KV per device; "
            f"data-parallel attention (--dp N --tp 1 --ep N) holds it once per sequence; {fit}")

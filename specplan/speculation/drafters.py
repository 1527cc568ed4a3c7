"""Draft mechanisms: T_draft(B, D), draft memory and ρ, each built from the same roofline kernels as the target.

Every function takes a `DraftInput` (grid arrays B, D, context broadcast together) and returns a `DraftCost`.
Times are pure roofline; engine overheads (serving.py) are added by the caller per serial draft step.
ρ = serial draft layers per drafted token / target layers, so ρ·D is the draft overhead O_d of Guideline 4.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from specplan.core.records import record
from specplan.costs.gemm import gemm_cost
from specplan.core.dtypes import dtype_bytes
from specplan.core.errors import SpecplanError
from specplan.core.memo import by_identity
from specplan.model.memory import kv_bytes_per_seq, memory_usage, mtp_weight_bytes, state_bytes_per_seq, weight_bytes
from specplan.model.parallel import Layout
from specplan.costs.precision import MODULES, Precision, resolve_precision
from specplan.profiles.hardware import HardwareProfile
from specplan.profiles.model import ModelProfile, layer_group
from specplan.profiles.registry import load_hardware, load_model, model_ids
from specplan.costs.shapes import lm_head_gemm, mixer_gemms
from specplan.model.step import StepKernels, step_time

# Named assumptions (docs/speculation.md).
CROSS_DEVICE_TRANSFER_S = 20e-6  # draft on other hardware: one round trip (tokens out, accepted ids back) per iteration
DFLASH_LAYERS = 5  # DFlash / DSpark draft depth ("~5 layers, once", Table 1 of the seed post)
# DFlash drafts are dense decoder layers whatever the target (vLLM 0.33.0 model_executor/models/qwen3_dflash.py:
# DFlashQwen3DecoderLayer has a dense Qwen3MLP of the draft config's intermediate_size). Their FFN width: the
# target's dense FFN when it has one, else DFLASH_FFN_PER_HIDDEN x hidden (an assumption: the Qwen3 dense ratio,
# Qwen3-8B 12288 / 4096 in reference/model_configs.csv; no released DFlash config is in reference/).
DFLASH_FFN_PER_HIDDEN = 3
# Medusa heads of a checkpoint when neither the heads profile nor the acceptance profile names them:
# reference/model_configs.csv row medusa-heads (FasterDecoding/Medusa MedusaConfig default medusa_num_heads = 5).
MEDUSA_DEFAULT_HEADS = 5
DFLASH_FUSED_LAYERS = 5  # target layers whose hidden states the DFlash fusion projection concatenates
MARKOV_HEAD_GEMMS = 2  # DSpark Markov head: two hidden x hidden GEMMs per drafted token (2·h² weights)
# An external draft whose vocabulary size differs from the target's by more than this cannot share its tokenizer
# (one family pads its embedding differently: Qwen2.5-0.5B 151,936 and Qwen2.5-7B 152,064 share one; a size check
# cannot tell two tokenizers of one size apart)
VOCAB_TOLERANCE = 0.01
NGRAM_CPU_S_PER_SEQ = 2e-6  # suffix/n-gram lookup of one sequence on the host, per iteration
SELF_DEFAULT_KV_BUDGET = 2048  # self-speculation: StreamingLLM sink + window tokens read while drafting


@dataclass
class DraftInput:
    """Grid and options shared by the drafters (arrays broadcast together)."""

    model: ModelProfile
    hw: HardwareProfile
    tp: int
    prec: Precision
    batch: np.ndarray
    draft_len: np.ndarray
    context_len: np.ndarray
    dtype: str | None = None
    kv_dtype: str | None = None
    draft_model: ModelProfile | None = None
    draft_hardware: HardwareProfile | None = None
    draft_dtype: str | None = None
    draft_kv_budget: int | None = None
    attention_style: str = "shared"
    routing: str = "random"
    layout: Layout | None = None  # the target's layout (None: TP only)
    draft_heads: int | None = None  # Medusa heads of the trained drafter (flag or acceptance profile), not the search

    @property
    def lay(self) -> Layout:
        """The target's layout."""
        return self.layout or Layout(tp=self.tp)

    @property
    def rank_batch(self) -> np.ndarray:
        """Sequences on one DP rank (the draft's dense GEMMs run per DP rank)."""
        return self.lay.per_rank_batch(self.batch)

    def draft_layout(self, model: ModelProfile) -> Layout:
        """A draft model's layout as engines place MTP / EAGLE heads: the target's attention TP and DP (and its EP
        for a draft with routed experts), on the last pipeline stage (PP 1 for the draft's own step)."""
        lay = self.lay
        return Layout(tp=lay.tp, dp=lay.dp, ep=lay.ep if model.moe is not None else 1)


@dataclass
class DraftCost:
    """Per-iteration draft time and serial steps, memory on the target devices, ρ, and separate draft devices."""

    time_s: np.ndarray
    serial_steps: np.ndarray
    fixed_bytes: float = 0.0
    per_seq_bytes: np.ndarray | float = 0.0
    rho: np.ndarray | float = 0.0
    devices: np.ndarray | float = 0
    fits: np.ndarray | bool = True
    notes: list[str] = field(default_factory=list)


def _active(d: np.ndarray) -> np.ndarray:
    return (d > 0).astype(float)


def _step(model, hw, b, q, ctx, prec, inp: DraftInput, layout: Layout | None = None, **kw) -> np.ndarray:
    lay = layout or inp.draft_layout(model)
    return step_time(model, hw, 1, b, q, ctx, layout=lay, precision=prec,
                     kernels=StepKernels(attention_style=inp.attention_style, routing=inp.routing), **kw).total_s


def _single_layer(model: ModelProfile, mixer: str, ffn: str, count: int = 1, **update) -> ModelProfile:
    """A copy of `model` with `count` layers of one (mixer, ffn) kind, no MTP, embedding shared with the target."""
    upd = {"num_layers": count, "layer_groups": [layer_group(mixer, ffn, count)], "mtp": None,
           "tie_embeddings": True, **update}
    return model.model_copy(update=upd)


def _uniform_precision(prec: Precision, weight: str, lm_head: str | None = None) -> Precision:
    own = {"router": prec.w("router"), "lm_head": lm_head or weight}  # the target's router; the LM head given
    return Precision(compute=prec.compute, kv=prec.kv, weights={m: own.get(m, weight) for m in MODULES})


def _lm_head_bytes(model: ModelProfile, tp: int, prec: Precision) -> float:
    lm = lm_head_gemm(model, tp)
    return lm.n * lm.k * dtype_bytes(prec.w("lm_head"))


def draft_none(inp: DraftInput) -> DraftCost:
    """No speculation."""
    z = np.zeros(np.broadcast(inp.batch, inp.draft_len, inp.context_len).shape)
    return DraftCost(time_s=z, serial_steps=z)


def draft_external(inp: DraftInput) -> DraftCost:
    """A standalone draft LLM: D sequential decode steps at batch B with its own KV, maybe on other hardware."""
    if inp.draft_model is None:
        raise SpecplanError("mechanism external: needs a draft model (--draft-model)")
    dm, d, b = inp.draft_model, inp.draft_len, inp.batch
    dhw = inp.draft_hardware or inp.hw
    separate = inp.draft_hardware is not None and dhw.id != inp.hw.id
    tp_d = 1 if separate else (inp.tp if dm.num_q_heads % inp.tp == 0 else 1)  # the target's TP, as vLLM 0.34 sets it
    # (config/speculative.py _verify_and_get_draft_tp: draft_tensor_parallel_size defaults to the target's, else 1)
    prec_d = resolve_precision(dm, dhw, inp.draft_dtype, inp.kv_dtype)
    ctx_d = inp.context_len if inp.draft_kv_budget is None else np.minimum(inp.context_len, inp.draft_kv_budget)
    mem = memory_usage(dm, dhw, tp_d, b, ctx_d, prec_d, q_len=np.maximum(d, 1))
    lay_d = Layout(tp=tp_d) if separate else Layout(tp=tp_d, dp=inp.lay.dp)
    step = step_time(dm, dhw, 1, b, 1, ctx_d, layout=lay_d, precision=prec_d,
                     kernels=StepKernels(attention_style=inp.attention_style, routing=inp.routing))
    devices = np.asarray(step.devices, dtype=float) if separate else 0
    t = d * step.total_s
    notes = [f"draft {dm.id} on {dhw.id} (tp {tp_d}), {prec_d.compute}"]
    if abs(dm.vocab_size / inp.model.vocab_size - 1.0) > VOCAB_TOLERANCE:  # draft tokens are target token ids
        notes.append(f"draft {dm.id}'s vocabulary ({dm.vocab_size:,}) is not {inp.model.id}'s ({inp.model.vocab_size:,}): "
                     f"a draft model must share the target's tokenizer, so this pairing prices a draft no engine "
                     f"runs as it stands")
    if inp.draft_hardware is not None and not separate:
        notes.append(f"draft hardware {dhw.id} is the target's: the draft shares the target's devices (its weights "
                     f"and KV count against their memory; no transfer)")
    if separate:
        t = t + _active(d) * CROSS_DEVICE_TRANSFER_S
        notes.append(f"transfer {CROSS_DEVICE_TRANSFER_S * 1e6:g} us per iteration (assumption)")
        return DraftCost(t, d.astype(float) * np.ones_like(t), rho=dm.num_layers / inp.model.num_layers,
                         devices=devices, fits=True if dhw.kind == "lpu" else mem.fits, notes=notes)
    per_seq = kv_bytes_per_seq(dm, tp_d, prec_d.kv, ctx_d + d) + state_bytes_per_seq(dm, tp_d)
    return DraftCost(t, d * np.ones_like(t), fixed_bytes=weight_bytes(dm, tp_d, prec_d), per_seq_bytes=per_seq,
                     rho=dm.num_layers / inp.model.num_layers, notes=notes)


def eagle3_head(model: ModelProfile, head: ModelProfile | None = None) -> ModelProfile:
    """The one-layer EAGLE-3 draft model: the head profile (given or built-in eagle3-<target>), else target-shaped.

    As an `eagle3_head`, its layer has q/k/v over 2h inputs and the 3h -> h fusion GEMM (specplan.costs.shapes)."""
    if head is None and f"eagle3-{model.id}" in model_ids():
        head = load_model(f"eagle3-{model.id}")
    return _eagle3_layer(model, head)


@by_identity
def _eagle3_layer(model: ModelProfile, head: ModelProfile | None) -> ModelProfile:
    """eagle3_head's one-layer model of `head` (None: target-shaped), built once per (model, head) object."""
    if head is None:
        ffn = model.ffn_size or (model.moe.expert_ffn_size * model.moe.top_k if model.moe else 4 * model.hidden_size)
        head = model.model_copy(update={"ffn_size": ffn, "moe": None, "mla": None, "linear_attention": None,
                                        "mamba": None, "sliding_window": None, "gated_ffn": True})
    return _single_layer(head, "full", "dense", kind="eagle3_head", moe=None, mla=None)


def draft_eagle3(inp: DraftInput) -> DraftCost:
    """EAGLE-3: one decoder layer (q/k/v over 2h inputs) + LM head over the draft vocabulary, run D times serially
    at q_len 1 over the head's own one-layer KV cache, plus the fc 3h -> h fusion once per proposal."""
    one = eagle3_head(inp.model, inp.draft_model)
    prec_h = resolve_precision(one, inp.hw, inp.dtype, inp.kv_dtype)
    tp, b, d = inp.tp, inp.batch, inp.draft_len
    h = one.hidden_size
    br = inp.rank_batch
    # The 3h -> h fusion (fc) of the target's hidden states runs once per proposal, over the B·(1 + D) positions
    # the target just verified, not once per draft step: take it out of the per-step layer and add it once.
    fc = lambda m: gemm_cost(inp.hw, m, h, 3 * h, prec_h.w("fc"), prec_h.compute).time_s  # noqa: E731
    step = _step(one, inp.hw, b, 1, inp.context_len, prec_h, inp) - fc(br)
    t = d * step + _active(d) * fc(br * (1 + d))
    per_seq = kv_bytes_per_seq(one, tp, prec_h.kv, inp.context_len + d)
    return DraftCost(t, d * np.ones_like(t), fixed_bytes=weight_bytes(one, tp, prec_h), per_seq_bytes=per_seq,
                     rho=1.0 / inp.model.num_layers, notes=[f"EAGLE-3 head {one.id}, {prec_h.w('attention')}"])


@by_identity
def mtp_module(model: ModelProfile) -> ModelProfile:
    """The model's MTP module as a one-layer model (shared embedding and LM head)."""
    if model.mtp is None:
        raise SpecplanError(f"mechanism mtp: model {model.id} has no MTP module")
    return _single_layer(model, model.mtp.mixer, model.mtp.ffn)


def draft_mtp(inp: DraftInput) -> DraftCost:
    """MTP: the model's MTP module (decoder layer + 2h -> h projection) + shared LM head, run D times serially."""
    one = mtp_module(inp.model)
    prec_m = _uniform_precision(inp.prec, inp.prec.w("mtp"), inp.prec.w("lm_head"))
    h, tp, b, d = one.hidden_size, inp.tp, inp.batch, inp.draft_len
    step = _step(one, inp.hw, b, 1, inp.context_len, prec_m, inp)
    step = step + gemm_cost(inp.hw, inp.rank_batch, h // tp, 2 * h, prec_m.w("mtp"), prec_m.compute).time_s  # eh_proj
    t = d * step
    per_seq = kv_bytes_per_seq(one, tp, inp.prec.kv, inp.context_len + d) + state_bytes_per_seq(one, tp)
    return DraftCost(t, d * np.ones_like(t), fixed_bytes=mtp_weight_bytes(inp.model, tp, inp.prec, inp.draft_layout(one)),
                     per_seq_bytes=per_seq, rho=1.0 / inp.model.num_layers, notes=[f"MTP module, {prec_m.w('mtp')}"])


def draft_medusa(inp: DraftInput) -> DraftCost:
    """Medusa: D heads (ResBlocks h x h + own LM head) evaluated in one pass over the target's last hidden state."""
    heads = inp.draft_model
    m, tp, b, d = inp.model, inp.tp, inp.batch, inp.draft_len
    blocks = heads.num_layers if heads is not None and heads.kind == "medusa_heads" else 1
    n_heads = medusa_heads(heads, inp.draft_heads)
    h, vocab = m.hidden_size, m.vocab_size
    w = inp.prec.w("lm_head")
    br = inp.rank_batch
    per_head = blocks * gemm_cost(inp.hw, br, h // tp, h, w, inp.prec.compute).time_s
    per_head = per_head + gemm_cost(inp.hw, br, vocab // tp, h, w, inp.prec.compute).time_s
    t = d * per_head
    fixed = n_heads * (blocks * h * h + vocab * h) / tp * dtype_bytes(w)
    rho = blocks / (m.num_layers * np.maximum(d, 1))
    notes = [f"{n_heads} Medusa heads x {blocks} ResBlock(s), one pass (D heads evaluated)"]
    if np.max(d) > n_heads:
        notes.append(f"medusa: D > {n_heads} needs more heads than the drafter has (not feasible; --draft-heads)")
    return DraftCost(t, _active(d) * np.ones_like(t), fixed_bytes=fixed, rho=rho, fits=d <= n_heads, notes=notes)


def medusa_heads(heads: ModelProfile | None, draft_heads: int | None = None) -> int:
    """Heads of the trained Medusa drafter: the heads profile's, else the given count (flag or acceptance
    profile), else MEDUSA_DEFAULT_HEADS; never the largest D of a search."""
    if heads is not None and heads.num_draft_heads:
        return int(heads.num_draft_heads)
    if draft_heads is not None:
        if int(draft_heads) < 1:
            raise SpecplanError(f"medusa heads: must be >= 1, got {draft_heads}")
        return int(draft_heads)
    return MEDUSA_DEFAULT_HEADS


def dflash_model(model: ModelProfile) -> ModelProfile:
    """The DFlash / DSpark draft: DFLASH_LAYERS full-attention layers with the target's attention shape and a
    dense FFN (the target's dense FFN size, else DFLASH_FFN_PER_HIDDEN x hidden), never the target's MoE."""
    ffn = model.ffn_size or DFLASH_FFN_PER_HIDDEN * model.hidden_size
    return _single_layer(model, "full", "dense", count=DFLASH_LAYERS, ffn_size=ffn, moe=None,
                         linear_attention=None, mamba=None, sliding_window=None)


def _dflash(inp: DraftInput) -> tuple[np.ndarray, float, np.ndarray, ModelProfile]:
    five = dflash_model(inp.model)
    h, tp, b, d = five.hidden_size, inp.tp, inp.batch, inp.draft_len
    _, kv_dev = five.heads_per_device(tp)
    w = inp.prec.w("attention")
    q = d + 1  # one parallel pass over the anchor (last verified token) + D masked positions
    t = _step(five, inp.hw, b, q, inp.context_len, inp.prec, inp)
    fuse_m = inp.rank_batch * (1 + d)  # new target hidden states of the verified positions become draft K/V
    t = t + gemm_cost(inp.hw, fuse_m, h // tp, DFLASH_FUSED_LAYERS * h, w, inp.prec.compute).time_s
    n = five.num_layers
    t = t + gemm_cost(inp.hw, fuse_m, n * 2 * kv_dev * five.head_dim, h, w, inp.prec.compute).time_s
    fixed = weight_bytes(five, tp, inp.prec) - _lm_head_bytes(five, tp, inp.prec)  # LM head shared with target
    fixed += (DFLASH_FUSED_LAYERS * h * h / tp + n * 2 * kv_dev * five.head_dim * h) * dtype_bytes(w)
    per_seq = kv_bytes_per_seq(five, tp, inp.prec.kv, inp.context_len + d)
    return _active(d) * t, fixed, per_seq, five


def draft_dflash(inp: DraftInput) -> DraftCost:
    """DFlash: five dense decoder layers run once over the anchor + D masked positions (q_len D + 1) + LM head;
    their KV is projected from the target's hidden states."""
    t, fixed, per_seq, five = _dflash(inp)
    d = inp.draft_len
    return DraftCost(t, _active(d) * np.ones_like(t), fixed_bytes=fixed, per_seq_bytes=per_seq,
                     rho=five.num_layers / (inp.model.num_layers * np.maximum(d, 1)),
                     notes=[f"DFlash, {five.num_layers} dense layers (FFN {five.ffn_size}) once at q_len D + 1"])


def draft_dspark(inp: DraftInput) -> DraftCost:
    """DSpark: DFlash plus a light Markov head run once per drafted token (2 h x h GEMMs, an assumption)."""
    t, fixed, per_seq, five = _dflash(inp)
    h, tp, b, d = five.hidden_size, inp.tp, inp.batch, inp.draft_len
    w = inp.prec.w("attention")
    markov = MARKOV_HEAD_GEMMS * gemm_cost(inp.hw, inp.rank_batch, h // tp, h, w, inp.prec.compute).time_s
    t = t + d * markov
    fixed += MARKOV_HEAD_GEMMS * h * h / tp * dtype_bytes(w)
    return DraftCost(t, _active(d) * np.ones_like(t), fixed_bytes=fixed, per_seq_bytes=per_seq,
                     rho=five.num_layers / (inp.model.num_layers * np.maximum(d, 1)),
                     notes=["DSpark: DFlash + Markov head (2·h² weights, assumption)"])


def draft_ngram(inp: DraftInput) -> DraftCost:
    """Suffix / n-gram lookup on the host: no accelerator work, a small CPU cost per sequence and iteration."""
    d = inp.draft_len
    t = _active(d) * inp.rank_batch * NGRAM_CPU_S_PER_SEQ * np.ones(np.broadcast(inp.batch, d, inp.context_len).shape)
    return DraftCost(t, np.zeros_like(t), notes=[f"n-gram lookup {NGRAM_CPU_S_PER_SEQ * 1e6:g} us per sequence"])


def draft_self(inp: DraftInput) -> DraftCost:
    """Self-speculation (MagicDec-style): the target drafts D tokens reading only a KV budget (sink + window)."""
    budget = SELF_DEFAULT_KV_BUDGET if inp.draft_kv_budget is None else inp.draft_kv_budget
    d = inp.draft_len
    ctx_d = np.minimum(inp.context_len, budget)
    t = d * _step(inp.model, inp.hw, inp.batch, 1, ctx_d, inp.prec, inp, layout=inp.lay)
    return DraftCost(t, d * np.ones_like(t), rho=1.0, notes=[f"self-draft with a KV budget of {budget} tokens"])


DRAFTERS = {
    "none": draft_none,
    "external": draft_external,
    "eagle3": draft_eagle3,
    "mtp": draft_mtp,
    "medusa": draft_medusa,
    "dflash": draft_dflash,
    "dspark": draft_dspark,
    "ngram": draft_ngram,
    "self": draft_self,
}


def get_drafter(mechanism: str):
    """The drafter function of a mechanism, or a one-line error listing the known ones."""
    if mechanism not in DRAFTERS:
        raise SpecplanError(f"unknown mechanism '{mechanism}' (known: {', '.join(DRAFTERS)})")
    return DRAFTERS[mechanism]


def load_optional(ref, loader):
    """Load a profile reference that may be None."""
    return None if ref is None else loader(ref)


def load_draft_hardware(ref) -> HardwareProfile | None:
    """Draft hardware profile (id or path), or None for the target's devices."""
    return load_optional(ref, load_hardware)


HEAD_MECHANISMS = ("eagle3", "dflash", "dspark")  # drafts priced from the target's shape when no profile is given


@record
class DraftRef:
    """A --draft-model as given: the profile the pricing reads (None: built from the target's shape), the Hugging
    Face repo a launch names, and a note when the draft was not found as a profile."""

    profile: str | None
    hf_repo: str | None
    note: str | None = None


def resolve_draft(ref: str | None, target: ModelProfile, mechanisms=None) -> DraftRef:
    """A --draft-model (a built-in id, a YAML path, or a Hugging Face org/name) as a DraftRef: a built-in profile
    whose hf_repo it names is that profile; an unknown org/name of a head (EAGLE-3, DFlash) is priced as a head of
    the target's shape and kept for the launch; an external draft needs a profile (one line otherwise)."""
    if ref is None:
        return DraftRef(None, None)
    looks_like_repo = "/" in ref and not ref.endswith((".yaml", ".yml"))
    try:
        prof = load_model(ref)
    except SpecplanError:
        if not looks_like_repo or Path(ref).exists():
            raise
        if mechanisms is not None and "external" in mechanisms:
            raise SpecplanError(f"--draft-model {ref}: an external draft is priced from its profile, and no built-in "
                                f"profile has this Hugging Face repo: import its config.json with `specplan model "
                                f"import` and pass the YAML") from None
        return DraftRef(None, ref, f"draft {ref}: no built-in profile; priced as a head of {target.id}'s shape "
                                   f"(one decoder layer at hidden size {target.hidden_size}) and named in the launch")
    return DraftRef(ref, prof.hf_repo or (ref if looks_like_repo else None))

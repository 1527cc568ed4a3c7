"""EngineProfile and KernelFamily: what a serving engine adds to (or saves from) the roofline, as data.

A `KernelFamily` is one attention kernel as the cost model sees it (engine_profiles/kernels/<id>.yaml):
its row-tile height, whether it packs the G * q_len query rows of one KV head into shared tiles (`packed`,
K/V read once per KV head) or tiles each query head's q_len rows separately and re-reads K/V per tile
(`per_head`), and optional efficiency overrides of the hardware profile's `attention` block. Unset fields
(None) keep the hardware profile's value, so a family with nothing set prices exactly as before.

An `EngineProfile` (engine_profiles/<id>.yaml) holds per-step host/scheduler time, CUDA graphs for decode
(extra launch seconds per kernel inside a graph vs eager, on top of the hardware's per-kernel floor, which
stays in the hardware profile), the chunked-prefill token budget, the speculative iteration and per-draft-step
host costs, the speculative round's host time per sequence, its overlap and its graph caps (speculation/round.py),
which kernel family the engine runs for decode, verification, prefill and MLA, and how its GEMM
kernels differ from the ones the hardware profile was fitted on (`gemm_mem_bw_scale` / `gemm_compute_scale` per
compute dtype: the hardware's GEMM mem_bw_fraction / compute_max_fraction are multiplied by them, capped at 1, when
the engine is selected; `engine_hardware`). Every number names its source in `sources`; `ideal` adds nothing.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from specplan.core.dtypes import canonical_dtype
from specplan.core.limits import MAX_BATCH
from specplan.profiles.hardware import (GENERATIONS, MAX_TIME_S, MIN_FRACTION, MOE_BLOCK_M_RULES, HardwareProfile,
                                        kv_fractions, moe_kernel_counts)  # the hardware profiles' bounds

GEMM_SCALE_RANGE = (0.2, 5.0)  # an engine's GEMM kernels run at 1/5 to 5x the fitted fractions; beyond is a typo


class _Frozen(BaseModel):
    """Frozen, no unknown fields, strict finite numbers (YAML `true` is not 1, `.inf` is refused)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False, defer_build=True)


class KernelFamily(_Frozen):
    """One attention kernel family: tile height, row packing, efficiency overrides (None = hardware's)."""

    id: str = Field(min_length=1, max_length=255)
    name: str = ""
    tile_rows: int | None = Field(None, gt=0, le=65536)  # query rows per tile; None = the hardware's attention.tile_rows
    packing: Literal["packed", "per_head"] = "packed"
    mem_bw_fraction: float | None = Field(None, ge=MIN_FRACTION, le=1)
    kv_mem_bw_fraction: dict[str, float] = Field(default_factory=dict)
    compute_fraction: float | None = Field(None, ge=MIN_FRACTION, le=1)
    cta_overhead_s: float | None = Field(None, ge=0, le=MAX_TIME_S)
    l2_hit_fraction: float | None = Field(None, ge=0, le=1)
    source: str = Field(min_length=1)
    sources: dict[str, str] = Field(default_factory=dict)  # per-field sources where they differ from `source`
    notes: str = ""

    @field_validator("kv_mem_bw_fraction")
    @classmethod
    def _kv_bw(cls, v: dict[str, float]) -> dict[str, float]:
        return kv_fractions(v, "kv_mem_bw_fraction")


# the speculative mechanisms an engine field may name (speculation/drafters.py DRAFTERS without "none"; tested)
SPEC_MECHANISMS = ("external", "eagle3", "mtp", "medusa", "dflash", "dspark", "ngram", "self")


# the engine fields a per-hardware default may set (EngineProfile.hardware_defaults)
HARDWARE_DEFAULT_FIELDS = ("max_num_batched_tokens", "max_num_seqs", "graph_max_batch", "verify_graph_max_tokens",
                           "draft_graph_max_batch")
GIB = 2.0 ** 30


class HardwareDefault(_Frozen):
    """One rule of an engine's defaults that depend on the GPU (its memory, generation, id) and the launch's TP:
    where every condition holds, `set` replaces those engine fields (later rules win)."""

    min_memory_gib: float = Field(0.0, ge=0)  # the device's memory, GiB (2^30 bytes), at least
    below_memory_gib: float | None = Field(None, gt=0)  # ... and below
    generations: list[str] = Field(default_factory=list)  # GPU generations it applies to ([] = any)
    exclude_ids: list[str] = Field(default_factory=list)  # hardware ids containing one of these are excluded
    min_tp: int = Field(1, ge=1)  # the launch's tensor-parallel size, at least
    below_tp: int | None = Field(None, gt=1)  # ... and below
    set: dict[str, int] = Field(min_length=1)
    source: str = Field(min_length=1)

    @field_validator("set")
    @classmethod
    def _fields(cls, v: dict[str, int]) -> dict[str, int]:
        bad = [k for k in v if k not in HARDWARE_DEFAULT_FIELDS]
        if bad:
            raise ValueError(f"set: '{bad[0]}' is not a per-hardware engine field (known: "
                             f"{', '.join(HARDWARE_DEFAULT_FIELDS)})")
        if any(x <= 0 for x in v.values()):
            raise ValueError("set: values must be > 0")
        return dict(v)

    def applies(self, hw: HardwareProfile, tp: int = 1) -> bool:
        """True where the rule's conditions hold for `hw` at tensor-parallel size `tp`."""
        gib = hw.mem_capacity_bytes / GIB
        return (gib >= self.min_memory_gib and (self.below_memory_gib is None or gib < self.below_memory_gib)
                and (not self.generations or hw.generation in self.generations)
                and not any(x in hw.id for x in self.exclude_ids)
                and tp >= self.min_tp and (self.below_tp is None or tp < self.below_tp))


class GemmTileSwitch(_Frozen):
    """Where an engine's GEMM dispatch runs a larger-tile kernel (M >= min_m and K >= min_k, the thresholds read in
    its code) and that kernel's compute rate relative to the engine's GEMM fit elsewhere (compute_scale, fitted)."""

    min_m: int = Field(ge=1, le=1 << 30)
    min_k: int = Field(ge=1, le=1 << 30)
    compute_scale: float = Field(ge=GEMM_SCALE_RANGE[0], le=GEMM_SCALE_RANGE[1])


class EngineProfile(_Frozen):
    """A serving engine's costs beyond the roofline (seconds, tokens), each with its source."""

    id: str = Field(min_length=1, max_length=255)
    name: str = ""
    version: str = ""
    host_step_s: float = Field(0.0, ge=0, le=MAX_TIME_S)  # host/scheduler time per engine step (any step)
    host_per_seq_s: float = Field(0.0, ge=0, le=MAX_TIME_S)  # host time per running sequence per step (sampling, streaming)
    overlap_scheduler: bool = False  # host work of step n+1 runs while the GPU runs step n
    cuda_graphs_decode: bool = False  # decode-only steps replay a captured CUDA graph
    graph_max_batch: int = Field(0, ge=0, le=MAX_BATCH)  # largest captured decode batch; larger decode batches run eager
    # True: a decode / verify batch up to the cap replays the graph of the next captured size (padding rows); False:
    # only the batches in graph_batch_sizes replay a graph, any other runs eagerly (TensorRT-LLM enable_padding false)
    graph_padding: bool = True
    graph_batch_sizes: list[int] = Field(default_factory=list)  # captured decode batches without padding ([]: all)
    graph_launch_s: float = Field(0.0, ge=0, le=MAX_TIME_S)  # host seconds per kernel of a replayed graph (over the hardware floor)
    eager_launch_s: float = Field(0.0, ge=0, le=MAX_TIME_S)  # host seconds per kernel launched eagerly (mixed/prefill steps)
    # host seconds per step that runs eagerly (no graph replay: a step with a prefill chunk), whatever the model
    # size: the engine's per-step input preparation outside graphs, beyond the per-kernel launches
    eager_step_s: float = Field(0.0, ge=0, le=MAX_TIME_S)
    # seconds every step takes beyond the larger (overlap) or the sum (no overlap) of its GPU and host time: the GPU
    # idle between two steps that an overlap scheduler does not hide (its synchronization with the previous step's
    # sampled tokens, the graph launch); fitted, not read in an engine's code
    step_gap_s: float = Field(0.0, ge=0, le=MAX_TIME_S)
    max_num_batched_tokens: int = Field(8192, gt=0, le=2**32)  # chunked-prefill token budget per step (decode + prefill)
    max_num_seqs: int = Field(1024, gt=0, le=MAX_BATCH)  # requests an engine step may hold
    # requests the engine runs at once when speculation is on and the launch sets no cap of its own (SGLang lowers
    # max_running_requests to 48 then); None = max_num_seqs, as without speculation
    spec_max_num_seqs: int | None = Field(None, gt=0, le=MAX_BATCH)
    # under data-parallel attention (DP ranks, each with its own scheduler): "divided" when the launch's
    # max_num_seqs, spec_max_num_seqs and max_num_batched_tokens are the instance's and each rank gets 1/DP of them
    # (SGLang), "per_rank" when every rank applies them itself (vLLM's DP engines; TensorRT-LLM's attention-DP ranks)
    dp_attention_limits: Literal["divided", "per_rank"] = "per_rank"
    chunked_prefill: bool = True  # long prompts split to fill the step budget; False: whole prompts per step
    # prefill chunks ride in the decode steps (mixed batches); False: prefill batches run first, in steps of their
    # own, while decoding waits (SGLang without --enable-mixed-chunk)
    mixed_prefill: bool = True
    admission: Literal["immediate", "next_departure"] = "immediate"  # when a new request gets a batch slot
    prefill_tokens_s: float = Field(0.0, ge=0, le=MAX_TIME_S)  # host seconds per prompt token a step carries (fitted for TensorRT-LLM)
    spec_iteration_overhead_s: float = Field(0.0, ge=0, le=MAX_TIME_S)  # host work of one speculative iteration beyond a decode
    spec_draft_step_overhead_s: float = Field(0.0, ge=0, le=MAX_TIME_S)  # host work per serial draft step
    # the speculative round (specplan/speculation/round.py, docs/speculation_rounds.md):
    # host time per running sequence per round beyond a decode step's
    spec_host_per_seq_s: float = Field(0.0, ge=0, le=MAX_TIME_S)
    # host seconds of one speculative round's own work outside its CUDA graphs, beyond a decode step's: the eager
    # PyTorch ops, Triton launches and device-to-host copies the engine's round issues between its graph replays,
    # counted in its code and priced per launch (sources name the count); overlapped like the rest of the host work
    spec_round_host_s: float = Field(0.0, ge=0, le=MAX_TIME_S)
    # spec_round_host_s of the mechanisms whose rounds run another worker (SGLang's DFlash worker), set by for_mechanism
    spec_round_host_by_mechanism: dict[str, float] = Field(default_factory=dict)
    # tree drafts: the verify's attention mask covers each verified token's whole prefix and the tree (SGLang
    # TreeMaskMode.FULL_MASK: one byte per token pair, built each round, bit-packed, read by every attention layer)
    tree_mask_full: bool = False
    # tree drafts: each draft step's attention reads a sequence's cached prefix once per candidate (SGLang's
    # flashinfer / triton multi-step draft backends: one decode row per branch, kv_indices seq_lens_sum x topk)
    tree_draft_prefix_per_candidate: bool = False
    spec_overlap: bool = False  # the round's host work overlaps the GPU (SGLang spec v2, TRT-LLM overlap scheduler)
    # mechanisms with which the engine turns its overlap scheduler off: their rounds add host work to the GPU even
    # where spec_overlap is true (vLLM 0.14-0.17: every method outside EagleModelTypes: n-gram, draft models, Medusa)
    spec_sync_mechanisms: list[str] = Field(default_factory=list)
    # verify steps replay graphs up to this many tokens (vLLM: 512 // (1 + K) requests); 0 = graph_max_batch requests
    verify_graph_max_tokens: int = Field(0, ge=0, le=2**32)
    draft_graph_max_batch: int = Field(0, ge=0, le=MAX_BATCH)  # draft steps captured up to this batch (0: graph_max_batch)
    # a speculative deployment whose draft length drops to 0 (a per-batch-size schedule) still runs the draft's
    # extend over the verified position, keeping the draft KV warm (vLLM 0.34, SGLang 0.5.23); False: no draft work
    zero_draft_extend: bool = False
    # tree drafts: candidates per request in each draft step after the first (SGLang --speculative-eagle-topk);
    # None = ceil((verified tokens - 1) / D), the tree's nodes spread evenly over its depth
    spec_topk: int | None = Field(None, gt=0, le=1024)
    # tree drafts (spec_topk > 1) run without the overlap scheduler (SGLang <= 0.5.12 server_args.py)
    spec_sync_tree: bool = False
    # rejection as the engine verifies: "probabilistic" (rejection sampling over target and draft probabilities) or
    # "exact" (greedy / exact match of the draft against the target's own sample: one pass over the logits)
    verification: Literal["probabilistic", "exact"] = "probabilistic"
    # full-vocabulary fp32 passes of the verify's sampling, per rejection mode ("greedy", "probabilistic"): [passes
    # per verified row (B x q rows), passes per request (B rows) net of the plain sampler's] where counted in the
    # engine's code; {} = speculation/round.py REJECTION_PASSES (p per verified row, -p per request)
    rejection_passes: dict[str, list[float]] = Field(default_factory=dict)
    # rejection_passes of the mechanisms whose verify samples in other code (SGLang's DFlash), set by for_mechanism
    rejection_passes_by_mechanism: dict[str, dict[str, list[float]]] = Field(default_factory=dict)
    # per GPU generation, per expert weight format: the engine's MoE kernel picks its row tile from the batch
    # ("triton_kernels": triton_kernels matmul_ogs opt_flags, costs/moe.py triton_kernels_block_m) instead of the
    # hardware's fitted tile shapes (hw.moe.tile_rows); set on the hardware by engine_hardware
    moe_block_m: dict[str, dict[str, str]] = Field(default_factory=dict)
    # defaults the engine picks from the GPU and the launch's TP (EngineProfile.for_hardware); they fill only the
    # fields the YAML (or a caller) leaves unset, so an explicit top-level value always wins
    hardware_defaults: list[HardwareDefault] = Field(default_factory=list)
    resolved_for: str = ""  # set by for_hardware: the GPU and TP the defaults were resolved for ("" = not yet)
    ttft_includes_first_decode: bool = False  # TTFT counts the first decode step after prefill
    # steps a finished request keeps its batch slot and KV after its last token (the request simulator,
    # serving/simulator.py): 1 where an overlap scheduler learns of the finish only after launching the next step
    finished_slot_steps: int = Field(0, ge=0, le=4)
    # closed loop, start-up bunching: seconds each of the other C - 1 clients adds to a request's TTFT (averaged
    # over a run) when a benchmark starts all clients at once; only where asked (Workload.startup_cohort,
    # --startup-cohort); fitted on TTFT of such runs (docs/validation/serving.md)
    startup_client_s: float = Field(0.0, ge=0, le=MAX_TIME_S)
    # the same start-up bunching in units of the engine's own prompt service time (aggregated.prompt_service_s: the
    # engine seconds one prompt takes): each of the other C - 1 clients adds this fraction of one prompt's service
    # to a request's TTFT (averaged over a run), so the wait grows with the prompt; added to startup_client_s
    startup_prefill_frac: float = Field(0.0, ge=0, le=10.0)
    decode_attention: str = "default"  # kernel family ids (engine_profiles/kernels/)
    verify_attention: str = "default"
    prefill_attention: str = "prefill-default"
    mla_attention: str = "mla-latent"
    # MLA verify steps (q_len > 1) where the engine runs them through another kernel than its MLA decode
    # ("" = mla_attention); e.g. SGLang 0.4.10 on ROCm with speculation: Triton's extend kernel (kernels/)
    mla_verify_attention: str = ""
    # per compute dtype: multipliers of the hardware's GEMM mem_bw_fraction / compute_max_fraction for this engine's
    # GEMM kernels (the H100 profile is fitted on TensorRT-LLM's); {} = the hardware's own fractions
    gemm_mem_bw_scale: dict[str, float] = Field(default_factory=dict)
    gemm_compute_scale: dict[str, float] = Field(default_factory=dict)
    # per compute dtype: output columns N at which the engine's GEMM compute rate halves (KernelEfficiency
    # compute_half_n: t_c x (1 + half_n / N)); {} = no N dependence
    gemm_compute_half_n: dict[str, float] = Field(default_factory=dict)
    # per compute dtype: the larger-tile kernel the engine dispatches at large M and K and its compute scale
    # (KernelEfficiency large_tile_*); {} = one kernel family at every M
    gemm_large_tile: dict[str, GemmTileSwitch] = Field(default_factory=dict)
    # per GPU generation (HardwareProfile.generation), the kernel families the engine picks there instead of the
    # ones above, e.g. {blackwell: {decode_attention: flashinfer}} (FlashAttention-3 does not run on Blackwell)
    attention_by_generation: dict[str, dict[Literal["decode_attention", "verify_attention", "prefill_attention",
                                                    "mla_attention", "mla_verify_attention"], str]] = Field(default_factory=dict)
    # the engine's tensor-parallel all-reduce family (costs/comm.py); None = the hardware profile's `algorithm`
    allreduce_algorithm: Literal["custom", "oneshot", "nccl"] | None = None
    # host seconds of one all-reduce the engine issues outside a CUDA graph (its custom op's dispatch, the copy
    # into the registered buffer and the kernel launches): the floor of an eager collective (costs/comm.py
    # eager_allreduce_s); 0 = no floor beyond the GPU's time
    allreduce_eager_s: float = Field(0.0, ge=0, le=MAX_TIME_S)
    # per GPU generation and expert weight format, the kernels one MoE layer of the engine's default MoE path
    # launches besides the router GEMM (top-k, routing metadata, the grouped GEMMs, activation, combine), counted in
    # the engine's code, e.g. {hopper: {mxfp4: 13}}; a format not listed keeps costs/moe.py's MOE_KERNELS
    moe_kernels: dict[str, dict[str, int]] = Field(default_factory=dict)
    sources: dict[str, str] = Field(default_factory=dict)
    notes: str = ""

    @field_validator("gemm_mem_bw_scale", "gemm_compute_scale")
    @classmethod
    def _gemm_scale(cls, v: dict[str, float], info) -> dict[str, float]:
        lo, hi = GEMM_SCALE_RANGE
        out = {}
        for k, val in v.items():
            if not (lo <= val <= hi):
                raise ValueError(f"{info.field_name}.{k}: must be in [{lo:g}, {hi:g}], got {val}")
            out[canonical_dtype(k, where=f"{info.field_name}.{k}")] = float(val)
        return out

    @field_validator("gemm_large_tile")
    @classmethod
    def _gemm_large_tile(cls, v: dict, info) -> dict:
        return {canonical_dtype(k, where=f"{info.field_name}.{k}"): t for k, t in v.items()}

    @field_validator("decode_attention", "verify_attention", "prefill_attention", "mla_attention",
                     "mla_verify_attention")
    @classmethod
    def _families(cls, v: str, info) -> str:
        _check_family(v, info.field_name)
        return v

    @field_validator("attention_by_generation")
    @classmethod
    def _families_by_generation(cls, v: dict) -> dict:
        for gen, roles in v.items():
            for role, fam in roles.items():
                _check_family(fam, f"attention_by_generation.{gen}.{role}")
        return v

    @field_validator("graph_batch_sizes")
    @classmethod
    def _graph_sizes(cls, v: list[int]) -> list[int]:
        if any(x <= 0 or x > MAX_BATCH for x in v):
            raise ValueError(f"graph_batch_sizes: batch sizes in 1 ... {MAX_BATCH}, got {min(v) if min(v) <= 0 else max(v)}")
        return sorted(set(v))

    @field_validator("spec_sync_mechanisms")
    @classmethod
    def _sync_mechanisms(cls, v: list[str]) -> list[str]:
        bad = [x for x in v if x not in SPEC_MECHANISMS]
        if bad:
            raise ValueError(f"spec_sync_mechanisms: '{bad[0]}' is not a speculative mechanism (known: "
                             f"{', '.join(SPEC_MECHANISMS)})")
        return list(v)

    @field_validator("moe_kernels")
    @classmethod
    def _moe_kernels(cls, v: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
        for gen in v:
            if gen not in GENERATIONS:
                raise ValueError(f"moe_kernels.{gen}: a GPU generation, one of {', '.join(GENERATIONS)}")
        return {gen: moe_kernel_counts(per, f"moe_kernels.{gen}") for gen, per in v.items()}

    @field_validator("rejection_passes")
    @classmethod
    def _rejection_passes(cls, v: dict[str, list[float]]) -> dict[str, list[float]]:
        return rejection_pass_table(v, "rejection_passes")

    @field_validator("rejection_passes_by_mechanism")
    @classmethod
    def _rejection_passes_by_mechanism(cls, v: dict[str, dict[str, list[float]]]) -> dict:
        return {m: rejection_pass_table(t, f"rejection_passes_by_mechanism.{m}") for m, t in v.items()}

    @field_validator("moe_block_m")
    @classmethod
    def _moe_block_m(cls, v: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
        out = {}
        for gen, per in v.items():
            if gen not in GENERATIONS:
                raise ValueError(f"moe_block_m.{gen}: a GPU generation, one of {', '.join(GENERATIONS)}")
            out[gen] = {}
            for k, rule in per.items():
                if rule not in MOE_BLOCK_M_RULES:
                    raise ValueError(f"moe_block_m.{gen}.{k}: one of {', '.join(MOE_BLOCK_M_RULES)}, got {rule!r}")
                out[gen][canonical_dtype(k, where=f"moe_block_m.{gen}.{k}")] = rule
        return out

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data):
        if isinstance(data, dict) and "prefill_cohort" in data:  # session 6: the start-up term changed its form
            raise ValueError("prefill_cohort: replaced by startup_client_s, seconds each other client adds to TTFT "
                             "when a benchmark starts all clients at once (docs/serving.md)")
        return data

    @model_validator(mode="after")
    def _sourced(self) -> "EngineProfile":
        numeric = ("host_step_s", "host_per_seq_s", "graph_launch_s", "eager_launch_s", "eager_step_s", "step_gap_s",
                   "max_num_batched_tokens",
                   "max_num_seqs", "spec_max_num_seqs", "prefill_tokens_s", "spec_iteration_overhead_s",
                   "spec_draft_step_overhead_s",
                   "spec_host_per_seq_s", "verify_graph_max_tokens", "draft_graph_max_batch", "graph_max_batch",
                   "startup_client_s", "startup_prefill_frac", "gemm_mem_bw_scale", "gemm_compute_scale", "gemm_compute_half_n", "gemm_large_tile", "moe_kernels",
                   "allreduce_eager_s",
                   "graph_batch_sizes", "spec_topk", "spec_round_host_s", "spec_round_host_by_mechanism", "tree_mask_full",
                   "tree_draft_prefix_per_candidate", "rejection_passes", "rejection_passes_by_mechanism",
                   "moe_block_m")
        missing = [k for k in numeric if getattr(self, k) and k not in self.sources]
        if missing:
            raise ValueError(f"sources: every number needs a source; missing for {', '.join(missing)}")
        return self

    def family_id(self, role: str, hw: HardwareProfile | None = None) -> str:
        """The kernel family id the engine runs for `role` (decode_attention, verify_attention, prefill_attention,
        mla_attention, mla_verify_attention) on `hw`'s GPU generation (attention_by_generation), else its default;
        an unset mla_verify_attention is the MLA decode family."""
        gen = self.attention_by_generation.get(hw.generation, {}) if hw is not None and hw.generation else {}
        fam = gen.get(role, getattr(self, role))
        if role == "mla_verify_attention" and not fam:
            return self.family_id("mla_attention", hw)
        return fam

    def for_mechanism(self, mechanism: str) -> "EngineProfile":
        """This engine as it runs `mechanism`: with spec_overlap off where the engine turns its overlap scheduler off
        for that mechanism (spec_sync_mechanisms) or for tree drafts (spec_sync_tree with spec_topk > 1), and with
        the mechanism's own round launches (spec_round_host_by_mechanism) and verify sampling passes
        (rejection_passes_by_mechanism), else itself. Only the speculative rounds
        change: steps priced by step_s (a prefill-only step, OSL 1, a disaggregated prefill pool) keep
        overlap_scheduler, as the baseline server's launch has it."""
        upd: dict = {}
        if mechanism in self.spec_round_host_by_mechanism:
            upd["spec_round_host_s"] = float(self.spec_round_host_by_mechanism[mechanism])
        if mechanism in self.rejection_passes_by_mechanism:
            upd["rejection_passes"] = {**self.rejection_passes, **self.rejection_passes_by_mechanism[mechanism]}
        tree_sync = self.spec_sync_tree and (self.spec_topk or 1) > 1 and mechanism != "none"
        if self.spec_overlap and (mechanism in self.spec_sync_mechanisms or tree_sync):
            upd["spec_overlap"] = False
        return _adjusted(self, mechanism, upd) if upd else self

    def for_hardware(self, hw: HardwareProfile | None, tp: int = 1) -> "EngineProfile":
        """This engine as it starts on `hw` at tensor-parallel size `tp`: the fields its hardware_defaults set there
        (later rules win), else itself; one copy per (engine, GPU, TP), kept."""
        if hw is None or not self.hardware_defaults or self.resolved_for:
            return self
        upd: dict = {}
        for rule in self.hardware_defaults:
            if rule.applies(hw, int(tp)):
                upd.update(rule.set)
        kept = self._set_by_caller()
        upd = {k: v for k, v in upd.items() if k not in kept}
        key = f"{hw.id} tp{int(tp)}"
        return _adjusted(self, f"hw:{key}:{hw.mem_capacity_bytes:g}:{hw.generation}", {**upd, "resolved_for": key})

    def _set_by_caller(self) -> set[str]:
        """The per-hardware fields this profile sets itself (its YAML's top level, a caller's model_copy): an explicit
        value wins over hardware_defaults, which fill only the fields left at the class default."""
        return set(HARDWARE_DEFAULT_FIELDS) & set(self.model_fields_set)

    def graphed(self, batch, cap=None) -> np.ndarray:
        """True where a step of `batch` sequences replays a CUDA graph: up to `cap` (default graph_max_batch; 0 =
        no cap) with padding, else only at the captured sizes (graph_batch_sizes, a batch taken at its nearest whole
        size) up to the cap; False everywhere without decode graphs."""
        b = np.asarray(batch, dtype=float)
        cap = self.graph_max_batch if cap is None else cap
        lim = np.asarray(cap if cap else np.inf, dtype=float)
        ok = bool(self.cuda_graphs_decode) & (b <= lim)
        if self.graph_padding or not self.graph_batch_sizes:
            return ok
        return ok & np.isin(np.round(b), np.asarray(self.graph_batch_sizes, dtype=float))

    def as_launched(self) -> "EngineProfile":
        """This engine as specplan's launch files start it: the speculative running cap lifted (spec_max_num_seqs
        None; SGLang: --max-running-requests set to the answer's concurrency), else itself; one copy, kept."""
        if self.spec_max_num_seqs is None:
            return self
        return _adjusted(self, "launched", {"spec_max_num_seqs": None})

    def per_dp_rank(self, dp: int) -> "EngineProfile":
        """This engine as one of `dp` data-parallel attention ranks schedules: with dp_attention_limits "divided"
        its running caps and token budget divided by dp (at least 1), else itself (each rank applies them)."""
        if dp <= 1 or self.dp_attention_limits != "divided":
            return self
        cut = lambda v: None if v is None else max(1, int(v) // dp)  # noqa: E731
        return _adjusted(self, f"dp{dp}", {"max_num_seqs": cut(self.max_num_seqs),
                                            "spec_max_num_seqs": cut(self.spec_max_num_seqs),
                                            "max_num_batched_tokens": cut(self.max_num_batched_tokens)})

    def launch_s(self, graphed) -> float:
        """Extra seconds per kernel launch: graph_launch_s inside a CUDA graph, eager_launch_s otherwise."""
        return np.where(graphed, self.graph_launch_s, self.eager_launch_s)

    def host_s(self, batch, prompt_tokens=0.0) -> np.ndarray:
        """Scheduler host seconds of one step: host_step_s + batch x host_per_seq_s + prompt_tokens x
        prefill_tokens_s (the prompt tokens the step carries)."""
        host = self.host_step_s + np.asarray(batch, dtype=float) * self.host_per_seq_s
        if isinstance(prompt_tokens, (int, float)) and prompt_tokens == 0 and isinstance(self.prefill_tokens_s, float):
            return host  # the prompt term is a scalar zero (a decode step): the same numbers, one array op fewer
        return host + np.asarray(prompt_tokens, dtype=float) * self.prefill_tokens_s

    def combine_s(self, gpu_s, host_s, launches_s, overlap) -> np.ndarray:
        """Seconds of a step from its GPU, host and launch seconds: max(gpu, host + launches) where `overlap`, else
        host + max(gpu, launches) (launches always run ahead of the GPU), plus step_gap_s."""
        step = np.where(overlap, np.maximum(gpu_s, host_s + launches_s), host_s + np.maximum(gpu_s, launches_s))
        return step + self.step_gap_s

    def step_s(self, gpu_s, batch, kernels, graphed, prompt_tokens=0.0) -> np.ndarray:
        """Seconds of one engine step from its GPU seconds: kernel launches (kernels x launch_s, plus eager_step_s
        for a step that does not replay a graph) overlap the GPU (the launch queue runs ahead); the scheduler's
        host time (host_step_s + batch x host_per_seq_s + prompt_tokens x prefill_tokens_s, the last for the
        prompt tokens the step carries) overlaps it too with an overlap scheduler, else adds; step_gap_s adds:
            overlap:  max(gpu, host + launches) + gap        no overlap: host + max(gpu, launches) + gap"""
        launches = np.asarray(kernels, dtype=float) * self.launch_s(graphed) + np.where(graphed, 0.0,
                                                                                        self.eager_step_s)
        return self.combine_s(gpu_s, self.host_s(batch, prompt_tokens), launches, bool(self.overlap_scheduler))


def _check_family(ref: str, field: str) -> None:
    """A kernel family reference: a built-in id (engine_profiles/kernels/), a YAML path that exists, or "" for an
    unset mla_verify_attention; a ValueError naming the field otherwise."""
    from pathlib import Path

    from specplan.profiles.registry import kernel_family_ids

    if ref == "" and field.endswith("mla_verify_attention"):
        return
    if ref.endswith((".yaml", ".yml")) or "/" in ref:  # a path, as registry._resolve reads it
        if not Path(ref).is_file():
            raise ValueError("kernel family file not found")
        return
    known = kernel_family_ids()
    if ref not in known and ref.lower() not in known:
        raise ValueError(f"unknown kernel family id (known: {', '.join(known)})")


_SYNC_ENGINES: dict = {}  # (id(engine), mechanism or 'launched') -> (engine, its adjusted copy): ids stay valid
SYNC_CACHE_MAX = 256  # entries kept before the cache starts again (a caller passing fresh engine copies)


def rejection_pass_table(v: dict, where: str) -> dict[str, list[float]]:
    """{rejection mode: [passes per verified row, passes per request]}: modes greedy / probabilistic, row passes
    >= 0 and row + request >= 0 (a verify of one token per request costs nothing beyond the plain sampler)."""
    out = {}
    for mode, pair in v.items():
        if mode not in ("greedy", "probabilistic"):
            raise ValueError(f"{where}.{mode}: a rejection mode, greedy or probabilistic")
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ValueError(f"{where}.{mode}: [passes per verified row, passes per request], got {pair!r}")
        row, req = float(pair[0]), float(pair[1])
        if not (0.0 <= row <= 1000.0) or row + req < 0.0 or abs(req) > 1000.0:
            raise ValueError(f"{where}.{mode}: needs 0 <= row passes <= 1000 and row + request passes >= 0, got {pair}")
        out[mode] = [row, req]
    return out


def _adjusted(eng: "EngineProfile", key: str, update: dict) -> "EngineProfile":
    """`eng` with `update` applied, one copy per (engine, key) while the cache holds it (the entry keeps `eng`
    alive, so its id cannot name another engine)."""
    k = (id(eng), key)
    if k not in _SYNC_ENGINES:
        if len(_SYNC_ENGINES) >= SYNC_CACHE_MAX:
            _SYNC_ENGINES.clear()
        _SYNC_ENGINES[k] = (eng, eng.model_copy(update=update))
    return _SYNC_ENGINES[k][1]
_ENGINE_HW: dict = {}  # (id(hardware), id(engine)) -> (hardware, engine, scaled hardware): the objects keep ids valid
ENGINE_APPLIED = "engine_applied"  # the sources key an engine-adjusted hardware copy carries (engine_hardware)


def engine_hardware(hw: HardwareProfile, engine: "EngineProfile | None") -> HardwareProfile:
    """`hw` with the engine's GEMM scales applied to its per-dtype GEMM efficiencies (fractions capped at 1), the
    engine's all-reduce family, its MoE kernel counts and MoE row-tile rules on `hw`'s generation set; `hw` itself
    when the engine changes none of them (or is None), or when `hw` already carries an engine's changes (sources
    ENGINE_APPLIED)."""
    moe_k = engine.moe_kernels.get(hw.generation, {}) if engine is not None and hw.generation else {}
    moe_bm = engine.moe_block_m.get(hw.generation, {}) if engine is not None and hw.generation else {}
    if engine is None or ENGINE_APPLIED in hw.sources or not (
            engine.gemm_mem_bw_scale or engine.gemm_compute_scale or engine.gemm_compute_half_n
            or engine.gemm_large_tile or moe_k or moe_bm or (
            engine.allreduce_algorithm and engine.allreduce_algorithm != hw.allreduce.algorithm)):
        return hw  # never applied twice, whichever engine asks
    key = (id(hw), id(engine))
    if key not in _ENGINE_HW:
        eff = dict(hw.efficiency)
        scaled = (set(engine.gemm_mem_bw_scale) | set(engine.gemm_compute_scale) | set(engine.gemm_compute_half_n)
                  | set(engine.gemm_large_tile))
        for d in sorted(scaled):
            blk = eff.get(d, eff["default"])
            tile = engine.gemm_large_tile.get(d)
            eff[d] = blk.model_copy(update={
                "mem_bw_fraction": min(1.0, blk.mem_bw_fraction * engine.gemm_mem_bw_scale.get(d, 1.0)),
                "compute_max_fraction": min(1.0, blk.compute_max_fraction * engine.gemm_compute_scale.get(d, 1.0)),
                "compute_half_n": engine.gemm_compute_half_n.get(d, blk.compute_half_n),
                **({"large_tile_min_m": tile.min_m, "large_tile_min_k": tile.min_k,
                    "large_tile_compute_scale": tile.compute_scale} if tile else {})})
        allreduce = hw.allreduce
        if engine.allreduce_algorithm:
            allreduce = allreduce.model_copy(update={"algorithm": engine.allreduce_algorithm})
        sources = {**hw.sources, ENGINE_APPLIED: f"engine {engine.id}'s GEMM scales, all-reduce family and "
                                                 f"MoE kernel counts (engine_profiles/{engine.id}.yaml)"}
        if engine.gemm_mem_bw_scale or engine.gemm_compute_scale or engine.gemm_compute_half_n or engine.gemm_large_tile:
            sources["efficiency"] = (f"{hw.sources.get('efficiency', '')}; GEMM fractions scaled by engine "
                                     f"{engine.id} (engine_profiles/{engine.id}.yaml)")
        adjusted = hw.model_copy(update={"efficiency": eff, "allreduce": allreduce,
                                         "moe_kernels": {**hw.moe_kernels, **moe_k},
                                         "moe_block_m": {**hw.moe_block_m, **moe_bm}, "sources": sources})
        if len(_ENGINE_HW) > 256:
            _ENGINE_HW.clear()
        _ENGINE_HW[key] = (hw, engine, HardwareProfile.model_validate(adjusted.model_dump()))
    return _ENGINE_HW[key][2]

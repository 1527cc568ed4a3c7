"""ModelProfile: the architecture of a target model or draft head (layers, heads, FFN/MoE, MLA, hybrids, MTP)."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from specplan.core.dtypes import canonical_dtype
from specplan.core.errors import SpecplanError
from specplan.core.limits import MAX_PROFILE_INT

# Keys of ModelProfile.module_dtypes (any other key is an error, not silently ignored).
MODULE_KEYS = ("attention", "linear_attention", "mamba", "ffn", "moe", "shared_experts", "router", "fc", "lm_head",
               "embedding", "mtp", "other")


class _Frozen(BaseModel):
    """Frozen, no unknown fields, strict numbers (YAML `true` is not 1) and every integer <= MAX_PROFILE_INT."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False, defer_build=True)

    @model_validator(mode="after")
    def _bounded_ints(self):
        for name in type(self).model_fields:
            v = getattr(self, name)
            if isinstance(v, int) and not isinstance(v, bool) and v > MAX_PROFILE_INT:
                raise ValueError(f"{name}: must be <= {MAX_PROFILE_INT:,}, got {v}")
        return self


class MoE(_Frozen):
    """Mixture of experts: routed experts, top-k, shared experts, leading dense layers."""

    num_experts: int = Field(gt=0)
    top_k: int = Field(gt=0)
    expert_ffn_size: int = Field(gt=0)
    num_shared_experts: int = Field(0, ge=0)
    shared_expert_ffn_size: int = Field(0, ge=0)  # total intermediate size of all shared experts
    dense_layers: int = Field(0, ge=0)  # leading layers with a dense FFN of `ffn_size`
    router_bias: bool = False  # a per-expert bias vector (gpt-oss router bias, DeepSeek/Nemotron score-correction bias)
    shared_expert_gate: bool = False  # Qwen3-Next / Qwen3.5: a sigmoid gate (h -> 1) on the shared expert's output
    # Group-limited routing (DeepSeek-V3 `n_group`, `topk_group`): experts in n_group equal groups, a token picks
    # its top_k experts within topk_group groups. 1 and 1 = unrestricted top-k over all experts.
    n_group: int = Field(1, gt=0)
    topk_group: int = Field(1, gt=0)
    latent_size: int | None = Field(None, gt=0)  # LatentMoE (Nemotron-H): routed experts run in this width (h -> latent -> h)
    hash_layers: int = Field(0, ge=0)  # DeepSeek-V4: leading MoE layers whose experts a token-id table picks (the
    # router GEMM still scores them)

    @model_validator(mode="after")
    def _k(self) -> "MoE":
        if self.top_k > self.num_experts:
            raise ValueError(f"moe.top_k: must be <= num_experts ({self.num_experts}), got {self.top_k}")
        if self.num_experts % self.n_group:
            raise ValueError(f"moe.n_group: must divide num_experts ({self.num_experts}), got {self.n_group}")
        if self.n_group > 1 and not (1 <= self.topk_group <= self.n_group):
            raise ValueError(f"moe.topk_group: must be in 1 ... n_group ({self.n_group}), got {self.topk_group}")
        if self.n_group > 1 and self.top_k > self.topk_group * (self.num_experts // self.n_group):
            raise ValueError(f"moe.topk_group: {self.topk_group} groups of {self.num_experts // self.n_group} "
                             f"experts cannot hold top_k = {self.top_k}")
        return self

    @property
    def group_limited(self) -> bool:
        """True when a token's experts come from topk_group < n_group groups."""
        return self.n_group > 1 and self.topk_group < self.n_group


class MLA(_Frozen):
    """Multi-head latent attention (DeepSeek): LoRA ranks and head dims."""

    q_lora_rank: int = Field(0, ge=0)  # 0 = no query compression
    kv_lora_rank: int = Field(gt=0)
    qk_rope_head_dim: int = Field(gt=0)
    qk_nope_head_dim: int = Field(gt=0)
    v_head_dim: int = Field(gt=0)


class LinearAttention(_Frozen):
    """Gated DeltaNet-style linear attention: heads and dims of its recurrent state."""

    num_k_heads: int = Field(gt=0)
    num_v_heads: int = Field(gt=0)
    head_k_dim: int = Field(gt=0)
    head_v_dim: int = Field(gt=0)
    conv_kernel: int = Field(4, ge=1)


class Mamba(_Frozen):
    """Mamba-2 mixer: heads, head dim, state size, groups, conv kernel."""

    num_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    d_state: int = Field(gt=0)
    n_groups: int = Field(1, gt=0)
    conv_kernel: int = Field(4, ge=1)


class Indexer(_Frozen):
    """DeepSeek Sparse Attention lightning indexer: small heads score the whole context, attention reads the top-k."""

    num_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    topk: int = Field(gt=0)  # tokens (V3.2) or compressed entries (V4 CSA) each query attends to


class CompressedAttention(_Frozen):
    """DeepSeek-V4 attention: one shared 512-dim KV head, sliding window plus a compressed branch, grouped output."""

    csa_rate: int = Field(4, gt=0)  # compressed sparse attention: one entry per csa_rate tokens, top-k via the indexer
    hca_rate: int = Field(128, gt=0)  # heavily compressed attention: one entry per hca_rate tokens, all read
    q_lora_rank: int = Field(gt=0)
    o_groups: int = Field(gt=0)
    o_lora_rank: int = Field(gt=0)
    hc_mult: int = Field(1, gt=0)  # manifold-constrained hyper-connections: residual streams per layer


# full / sliding: softmax attention over the context / the last `sliding_window` tokens; chunked: Llama 4 local
# attention within `attention_chunk_size` blocks; linear: Gated DeltaNet; mamba: Mamba-2; attn_linear: attention
# replaced by one h x h linear (Nemotron NAS); csa / hca: DeepSeek-V4 compressed attention; none: no mixer.
Mixer = Literal["full", "sliding", "chunked", "linear", "mamba", "attn_linear", "csa", "hca", "none"]
Ffn = Literal["dense", "moe", "linear", "none"]  # linear: FFN replaced by one h x h linear (Nemotron NAS)
MIXERS, FFNS = get_args(Mixer), get_args(Ffn)
ATTENTION_MIXERS = ("full", "sliding", "chunked", "csa", "hca")


class LayerGroup(_Frozen):
    """`count` layers with the same token mixer and FFN kind (order does not matter for cost).

    The optional fields override the model's value for these layers (None: the model's)."""

    mixer: Mixer
    ffn: Ffn
    count: int = Field(gt=0)
    ffn_size: int | None = Field(None, gt=0)  # dense FFN width of these layers (Nemotron NAS ffn_mult)
    num_kv_heads: int | None = Field(None, gt=0)  # (Gemma 4 global layers, Nemotron NAS n_heads_in_group)
    head_dim: int | None = Field(None, gt=0)  # (Gemma 4 global_head_dim)
    kv_shared: bool = False  # reuses an earlier layer's K/V: no k/v projections, no KV cache (Gemma 4)
    k_eq_v: bool = False  # values are the keys' projection: no v projection (Gemma 4 attention_k_eq_v)


def layer_group(mixer: str, ffn: str, count: int) -> LayerGroup:
    """LayerGroup(mixer=, ffn=, count=) of a mixer and FFN kind that LayerGroup accepts and a count > 0, built
    without running pydantic (the same object; a cold command builds no validator for it); anything else is
    validated, so it fails as LayerGroup(...) does."""
    if mixer in MIXERS and ffn in FFNS and type(count) is int and count > 0:
        return LayerGroup.model_construct(mixer=mixer, ffn=ffn, count=count)
    return LayerGroup(mixer=mixer, ffn=ffn, count=count)


class MTP(_Frozen):
    """Multi-token-prediction modules: each one decoder layer plus a 2h -> h projection; shares the LM head."""

    num_layers: int = Field(gt=0)
    mixer: Mixer = "full"  # "full" means the model's own full attention (MLA when `mla` is set, gated when attn_output_gate)
    ffn: Ffn = "moe"


class ModelProfile(_Frozen):
    """Architecture of one model or draft head; every number names its source in `sources`."""

    id: str = Field(min_length=1, max_length=255)
    name: str = Field("", max_length=1000)
    hf_repo: str = ""
    kind: Literal["model", "eagle3_head", "medusa_heads"] = "model"
    num_layers: int = Field(gt=0)
    hidden_size: int = Field(gt=0)
    num_q_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    ffn_size: int = Field(0, ge=0)  # dense FFN intermediate size (gated: 3 matrices)
    vocab_size: int = Field(gt=0)
    draft_vocab_size: int | None = Field(None, gt=0)  # EAGLE-3 heads predict over a reduced vocabulary
    num_draft_heads: int | None = Field(None, gt=0)  # medusa_heads: number of heads (each num_layers ResBlocks + LM head)
    tie_embeddings: bool = False
    attn_output_gate: bool = False  # query projection doubled for an output gate (Qwen3-Next / Qwen3.5)
    gated_ffn: bool = True  # FFN and experts gated (SwiGLU: gate, up, down = 3 matrices); False: up, down (Nemotron relu^2)
    attention_bias: bool = False  # biases on q/k/v/o projections (gpt-oss)
    mlp_bias: bool = False  # biases on FFN / expert projections (gpt-oss)
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3, Qwen3-Next, Qwen3.5): 2 * head_dim weights per layer
    attention_sinks: bool = False  # one learned sink logit per query head and layer (gpt-oss)
    moe: MoE | None = None
    mla: MLA | None = None
    sliding_window: int | None = Field(None, gt=0)
    chunk_size: int | None = Field(None, gt=0)  # Llama 4 chunked local attention (attention_chunk_size), tokens
    indexer: Indexer | None = None  # DeepSeek-V3.2 (every MLA layer) / V4 (csa layers) sparse attention
    compressed_attention: CompressedAttention | None = None  # DeepSeek-V4 attention in every layer
    norms_per_layer: int | None = Field(None, ge=0)  # hidden-size norms per layer; None: one per mixer and per FFN
    per_layer_input_size: int = Field(0, ge=0)  # Gemma per-layer embeddings (PLE): width per layer
    per_layer_vocab_size: int = Field(0, ge=0)  # Gemma PLE table rows
    max_context_len: int | None = Field(None, gt=0)  # longest sequence (prompt + output) the model takes, tokens
    linear_attention: LinearAttention | None = None
    mamba: Mamba | None = None
    layer_groups: list[LayerGroup] | None = None  # None: every layer full attention (+ MoE if moe)
    mtp: MTP | None = None
    weight_dtype: str = "bf16"
    # Per-module weight formats overriding weight_dtype. Keys: attention (q/k/v/o of full and sliding layers, MLA
    # projections), linear_attention (Gated DeltaNet projections), mamba (Mamba-2 in_proj/out_proj), ffn (dense FFN),
    # moe (routed and shared experts), lm_head, embedding, mtp (the MTP modules as a whole).
    module_dtypes: dict[str, str] = Field(default_factory=dict)
    # Recurrent-state dtype of linear-attention / Mamba layers (HF mamba_ssm_dtype in Qwen3-Next / Qwen3.5,
    # mamba_ssm_cache_dtype in Nemotron-H); engines may override it (Precision.state).
    state_dtype: str = "fp32"
    kv_cache_dtype: str | None = None  # KV-cache format the checkpoint was calibrated for (e.g. fp8), if it names one
    architecture: str = ""  # Hugging Face model_type the profile was imported from (informational)
    sources: dict[str, str] = Field(default_factory=dict)
    notes: str = ""

    @model_validator(mode="after")
    def _check(self) -> "ModelProfile":
        if self.num_q_heads % self.num_kv_heads != 0:
            raise ValueError(
                f"num_q_heads: must be a multiple of num_kv_heads ({self.num_kv_heads}), got {self.num_q_heads}"
            )
        canonical_dtype(self.weight_dtype, where="weight_dtype")
        for k, v in self.module_dtypes.items():
            if k not in MODULE_KEYS:
                raise ValueError(f"module_dtypes.{k}: unknown module (known: {', '.join(MODULE_KEYS)})")
            canonical_dtype(v, where=f"module_dtypes.{k}")
        canonical_dtype(self.state_dtype, where="state_dtype")
        if self.kv_cache_dtype is not None:
            canonical_dtype(self.kv_cache_dtype, where="kv_cache_dtype")
        groups = self.groups()
        for g in groups:
            if g.num_kv_heads and self.num_q_heads % g.num_kv_heads:
                raise ValueError(f"layer_groups.num_kv_heads: {g.num_kv_heads} does not divide {self.num_q_heads} query heads")
        n = sum(g.count for g in groups)
        if n != self.num_layers:
            raise ValueError(f"layer_groups: counts sum to {n}, but num_layers is {self.num_layers}")
        for g in groups:
            if g.mixer == "sliding" and self.sliding_window is None:
                raise ValueError("sliding_window: required when a layer group uses mixer 'sliding'")
            if g.mixer == "chunked" and self.chunk_size is None:
                raise ValueError("chunk_size: required when a layer group uses mixer 'chunked'")
            if g.mixer in ("csa", "hca") and self.compressed_attention is None:
                raise ValueError(f"compressed_attention: required when a layer group uses mixer '{g.mixer}'")
            if g.mixer == "csa" and self.indexer is None:
                raise ValueError("indexer: required when a layer group uses mixer 'csa'")
            if g.mixer == "linear" and self.linear_attention is None:
                raise ValueError("linear_attention: required when a layer group uses mixer 'linear'")
            if g.mixer == "mamba" and self.mamba is None:
                raise ValueError("mamba: required when a layer group uses mixer 'mamba'")
            if g.ffn == "moe" and self.moe is None:
                raise ValueError("moe: required when a layer group uses ffn 'moe'")
            if g.ffn == "dense" and (g.ffn_size or self.ffn_size) <= 0:
                raise ValueError("ffn_size: must be > 0 when a layer group uses a dense FFN")
        return self

    def groups(self) -> list[LayerGroup]:
        """Layer groups, with the default (all full attention; leading dense layers for MoE) filled in."""
        if self.layer_groups is not None:
            return list(self.layer_groups)
        if self.moe is None:
            return [layer_group("full", "dense", self.num_layers)]
        out = []
        if self.moe.dense_layers:
            out.append(layer_group("full", "dense", self.moe.dense_layers))
        out.append(layer_group("full", "moe", self.num_layers - self.moe.dense_layers))
        return out

    @property
    def group_size(self) -> int:
        """GQA group size G on one device without TP (query heads per KV head)."""
        return self.num_q_heads // self.num_kv_heads

    def dtype_of(self, module: str) -> str:
        """Weight dtype of one module (attention, ffn, moe, shared_experts, lm_head, embedding, mtp, ...).

        shared_experts falls back to moe's dtype (one format for all experts unless the checkpoint says otherwise)."""
        if module == "shared_experts" and module not in self.module_dtypes:
            module = "moe"
        return canonical_dtype(self.module_dtypes.get(module, self.weight_dtype))

    def kv_heads_of(self, g: LayerGroup) -> int:
        """KV heads of one layer group's attention."""
        return g.num_kv_heads or self.num_kv_heads

    def head_dim_of(self, g: LayerGroup) -> int:
        """Head dim of one layer group's attention."""
        return g.head_dim or self.head_dim

    def ffn_size_of(self, g: LayerGroup) -> int:
        """Dense FFN width of one layer group."""
        return g.ffn_size or self.ffn_size

    def check_tp(self, tp: int) -> None:
        """Raise a one-line error unless TP splits the query heads evenly."""
        if tp < 1:
            raise SpecplanError(f"tp: must be >= 1, got {tp}")
        if self.num_q_heads % tp != 0:
            raise SpecplanError(f"tp: {tp} does not divide the {self.num_q_heads} query heads of {self.id}")

    def heads_per_device(self, tp: int, kv_heads: int | None = None) -> tuple[int, int]:
        """(query heads, KV heads) on one device under TP; KV heads fewer than TP are replicated.

        `kv_heads` overrides the model's KV head count (a layer group's own)."""
        self.check_tp(tp)
        kv_heads = kv_heads or self.num_kv_heads
        if self.mla is None and kv_heads % tp and tp % kv_heads:
            raise SpecplanError(f"tp: {tp} neither divides nor is a multiple of the {kv_heads} KV heads of {self.id}")
        q = self.num_q_heads // tp
        kv = max(1, kv_heads // tp)
        return q, kv

    def g_dev(self, tp: int = 1) -> int:
        """Per-device GQA group size: query heads per KV head on one device (MLA: all heads share one latent)."""
        q, kv = self.heads_per_device(tp)
        if self.mla is not None:
            return q
        return max(1, q // kv)

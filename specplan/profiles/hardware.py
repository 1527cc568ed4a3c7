"""HardwareProfile: peak FLOPS per dtype, memory, links, overheads and efficiencies of one device."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from specplan.core.dtypes import canonical_dtype, math_dtype
from specplan.core.errors import SpecplanError

# Bounds that keep every derived time finite (see specplan.core.limits): a fraction of the spec sheet is at least
# 1e-3, a rate (FLOP/s, bytes/s) at least 1e6 and at most 1e21, a time at most 1 s; no number is NaN or inf and
# numbers are numbers (strict: YAML `true` is not 1).
MIN_FRACTION = 1e-3
MIN_RATE, MAX_RATE = 1e6, 1e21
MAX_TIME_S = 1.0
MAX_BYTES = 1e18


def kv_fractions(v: dict[str, float], where: str) -> dict[str, float]:
    """{canonical KV dtype: fraction in [MIN_FRACTION, 1]} of a per-KV-dtype bandwidth table, or a ValueError."""
    out = {}
    for k, val in v.items():
        if not (MIN_FRACTION <= val <= 1):
            raise ValueError(f"{where}.{k}: must be in [{MIN_FRACTION:g}, 1], got {val}")
        out[canonical_dtype(k, where=f"{where}.{k}")] = float(val)
    return out


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False, defer_build=True)


class KernelEfficiency(_Frozen):
    """Achievable fractions of the spec sheet for one compute dtype (GEMMs and element-wise kernels)."""

    mem_bw_fraction: float = Field(0.80, ge=MIN_FRACTION, le=1)
    compute_max_fraction: float = Field(0.75, ge=MIN_FRACTION, le=1)
    # GEMM FLOPs at which compute efficiency reaches half of its saturation level (eff = max * f / (f + half)).
    compute_half_flops: float = Field(1.0e9, ge=0, le=MAX_RATE)
    # Extra seconds per GEMM for activation quantization (fp8/fp4 paths of some frameworks).
    quant_overhead_s: float = Field(0.0, ge=0, le=MAX_TIME_S)
    # Sharpness p of the roofline corner: busy = (compute^p + memory^p)^(1/p) (memory and compute overlap
    # imperfectly near the ridge); 0 = the hard max(compute, memory).
    roofline_sharpness: float = Field(0.0, ge=0, le=64)
    # Seconds per element of the reduction dimension K added to a GEMM (the serial K loop of a CTA: latency of
    # its load -> MMA pipeline that bandwidth does not hide); 0 = none.
    k_latency_s: float = Field(0.0, ge=0, le=MAX_TIME_S)
    # Output columns N at which a GEMM's compute rate is half its saturation level (t_c x (1 + half_n / N): a
    # kernel whose CTAs cover few output columns keeps fewer tiles in flight); 0 = no N dependence.
    compute_half_n: float = Field(0.0, ge=0, le=1.0e6)
    # Where the kernel's dispatch switches to a larger output tile (M >= large_tile_min_m and K >= large_tile_min_k,
    # e.g. vLLM's SM90 fp8 256x128 cooperative kernel), its compute term is divided by large_tile_compute_scale;
    # large_tile_min_m 0 = no switch.
    large_tile_min_m: int = Field(0, ge=0, le=1 << 30)
    large_tile_min_k: int = Field(0, ge=0, le=1 << 30)
    large_tile_compute_scale: float = Field(1.0, ge=0.1, le=10.0)


class AttentionEfficiency(_Frozen):
    """Achievable fractions for decode/verify attention kernels."""

    mem_bw_fraction: float = Field(0.75, ge=MIN_FRACTION, le=1)
    compute_fraction: float = Field(0.45, ge=MIN_FRACTION, le=1)
    # Fraction of a re-read K/V tile served from L2 in the `reread` kernel style.
    l2_hit_fraction: float = Field(0.5, ge=0, le=1)
    tile_rows: int = Field(128, gt=0, le=65536)
    # Per-KV-dtype override of mem_bw_fraction (e.g. {"fp8": 0.62}); dtypes not listed use mem_bw_fraction.
    kv_mem_bw_fraction: dict[str, float] = Field(default_factory=dict)
    # Fixed seconds of one CTA (one sequence x KV head x row tile: load Q, first KV tile, write O), whatever
    # kv_len is; CTAs run `sm_count` at a time, so it adds ceil(CTAs / sm_count) x this (needs sm_count).
    cta_overhead_s: float = Field(0.0, ge=0, le=MAX_TIME_S)

    @field_validator("kv_mem_bw_fraction")
    @classmethod
    def _check_kv_bw(cls, v: dict[str, float]) -> dict[str, float]:
        return kv_fractions(v, "attention.kv_mem_bw_fraction")

    def bw_fraction(self, kv_dtype: str) -> float:
        """Fraction of HBM bandwidth for reading KV of `kv_dtype`."""
        return self.kv_mem_bw_fraction.get(canonical_dtype(kv_dtype), self.mem_bw_fraction)


class AllReduceParams(_Frozen):
    """All-reduce cost parameters: latency (s) plus bytes over an effective bus bandwidth."""

    algorithm: Literal["custom", "oneshot", "nccl"] = "custom"
    custom_latency_s: float = Field(3.5e-6, ge=0, le=MAX_TIME_S)
    custom_bw_fraction: float = Field(0.45, ge=MIN_FRACTION, le=1)
    custom_max_bytes: float = Field(8.0e6, gt=0, le=MAX_BYTES)
    # `oneshot` family (TensorRT-LLM's custom kernels): one-shot up to this message size, NCCL ring beyond
    oneshot_max_bytes: float = Field(1.05e6, gt=0, le=MAX_BYTES)
    nccl_latency_s: float = Field(4.65e-6, ge=0, le=MAX_TIME_S)  # base latency
    nccl_latency_per_peer_s: float = Field(1.55e-6, ge=0, le=MAX_TIME_S)  # added per extra device in the ring
    nccl_bw_fraction: float = Field(0.75, ge=MIN_FRACTION, le=1)
    # NCCL's LL-protocol bus-bandwidth cap for the GPU generation on one node (llMaxBws, bytes/s); set: the NCCL
    # all-reduce is the cheapest of NCCL's ring protocols LL / LL128 / Simple (costs/comm.py nccl_terms) and
    # nccl_bw_fraction is Simple's fraction of the link; None: one ring at nccl_bw_fraction (RCCL, no NCCL source)
    nccl_ll_max_bw_bytes_s: float | None = Field(None, gt=0, le=MAX_BYTES)
    # NVLink SHARP (NCCL's NVLS algorithm): true where NCCL enables it (an NVSwitch with multicast, Hopper and
    # later; NCCL turns it off at <= 2 GPUs): the NCCL all-reduce is then the cheaper of the rings and NVLS, whose
    # devices each move (1 + 1/n) x bytes at nccl_bw_fraction x nvls_efficiency (NCCL's nvlsEfficiency for the
    # GPU generation) x 15/16 of the link, after nvls_latency_s (costs/comm.py nvls_terms)
    nvls: bool = False
    nvls_efficiency: float = Field(0.85, ge=MIN_FRACTION, le=1)
    nvls_latency_s: float = Field(25.0e-6, ge=0, le=MAX_TIME_S)
    # the smallest message NCCL runs with NVLS (its own cost model picks the rings below; the threshold it reaches
    # depends on the NVLS graph's runtime bandwidths, so it is read off measured rows: hardware profile sources)
    nvls_min_bytes: float = Field(0.0, ge=0, le=MAX_BYTES)


class AllToAllParams(_Frozen):
    """Expert-parallel dispatch / combine all-to-all: a latency per call and the achieved fraction of each fabric."""

    latency_s: float = Field(8.0e-6, ge=0, le=MAX_TIME_S)  # one call inside the scale-up (NVLink) domain
    scaleout_latency_s: float = Field(20.0e-6, ge=0, le=MAX_TIME_S)  # one call whose group spans nodes
    scaleup_bw_fraction: float = Field(0.77, ge=MIN_FRACTION, le=1)  # of scaleup_bandwidth_bytes_s
    scaleout_bw_fraction: float = Field(0.86, ge=MIN_FRACTION, le=1)  # of scaleout_bandwidth_bytes_s


# row-tile rules of engine MoE kernels that pick their tile from the batch (EngineProfile.moe_block_m; priced in
# costs/moe.py: "triton_kernels" = triton_kernels_block_m)
MOE_BLOCK_M_RULES = ("triton_kernels",)
MOE_FORMATS = ("bf16", "fp16", "fp8", "fp8_block", "fp4")  # keys of MoEGroupedEfficiency.compute_fraction


class MoEGroupedEfficiency(_Frozen):
    """Grouped-GEMM compute of a fused MoE layer (costs/moe.py): each expert's rows are cut into tiles of
    tile_rows x tile_cols outputs (the faster of the shapes listed: the kernels' autotuned tactics), the tiles run
    in waves over the SMs, and a full tile computes at compute_fraction of the dense peak of its format. fp8_block: fp8 weights with 128-wide block scales (DeepSeek,
    Qwen fp8 checkpoints); a format not listed keeps the dense-GEMM efficiency (the rule before this block).
    triton_compute_fraction: the full tile's fraction of a Triton grouped-GEMM kernel, per format of its MMA (fitted
    on Triton fused-MoE rows), for the engine kernels a row-tile rule names (MOE_BLOCK_M_RULES: triton_kernels'
    matmul_ogs); a format not listed there keeps compute_fraction."""

    tile_rows: list[int] = Field(default_factory=lambda: [32], min_length=1, max_length=8)
    tile_cols: list[int] = Field(default_factory=lambda: [128], min_length=1, max_length=8)
    compute_fraction: dict[str, float] = Field(default_factory=dict)
    triton_compute_fraction: dict[str, float] = Field(default_factory=dict)

    @field_validator("tile_rows", "tile_cols")
    @classmethod
    def _tiles(cls, v: list[int], info) -> list[int]:
        if any(not (0 < t <= 4096) for t in v):
            raise ValueError(f"{info.field_name}: tile sizes in 1 ... 4096, got {v}")
        return v

    @field_validator("compute_fraction", "triton_compute_fraction")
    @classmethod
    def _fractions(cls, v: dict[str, float], info) -> dict[str, float]:
        for k, val in v.items():
            if k not in MOE_FORMATS:
                raise ValueError(f"{info.field_name}.{k}: a MoE weight format, one of {', '.join(MOE_FORMATS)}")
            if not (MIN_FRACTION <= val <= 1):
                raise ValueError(f"{info.field_name}.{k}: must be in [{MIN_FRACTION:g}, 1], got {val}")
        return v


class PowerSpec(_Frozen):
    """Board power of one device: spec-sheet TDP, idle draw, and the split of dynamic power (fractions of TDP - idle).

    power = idle + (TDP - idle) x min(1, active_floor + compute x u_compute + memory x u_memory), where u_compute
    is the fraction of dense peak FLOP/s and u_memory of HBM bandwidth a step achieves (specplan.planning.cost)."""

    tdp_w: float = Field(gt=0, le=1e5)
    idle_w: float = Field(ge=0, le=1e5)
    active_floor: float = Field(ge=0, le=1)  # a busy GPU with no traffic (clocks up, kernels resident)
    compute: float = Field(ge=0, le=100)  # per unit of compute utilization
    memory: float = Field(ge=0, le=100)  # per unit of HBM bandwidth utilization

    @model_validator(mode="after")
    def _idle_below_tdp(self) -> "PowerSpec":
        if self.idle_w >= self.tdp_w:
            raise ValueError(f"power.idle_w: must be below tdp_w ({self.tdp_w:g} W), got {self.idle_w:g}")
        return self


MAX_MOE_KERNELS = 64  # kernels per MoE layer a profile may state; beyond is a typo
GENERATIONS = ("ampere", "hopper", "blackwell")  # the GPU generations engine profiles distinguish


def moe_kernel_counts(v: dict, where: str) -> dict[str, int]:
    """{expert weight format: kernels per MoE layer} with canonical format names and counts in 1 ... MAX_MOE_KERNELS
    (ValueError naming `where` otherwise)."""
    out = {}
    for k, n in v.items():
        if isinstance(n, bool) or not isinstance(n, int) or not (1 <= n <= MAX_MOE_KERNELS):
            raise ValueError(f"{where}.{k}: must be a whole number 1 ... {MAX_MOE_KERNELS}, got {n!r}")
        out[canonical_dtype(k, where=f"{where}.{k}")] = n
    return out


class HardwareProfile(_Frozen):
    """One device: spec-sheet numbers (dense, never sparse) plus calibrated efficiencies; every number sourced."""

    id: str = Field(min_length=1, max_length=255)
    name: str = Field(max_length=1000)
    kind: Literal["gpu", "lpu", "cpu"] = "gpu"
    vendor: str = ""
    # GPU generation, for the kernels engines pick on it (EngineProfile.attention_by_generation): "ampere",
    # "hopper", "blackwell"; "" = not an NVIDIA GPU generation the engine profiles distinguish
    generation: str = Field("", max_length=64)
    peak_flops: dict[str, float]  # dense FLOP/s per compute dtype
    mem_capacity_bytes: float = Field(gt=0, le=MAX_BYTES)  # HBM per device (LPU: on-chip SRAM per chip)
    mem_bandwidth_bytes_s: float = Field(ge=MIN_RATE, le=MAX_RATE)  # HBM (LPU: SRAM) bandwidth per device
    l2_bytes: float = Field(0.0, ge=0, le=MAX_BYTES)
    sm_count: int | None = Field(None, gt=0, le=2**20)  # streaming multiprocessors (GPU); None = unknown / not a GPU
    scaleup_bandwidth_bytes_s: float = Field(1.0e9, ge=MIN_RATE, le=MAX_RATE)  # per direction, per device
    scaleup_latency_s: float = Field(2.0e-6, ge=0, le=MAX_TIME_S)
    scaleup_domain: int = Field(1, ge=1, le=2**20)
    # switch: every device reaches the group at the full figure (NVSwitch); mesh: point-to-point links to each
    # of the other domain devices, so a TP group of t devices uses (t-1)/(domain-1) of it (MI300X).
    scaleup_topology: Literal["switch", "mesh"] = "switch"
    # Inter-node (scale-out) network bandwidth per device, per direction (one NIC per GPU on HGX/DGX nodes).
    scaleout_bandwidth_bytes_s: float = Field(50.0e9, ge=MIN_RATE, le=MAX_RATE)
    # Host link (GPU to host memory: PCIe, or NVLink-C2C to a Grace CPU) bandwidth per device, per direction, from
    # the spec sheet; what KV offload to host memory moves over (serving/simulator.py). None: not sourced.
    host_link_bandwidth_bytes_s: float | None = Field(None, ge=MIN_RATE, le=MAX_RATE)
    kernel_overhead_s: float = Field(3.0e-6, ge=0, le=MAX_TIME_S)  # fixed cost per kernel (launch, prologue)
    chip_hop_latency_s: float = Field(0.0, ge=0, le=MAX_TIME_S)  # LPU: pipeline hop between chips
    # The 4-bit weight format deployed on this device, which `--dtype fp4` prices: "fp4" = NVFP4 (Blackwell),
    # "mxfp4" = OCP MXFP4 (AMD CDNA4, which has no NVFP4). Both compute on the device's fp4 peak.
    fp4_format: Literal["fp4", "mxfp4"] = "fp4"
    efficiency: dict[str, KernelEfficiency] = Field(default_factory=lambda: {"default": KernelEfficiency()})
    # (the defaults are built with model_construct: the same objects as AttentionEfficiency() etc., without building
    # their validators when this module is imported; a cold command that reads only shipped profiles builds none)
    attention: AttentionEfficiency = AttentionEfficiency.model_construct()
    allreduce: AllReduceParams = AllReduceParams.model_construct()
    alltoall: AllToAllParams = AllToAllParams.model_construct()
    moe: MoEGroupedEfficiency = MoEGroupedEfficiency.model_construct()  # grouped-GEMM compute of fused MoE layers
    # kernels one MoE layer launches besides the router GEMM, per expert weight format: set from the serving
    # engine's profile (EngineProfile.moe_kernels, profiles/engine.py engine_hardware); {} = costs/moe.py MOE_KERNELS
    moe_kernels: dict[str, int] = Field(default_factory=dict)
    # per expert weight format: the row-tile rule of the serving engine's MoE kernel (EngineProfile.moe_block_m, set
    # by engine_hardware; costs/moe.py MOE_BLOCK_M_RULES); {} = the fitted tile shapes of `moe`
    moe_block_m: dict[str, str] = Field(default_factory=dict)
    power: PowerSpec | None = None  # None: no power model for this device (energy and power not reported)
    sources: dict[str, str] = Field(default_factory=dict)
    notes: str = ""
    calibration: dict | None = None

    @field_validator("peak_flops")
    @classmethod
    def _check_peaks(cls, v: dict[str, float]) -> dict[str, float]:
        out = {}
        for k, val in v.items():
            key = canonical_dtype(k, where=f"peak_flops.{k}")
            if not (MIN_RATE <= val <= MAX_RATE):
                raise ValueError(f"peak_flops.{k}: must be in [{MIN_RATE:g}, {MAX_RATE:g}] FLOP/s, got {val}")
            out[key] = float(val)
        if not out:
            raise ValueError("peak_flops: needs at least one dtype")
        return out

    @field_validator("moe_kernels")
    @classmethod
    def _check_moe_kernels(cls, v: dict[str, int]) -> dict[str, int]:
        return moe_kernel_counts(v, "moe_kernels")

    @field_validator("efficiency")
    @classmethod
    def _check_eff_keys(cls, v: dict[str, KernelEfficiency]) -> dict[str, KernelEfficiency]:
        for k in v:
            if k != "default":
                canonical_dtype(k, where=f"efficiency.{k}")
        return v

    @model_validator(mode="after")
    def _check_eff(self) -> "HardwareProfile":
        if "default" not in self.efficiency:
            raise ValueError("efficiency: needs a 'default' entry")
        return self

    def kernel_eff(self, dtype: str) -> KernelEfficiency:
        """Efficiency block for a compute dtype (falls back to 'default')."""
        if dtype == "default":
            return self.efficiency["default"]
        return self.efficiency.get(math_dtype(dtype), self.efficiency["default"])

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s in a compute dtype, or a one-line error if the device cannot compute in it."""
        key = math_dtype(dtype)
        if key not in self.peak_flops:
            have = ", ".join(sorted(self.peak_flops))
            raise SpecplanError(f"hardware {self.id}: cannot compute in {key} (supports {have})")
        return self.peak_flops[key]

    def ridge_flops_per_byte(self, dtype: str, effective: bool = False) -> float:
        """GEMM ridge point in FLOP/byte: peak / bandwidth, or with saturated efficiencies when effective."""
        if not effective:
            return self.peak(dtype) / self.mem_bandwidth_bytes_s
        e = self.kernel_eff(dtype)
        return self.peak(dtype) * e.compute_max_fraction / (self.mem_bandwidth_bytes_s * e.mem_bw_fraction)

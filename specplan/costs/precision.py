"""Precision of a deployment: GEMM math dtype, KV-cache dtype and the weight dtype of every module."""

from __future__ import annotations

from dataclasses import field

from specplan.core.records import record
from specplan.core.dtypes import canonical_dtype
from specplan.profiles.hardware import HardwareProfile
from specplan.profiles.model import ModelProfile

KV_AUTO = "auto"  # --kv-dtype auto: the checkpoint's declared KV format, else the 16-bit activation dtype

MODULES = ("attention", "linear_attention", "mamba", "fc", "ffn", "moe", "shared_experts", "router", "lm_head", "embedding",
           "mtp")


@record
class Precision:
    """compute: activation/math dtype of GEMMs; kv: KV-cache dtype; weights: module -> weight dtype;
    state: dtype of the recurrent state of linear-attention / Mamba layers (the conv state is 16-bit)."""

    compute: str
    kv: str
    weights: dict[str, str] = field(default_factory=dict)
    state: str = "fp32"

    def w(self, module: str) -> str:
        """Weight dtype of a module."""
        return self.weights.get(module, self.compute)


@record
class Dtypes:
    """Dtypes as a user names them (None: the checkpoint's declared format, else 16-bit), before
    resolve_precision turns them into a Precision for one model on one device."""

    dtype: str | None = None
    kv_dtype: str | None = None
    weight_dtype: str | None = None


def as_precision(model: ModelProfile, hw: HardwareProfile, precision) -> Precision:
    """A Precision as given, or resolved from Dtypes (None: every dtype the checkpoint's)."""
    if isinstance(precision, Precision):
        return precision
    d = precision if precision is not None else Dtypes()
    return resolve_precision(model, hw, d.dtype, d.kv_dtype, d.weight_dtype)


def resolve_precision(
    model: ModelProfile,
    hw: HardwareProfile,
    dtype: str | None = None,
    kv_dtype: str | None = None,
    weight_dtype: str | None = None,
    state_dtype: str | None = None,
) -> Precision:
    """Precision from CLI-style choices.

    - `dtype` given: weights and GEMM math in that dtype (the device must compute in it, else a one-line
      error; `fp4` weights are the device's deployed 4-bit format, `HardwareProfile.fp4_format`); `weight_dtype` may still set a narrower weight format (W4A16: dtype bf16, weight_dtype int4).
    - no `dtype`: the checkpoint's own weight dtypes per module; math in the weight format where the device
      supports it, else in bf16 (fp16 on devices without bf16).
    - `kv_dtype` defaults to the checkpoint's KV format when the profile names one, else 16-bit; `auto` is the
      same rule, the one vLLM, SGLang and TensorRT-LLM apply to `--kv-cache-dtype auto` (docs/engines.md).
    - `state_dtype` (an engine override, e.g. vLLM's --mamba-ssm-cache-dtype) defaults to the profile's
      `state_dtype` (the config's mamba_ssm_dtype / mamba_ssm_cache_dtype).
    """
    sixteen = _device_activation_dtype(hw)
    if dtype is not None:
        compute = canonical_dtype(dtype, where="dtype")
        hw.peak(compute)  # raises if the device cannot compute in it
        w = canonical_dtype(weight_dtype, where="weight_dtype") if weight_dtype else compute
        if w == "fp4" and not weight_dtype:  # fp4 as the device deploys it (MXFP4 on CDNA4, NVFP4 on Blackwell)
            w = hw.fp4_format
        weights = {**{m: w for m in MODULES}, "router": compute if compute in ("bf16", "fp16", "fp32") else sixteen}
    else:
        native = canonical_dtype(model.weight_dtype)
        compute = native if native in hw.peak_flops and native in ("bf16", "fp16", "fp8", "fp4", "int8") else sixteen
        if weight_dtype:
            w = canonical_dtype(weight_dtype, where="weight_dtype")
            weights = {m: w for m in MODULES}
        else:
            weights = {m: model.dtype_of(m) for m in MODULES}
        if sixteen not in ("bf16", "fp16"):  # 8-bit-only device (Groq 3 LPU): weights served in its format
            weights = {m: (sixteen if d in ("bf16", "fp16", "fp32") else d) for m, d in weights.items()}
        router = model.module_dtypes.get("router", sixteen) if model.module_dtypes else sixteen
        weights = {**weights, "router": router}
    if kv_dtype and str(kv_dtype).strip().lower() != KV_AUTO:
        kv = canonical_dtype(kv_dtype, where="kv_dtype")
    elif model.kv_cache_dtype:  # the checkpoint names the KV format it was calibrated for (e.g. NVFP4 + fp8 KV)
        kv = canonical_dtype(model.kv_cache_dtype)
    else:
        kv = sixteen
    state = canonical_dtype(state_dtype or model.state_dtype, where="state_dtype")
    return Precision(compute=compute, kv=kv, weights=weights, state=state)


def _device_activation_dtype(hw: HardwareProfile) -> str:
    """The device's activation format: bf16, else fp16, else its own 8-bit format (e.g. fp8 on Groq 3)."""
    for d in ("bf16", "fp16", "fp8", "int8"):
        if d in hw.peak_flops:
            return d
    return next(iter(hw.peak_flops))

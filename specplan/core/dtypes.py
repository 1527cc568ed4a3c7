"""Numeric formats: bytes per element for weights, activations and KV cache."""

from specplan.core.errors import SpecplanError

# 4-bit formats count the element only; the block scales are added by BLOCK_SCALE_OVERHEAD below:
# fp4 = NVFP4 (one fp8 scale per 16 elements, +12.5%), mxfp4 = OCP MXFP4 (one E8M0 scale per 32, +6.25%).
BYTES_PER_ELEMENT = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp4": 0.5,
    "mxfp4": 0.5,
    "int4": 0.5,
}

# Extra bytes per element for block scales (NVFP4: 1 byte per 16 elements; MXFP4: 1 per 32).
BLOCK_SCALE_OVERHEAD = {"fp4": 1.0 / 16.0, "mxfp4": 1.0 / 32.0, "int4": 1.0 / 32.0}

# Storage formats whose math runs on another format's tensor cores (MXFP4 uses the FP4 units).
MATH_FORMAT = {"mxfp4": "fp4"}

# Group-quantized int4 checkpoints by group size g: int4_g<g> = AWQ / GPTQ (a 16-bit scale and a packed 4-bit zero
# point per group: +2.5/g B per element); int4_sym_g<g> = symmetric (compressed-tensors pack-quantized: a 16-bit
# scale per group, +2/g). Weight-only: the math runs in int4 where a device has it, else the activation dtype.
INT4_GROUP_SIZES = (32, 64, 128)
for _g in INT4_GROUP_SIZES:
    for _name, _extra in ((f"int4_g{_g}", 2.5 / _g), (f"int4_sym_g{_g}", 2.0 / _g)):
        BYTES_PER_ELEMENT[_name] = 0.5
        BLOCK_SCALE_OVERHEAD[_name] = _extra
        MATH_FORMAT[_name] = "int4"

ALIASES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
    "fp8_e4m3": "fp8",
    "e4m3": "fp8",
    "float8_e4m3fn": "fp8",
    "fp8_block": "fp8",
    "nvfp4": "fp4",
    "w4a16": "int4",
}


def canonical_dtype(name: str, where: str = "dtype") -> str:
    """Return the canonical short name of a numeric format, or raise a one-line error."""
    hit = _CANONICAL.get(name) if isinstance(name, str) else None
    if hit is not None:
        return hit
    key = _canonical(name, where)
    if isinstance(name, str):
        _CANONICAL[name] = key
    return key


_CANONICAL: dict[str, str] = {}  # canonical_dtype's answers by the name given (a step prices thousands of GEMMs)


def _canonical(name: str, where: str) -> str:
    """canonical_dtype, computed."""
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key not in BYTES_PER_ELEMENT:
        known = ", ".join(sorted(BYTES_PER_ELEMENT))
        raise SpecplanError(f"{where}: unknown dtype '{name}' (known: {known})")
    return key


def math_dtype(name: str) -> str:
    """The tensor-core format a storage format computes in (mxfp4 -> fp4; others unchanged)."""
    key = canonical_dtype(name)
    return MATH_FORMAT.get(key, key)


def dtype_bytes(name: str) -> float:
    """Bytes per element of a format, block-scale overhead included."""
    key = canonical_dtype(name)
    return BYTES_PER_ELEMENT[key] + BLOCK_SCALE_OVERHEAD.get(key, 0.0)

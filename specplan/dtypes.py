"""Numeric formats: bytes per element for weights, activations and KV cache."""

from specplan.errors import SpecplanError

# fp4 counts the 4-bit element only; block-scale overhead (one fp8 scale per 16 elements for NVFP4,
# +6%) is added by BLOCK_SCALE_OVERHEAD below for the formats that carry it.
BYTES_PER_ELEMENT = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp4": 0.5,
    "int4": 0.5,
}

# Extra bytes per element for block scales (NVFP4: 1 byte per 16 elements; MXFP4: 1 per 32).
BLOCK_SCALE_OVERHEAD = {"fp4": 1.0 / 16.0, "int4": 1.0 / 32.0}

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
    "mxfp4": "fp4",
    "w4a16": "int4",
}


def canonical_dtype(name: str, where: str = "dtype") -> str:
    """Return the canonical short name of a numeric format, or raise a one-line error."""
    key = str(name).strip().lower()
    key = ALIASES.get(key, key)
    if key not in BYTES_PER_ELEMENT:
        known = ", ".join(sorted(BYTES_PER_ELEMENT))
        raise SpecplanError(f"{where}: unknown dtype '{name}' (known: {known})")
    return key


def dtype_bytes(name: str) -> float:
    """Bytes per element of a format, block-scale overhead included."""
    key = canonical_dtype(name)
    return BYTES_PER_ELEMENT[key] + BLOCK_SCALE_OVERHEAD.get(key, 0.0)

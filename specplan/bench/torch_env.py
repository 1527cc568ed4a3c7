"""The torch environment of a benchmark: torch itself (optional), dtype names, device identity.

Importable without torch: :func:`require_torch` imports it, raising :class:`TorchMissingError`
with the install hint where it is missing.
"""

from __future__ import annotations

import os
import platform
from typing import Any

INSTALL_HINT = (
    "torch is required for the benchmarks: pip install 'specplan[bench]' "
    "(or, for the CPU-only wheel, pip install torch==2.13.0)"
)

_DTYPE_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "float8_e4m3fn"}
_DTYPE_ALIASES = {
    "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "half": "fp16", "fp16": "fp16",
    "float32": "fp32", "float": "fp32", "fp32": "fp32", "fp8": "fp8", "fp8_e4m3": "fp8",
    "float8_e4m3fn": "fp8", "e4m3": "fp8",
}


class TorchMissingError(ImportError):
    """torch (the optional ``bench`` extra) is not installed."""


def require_torch():
    """Import and return torch, or raise :class:`TorchMissingError` with the install hint."""
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise TorchMissingError(INSTALL_HINT) from exc
    return torch



def normalize_dtype(name: str) -> str:
    """'bfloat16' -> 'bf16', ... ; raises ValueError for unknown names."""
    key = str(name).strip().lower()
    if key not in _DTYPE_ALIASES:
        raise ValueError(f"unknown dtype {name!r}; use one of bf16, fp16, fp32, fp8")
    return _DTYPE_ALIASES[key]


def torch_dtype(torch, name: str):
    """The torch dtype object for a dtype name ("bf16" -> torch.bfloat16)."""
    return getattr(torch, _DTYPE_NAMES[normalize_dtype(name)])



def device_slug(name: str) -> str:
    """Short device id in the style of the reference tables ('h100-sxm', 'h200-sxm', 'cpu')."""
    n = name.lower()
    if "gh200" in n:
        return "gh200"
    for chip in ("h200", "h100", "b200", "b300", "h20", "l40s", "a100"):
        if chip not in n:
            continue
        if chip == "a100":
            return "a100-sxm-80gb" if "80" in n else "a100-sxm-40gb"
        if chip in ("h100", "h200"):
            if "pcie" in n:
                return f"{chip}-pcie"
            if "nvl" in n:
                return f"{chip}-nvl"
            return f"{chip}-sxm"
        return chip
    slug = "".join(c if c.isalnum() else "-" for c in n).strip("-")
    while "--" in slug:
        slug = slug.replace("--", "-")
    return slug or "unknown"


def _cpu_name() -> str:
    """CPU model name from /proc/cpuinfo (platform fallback)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def device_info(torch, device) -> dict:
    """{'device': slug, 'device_name': ..., 'torch_version': ..., 'l2_bytes': ..., 'n_sms': ...}."""
    dev = torch.device(device)
    info: dict[str, Any] = {"torch_version": torch.__version__}
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        info["device_name"] = props.name
        info["device"] = device_slug(props.name)
        info["l2_bytes"] = int(getattr(props, "L2_cache_size", 0) or 0)
        info["n_sms"] = int(props.multi_processor_count)
        info["memory_bytes"] = int(props.total_memory)
        info["capability"] = f"{props.major}.{props.minor}"
    else:
        info["device_name"] = _cpu_name()
        info["device"] = "cpu"
        info["l2_bytes"] = 0
        info["n_sms"] = os.cpu_count() or 1
    try:
        import triton

        info["triton_version"] = triton.__version__
    except Exception:
        info["triton_version"] = None
    return info


def framework_name(torch) -> str:
    """Framework column value: 'torch 2.x.y' (local build suffix dropped)."""
    return "torch " + torch.__version__.split("+")[0]


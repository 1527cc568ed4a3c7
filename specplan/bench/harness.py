"""Entry point of the torch microbenchmarks of the decode-step kernels: GEMMs and decode attention.

``python -m specplan.bench.harness gemm|attention|all [--shapes FILE] [--device cuda|cpu]
[--dtype bf16] [--kv-dtype bf16] [--max-m M] [--reps N] -o out.csv``.  With ``all``,
``-o out.csv`` writes ``out_gemm.csv`` and ``out_attention.csv``.

Importable without torch, pydantic or pandas: torch is imported inside the functions, and a
missing torch raises :class:`TorchMissingError` saying how to install it
(``pip install 'specplan[bench]'``, or ``pip install torch==2.13.0`` for the CPU wheel).
Re-exports the public names of the modules that do the work, so ``harness.bench_gemm`` etc.
keep working, also when loaded as a plain module from the bench folder (``device_run.py``):

* :mod:`torch_env` -- ``require_torch``, ``TorchMissingError``, dtype names, ``device_info``
* :mod:`timing` -- ``measure`` (CUDA graph + events with L2 flush; ``time.perf_counter`` on CPU)
* :mod:`gemm_bench` -- ``bench_gemm(shapes, m_values=None, *, device, dtype, reps, ...)``
* :mod:`attention_bench` -- ``bench_attention(configs, *, device, dtype, kernels, ...)``
* :mod:`csvio` -- ``GEMM_COLUMNS`` / ``ATTENTION_COLUMNS`` / ``CHECK_COLUMNS``,
  ``write_csv(rows, path, columns=None)`` (atomic; ``.gz`` compresses) / ``read_csv(path)``
* :mod:`progress` -- the stderr progress bar and notes

Shapes file (YAML or JSON)
--------------------------
::

    m: [1, 2, 4, 8, 16]            # optional: GEMM M values (default 1..4096, powers of 2)
    gemm:                          # y = x[M,K] @ W[N,K]^T
      - {n: 6144, k: 4096, name: qkv}
      - {n: 4096, k: 14336, name: down}
    attention:                     # every field may be a scalar or a list (cartesian product)
      - batch: [1, 8]
        q_len: [1, 2, 3, 4]        # query tokens per sequence (1 = plain decode)
        n_kv_heads: 8
        n_q_heads: [8, 32]         # or  group: [1, 4]  (n_q_heads = group * n_kv_heads)
        head_dim: 128
        kv_len: [1024, 4096]       # KV length INCLUDING the q_len new tokens

Without ``--shapes`` the GEMMs of llama-3.1-8b and a small attention grid are used.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Sequence

if __package__:
    from .attention_bench import DEFAULT_ATTENTION_CONFIGS, SDPA_BACKEND_ORDER, bench_attention, expand_attention_configs
    from .csvio import ATTENTION_COLUMNS, CHECK_COLUMNS, GEMM_COLUMNS, read_csv, split_path, write_csv
    from .gemm_bench import DEFAULT_M_VALUES, LLAMA31_8B_GEMMS, bench_gemm, m_values
    from .progress import Progress
    from .timing import TimingPlan, measure
    from .torch_env import (INSTALL_HINT, TorchMissingError, device_info, device_slug, normalize_dtype,
                            require_torch, torch_dtype)
else:  # loaded from the bench folder on sys.path (device_run.py)
    from attention_bench import DEFAULT_ATTENTION_CONFIGS, SDPA_BACKEND_ORDER, bench_attention, expand_attention_configs  # type: ignore[no-redef]
    from csvio import ATTENTION_COLUMNS, CHECK_COLUMNS, GEMM_COLUMNS, read_csv, split_path, write_csv  # type: ignore[no-redef]
    from gemm_bench import DEFAULT_M_VALUES, LLAMA31_8B_GEMMS, bench_gemm, m_values  # type: ignore[no-redef]
    from progress import Progress  # type: ignore[no-redef]
    from timing import TimingPlan, measure  # type: ignore[no-redef]
    from torch_env import (INSTALL_HINT, TorchMissingError, device_info, device_slug,  # type: ignore[no-redef]
                           normalize_dtype, require_torch, torch_dtype)

__all__ = [
    "ATTENTION_COLUMNS", "CHECK_COLUMNS", "DEFAULT_ATTENTION_CONFIGS", "DEFAULT_M_VALUES", "GEMM_COLUMNS",
    "INSTALL_HINT", "LLAMA31_8B_GEMMS", "Progress", "SDPA_BACKEND_ORDER", "TimingPlan", "TorchMissingError",
    "bench_attention", "bench_gemm", "device_info", "device_slug", "expand_attention_configs",
    "load_shapes", "m_values", "main", "measure", "normalize_dtype", "read_csv", "require_torch",
    "split_path", "torch_dtype", "write_csv",
]


def load_shapes(path: str | os.PathLike) -> dict:
    """Load a shapes file (YAML or JSON, see the module docstring)."""
    path = os.fspath(path)
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    if path.endswith(".json"):
        data = json.loads(text)
    else:
        try:
            import yaml
        except ImportError:
            data = json.loads(text)
        else:
            data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping with 'gemm' and/or 'attention'")
    return data



def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark CLI; returns the exit status (2 when torch or CUDA is missing)."""
    parser = argparse.ArgumentParser(prog="python -m specplan.bench.harness",
                                     description="Time decode GEMMs and attention with torch.")
    parser.add_argument("what", choices=("gemm", "attention", "all"))
    parser.add_argument("--shapes", help="YAML/JSON with 'gemm' and/or 'attention' (see module doc)")
    parser.add_argument("--device", default="cuda", help="cuda | cpu | cuda:N (default cuda)")
    parser.add_argument("--dtype", default="bf16", help="bf16 | fp16 | fp32 | fp8 (GEMM only)")
    parser.add_argument("--kv-dtype", default=None)
    parser.add_argument("--max-m", type=int, default=None)
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        torch = require_torch()
    except TorchMissingError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.stderr.write("error: --device cuda but torch sees no CUDA device (use --device cpu)\n")
        return 2
    data = load_shapes(args.shapes) if args.shapes else {}
    notes: list[str] = []
    if args.what in ("gemm", "all"):
        shapes = data.get("gemm", LLAMA31_8B_GEMMS if not args.shapes else [])
        rows = bench_gemm(shapes, data.get("m"), device=args.device, dtype=args.dtype, max_m=args.max_m, notes=notes,
                          timing=TimingPlan(reps=args.reps, progress=not args.no_progress))
        out = args.output if args.what == "gemm" else split_path(args.output, "gemm")
        write_csv(rows, out, GEMM_COLUMNS)
        sys.stderr.write(f"wrote {len(rows)} GEMM rows to {out}\n")
    if args.what in ("attention", "all"):
        configs = data.get("attention", DEFAULT_ATTENTION_CONFIGS if not args.shapes else [])
        adt = args.dtype if normalize_dtype(args.dtype) != "fp8" else "bf16"
        rows = bench_attention(configs, device=args.device, dtype=adt, kv_dtype=args.kv_dtype, notes=notes,
                               timing=TimingPlan(reps=args.reps, progress=not args.no_progress))
        out = args.output if args.what == "attention" else split_path(args.output, "attention")
        write_csv(rows, out, ATTENTION_COLUMNS)
        sys.stderr.write(f"wrote {len(rows)} attention rows to {out}\n")
    for n in notes:
        sys.stderr.write(f"note: {n}\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


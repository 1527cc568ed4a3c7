"""Decode attention benchmark (q_len >= 1, causal mask aligned to the END of the KV): SDPA and packed kernels.

Query i of q_len may attend KV positions j <= kv_len - q_len + i.  Times
``torch.nn.functional.scaled_dot_product_attention`` with grouped KV heads
(``enable_gqa=True``; KV expanded where torch lacks it), forcing the SDPA backends in the
order flash, efficient, cudnn, math and recording the first that runs (kernel
``sdpa_flash`` / ``sdpa_efficient`` / ``sdpa_cudnn`` / ``sdpa_math``), and a kernel that packs
the G * q_len query rows of one KV head into row tiles of 128 (``triton_packed``, see
:mod:`specplan.bench.packed_attention`; ``torch_packed`` where Triton is missing, e.g. on
CPU).  Rows have exactly the columns ``csvio.ATTENTION_COLUMNS``; numerical checks (packed
vs SDPA, max abs error) go to the optional ``checks`` list (``csvio.CHECK_COLUMNS``).
"""

from __future__ import annotations

import itertools
import time
import warnings
from typing import Any, Iterable, Sequence

if __package__:
    from .csvio import ATTENTION_COLUMNS
    from .progress import Progress, note
    from .timing import TimingPlan, measure, source_label
    from .torch_env import device_info, framework_name, normalize_dtype, require_torch, torch_dtype
else:  # loaded from the bench folder on sys.path (device_run.py)
    from csvio import ATTENTION_COLUMNS  # type: ignore[no-redef]
    from progress import Progress, note  # type: ignore[no-redef]
    from timing import TimingPlan, measure, source_label  # type: ignore[no-redef]
    from torch_env import device_info, framework_name, normalize_dtype, require_torch, torch_dtype  # type: ignore[no-redef]

DEFAULT_ATTENTION_CONFIGS: tuple[dict, ...] = (
    {"batch": [1, 8], "q_len": [1, 2, 4, 8, 16, 17], "n_kv_heads": 8, "group": [1, 4, 8, 16],
     "head_dim": 128, "kv_len": [1024, 4096]},
)

SDPA_BACKEND_ORDER: tuple[str, ...] = ("flash", "efficient", "cudnn", "math")
_SDPA_ENUM = {
    "flash": "FLASH_ATTENTION",
    "efficient": "EFFICIENT_ATTENTION",
    "cudnn": "CUDNN_ATTENTION",
    "math": "MATH",
}


def _packed_module():
    """The sibling :mod:`packed_attention` module, imported lazily (it imports Triton)."""
    if __package__:
        from . import packed_attention as mod
    else:  # loaded from the bench folder on sys.path (device_run.py)
        import packed_attention as mod  # type: ignore[no-redef]
    return mod


def _as_list(v) -> list:
    """A list/tuple as a list, a scalar as a one-element list."""
    if isinstance(v, (list, tuple)):
        return list(v)
    return [v]


def expand_attention_configs(configs: Iterable[dict]) -> list[dict]:
    """Expand list-valued fields; returns dicts with batch, q_len, n_q_heads, n_kv_heads, head_dim, kv_len."""
    out: list[dict] = []
    for cfg in configs:
        cfg = dict(cfg)
        hkv_l = _as_list(cfg.get("n_kv_heads", 8))
        if "n_q_heads" in cfg:
            heads = [("q", v) for v in _as_list(cfg["n_q_heads"])]
        else:
            heads = [("g", v) for v in _as_list(cfg.get("group", cfg.get("g", 1)))]
        for b, hkv, (kind, hv), d, s, ql in itertools.product(
                _as_list(cfg.get("batch", 1)), hkv_l, heads, _as_list(cfg.get("head_dim", 128)),
                _as_list(cfg.get("kv_len", 4096)), _as_list(cfg.get("q_len", 1))):
            hkv = int(hkv)
            hq = int(hv) if kind == "q" else int(hv) * hkv
            if hq % hkv:
                raise ValueError(f"n_q_heads {hq} not a multiple of n_kv_heads {hkv}")
            if int(s) < int(ql):
                raise ValueError(f"kv_len {s} < q_len {ql}")
            out.append({"batch": int(b), "q_len": int(ql), "n_q_heads": hq, "n_kv_heads": hkv,
                        "head_dim": int(d), "kv_len": int(s)})
    return out


def _sdpa_fn(torch, q, k, v, backend: str):
    """A zero-argument callable running SDPA with only ``backend`` enabled."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    F = torch.nn.functional
    hq, hkv = q.shape[1], k.shape[1]
    q_len, kv_len = q.shape[2], k.shape[2]
    kwargs: dict[str, Any] = {}
    if hq != hkv:
        try:
            import inspect

            has_gqa = "enable_gqa" in inspect.signature(F.scaled_dot_product_attention).parameters
        except (TypeError, ValueError):
            has_gqa = True
        if has_gqa:
            kwargs["enable_gqa"] = True
        else:  # old torch: expand KV (outside the timed call)
            k = k.repeat_interleave(hq // hkv, dim=1)
            v = v.repeat_interleave(hq // hkv, dim=1)
    mask = None
    if q_len > 1:
        try:
            from torch.nn.attention.bias import causal_lower_right

            mask = causal_lower_right(q_len, kv_len)
        except ImportError:
            mask = _packed_module().end_aligned_causal_mask(q_len, kv_len, q.device)
    enum = getattr(SDPBackend, _SDPA_ENUM[backend])

    def fn():
        with sdpa_kernel([enum]):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kwargs)

    return fn


def _try_sdpa(torch, q, k, v, backends: Sequence[str], first_only: bool = True):
    """[(backend, fn)] for the backends that run on these tensors, in order (only the first
    that runs when ``first_only``)."""
    ok = []
    for be in backends:
        if not hasattr(torch.nn.attention.SDPBackend, _SDPA_ENUM[be]):
            continue
        fn = _sdpa_fn(torch, q, k, v, be)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = fn()
            if q.device.type == "cuda":
                torch.cuda.synchronize(q.device)
            if not torch.isfinite(out).all():
                continue
        except Exception:
            continue
        ok.append((be, fn))
        if first_only:
            break
    return ok


def bench_attention(configs: Iterable[dict], *, device: str = "cpu", dtype: str = "bf16",
                    kv_dtype: str | None = None, kernels: Sequence[str] = ("sdpa", "packed"),
                    sdpa_backends: Sequence[str] | None = None, check: bool = True, checks: list | None = None,
                    notes: list | None = None, timing: TimingPlan = TimingPlan()) -> list[dict]:
    """Time decode attention (q_len >= 1, end-aligned causal mask) for every expanded config.

    ``kernels``: 'sdpa' (torch SDPA, backend recorded in the kernel column) and/or 'packed'
    (Triton packed kernel on CUDA, the torch packed implementation where Triton is missing;
    'torch_packed' forces the torch one).  ``sdpa_backends=None`` times the FIRST backend of
    flash, efficient, cudnn, math that runs; a list (e.g. ['flash', 'math']) times each of
    them that runs.  ``check``: compare the packed output with SDPA's (max abs error) at the
    smallest and largest q_len of each (batch, kv_len, heads, head_dim) family; results go to
    ``checks``.  ``timing``: how each case is timed (repetitions, warm-up, flush, graphs, deadline, seed,
    progress).  Returns rows with the columns :data:`ATTENTION_COLUMNS`.
    """
    reps, warmup, flush_bytes, use_graph = timing.reps, timing.warmup, timing.flush_bytes, timing.use_graph
    deadline, seed, progress = timing.deadline, timing.seed, timing.progress
    torch = require_torch()
    pa = _packed_module()
    dev = torch.device(device)
    dname = normalize_dtype(dtype)
    kvname = normalize_dtype(kv_dtype or dname)
    if kvname != dname:
        raise ValueError(f"kv_dtype {kvname} != dtype {dname}: only equal dtypes are benchmarked")
    if dname == "fp8":
        raise ValueError("fp8 attention is not benchmarked; use bf16/fp16/fp32")
    tdt = torch_dtype(torch, dname)
    info = device_info(torch, dev)
    cfgs = expand_attention_configs(configs)
    if reps is None:
        reps = 20 if dev.type == "cuda" else 5
    gen = torch.Generator(device="cpu").manual_seed(seed)
    framework = framework_name(torch)
    triton_fw = f"triton {info['triton_version']}" if info.get("triton_version") else framework
    use_triton = ("packed" in kernels and dev.type == "cuda" and pa.HAVE_TRITON)
    want_torch_packed = ("torch_packed" in kernels) or ("packed" in kernels and not use_triton)
    if "packed" in kernels and dev.type == "cuda" and not pa.HAVE_TRITON:
        note(notes, "Triton not importable: timing torch_packed instead of triton_packed")
    backend_list = list(sdpa_backends) if sdpa_backends else list(SDPA_BACKEND_ORDER)
    first_only = sdpa_backends is None

    # group by the KV tensors so that they are allocated once
    groups: dict[tuple, list[dict]] = {}
    for c in cfgs:
        groups.setdefault((c["batch"], c["kv_len"], c["n_kv_heads"], c["head_dim"]), []).append(c)
    n_kernels = (1 if "sdpa" in kernels else 0) + (1 if use_triton else 0) + (1 if want_torch_packed else 0)
    bar = Progress(len(cfgs) * max(n_kernels, 1), f"attention {dname}", progress)
    rows: list[dict] = []
    stop = False

    def base_row(c):
        return {"device": info["device"], "dtype": dname, "kv_dtype": kvname, "batch": c["batch"],
                "q_len": c["q_len"], "n_q_heads": c["n_q_heads"], "n_kv_heads": c["n_kv_heads"],
                "head_dim": c["head_dim"], "kv_len": c["kv_len"],
                "torch_version": torch.__version__, "device_name": info["device_name"]}

    def record(c, kernel, fw, res):
        row = base_row(c)
        row.update({"framework": fw, "kernel": kernel, "time_us": round(res["time_us"], 3),
                    "source": source_label(res["method"], res["reps"])})
        rows.append({col: row[col] for col in ATTENTION_COLUMNS})

    try:
        for (b, s, hkv, d), group_cfgs in groups.items():
            if stop:
                break
            try:
                k = torch.randn(b, hkv, s, d, generator=gen).to(device=dev, dtype=tdt)
                v = torch.randn(b, hkv, s, d, generator=gen).to(device=dev, dtype=tdt)
            except Exception as exc:
                note(notes, f"attention b={b} kv={s} hkv={hkv} d={d} skipped (KV alloc): {type(exc).__name__}: {str(exc)[:160]}")
                bar.update(len(group_cfgs) * max(n_kernels, 1))
                continue
            # q_len extremes per G, for the numerical checks
            qrange: dict[int, tuple[int, int]] = {}
            for c in group_cfgs:
                lo, hi = qrange.get(c["n_q_heads"], (c["q_len"], c["q_len"]))
                qrange[c["n_q_heads"]] = (min(lo, c["q_len"]), max(hi, c["q_len"]))
            for c in group_cfgs:
                if deadline is not None and time.monotonic() > deadline:
                    note(notes, f"attention: deadline reached; {len(rows)} rows measured")
                    stop = True
                    break
                hq, q_len = c["n_q_heads"], c["q_len"]
                tag = f"b={b} kv={s} hkv={hkv} G={hq // hkv} d={d} q={q_len}"
                q = torch.randn(b, hq, q_len, d, generator=gen).to(device=dev, dtype=tdt)
                outs: dict[str, Any] = {}
                if "sdpa" in kernels:
                    try:
                        cands = _try_sdpa(torch, q, k, v, backend_list, first_only)
                        if not cands:
                            raise RuntimeError("no SDPA backend ran")
                        for be, fn in (cands[:1] if first_only else cands):
                            with warnings.catch_warnings():
                                warnings.simplefilter("ignore")
                                res = measure(fn, dev, reps=reps, warmup=warmup,
                                              flush_bytes=flush_bytes, use_graph=use_graph)
                                outs[f"sdpa_{be}"] = fn
                            record(c, f"sdpa_{be}", framework, res)
                            bar.update(0, f"{tag} sdpa_{be} {res['time_us']:.1f}us")
                    except Exception as exc:
                        note(notes, f"sdpa {tag} failed: {type(exc).__name__}: {str(exc)[:200]}")
                    bar.update(1)
                if use_triton:
                    try:
                        fn = pa.TritonPackedAttention(q, k, v)
                        res = measure(fn, dev, reps=reps, warmup=warmup, flush_bytes=flush_bytes,
                                      use_graph=use_graph)
                        record(c, "triton_packed", triton_fw, res)
                        outs["triton_packed"] = fn
                        bar.update(0, f"{tag} triton {res['time_us']:.1f}us")
                    except Exception as exc:
                        note(notes, f"triton_packed {tag} failed: {type(exc).__name__}: {str(exc)[:300]}")
                        if not want_torch_packed:
                            want_torch_packed = True
                            n_kernels += 1
                            note(notes, "falling back to torch_packed for the remaining configs")
                    bar.update(1)
                if want_torch_packed:
                    try:
                        mask = pa.packed_causal_mask(hq // hkv, q_len, s, dev)

                        def fn(q=q, mask=mask):
                            return pa.torch_packed_attention(q, k, v, mask=mask)

                        res = measure(fn, dev, reps=reps, warmup=warmup, flush_bytes=flush_bytes,
                                      use_graph=use_graph)
                        record(c, "torch_packed", framework, res)
                        outs["torch_packed"] = fn
                    except Exception as exc:
                        note(notes, f"torch_packed {tag} failed: {type(exc).__name__}: {str(exc)[:200]}")
                    bar.update(1)
                if check and checks is not None and q_len in qrange.get(hq, ()):
                    ref_name = next((n for n in outs if n.startswith("sdpa_")), None)
                    if ref_name is not None:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            ref = outs[ref_name]().float()
                        for name, fn in outs.items():
                            if name.startswith("sdpa_"):
                                continue
                            out = fn().float()
                            checks.append({
                                "device": info["device"], "kernel": name, "reference": ref_name,
                                "dtype": dname, "batch": b, "q_len": q_len, "n_q_heads": hq,
                                "n_kv_heads": hkv, "head_dim": d, "kv_len": s,
                                "max_abs_err": float((out - ref).abs().max().item()),
                                "ref_max_abs": float(ref.abs().max().item()),
                                "torch_version": torch.__version__,
                                "device_name": info["device_name"],
                            })
                del q, outs
            del k, v
    finally:
        bar.close()
    return rows

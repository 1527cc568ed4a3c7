"""CPU tests of the torch microbenchmark harness (tiny shapes; skipped without torch)."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the benchmark harness needs it (pip "
                            "install torch, then pip install -e '.[bench]')")

from specplan.bench import harness, packed_attention as pa  # noqa: E402

BENCH_DIR = os.path.dirname(os.path.abspath(harness.__file__))


def _sdpa_end_aligned(q, k, v):
    """SDPA with an explicit end-aligned boolean mask and KV expanded per query head."""
    g = q.shape[1] // k.shape[1]
    mask = pa.end_aligned_causal_mask(q.shape[2], k.shape[2])
    return torch.nn.functional.scaled_dot_product_attention(
        q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), attn_mask=mask)


@pytest.mark.parametrize("q_len", [1, 3, 17])
@pytest.mark.parametrize("group", [1, 4, 8])
def test_torch_packed_matches_sdpa(q_len, group):
    gen = torch.Generator().manual_seed(q_len * 100 + group)
    b, hkv, d, s = 2, 2, 32, 45
    q = torch.randn(b, hkv * group, q_len, d, generator=gen, dtype=torch.float64)
    k = torch.randn(b, hkv, s, d, generator=gen, dtype=torch.float64)
    v = torch.randn(b, hkv, s, d, generator=gen, dtype=torch.float64)
    out = pa.torch_packed_attention(q, k, v)
    ref = _sdpa_end_aligned(q, k, v)
    assert out.shape == q.shape
    assert torch.allclose(out, ref, atol=1e-10, rtol=1e-10)
    assert torch.allclose(pa.reference_attention(q, k, v), ref, atol=1e-10, rtol=1e-10)
    # float32 too, the dtype the CPU benchmark uses for checks
    out32 = pa.torch_packed_attention(q.float(), k.float(), v.float())
    assert (out32.double() - ref).abs().max().item() < 1e-5


def test_end_aligned_mask():
    m = pa.end_aligned_causal_mask(3, 5)
    assert m.tolist() == [[True, True, True, False, False],
                          [True, True, True, True, False],
                          [True, True, True, True, True]]
    pm = pa.packed_causal_mask(2, 3, 5)
    assert pm.shape == (6, 5) and torch.equal(pm[3:], m)


def test_bench_attention_columns_and_checks():
    checks, notes = [], []
    cfg = {"batch": [1, 2], "q_len": [1, 3, 17], "n_kv_heads": 2, "group": [1, 4, 8],
           "head_dim": 32, "kv_len": 64}
    rows = harness.bench_attention([cfg], device="cpu", dtype="fp32", checks=checks, notes=notes,
                                   timing=harness.TimingPlan(reps=2, warmup=1, progress=False, flush_bytes=0))
    n_cfg = 2 * 3 * 3
    assert len(rows) == 2 * n_cfg, notes
    for r in rows:
        assert tuple(r) == harness.ATTENTION_COLUMNS
        assert r["time_us"] > 0 and math.isfinite(r["time_us"])
        assert r["device"] == "cpu" and r["dtype"] == "fp32" and r["kv_dtype"] == "fp32"
        assert r["n_q_heads"] % r["n_kv_heads"] == 0
    kernels = {r["kernel"] for r in rows}
    assert "torch_packed" in kernels
    assert any(k.startswith("sdpa_") for k in kernels)
    # checks at the smallest and largest q_len of every (batch, G)
    assert len(checks) == 2 * 3 * 2
    for c in checks:
        assert tuple(c) == harness.CHECK_COLUMNS
        assert c["max_abs_err"] < 1e-4, c


def test_bench_gemm_columns_and_max_m():
    rows = harness.bench_gemm([(64, 32, "a"), {"n": 48, "k": 16, "name": "b"}], [1, 2, 8, 64], device="cpu",
                              dtype="bf16", max_m=8,
                              timing=harness.TimingPlan(reps=2, warmup=1, progress=False, flush_bytes=0))
    assert [(r["n"], r["m"]) for r in rows] == [(64, 1), (64, 2), (64, 8), (48, 1), (48, 2), (48, 8)]
    for r in rows:
        assert tuple(r) == harness.GEMM_COLUMNS
        assert r["time_us"] > 0
        assert r["kernel"] == "torch.nn.functional.linear"


def test_fp8_gemm_skipped_on_cpu():
    notes = []
    assert harness.bench_gemm([(64, 32, "a")], [1], device="cpu", dtype="fp8", notes=notes,
                              timing=harness.TimingPlan(progress=False)) == []
    assert notes and "fp8" in notes[0]


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz"])
def test_csv_round_trip(tmp_path, suffix):
    rows = harness.bench_attention([{"batch": 1, "q_len": [1, 2], "n_kv_heads": 1, "group": 2,
                                     "head_dim": 16, "kv_len": 8}],
                                   device="cpu", dtype="fp32",
                                   timing=harness.TimingPlan(reps=1, warmup=0, progress=False, flush_bytes=0))
    path = tmp_path / f"att{suffix}"
    harness.write_csv(rows, path)
    back = harness.read_csv(path)
    assert back == rows
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp-")]
    g = harness.bench_gemm([(16, 16, "x")], [1, 4], device="cpu", dtype="fp32",
                           timing=harness.TimingPlan(reps=1, warmup=0, progress=False, flush_bytes=0))
    gpath = tmp_path / f"g{suffix}"
    harness.write_csv(g, gpath)
    assert harness.read_csv(gpath) == g
    header = harness.read_csv(gpath)[0].keys()
    assert tuple(header) == harness.GEMM_COLUMNS


def test_expand_configs():
    cfgs = harness.expand_attention_configs([
        {"batch": [1, 2], "q_len": [1, 5], "n_kv_heads": 4, "group": [2, 8], "head_dim": 64,
         "kv_len": 128},
        {"batch": 1, "q_len": 1, "n_kv_heads": 2, "n_q_heads": 16, "head_dim": 128, "kv_len": 32},
    ])
    assert len(cfgs) == 9
    assert {c["n_q_heads"] for c in cfgs[:8]} == {8, 32}
    assert cfgs[-1]["n_q_heads"] == 16
    with pytest.raises(ValueError):
        harness.expand_attention_configs([{"n_kv_heads": 3, "n_q_heads": 8}])
    with pytest.raises(ValueError):
        harness.expand_attention_configs([{"q_len": 9, "kv_len": 4}])


def test_m_values_and_slug():
    assert harness.m_values() == [2 ** i for i in range(13)]
    assert harness.m_values(max_m=100) == [1, 2, 4, 8, 16, 32, 64]
    assert harness.device_slug("NVIDIA H200") == "h200-sxm"
    assert harness.device_slug("NVIDIA H100 80GB HBM3") == "h100-sxm"


def test_cli_all(tmp_path):
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps({
        "m": [1, 4, 32],
        "gemm": [{"n": 32, "k": 16, "name": "t"}],
        "attention": [{"batch": 1, "q_len": [1, 2], "n_kv_heads": 1, "group": [1, 2],
                       "head_dim": 16, "kv_len": 16}],
    }))
    out = tmp_path / "m.csv"
    rc = harness.main(["all", "--shapes", str(shapes), "--device", "cpu", "--dtype", "fp32",
                       "--max-m", "4", "--reps", "1", "--no-progress", "-o", str(out)])
    assert rc == 0
    g = harness.read_csv(tmp_path / "m_gemm.csv")
    a = harness.read_csv(tmp_path / "m_attention.csv")
    assert [r["m"] for r in g] == [1, 4]
    assert len(a) == 2 * 4


def test_harness_importable_without_torch():
    """The module must import (and fail helpfully) where torch is missing."""
    code = textwrap.dedent(f"""
        import builtins, sys
        real = builtins.__import__
        def fake(name, *a, **k):
            if name == "torch" or name.startswith("torch."):
                raise ImportError("no torch")
            return real(name, *a, **k)
        builtins.__import__ = fake
        sys.path.insert(0, {BENCH_DIR!r})
        import harness
        try:
            harness.require_torch()
        except harness.TorchMissingError as e:
            assert "pip install" in str(e) and "specplan[bench]" in str(e)
            print("OK")
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.stdout.strip() == "OK", res.stderr


@pytest.mark.skipif(importlib.util.find_spec("triton") is None and not os.environ.get("CI"),
                    reason="triton not installed (the dev extra installs it; CI must run this test)")
def test_triton_kernel_in_interpreter():
    """The Triton packed kernel, run by Triton's CPU interpreter, against a float64 reference.

    Any failure of the interpreter run is a test failure: no fallback to a skip."""
    code = textwrap.dedent(f"""
        import os, sys
        os.environ["TRITON_INTERPRET"] = "1"
        import numpy as np
        import triton.runtime.interpreter as ti
        _orig = ti._patch_lang_tensor
        def _patched(tensor, scope):  # numpy >= 2.4: int() of a 1-element array
            _orig(tensor, scope)
            scope.set_attr(tensor, "__index__",
                           lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))
        ti._patch_lang_tensor = _patched
        sys.path.insert(0, {BENCH_DIR!r})
        import torch, packed_attention as pa
        torch.manual_seed(0)
        worst = 0.0
        for b, hkv, g, ql, s, d, splits in [(2, 2, 4, 3, 150, 32, None), (1, 2, 8, 17, 200, 16, 3),
                                            (1, 1, 32, 5, 130, 16, 2), (1, 2, 4, 17, 140, 16, 3),
                                            (2, 1, 1, 1, 40, 16, None)]:
            q = torch.randn(b, g * hkv, ql, d); k = torch.randn(b, hkv, s, d); v = torch.randn(b, hkv, s, d)
            fn = pa.TritonPackedAttention(q, k, v, num_splits=splits)
            out = fn().double()
            ref = pa.reference_attention(q, k, v)
            worst = max(worst, (out - ref).abs().max().item())
        print("ERR", worst)
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    err = float(res.stdout.split("ERR")[-1])
    assert err < 1e-4


def test_choose_splits():
    s, c = pa.choose_splits(1, 8, 32768, 132)
    assert s * c >= 32768 and (s - 1) * c < 32768 and c % 64 == 0
    assert s > 1
    assert pa.choose_splits(64, 8, 4096, 132)[0] == 1

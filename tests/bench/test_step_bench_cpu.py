"""CPU tests of the whole-step benchmark (tiny 2-layer config; skipped without torch)."""

from __future__ import annotations

import csv
import math
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the benchmark harness needs it (pip "
                            "install torch, then pip install -e '.[bench]')")

from specplan.bench import step_bench as sb  # noqa: E402

BENCH_DIR = os.path.dirname(os.path.abspath(sb.__file__))


def _model(batch=3, max_kv=48):
    return sb.StepModel(sb.TINY, "cpu", "fp64", max_batch=batch, max_kv=max_kv, seed=0)


def _rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _naive_layer(m, r, x0, k_old, v_old, i=0):
    """One decoder layer with explicit per-(sequence, head, position) loops and the end-aligned mask."""
    c, p = m.cfg, m.layers[i]
    hq, hkv, d, f, eps = c["heads"], c["kv_heads"], c["head_dim"], c["ffn"], c["eps"]
    b, q, ctx = r.b, r.q, r.ctx
    qkv = _rms(x0, p["ln1"], eps) @ p["wqkv"].T
    qkv[:, :(hq + hkv) * d] *= r.rope
    qkv = qkv.view(b, q, hq + 2 * hkv, d)
    k_all, v_all = k_old.clone(), v_old.clone()
    k_all[:, :, ctx:ctx + q] = qkv[:, :, hq:hq + hkv].transpose(1, 2)
    v_all[:, :, ctx:ctx + q] = qkv[:, :, hq + hkv:].transpose(1, 2)
    att = torch.zeros(b, q, hq, d, dtype=x0.dtype)
    for s in range(b):
        for h in range(hq):
            kvh = h // (hq // hkv)
            for t in range(q):
                last = ctx + t  # new token t sees the cache and new tokens 0..t
                keys, vals = k_all[s, kvh, :last + 1], v_all[s, kvh, :last + 1]
                w = torch.softmax(keys @ qkv[s, t, h] / math.sqrt(d), dim=0)
                att[s, t, h] = w @ vals
    x = x0 + att.reshape(b * q, hq * d) @ p["wo"].T
    gu = _rms(x, p["ln2"], eps) @ p["wgu"].T
    return x + (torch.nn.functional.silu(gu[:, :f]) * gu[:, f:]) @ p["wd"].T, k_all, v_all


@pytest.mark.parametrize("kernel", ["torch_packed", "sdpa"])
@pytest.mark.parametrize("batch,q_len,ctx", [(1, 1, 7), (3, 4, 20), (2, 5, 40)])
def test_layer_matches_naive_reference(kernel, batch, q_len, ctx):
    m = _model()
    r = sb.StepRunner(m, batch, q_len, ctx, kernel)
    x0 = torch.randn(batch * q_len, m.cfg["hidden"], dtype=torch.float64)
    r.x.copy_(x0)
    k_old = m.k_cache[0, :batch].clone()
    v_old = m.v_cache[0, :batch].clone()
    ref_x, ref_k, ref_v = _naive_layer(m, r, x0, k_old, v_old)
    r.layer(0)
    torch.testing.assert_close(r.x, ref_x, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(m.k_cache[0, :batch], ref_k)
    torch.testing.assert_close(m.v_cache[0, :batch], ref_v)


def test_mask_hides_future_tokens():
    """Changing new token t+1's key/value must not change token t's attention output."""
    m = _model()
    r = sb.StepRunner(m, 2, 4, 10, "torch_packed")
    r.qkv.normal_()
    k_new, v_new = r.k_new.clone(), r.v_new.clone()
    m.k_cache[0, :2, :, 10:14].copy_(k_new)
    m.v_cache[0, :2, :, 10:14].copy_(v_new)
    r.attention(0)
    before = r.out4.clone()
    m.k_cache[0, :2, :, 13] += 5.0  # the last new token
    m.v_cache[0, :2, :, 13] -= 3.0
    r.attention(0)
    assert torch.equal(r.out4[:, :, :3], before[:, :, :3])
    assert not torch.allclose(r.out4[:, :, 3], before[:, :, 3])


def test_step_shapes_and_kernels_agree():
    m = _model()
    outs = {}
    for kern in ("torch_packed", "sdpa"):
        r = sb.StepRunner(m, 3, 4, 20, kern)
        cache = m.k_cache.clone(), m.v_cache.clone()
        logits = r()
        assert logits.shape == (12, sb.TINY["vocab"])
        assert r.kv_len == 24 and r.q4.shape == (3, sb.TINY["heads"], 4, sb.TINY["head_dim"])
        outs[kern] = logits.clone()
        m.k_cache.copy_(cache[0])
        m.v_cache.copy_(cache[1])
    torch.testing.assert_close(outs["torch_packed"], outs["sdpa"])
    with pytest.raises(ValueError):
        sb.StepRunner(m, 4, 1, 10)  # batch above the cache
    with pytest.raises(ValueError):
        sb.StepRunner(m, 1, 16, 40)  # kv_len above the cache


def test_main_smoke_writes_csv(tmp_path):
    assert sb.main(["--out", str(tmp_path), "--device", "cpu", "--smoke", "--reps", "2"]) == 0
    with open(tmp_path / "step.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0])[:9] == ["model", "device", "batch", "q_len", "context", "attention_kernel", "time_us",
                                 "torch_version", "device_name"]
    assert len(rows) == 16
    assert {r["attention_kernel"] for r in rows} == {"torch_packed", "sdpa"}
    assert all(float(r["time_us"]) > 0 and r["finite"] == "True" for r in rows)
    assert (tmp_path / "env.json").exists()


def test_imports_without_pydantic_or_pandas():
    code = ("import sys; sys.modules['pydantic'] = None; sys.modules['pandas'] = None; "
            f"sys.path.insert(0, {BENCH_DIR!r}); import step_bench; print(step_bench.COLUMNS[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "model"

"""CPU tests of the speculative-round benchmark (tiny config; skipped without torch) and of its report."""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the benchmark harness needs it (pip "
                            "install torch, then pip install -e '.[bench]')")

from specplan.bench import round_bench as rb  # noqa: E402

BENCH_DIR = os.path.dirname(os.path.abspath(rb.__file__))


def test_greedy_rejection_counts_the_matching_prefix():
    # 3 sequences, D = 4, vocabulary 6: the target's argmax at each position is set by a one-hot; sequence i's
    # draft tokens match the target on its first k_i = (4, 0, 2) positions
    d, v = 4, 6
    target = torch.tensor([[1, 2, 3, 4, 5], [0, 0, 0, 0, 0], [5, 4, 3, 2, 1]])
    logits = torch.nn.functional.one_hot(target, v).float().reshape(3 * (d + 1), v)
    draft = torch.tensor([[1, 2, 3, 4], [1, 0, 0, 0], [5, 4, 0, 2]])
    r = rb.RejectRunner(logits, draft, d, probabilistic=False)
    assert r().tolist() == [4, 0, 2] == rb.reference_accepted(target[:, :d], draft)


def test_probabilistic_rejection_accepts_within_the_draft_length():
    d = 3
    logits = torch.randn(4 * (d + 1), 50)
    draft = torch.randint(0, 50, (4, d))
    r = rb.RejectRunner(logits, draft, d, probabilistic=True)
    n = r()
    assert n.shape == (4,) and bool(((n >= 0) & (n <= d)).all())
    assert bool(((r.resampled >= 0) & (r.resampled < 50)).all())


def test_smoke_run_writes_every_part(tmp_path):
    assert rb.main(["--out", str(tmp_path), "--device", "cpu", "--smoke", "--reps", "2"]) == 0
    with open(tmp_path / "round.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    # batches (1, 3) x (decode at D = 0; verify, draft, 2 rejections, round at D = 1 and 3)
    assert len(rows) == 2 * (1 + 2 * 5)
    assert {r["part"] for r in rows} == set(rb.PARTS)
    assert all(float(r["time_us"]) > 0 and r["finite"] == "True" for r in rows)


def test_imports_without_pydantic_or_pandas():
    code = ("import sys; sys.modules['pydantic'] = None; sys.modules['pandas'] = None; "
            f"sys.path.insert(0, {BENCH_DIR!r}); import round_bench; print(round_bench.COLUMNS[0])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "model"


def test_report_reads_measured_over_predicted(tmp_path):
    """Rows measured at 1.1 x what specplan predicts read 1.10 for every part; the greedy rejection at B 64,
    D 3 is one fp32 read of 64 x 3 x 128256 logits at the H200's element-wise bandwidth, plus a launch."""
    from specplan.profiles.registry import load_hardware
    from specplan.validation.round_bench import PARTS, predict_parts, report

    rows = []
    for b in (1, 64):
        for d in (0, 3):
            p = predict_parts("h200-sxm", [b], [d], [1024])
            for part in (["decode"] if d == 0 else [x for x in PARTS if x != "decode"]):
                rows.append(dict(model="llama-3.1-8b", device="cuda", batch=b, draft_len=d, context=1024, part=part,
                                 time_us=f"{1.1 * float(np.asarray(p[part])[0]) * 1e6:.6f}", torch_version="x",
                                 device_name="NVIDIA H200", reps=15, finite=True, method="cuda_graph"))
    path = tmp_path / "round.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    text = report(path)
    for part in PARTS:
        assert f"| {part} | 2 | 1.10 | 1.10 | 1.10 |" in text
    hw = load_hardware("h200-sxm")
    eff = hw.kernel_eff("default")
    by_hand = 64 * 3 * 128256 * 4.0 / (hw.mem_bandwidth_bytes_s * eff.mem_bw_fraction) + hw.kernel_overhead_s
    got = float(np.asarray(predict_parts("h200-sxm", [64], [3], [1024])["reject_greedy"])[0])
    assert got == pytest.approx(by_hand, rel=1e-9)

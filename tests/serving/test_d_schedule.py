"""Best D per concurrency band (specplan/serving/d_schedule.py): brute force and the engines' schedule formats."""

from __future__ import annotations

import numpy as np
import pytest

from specplan.core.errors import SpecplanError
from specplan.serving.aggregated import aggregated
from specplan.serving.d_schedule import bands_from_edges, d_schedule
from specplan.serving.workload import Workload
from specplan.speculation.acceptance import Acceptance
from specplan.speculation.spec import DraftSearch, Speculation
from specplan.model.deployment import Deployment


def test_best_d_per_band_matches_brute_force_and_formats():
    acc = Acceptance.from_rate(0.8)
    r = d_schedule("llama-3.1-8b", "h100-sxm", 128, 512, drafts=DraftSearch(["eagle3"], {"eagle3": acc}, 5),
                   edges=(1, 16, 128), engine="vllm")
    assert [(lo, hi) for lo, hi, *_ in r["bands"]] == [(1, 15), (16, 127), (128, 128)]
    for lo, hi, c, d_best, tps, _ in r["bands"]:
        assert c == pytest.approx(np.sqrt(lo * hi))
        one = [float(aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="vllm"), Speculation("eagle3", d, acc),
                                Workload(isl=128, osl=512, concurrency=c))["tokens_per_s_per_gpu"])
               for d in range(6)]
        assert d_best == int(np.argmax(one)) and tps == pytest.approx(max(one),
                                                                      rel=1e-3)  # tables on another batch grid
    for (lo, hi, c, d_best, _, _), (tpot_ms, ttft_ms) in zip(r["bands"], r["band_tpot_ttft_ms"]):
        at = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="vllm"),
                        Speculation("eagle3" if d_best else "none", d_best,
                                    acc if d_best else None), Workload(isl=128, osl=512, concurrency=c))
        assert tpot_ms == pytest.approx(1e3 * float(at["tpot_s"]), rel=1e-2)  # each band's TPOT / TTFT at its own D
        assert ttft_ms == pytest.approx(1e3 * float(at["ttft_s"]), rel=1e-2)
    v = r["vllm"]  # vLLM: inclusive ranges from 1, sorted, contiguous
    assert v[0][0] == 1 and v[-1][1] == 128 and all(a[1] + 1 == b[0] for a, b in zip(v, v[1:]))
    if r["trtllm"] is not None:  # TensorRT-LLM: {upper batch: D}, the smallest key with max_draft_len
        assert r["trtllm"] == {hi: k for _, hi, k in v} and r["trtllm"][min(r["trtllm"])] == max(r["trtllm"].values())
        assert max(r["trtllm"]) == 128  # speculation stops above the last key: the last band reaches the top


def test_bands_must_start_at_one():
    assert bands_from_edges((1, 4, 8)) == [(1, 3), (4, 7), (8, 8)]
    with pytest.raises(SpecplanError):
        bands_from_edges((2, 4))

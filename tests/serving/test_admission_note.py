"""predict's serving point says why requests wait before their prefill: the running cap (KV room or max_num_seqs)."""

import numpy as np
import pytest

from specplan.profiles.registry import load_engine
from specplan.serving.api import serving_summary
from specplan.serving.workload import Workload


def test_kv_cap_names_the_decode_batch_and_the_wait():
    """gpt-oss-120b on one H100 at ISL 1024 / OSL 1024: 256 clients, fewer requests' KV fit beside the weights. The
    decode batch is the cap, the rest wait (Little's law: C = B + X·TTFT), and the note says both numbers."""
    s = serving_summary("gpt-oss-120b", "h100-sxm", Workload(1024, 1024, concurrency=[8.0, 256.0]), engine="sglang")
    small, big = s["points"]
    b = big["baseline"]
    assert b["decode_batch"] < 256 and b["admission_wait_ms"] > 1.0
    assert b["decode_batch"] + b["requests_per_s"] * b["ttft_ms"] / 1e3 == pytest.approx(256.0, rel=1e-3)
    cap = f"{b['decode_batch']:g}"
    assert b["note"].startswith(f"at most {cap} requests run at once (the KV cache holds {cap} requests")
    assert f"{b['admission_wait_ms']:.0f} ms of the TTFT" in b["note"]
    assert b["admission_wait_ms"] < b["ttft_ms"]
    assert "note" not in small["baseline"] and "admission_wait_ms" not in small["baseline"]


def test_max_num_seqs_cap_is_named_as_such(tmp_path):
    """An engine whose max_num_seqs binds before the KV cache: the note names max_num_seqs, and the decode batch
    stops there."""
    eng = load_engine("vllm").model_copy(update={"max_num_seqs": 16})
    s = serving_summary("llama-3.1-8b", "h100-sxm", Workload(512, 256, concurrency=64.0), engine=eng)
    b = s["baseline"]
    assert b["decode_batch"] == pytest.approx(16.0)
    assert "the engine's max_num_seqs is 16" in b["note"]
    assert np.isfinite(b["admission_wait_ms"]) and b["admission_wait_ms"] > 1.0


def test_disaggregated_cap_is_per_decode_instance():
    """1P1D: the decode instance holds as many requests' KV as the aggregated engine on the same GPU; the note says
    the cap is per decode instance."""
    agg = serving_summary("gpt-oss-120b", "h100-sxm", Workload(1024, 1024, concurrency=256.0), engine="sglang")
    dis = serving_summary("gpt-oss-120b", "h100-sxm", Workload(1024, 1024, concurrency=256.0, mode="disagg",
                                                                 pools=(1, 1)), engine="sglang")
    b = dis["baseline"]
    assert b["decode_batch"] == pytest.approx(agg["baseline"]["decode_batch"])
    assert f"at most {b['decode_batch']:g} requests run at once per decode instance (the KV cache" in b["note"]

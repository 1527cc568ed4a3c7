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


def test_no_admission_note_when_the_model_does_not_fit():
    """DeepSeek-V3 on one H100: the weights alone exceed the memory (fits: false); no running-cap note then."""
    s = serving_summary("deepseek-v3", "h100-sxm", Workload(1024, 1024, concurrency=64.0))
    assert s["baseline"]["fits"] is False
    assert "run at once" not in (s["baseline"].get("note") or "")


def test_disaggregated_saturation_does_not_depend_on_the_concurrency():
    """The decode pool's capacity is priced at the running cap, not at the top of a table that ends at the
    loop's concurrency: the same saturation rate at concurrency 8, 256 and in a list of both."""
    wl = lambda c: Workload(1024, 1024, concurrency=c, mode="disagg", pools=(1, 1))  # noqa: E731
    sat = [serving_summary("gpt-oss-120b", "h100-sxm", wl(c), engine="sglang")["baseline"]
           ["saturation_requests_per_s"] for c in (8.0, 256.0)]
    both = serving_summary("gpt-oss-120b", "h100-sxm", wl([8.0, 256.0]), engine="sglang")["points"]
    assert sat[0] == pytest.approx(sat[1], rel=1e-9)
    assert [p["baseline"]["saturation_requests_per_s"] for p in both] == pytest.approx(sat, rel=1e-9)


def test_an_overloaded_open_loop_runs_at_its_cap():
    """Arrivals beyond the saturation rate: no TPOT or tokens/s/user (no steady state), the decode batch at most
    the running cap (the fixed point only bounds it)."""
    r = serving_summary("llama-3.1-8b", "h100-sxm", Workload(1024, 256, request_rate=[1.0, 64.0]), engine="vllm")
    hi = r["points"][1]["baseline"]
    assert hi["stable"] is False and hi["tpot_ms"] is None and hi["tokens_per_s_per_user"] is None
    from specplan.serving.api import serve

    cap = float(np.ravel(serve("llama-3.1-8b", "h100-sxm", Workload(1024, 256, request_rate=64.0),
                               engine="vllm")["running_cap"])[0])
    assert hi["decode_batch"] <= cap


def test_a_busy_disaggregated_prefill_pool_is_named():
    """1P1D, Llama-3.1-8B, ISL 1024 / OSL 256, EAGLE-3 D 3: speculation makes the decode pool fast enough that the
    one prefill GPU runs 98-99 % busy at concurrency 64 and 128 (its M/D/1 queue is most of the TTFT); the point
    says so and carries the busy fraction. At concurrency 8 it is well under the 90 % threshold: no note."""
    from specplan.serving.api import PREFILL_NOTE_UTIL

    s = serving_summary("llama-3.1-8b", "h100-sxm", Workload(1024, 256, concurrency=[8.0, 128.0], mode="disagg",
                                                             pools=(1, 1)),
                        mechanism="eagle3", draft_len=3)
    low, high = (p["speculative"] for p in s["points"])
    assert PREFILL_NOTE_UTIL == 0.9
    assert high["prefill_utilization"] >= 0.95 and "the prefill pool is" in high["note"]
    assert f"{100 * high['prefill_utilization']:.0f} % busy" in high["note"]
    assert high["ttft_ms"] > 10 * low["ttft_ms"]
    assert low["prefill_utilization"] < 0.9 and "prefill pool" not in low.get("note", "")


def test_an_external_draft_takes_its_weights_and_kv_from_the_running_cap():
    """Llama-3.1-8B on one H100 (77.3 GB usable), ISL 1024 + OSL 256: its KV is 32 x 8 x 128 x 2 x 2 B = 128 KiB a
    token, 168 MB a request, so about (77.3 - 16.1) / 0.168 = 365 requests fit. A llama-3.2-1b draft adds 2.5 GB of
    weights and 16 x 8 x 64 x 2 x 2 B = 32 KiB a token (42 MB a request): (77.3 - 16.1 - 2.5) / 0.210 = 280. The
    serving path kept 363 for the speculative rows (the step path said it did not fit)."""
    from specplan.speculation.acceptance import Acceptance

    s = serving_summary("llama-3.1-8b", "h100-sxm", Workload(1024, 256, concurrency=400.0), engine="vllm",
                        mechanism="external", draft_len=2, draft_model="llama-3.2-1b",
                        acceptance=Acceptance.from_rate(0.7))
    base, spec = s["baseline"], s["speculative"]
    assert 355 <= base["decode_batch"] <= 366 and 270 <= spec["decode_batch"] <= 282
    assert "beside the target's and the draft's weights" in spec["note"]
    assert "draft" not in base["note"]

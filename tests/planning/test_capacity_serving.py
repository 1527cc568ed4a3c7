"""GPUs for a load: the prefill pool sized to a TTFT target (M/D/1, closed form in the test), and the aggregated
answer through the serving model beside the disaggregated one."""

import math

import pytest

from specplan.planning.capacity import prefill_groups, search
from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_hardware, load_model
from specplan.serving.prefill import prefill_s
from specplan.planning.options import LoadTarget


def test_prefill_groups_closed_form():
    # 10 requests/s of 0.2 s prefill: 2 groups would run at 100 % (an unbounded M/D/1 wait: the old sizing).
    # Default (wait <= one prefill, TTFT <= 0.4 s): rho <= 2/3 -> ceil(2 / (2/3)) = 3 groups.
    assert prefill_groups(10.0, 0.2) == 3
    # TTFT <= 0.25 s: 0.2 (1 + rho / (2 (1 - rho))) <= 0.25 <=> rho <= 1/3 -> 6 groups (TTFT 0.25 s exactly);
    # 5 groups: rho 0.4, wait 0.4 / 1.2 x 0.2 = 0.0667 s, TTFT 0.267 s > 0.25
    assert prefill_groups(10.0, 0.2, 0.25) == 6
    # a target below one prefill cannot be met by any pool
    assert prefill_groups(10.0, 0.2, 0.15) == 0


def test_gpu_count_search_sizes_the_prefill_pool_to_the_ttft_target():
    # Llama-3.1-8B on H100 nodes of 8, ISL 4096 / OSL 256, 40,000 tokens/s: 156.25 requests/s of S seconds each
    # (prefill of 4 prompts on TP 8, per prompt). Prefill GPUs = 8 x prefill_groups at the target, checked by hand.
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    s = float(prefill_s(m, hw, 8, 4096, precision=resolve_precision(m, hw, None, None), n_seqs=4)) / 4
    rate = 40000.0 / 256
    r = search(m, hw, load=LoadTarget(tps=40000.0, tps_per_user=40.0, isl=4096, osl=256), max_gpus=64,
               max_ttft_ms=1e3 * 3 * s)
    k = 3.0  # TTFT target / S
    rho_max = 2 * (k - 1) / (2 * k - 1)  # 0.8
    assert r["prefill_gpus"] == 8 * math.ceil(rate * s / rho_max)
    assert r["prefill_gpus"] > 8 * math.ceil(rate * s)  # more than the pool at 100 % utilization
    assert r["prefill_s_per_request"] == pytest.approx(s, rel=1e-9)


def test_gpu_count_search_offers_the_aggregated_answer():
    r = search("llama-3.1-8b", "h100-sxm", load=LoadTarget(tps=40000.0, tps_per_user=40.0, isl=4096, osl=256),
               max_gpus=64, max_ttft_ms=1000.0, engine="vllm")
    a = r["aggregated"]
    assert a is not None and a["gpus"] == a["replicas"] * a["tp"]
    assert a["tpot_ms"] <= 1e3 / 40.0 and a["ttft_ms"] <= 1000.0
    per = a["tokens_per_s_per_replica"]
    assert a["replicas"] * per >= 40000.0 > (a["replicas"] - 1) * per  # the fewest replicas that carry the load
    # why one replica fewer fails, in its own numbers (it explained only the disaggregated count before)
    k = a["replicas"] - 1
    assert a["smaller_fails"].startswith(f"{k * a['tp']} GPUs = {k} x TP {a['tp']} replicas serve {k * per:,.0f} "
                                         f"tokens/s, below 40,000")
    assert f"TP {a['tp']} {a['gpus']}" in a["smaller_fails"]

"""The prefill pool at exactly full utilization (issue 44): an open loop arriving at x / S requests/s (rho = 1) has
no steady state, the M/D/1 wait rho S / (2 (1 - rho)) diverges there, so TTFT is infinite and the point unstable
(a guard on 1 - rho once made it 1.1e10 s when the comparison admitted rho = 1). Just below, the wait is the
closed form by hand."""

import pytest

from specplan.serving.disaggregated import disaggregated
from specplan.serving.workload import Workload
from specplan.model.deployment import Deployment
from specplan.speculation.spec import Speculation


def _at(rate):
    return disaggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="vllm"), Speculation("none"),
                         Workload(1024, 256, request_rate=rate, mode="disagg",
                                                              pools=(1, 1)))


def test_full_prefill_utilization_has_no_finite_ttft():
    s = float(_at(1.0)["prefill_s"])
    r = _at(1.0 / s)  # 44.27 requests/s for Llama-3.1-8B on one H100 at ISL 1024
    assert float(r["prefill_utilization"]) == 1.0  # exactly: the boundary itself
    assert float(r["ttft_s"]) == float("inf") and not bool(r["stable"])
    rho = 0.9
    r = _at(rho / s)
    wait = rho * s / (2.0 * (1.0 - rho))  # M/D/1: 4.5 prefills
    assert float(r["ttft_s"]) == pytest.approx(s + wait + float(r["kv_transfer_s"]), rel=1e-12)

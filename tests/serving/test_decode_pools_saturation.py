"""The saturation rate of a disaggregated deployment with several decode instances (issue 44, a mutant that
survived): at saturation each of the y decode instances runs its running cap of requests, so the decode pool
finishes y times the requests/s of one; with the prefill pool far from binding the deployment saturates there,
and an open loop is stable just below that rate and unstable just above it."""

import pytest

from specplan.serving.disaggregated import disaggregated
from specplan.serving.workload import Workload
from specplan.model.deployment import Deployment
from specplan.speculation.spec import Speculation

DEP = Deployment("llama-3.1-8b", "h100-sxm", engine="vllm")


def _at(rate, pools):
    return disaggregated(DEP, Speculation(), Workload(1024, 256, request_rate=rate, mode="disagg", pools=pools))


def test_decode_pool_capacity_scales_with_its_instances():
    one = float(_at(1.0, (8, 1))["saturation_requests_per_s"])
    for y in (2, 3):
        r = _at(1.0, (8, y))
        sat = float(r["saturation_requests_per_s"])
        assert 8.0 / float(r["prefill_s"]) > 1.5 * sat  # 8 prefill instances: the decode pool binds
        assert sat == pytest.approx(y * one, rel=1e-9)
        below, above = _at(0.99 * sat, (8, y)), _at(1.01 * sat, (8, y))
        assert bool(below["stable"]) and not bool(above["stable"])

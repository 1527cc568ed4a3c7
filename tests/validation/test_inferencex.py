"""The InferenceX rows as specplan reads them (issue 38), and the acceptance profile fitted on them."""

import pytest

from specplan.model.parallel import Layout
from specplan.speculation.acceptance import load_profile
from specplan.validation.inferencex import PROFILE_ID, load_rows


def test_rows_read_with_their_layouts_and_measured_output_per_gpu():
    rows = load_rows()
    assert len(rows) == 131
    assert sum(r.mechanism == "mtp" for r in rows) == 18 and sum(r.hardware == "mi300x" for r in rows) == 106
    r = rows[0]  # ix-dsr1-h100-dynamo-sglang-...-p1xtp16ep1-d1xdep16ep16-1k1k-c1: tput 3.1508 over 32 GPUs
    assert (r.prefill_layout, r.layout, r.pools) == (Layout(tp=16), Layout(dp=16, ep=16), (1, 1))
    assert (r.engine, r.mechanism, r.draft_len, r.concurrency) == ("sglang", "mtp", 2, 1.0)
    assert r.out_per_gpu == pytest.approx(3.1508 * 1024 / 2048)
    trt = [x for x in rows if x.framework == "dynamo-trt" and x.layout == Layout(tp=16, ep=16)]
    assert trt and all(x.prefill_layout == Layout(dp=16, ep=16) for x in trt)  # TEP decode, DEP prefill


def test_inferencex_acceptance_profile_is_one_iid_rate():
    """The shipped profile is AL(D) = 1 + a + ... + a^D with a = AL(1) - 1; not a default (a workload's)."""
    p = load_profile(PROFILE_ID)
    assert p["target"] == "deepseek-r1" and p["default"] is False and "inferencex" in p["id"]
    a = p["points"][0][1] - 1.0
    for d, al in p["points"]:
        assert al == pytest.approx(sum(a ** k for k in range(d + 1)), abs=1e-3)

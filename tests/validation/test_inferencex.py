"""The InferenceX rows as specplan reads them (issue 38), and the acceptance profile fitted on them."""

import numpy as np
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


def _row(setup_isl: int, case: str, tps_user: float):
    """A made-up MI300X row of ISL `setup_isl` (its setup) with measured tokens/s/user `tps_user`."""
    from specplan.validation.inferencex import IxRow

    return IxRow(case, "mi300x", "sglang", "sglang", "agg", Layout(tp=8), None, None, "none", 0, setup_isl, 1024,
                 4.0, 1.0, tps_user, 100.0)


def test_held_out_fit_never_sees_the_left_out_setup():
    """Setup 1024 is matched only by grid value 1, setups 2048 / 4096 / 8192 only by value 2 (hand-made
    predictions): each setup's value is the one the OTHER setups choose, so 1024 gets 2 although value 1 fits it
    exactly, and the others get 2; on all rows 2 wins (3 setups of 4)."""
    from specplan.validation.inferencex import fit_on_user_rate, held_out_fits

    rows = [_row(isl, f"{isl}-{i}", 40.0) for isl in (1024, 2048, 4096, 8192) for i in range(2)]
    by_value = {1.0: {r.case_id: (0.0, 40.0 if r.isl == 1024 else 80.0, 0.0) for r in rows},
                2.0: {r.case_id: (0.0, 40.0 if r.isl != 1024 else 80.0, 0.0) for r in rows}}
    held = held_out_fits(rows, by_value)
    assert len(held) == 4 and all(v == 2.0 for v in held.values())
    assert fit_on_user_rate([r for r in rows if r.isl == 1024], by_value) == 1.0  # in sample it would pick 1
    assert np.isnan(fit_on_user_rate([], by_value))


def test_mi300x_per_kernel_time_fitted_without_a_setup_predicts_its_measured_step():
    """Measured rows, not the code: the 1K/1K C = 4 MI300X rows (11 run dates, 37.6-68.6 tok/s/user, median 46.6,
    reference/published/serving_public_inferencex.csv) scored with the per-kernel time fitted on the 1K/8K and 8K/1K
    rows only land within 15 % of the measured median, where the hardware profile's 11.2 us (the LMSYS SGLang 0.4.10
    fit) gives 57.5, 23 % fast."""
    from specplan.validation.inferencex import score

    rows = [r for r in load_rows() if r.hardware == "mi300x"]
    scored, fits = score(rows, koh_grid_s=np.array([11.0, 14.0, 17.0, 20.0]) * 1e-6)
    left = "mi300x sglang agg tp8 none 1024/1024"
    assert fits.koh_held_s[left] > fits.koh_profile_s  # the others ask for a longer per-kernel time
    c4 = [s for s in scored if s.row.setup == left and s.row.concurrency == 4]
    meas = np.median([s.row.tps_user for s in c4])
    assert len(c4) == 11 and meas == pytest.approx(46.6, abs=0.05)
    assert abs(c4[0].pred[1] / meas - 1) < 0.15
    assert fits.profile_pred[c4[0].row.case_id][1] / meas > 1.15


def test_trtllm_recipe_batch_is_the_per_rank_running_cap():
    """The MTP dynamo-trt rows' recipes (notes) carry the gen max_batch_size; InferenceX sizes C at about 1.2 x the
    gen slots counted per attention-DP rank (hand counts: 1 x 16 x 32 = 512 -> C 615; 3 x 16 x 4 = 192 -> C 231),
    which fixes the per-rank reading; the MTP-off rows name no recipe."""
    from specplan.validation.inferencex import recipe_max_batch

    assert recipe_max_batch("recipe ctx1_gen3_dep16_batch4_eplb0_mtp3.yaml (mtp3)") == 4
    assert recipe_max_batch("recipe recipes/h100/1k1k/mtp/h100-fp8-1p1d-max-dep-mtp.yaml") is None
    trt = {(r.concurrency, r.mechanism): r for r in load_rows() if r.framework == "dynamo-trt"}
    assert {c: r.decode_max_batch for (c, _), r in trt.items() if r.decode_max_batch} == {231.0: 4, 615.0: 32,
                                                                                           30.0: 8}
    for c in (615.0, 231.0):
        r = trt[(c, "mtp")]
        slots = r.pools[1] * r.layout.dp * r.decode_max_batch
        assert 1.15 < c / slots < 1.25
    assert all(r.decode_max_batch is None for r in trt.values() if r.mechanism == "none")


def test_recipe_cap_makes_the_overfilled_row_wait_as_measured():
    """C = 615 on 512 gen slots: with the recipe's cap the model's TTFT holds the admission wait, within 2x of the
    measured mean TTFT (12.17 s, the row's notes); uncapped it is a prefill plus a transfer, 50x below."""
    import dataclasses

    from specplan.validation.inferencex import predict

    r = [x for x in load_rows() if x.framework == "dynamo-trt" and x.concurrency == 615.0][0]
    capped = predict([r], 0.35)[r.case_id][2] / 1e3
    free = predict([dataclasses.replace(r, decode_max_batch=None)], 0.35)[r.case_id][2] / 1e3
    assert 12.17 / 2 < capped < 12.17 * 2
    assert free < 12.17 / 50

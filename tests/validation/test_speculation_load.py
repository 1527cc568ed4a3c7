"""The data and setup mapping of `specplan validate-speculation` (reference/speculation_load/)."""

from __future__ import annotations

import numpy as np
import pytest

from specplan.profiles.params import param_counts
from specplan.profiles.registry import load_engine, load_hardware, load_model
from specplan.validation.speculation_load import load_setups, scored
from specplan.serving.aggregated import StepOptions
from specplan.speculation.spec import Speculation


def test_every_scored_setup_has_three_loads_and_profiles():
    setups, not_scored = load_setups()
    assert len(setups) >= 7 and not_scored
    for st in setups:
        s = st.spec
        assert len(st.loads) >= 3 and np.all(np.diff(st.loads) > 0), s["id"]
        assert np.all(st.measured > 0)
        load_model(s["model"]), load_hardware(s["hardware"]), load_engine(s["engine"])
        if s["al"] == "row":
            assert np.all(np.isfinite(st.al_rows)) and np.all(st.al_rows <= 1 + s["draft_len"])
        else:  # AL fitted on the lowest load: that row does not count
            assert not scored(st)[0] and scored(st)[1:].all()
        if s.get("baseline_group"):
            assert np.all(st.base_tok_s > 0)


def test_qwen25_7b_profile_matches_its_published_size():
    # Qwen2.5-7B: 7.61B parameters (Qwen's model card); the profile omits only the q/k/v biases (~0.8M)
    assert abs(param_counts(load_model("qwen2.5-7b"))["total"] / 7.61e9 - 1) < 0.01


def test_mi300x_per_kernel_time_reproduces_its_measured_baselines():
    """hardware_profiles/mi300x.yaml's kernel_overhead_s is fitted on the amdmtp- baseline columns (DeepSeek-V3
    FP8, TP 8, SGLang 0.4.10, no speculation): the measured mean E2E latency of the random 1024/1024 setup at
    concurrency 8, 16 and 32 (19.92, 23.71, 30.87 s, reference/speculation_load/specdec_sweeps.csv) within 10 %;
    with the assumed 3 us it was 1.3-1.7 x too fast."""
    from specplan.validation.speculation_load import Priced

    st = [s for s in load_setups()[0] if s.spec["id"] == "s4-dsv3-mtp-random-sglang"][0]
    pred = Priced(st).baseline_metric()
    sel = np.isin(st.loads, [8.0, 16.0, 32.0])
    np.testing.assert_allclose(st.base_value[sel], [19.91906, 23.70894, 30.86839])
    assert np.all(np.abs(pred[sel] / st.base_value[sel] - 1.0) < 0.10), pred[sel]
    hw = load_hardware("mi300x").model_copy(update={"kernel_overhead_s": 3.0e-6})
    slow = Priced(st, hw).baseline_metric()
    assert np.all(st.base_value[sel] / slow[sel] > 1.25)


def test_kernel_overhead_is_fitted_with_each_setup_left_out():
    from specplan.validation.speculation_load import KOH_GRID_S, fit_kernel_overhead

    setups = load_setups()[0]
    koh = fit_kernel_overhead(setups)
    mi = [s.spec["id"] for s in setups if s.spec.get("fit_kernel_overhead")]
    assert sorted(koh["loo"]) == sorted(mi) and len(mi) == 2
    assert set(koh["all"]) == {"mi300x"} and koh["all"]["mi300x"] in KOH_GRID_S
    assert load_hardware("mi300x").kernel_overhead_s == float(f"{koh['all']['mi300x']:.3g}")  # the profile = the fit


def test_baseline_time_ratio_reads_both_metrics_the_same_way():
    """The report's 'baseline time, model / measured': 1 where the measured baseline is the model's own; a harness
    twice as fast (tokens/s x 2, or latency / 2) gives 2 on either metric; speedup-only rows give nan."""
    import dataclasses

    from specplan.validation.speculation_load import Priced, baseline_time_ratio

    setups, _ = load_setups()
    by_metric = {}
    for st in setups:
        by_metric.setdefault((st.spec["metric"], bool(np.all(np.isfinite(st.base_value)))), st)
    for metric, fast in (("throughput", 2.0), ("latency", 0.5)):
        st = by_metric[(metric, True)]
        p = Priced(st)
        own = p.baseline_metric()
        p.st = dataclasses.replace(st, base_value=own)
        assert np.allclose(baseline_time_ratio(p), 1.0)
        p.st = dataclasses.replace(st, base_value=own * fast)
        assert np.allclose(baseline_time_ratio(p), 2.0)
    st = by_metric[("throughput", False)]
    assert np.all(np.isnan(baseline_time_ratio(Priced(st))))


def test_waves_of_a_fixed_request_list():
    """A harness that runs 80 requests, C at a time: C 1 and 8 are full waves, 64 is a wave of 64 and one of 16,
    128 a single wave of the 80 (SpecForge's run_batch with num_threads = C)."""
    from specplan.validation.speculation_load import waves

    assert waves(1, 80) == [(80, 1.0)]
    assert waves(8, 80) == [(10, 8.0)]
    assert waves(64, 80) == [(1, 64.0), (1, 16.0)]
    assert waves(128, 80) == [(1, 80.0)]
    assert waves(32, 80) == [(2, 32.0), (1, 16.0)]


def test_a_wave_setup_prices_its_level_as_its_waves():
    """s2-gptoss-eagle3 (80 MT-Bench prompts): the baseline tokens/s at batch 64 is 80 x OSL over the latency of
    a closed loop of 64 plus that of one of 16 (Little: latency = C / X), each solved on its own; at batch 8 it is
    the steady state of 8 (10 full waves)."""
    from specplan.serving.aggregated import gpu_tables, solve
    from specplan.serving.workload import Workload
    from specplan.validation.speculation_load import Priced

    st = [s for s in load_setups()[0] if s.spec["id"] == "s2-gptoss-eagle3-sglang"][0]
    p = Priced(st)
    got = p.baseline_metric()

    def x_at(c):
        wl = Workload(isl=st.spec["isl"], osl=st.spec["osl"], concurrency=np.array([float(c)]))
        tab = gpu_tables(p.m, p.hw, 1, wl, p.eng, StepOptions(Speculation("none", np.zeros(1))),
                         p.prec, float(c))
        return float(np.ravel(solve(tab, p.eng, wl)["requests_per_s"])[0])

    osl = st.spec["osl"]
    assert abs(got[2] / (80 * osl / (64 / x_at(64) + 16 / x_at(16))) - 1) < 0.02  # own tables: another batch grid
    assert abs(got[1] / (x_at(8) * osl) - 1) < 0.02
    assert got[2] < x_at(64) * osl  # the tail wave of 16 lowers the level's tokens/s


def test_ngram_on_vllm_0_14_overlaps_the_baseline_host_work_but_not_the_rounds():
    """vLLM 0.14.0-0.17.1 schedule asynchronously by default and turn it off for n-gram speculation
    (vllm/config/vllm.py): n1's engine overlaps a decode step's host work and adds it to an n-gram round. By hand
    at concurrency 64, 8 ms of GPU, graphed (64 x 6 = 384 verify tokens <= 512): host = 0.764 ms + 64 x 36.1 us
    = 3.074 ms; baseline step max(8, 3.074) = 8 ms, n-gram round 3.074 + 8 ms. The measured trend (speedup at C 128
    / C 1, 1.179 / 3.513) is then met within 0.10, where the synchronous shipped profile misses it."""
    import dataclasses

    from specplan.speculation.round import round_s
    from specplan.validation.speculation_load import Priced

    st = [s for s in load_setups()[0] if s.spec["id"] == "n1-qwen25-ngram-vllm"][0]
    p = Priced(st)
    assert p.eng.overlap_scheduler and not p.eng.spec_overlap
    host = 0.764e-3 + 64 * 3.61e-5  # engine_profiles/vllm.yaml host_step_s, host_per_seq_s
    assert float(round_s(p.eng, 8e-3, 64, 0, 1, 300, 0)) == pytest.approx(8e-3, rel=1e-12)
    assert float(round_s(p.eng, 8e-3, 64, 5, 6, 300, 0)) == pytest.approx(host + 8e-3, rel=1e-3)
    measured = 1.179 / 3.513
    np.testing.assert_allclose(st.measured[[0, -1]], [3.513, 1.179])
    pred = p.predict({})
    assert abs(pred[-1] / pred[0] - measured) < 0.10
    sync = dict(st.spec, engine_overrides={})
    ps = Priced(dataclasses.replace(st, spec=sync))
    pred_s = ps.predict({})
    assert pred_s[-1] / pred_s[0] - measured > 0.10



def test_sglang_0_5_12_counted_verify_sampling_brings_the_gpt_oss_eagle3_trend_within_0_10():
    """s2-gptoss-eagle3 (gpt-oss-120b, one H100, SGLang 0.5.12, EAGLE-3 D 3, temperature 0.7): measured speedup
    1.344 at batch 1 and 1.444 at batch 64, trend 1.074. The verify's sampling as SGLang 0.5.12 runs it
    (engine_profiles/sglang-0.5.12.yaml rejection_passes: 44.5 full-vocabulary passes per sequence at q = 4, 12 by
    the generic rule) costs about 0.5 ms more per round at batch 64 and nothing at batch 1, which takes the
    predicted trend from 1.176 to 1.163, within 0.10 of the measured one (it was 0.102 off)."""
    import dataclasses

    from specplan.validation.speculation_load import Priced

    st = [s for s in load_setups()[0] if s.spec["id"] == "s2-gptoss-eagle3-sglang"][0]
    np.testing.assert_allclose(st.measured, [1.344, 1.313, 1.444])
    measured = st.measured[-1] / st.measured[0]
    sp = Priced(st).predict({})
    assert abs(sp[-1] / sp[0] - measured) < 0.10, sp
    generic = dataclasses.replace(st, spec={**st.spec, "engine_overrides": {
        **st.spec["engine_overrides"], "rejection_passes": {}, "rejection_passes_by_mechanism": {}}})
    gp = Priced(generic).predict({})
    assert abs(gp[-1] / gp[0] - measured) > 0.10, gp
    assert abs(sp[0] / gp[0] - 1) < 0.005 and sp[-1] / gp[-1] < 0.995  # the counted passes weigh at batch 64 only

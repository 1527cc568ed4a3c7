"""Host time per prompt token (EngineProfile.prefill_tokens_s, issue 22): a step carrying a prompt chunk pays it with
its other host time, overlapped with the GPU under an overlap scheduler (closed forms by hand)."""

import numpy as np
import pytest

from specplan.profiles.registry import load_engine
from specplan.serving.workload import Workload
from specplan.speculation.round import round_s
from specplan.serving.aggregated import StepOptions
from specplan.speculation.spec import Speculation


def test_an_eager_step_adds_its_prompt_tokens_host_time():
    # overlap scheduler, GPU 1 ms below the host: 1.5 ms + 8 x 0 per seq + 1024 x 4 us + 600 x 7.46 us launches
    # + 15 ms eager step = 1.5 + 4.096 + 4.476 + 15 = 25.072 ms
    eng = load_engine("trtllm").model_copy(update={"host_step_s": 1.5e-3, "host_per_seq_s": 0.0,
                                                   "eager_launch_s": 7.46e-6, "eager_step_s": 15e-3,
                                                   "prefill_tokens_s": 4e-6, "step_gap_s": 0.0})
    t = float(round_s(eng, 1e-3, 8.0, 0.0, 1.0, 600, 0.0, eager=True, prompt_tokens=1024))
    assert t == pytest.approx(25.072e-3, rel=1e-9)
    # a GPU step longer than the host hides it: the step is the GPU's 40 ms, prompt tokens or not
    assert float(round_s(eng, 40e-3, 8.0, 0.0, 1.0, 600, 0.0, eager=True, prompt_tokens=1024)) == 40e-3
    # no overlap: host + max(GPU, launches) = (1.5 + 4.096) + max(1, 4.476 + 15) ms
    sync = eng.model_copy(update={"overlap_scheduler": False})
    assert float(round_s(sync, 1e-3, 8.0, 0.0, 1.0, 600, 0.0, eager=True, prompt_tokens=1024)) == pytest.approx(
        (1.5 + 4.096 + 19.476) * 1e-3, rel=1e-9)
    assert float(eng.step_s(1e-3, 8.0, 600, False, 1024)) == pytest.approx(25.072e-3, rel=1e-9)


def test_a_prompt_adds_isl_times_the_per_token_host_time_to_the_engine_time_line():
    """TensorRT-LLM (whole prompts, no chunking: one chunk of ISL tokens) with its mixed step host-bound (eager step
    50 ms, far above an 8B TP 8 step): raising prefill_tokens_s by 10 us adds ISL x 10 us = 10.24 ms to what one
    prompt adds to the engine's time line (ΔP), at every decode batch of the tables."""
    from specplan.costs.precision import resolve_precision
    from specplan.profiles.registry import load_hardware, load_model
    from specplan.serving.aggregated import gpu_tables, prompt_step_s

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    base = load_engine("trtllm").model_copy(update={"prefill_tokens_s": 0.0, "eager_step_s": 0.05})
    more = base.model_copy(update={"prefill_tokens_s": 1e-5})
    wl = Workload(1024, 64, concurrency=np.array([16.0]))
    spec = StepOptions(Speculation("none", np.zeros(1)))
    tab = gpu_tables(m, hw, 8, wl, base, spec, resolve_precision(m, hw, None, None), 16.0)
    b = np.array([1.0, 4.0, 16.0])[:, None]
    it_gpu, chunks, _, _, tokens = tab.at(b)
    np.testing.assert_allclose(tokens[0], 1024.0)
    rnd = (tab.draft_len, tab.q, tab.kernels - tab.draft_kernels, tab.draft_kernels)
    dps = [prompt_step_s(tab, e, it_gpu, chunks, b, round_s(e, it_gpu, b, *rnd), rnd, tokens) for e in (base, more)]
    np.testing.assert_allclose(dps[1] - dps[0], 1024 * 1e-5, rtol=1e-9)


def test_the_step_gap_adds_to_every_step_overlapped_or_not():
    """step_gap_s (the GPU idle between steps that no overlap hides) adds to the step after the max: 8 ms of GPU
    over 1.5 ms of host is 8 + 0.44 ms with the overlap scheduler, 1.5 + 8 + 0.44 ms without; a speculative round and
    an eager step pay it once too."""
    eng = load_engine("trtllm").model_copy(update={"host_step_s": 1.5e-3, "host_per_seq_s": 0.0,
                                                   "step_gap_s": 4.4e-4})
    assert float(round_s(eng, 8e-3, 8.0, 0.0, 1.0, 600, 0.0)) == pytest.approx(8.44e-3, rel=1e-12)
    assert float(eng.step_s(8e-3, 8.0, 600, True)) == pytest.approx(8.44e-3, rel=1e-12)
    sync = eng.model_copy(update={"overlap_scheduler": False, "spec_overlap": False})
    assert float(round_s(sync, 8e-3, 8.0, 0.0, 1.0, 600, 0.0)) == pytest.approx(9.94e-3, rel=1e-12)
    assert float(round_s(eng, 8e-3, 8.0, 3.0, 4.0, 600, 60.0)) == pytest.approx(8.44e-3, rel=1e-12)
    no_gap = eng.model_copy(update={"step_gap_s": 0.0})
    e = round_s(eng, 1e-3, 8.0, 0.0, 1.0, 600, 0.0, eager=True, prompt_tokens=512)
    assert float(e - round_s(no_gap, 1e-3, 8.0, 0.0, 1.0, 600, 0.0, eager=True, prompt_tokens=512)) == pytest.approx(
        4.4e-4, rel=1e-9)

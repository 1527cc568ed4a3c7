"""SGLang caps the running requests at 48 when it speculates and the launch sets no --max-running-requests
(sglang 0.5.23 srt/arg_groups/speculative_hook.py): engine_profiles/sglang.yaml spec_max_num_seqs, priced by
serving.aggregated.running_cap where a grid point speculates (draft_len > 0) and never for the baseline."""

import numpy as np
import pytest

from specplan.core.errors import SpecplanError
from specplan.profiles.engine import EngineProfile
from specplan.profiles.registry import load_engine
from specplan.serving.aggregated import aggregated, running_cap
from specplan.serving.api import serving_summary
from specplan.serving.disaggregated import disaggregated
from specplan.serving.workload import Workload
from specplan.speculation.acceptance import Acceptance
from specplan.speculation.spec import DraftSearch, Speculation
from specplan.model.deployment import Deployment

WL = Workload(128, 1024, concurrency=64.0)


def test_sglang_profile_holds_the_default_of_48():
    """The number read in SGLang's code, with its source; vLLM and TensorRT-LLM have no such rule."""
    sg = load_engine("sglang")
    assert sg.spec_max_num_seqs == 48 and "speculative_hook.py" in sg.sources["spec_max_num_seqs"]
    assert load_engine("vllm").spec_max_num_seqs is None and load_engine("trtllm").spec_max_num_seqs is None


def test_running_cap_per_grid_point():
    """max_num_seqs 1024 without speculation, 48 where D > 0, the KV cache's room below either."""
    sg = load_engine("sglang")
    assert running_cap(sg, WL) == 1024.0
    assert running_cap(sg, WL, draft_len=3.0) == pytest.approx(48.0)
    assert np.asarray(running_cap(sg, WL, draft_len=np.array([0.0, 3.0]))).tolist() == [1024.0, 48.0]
    assert running_cap(sg, WL, kv_cap=20.0, draft_len=3.0) == pytest.approx(20.0)
    assert running_cap(load_engine("vllm"), WL, draft_len=3.0) == 1024.0


def test_closed_loop_runs_48_and_the_rest_wait():
    """Llama-3.1-8B on an H100 at concurrency 64: the baseline decodes all 64 requests; EAGLE-3 D 3 decodes 48 and
    16 wait for admission (Little's law: C = B + X * TTFT), and the point's note names the engine's cap."""
    acc = Acceptance.from_length(3.0, 3)
    s = serving_summary("llama-3.1-8b", "h100-sxm", WL, engine="sglang", mechanism="eagle3", draft_len=3,
                        acceptance=acc)
    b, sp = s["baseline"], s["speculative"]
    assert b["decode_batch"] > 63.0
    assert sp["decode_batch"] == pytest.approx(48.0)
    assert sp["decode_batch"] + sp["requests_per_s"] * sp["ttft_ms"] / 1e3 == pytest.approx(64.0, rel=1e-3)
    assert "at most 48 requests run at once" in sp["note"] and "--max-running-requests" in sp["note"]
    assert "note" not in b or "48" not in b["note"]


def test_below_the_cap_nothing_changes():
    """At concurrency 32 the cap (48) is not reached: the same point as an SGLang profile without the cap, and no
    admission wait."""
    acc = Acceptance.from_length(3.0, 3)
    wl = Workload(128, 1024, concurrency=32.0)
    free = load_engine("sglang").model_copy(update={"spec_max_num_seqs": None})
    a = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="sglang"), Speculation("eagle3", 3, acc), wl)
    f = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine=free), Speculation("eagle3", 3, acc), wl)
    assert float(a["tpot_s"]) == pytest.approx(float(f["tpot_s"]), rel=1e-9)
    assert bool(np.all(a["spec_cap"])) and float(a["decode_batch"]) < 32.0
    assert float(a["admission_wait_s"]) == 0.0


def test_disaggregated_decode_instance_is_capped_too():
    """1P1D at concurrency 128: the speculating decode instance holds 48 requests; the baseline's holds more."""
    acc = Acceptance.from_length(3.0, 3)
    wl = Workload(1024, 256, concurrency=128.0, mode="disagg", pools=(1, 1))
    base = disaggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="sglang"), Speculation(), wl)
    spec = disaggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="sglang"), Speculation("eagle3", 3, acc), wl)
    assert float(np.max(spec["decode_batch"])) <= 48.0 + 1e-9
    assert float(np.max(base["decode_batch"])) > 48.0
    assert bool(np.all(spec["spec_cap"]))


def test_the_number_needs_a_source_and_a_positive_value():
    """An engine file is data with sources: the cap without one, or 0, is refused."""
    with pytest.raises((ValueError, SpecplanError), match="spec_max_num_seqs"):
        EngineProfile(id="x", spec_max_num_seqs=48)
    with pytest.raises((ValueError, SpecplanError), match="spec_max_num_seqs"):
        EngineProfile(id="x", spec_max_num_seqs=0, sources={"spec_max_num_seqs": "s"})


def test_recommend_names_the_speculative_cap():
    """recommend's serving search on SGLang says in one line that speculative rows run at most 48 requests and
    how a launch lifts it; on vLLM (no such rule) it does not."""
    from specplan.planning.recommend_serving import recommend_serving

    acc = {"eagle3": "0.8"}
    kw = dict(drafts=DraftSearch(["eagle3"], acc, 3))
    wl = Workload(1024, 256, concurrency=64.0)
    sg = recommend_serving("llama-3.1-8b", "h100-sxm", wl, engine="sglang", **kw)
    vl = recommend_serving("llama-3.1-8b", "h100-sxm", wl, engine="vllm", **kw)
    line = [n for n in sg["notes"] if "when speculating" in n]
    assert len(line) == 1 and "at most 48 requests" in line[0] and "--max-running-requests" in line[0]
    assert not [n for n in vl["notes"] if "when speculating" in n]


def test_step_path_says_its_batch_needs_the_flag():
    """The step path prices the batch it is given: on SGLang at batch 64 with EAGLE-3 it says the batch needs
    --max-running-requests; at batch 32 (below 48) it says nothing of the cap."""
    from specplan.speculation.round import spec_cap_note

    sg = load_engine("sglang")
    assert spec_cap_note(sg, 32) == []
    line = spec_cap_note(sg, 64)
    assert len(line) == 1 and "prices batch 64 as given" in line[0] and "--max-running-requests" in line[0]
    assert spec_cap_note(load_engine("vllm"), 64) == []


def test_predict_step_path_says_its_batch_needs_the_flag():
    """predict with --batch (the step path) on SGLang: EAGLE-3 at batch 64 carries the cap line (64 > 48), batch 48
    and the baseline do not, and the serving path (which prices the cap) does not repeat the step path's line."""
    from specplan.planning.predict import predict_serving, predict_step
    from specplan.serving.workload import Workload

    kw = dict(context_len=2048, draft_len=3, mechanism="eagle3", engine="sglang")
    cap = [n for n in predict_step("llama-3.1-8b", "h100-sxm", batch=64, **kw)["notes"] if "at most 48" in n]
    assert len(cap) == 1 and "prices batch 64 as given" in cap[0]
    assert not [n for n in predict_step("llama-3.1-8b", "h100-sxm", batch=48, **kw)["notes"] if "at most 48" in n]
    base = predict_step("llama-3.1-8b", "h100-sxm", batch=64, context_len=2048, engine="sglang")
    assert not [n for n in base["notes"] if "at most 48" in n]
    wl = Workload(isl=128, osl=256, concurrency=64.0)
    srv = predict_serving("llama-3.1-8b", "h100-sxm", wl, mechanism="eagle3", draft_len=3, engine="sglang")
    assert not [n for n in srv["notes"] if "as given" in n]


def test_recommend_prices_the_launch_its_files_write():
    """recommend's answer is launched with --max-running-requests at its concurrency (planning/launch/emit.py), so it
    prices SGLang's speculative rows with the cap lifted: at concurrency 64 the EAGLE-3 decode batch is above 48 (64
    less those in prefill), the TPOT is that of an engine YAML without the cap, and the emitted SGLang command sets
    64; the default launch (predict's aggregated pricing) decodes at most 48."""
    from specplan.planning.launch.emit import build, plan_from_answer, render
    from specplan.planning.recommend_serving import recommend_serving
    from specplan.serving.aggregated import aggregated
    from specplan.speculation.acceptance_spec import parse_acceptance

    kw = dict(drafts=DraftSearch(["eagle3"], {"eagle3": "0.8"}, 3))
    r = recommend_serving("llama-3.1-8b", "h100-sxm", Workload(1024, 256, concurrency=64.0), engine="sglang", **kw)
    best = r["best"]
    assert best["mechanism"] == "eagle3" and 48.0 < best["decode_batch"] <= 64.0
    lifted = load_engine("sglang").model_copy(update={"spec_max_num_seqs": None})
    a = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine=lifted),
                   Speculation("eagle3", best["draft_len"],
                               parse_acceptance("0.8")), Workload(1024, 256, concurrency=64.0))
    assert best["tpot_ms"] == pytest.approx(1e3 * float(np.ravel(a["tpot_s"])[0]), rel=1e-9)
    capped = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="sglang"),
                        Speculation("eagle3", best["draft_len"],
                                    parse_acceptance("0.8")), Workload(1024, 256, concurrency=64.0))
    assert float(np.ravel(capped["decode_batch"])[0]) <= 48.0 + 1e-9  # predict's default launch
    cmd = render(build("sglang", plan_from_answer({**best, "model": "llama-3.1-8b", "isl": 1024, "osl": 256})))
    assert "--max-running-requests 64" in cmd

"""Defects an extreme-input probe of the CLI found (session 13), each pinned where it acts: a traceback, a printed
NaN, a silent wrong answer, or an error naming the wrong thing. Each test fails on the code before its fix."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from specplan.core.errors import SpecplanError
from specplan.planning.launch.emit import plan_from_answer
from specplan.planning.recommend_serving import recommend_serving, search_deployment
from specplan.serving.workload import Workload
from specplan.planning.options import DeploymentSpace, GridOptions, Sla
from specplan.speculation.spec import DraftSearch
from specplan.model.deployment import Deployment
from specplan.speculation.spec import Speculation

ROOT = Path(__file__).resolve().parents[2]


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "specplan", *args], capture_output=True, text=True, cwd=cwd)


def test_a_tpot_limit_does_not_bind_at_osl_one_and_nothing_prints_nan():
    """OSL 1 has no TPOT: --max-tpot-ms used to fail every row ('the lowest TPOT reachable is nan ms'); the answer
    is now the one without the limit, and an infeasible answer names the missing TPOT instead of a NaN."""
    wl = Workload(1024, 1, concurrency=1.0)
    kw = dict(engine="vllm", drafts=DraftSearch(["none"]), grid=GridOptions(search_concurrency=True))
    free = recommend_serving("llama-3.1-8b", "h100-sxm", wl, **kw)
    held = recommend_serving("llama-3.1-8b", "h100-sxm", wl, sla=Sla(max_tpot_ms=20.0), **kw)
    assert held["best"] is not None and held["best"]["concurrency"] == free["best"]["concurrency"]
    none = recommend_serving("llama-3.1-8b", "h100-sxm", wl, sla=Sla(max_tpot_ms=20.0, max_ttft_ms=1.0), **kw)
    assert none["best"] is None and "nan" not in none["infeasible"]
    assert "there is no TPOT (OSL 1" in none["infeasible"]


def test_gpus_search_refuses_what_it_cannot_lay_out():
    """--gpus-per-node 0 was replaced by the scale-up domain without a word; 1000 printed 'TP up to 1000' beyond
    the H100's NVLink domain of 8; disaggregated serving on 1 GPU said 'no layout meets the SLA' with no SLA."""
    for node, needle in ((0, "got 0"), (1000, "got 1000")):
        with pytest.raises(SpecplanError, match=r"--gpus-per-node\): must be a whole number 1 \.\.\. 8 .*" + needle):
            search_deployment("llama-3.1-8b", "h100-sxm", 1024, 256,
                              space=DeploymentSpace(gpus=8, gpus_per_node=node))
    with pytest.raises(SpecplanError, match=r"--gpus 1: disaggregated serving needs at least 2 GPUs"):
        search_deployment("llama-3.1-8b", "h100-sxm", 1024, 256, space=DeploymentSpace(gpus=1, modes=("disagg",)))


def _answer():
    return {"model": "llama-3.1-8b", "hardware": "h100-sxm", "engine": "vllm", "isl": 1024, "osl": 256,
            "best": {"mechanism": "eagle3", "draft_len": 3, "concurrency": 64, "tp": 1}}


def test_launch_refuses_unknown_dtypes_and_unlaunchable_numbers():
    """launch emitted '--dtype nosuch' advice and dropped '--kv-dtype nosuch'; it emitted D 500, a batch of 1e12
    and TP 3 for 32 heads as given."""
    with pytest.raises(SpecplanError, match=r"^--dtype: unknown dtype 'nosuch'"):
        plan_from_answer(_answer(), dtype="nosuch")
    with pytest.raises(SpecplanError, match=r"^--kv-dtype: unknown dtype 'nosuch'"):
        plan_from_answer({**_answer(), "kv_dtype": "fp8"}, kv_dtype="nosuch")  # even where the answer has one
    assert plan_from_answer(_answer(), kv_dtype="auto")["kv_dtype"] == "auto"
    for key, value, needle in (("draft_len", 500, "'draft_len' must be <= 256"),
                               ("concurrency", 1e12, "'max_batch' must be <= 16,777,216"),
                               ("tp", 3, r"'tp' \(3\) does not split the 32 query heads")):
        a = _answer()
        a["best"][key] = value
        with pytest.raises(SpecplanError, match=needle):
            plan_from_answer(a)
    a = _answer()
    a["dtype"] = "nosuch"
    with pytest.raises(SpecplanError, match="launch: answer field 'dtype': unknown dtype 'nosuch'"):
        plan_from_answer(a)


def test_a_price_tier_no_device_has_is_refused():
    """--price-tier nosuch passed silently, or under --objective cost blamed a missing price on h100-sxm."""
    from specplan.planning.cost import check_tier, energy_metrics
    from specplan.profiles.registry import load_hardware

    check_tier("neocloud")
    with pytest.raises(SpecplanError, match=r"^--price-tier: must be one of .*neocloud.*, got 'nosuch'"):
        check_tier("nosuch")
    with pytest.raises(SpecplanError, match="--price-tier"):
        energy_metrics(load_hardware("h100-sxm"), np.array([500.0]), np.array([1000.0]), tier="nosuch")


def test_the_energy_figure_of_an_osl_one_grid_draws_without_a_traceback(tmp_path):
    """pareto --osl 1 --figures energy crashed in savefig ('Data cannot be log-scaled'): tokens/s/user is NaN."""
    from specplan import plots as P
    from specplan.planning.figures import energy_figure
    from specplan.plots.cost_plot import plot_energy_frontier

    df = pd.DataFrame({"meets_sla": [True, True], "draft_len": [0, 2], "tokens_per_s_per_user": [np.nan, np.nan],
                       "joules_per_token": [1.0, 2.0], "usd_per_mtok": [3.0, 4.0]})
    out = P.save_figure(plot_energy_frontier(energy_figure(df), "osl 1"), tmp_path / "energy", formats=("png",))
    assert out[0].stat().st_size > 0


def test_an_engine_yaml_with_an_unknown_kernel_family_names_file_and_field(tmp_path):
    """It said "unknown kernel family id 'nosuch'" at use, naming neither the file nor the field."""
    from specplan.profiles.registry import load_engine

    p = tmp_path / "e_badattn.yaml"
    shutil.copy(ROOT / "engine_profiles" / "sglang.yaml", p)
    text = p.read_text()
    assert "decode_attention: " in text
    p.write_text("\n".join("decode_attention: nosuch" if x.startswith("decode_attention:") else x
                           for x in text.splitlines()))
    with pytest.raises(SpecplanError, match=r"e_badattn.yaml: decode_attention: unknown kernel family id .*nosuch"):
        load_engine(str(p))
    assert load_engine("sglang").decode_attention  # the shipped profiles still load


def test_a_hugging_face_config_given_as_a_model_points_to_the_importer():
    """-m config.json said 'id: Field required'."""
    from specplan.profiles.registry import load_model

    cfg = ROOT / "reference" / "hf_configs" / "Qwen--Qwen3-32B_config.json"
    with pytest.raises(SpecplanError, match=r"a Hugging Face config.json, not a specplan model profile: import it "
                                            r"with `specplan model import "):
        load_model(str(cfg))


def test_emit_and_the_output_folder_are_checked_before_the_work():
    """recommend --emit nosuch printed the whole search before its error; pareto -o /proc/nope swept first."""
    r = run("recommend", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--emit", "nosuch")
    assert r.returncode == 2 and r.stdout == "" and "--emit: must be one of vllm, sglang, trtllm, dynamo" in r.stderr
    if Path("/proc").is_dir():
        r = run("pareto", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-o", "/proc/specplan-nope", "--no-progress")
        assert r.returncode == 2 and r.stdout == "", r.stdout
        assert r.stderr.strip().endswith("cannot write there (No such file or directory)") and "Traceback" not in r.stderr


def test_recommend_gpus_table_prints_a_dash_not_nan_at_osl_one():
    r = run("recommend", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--isl", "1024", "--osl", "1", "--gpus", "2",
            "--max-tpot-ms", "20")
    assert r.returncode == 0, r.stderr
    assert "nan" not in r.stdout.lower()
    j = run("recommend", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--isl", "1024", "--osl", "1", "--gpus", "2",
            "--max-tpot-ms", "20", "--json")
    assert "NaN" not in j.stdout and json.loads(j.stdout)["layouts"]


@pytest.mark.parametrize("reserve", [float("nan"), 1.5, float("inf"), -1.0, np.array([]), np.array([0.1, 0.2]),
                                     "0.1", None, True])
def test_evaluate_refuses_a_bad_reserve_in_one_line(reserve):
    """evaluate (the vectorized API) priced reserve=nan as a NaN capacity, 1.5 as a negative one and -1 as more
    memory than the GPU has; step_summary raised raw ValueErrors on arrays."""
    from specplan.api import step_summary
    from specplan.speculation.acceptance import Acceptance
    from specplan.speculation.speedup import evaluate

    with pytest.raises(SpecplanError, match=r"^reserve: must be"):
        evaluate(Deployment("llama-3.1-8b", "h100-sxm"),
                 Speculation(mechanism="eagle3", draft_len=4, acceptance=Acceptance.from_rate(0.7)), batch=8,
                 reserve=reserve)
    with pytest.raises(SpecplanError, match=r"^reserve: must be"):
        step_summary("llama-3.1-8b", "h100-sxm", reserve=reserve)


def test_a_zero_d_array_reserve_is_a_float_in_the_answer():
    from specplan.api import step_summary

    r = step_summary("llama-3.1-8b", "h100-sxm", reserve=np.array(0.1))
    assert type(r.memory.reserve) is float and json.dumps(r.memory.as_dict())  # plain types, no numpy

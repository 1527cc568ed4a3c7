"""Studies: schema errors name the YAML path and value; overrides; outputs byte-identical on rerun."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from specplan.core.errors import SpecplanError
from specplan.study.spec import expand, load_study
from specplan.plots.study_plots import run_study
from specplan.planning.options import GridOptions, Sla
from specplan.speculation.spec import DraftSearch

REPO = Path(__file__).resolve().parents[2]

STUDY = {
    "name": "tiny",
    "base": {"model": "llama-3.1-8b", "hardware": "h100-sxm", "tp": [1], "batch": [1, 4, 16],
             "max_draft_len": 3, "context": [2048], "mechanisms": {"ngram": 0.5}},
    "variants": [
        {"name": "BW x1.5", "hardware": {"mem_bandwidth_bytes_s": {"scale": 1.5}}},
        {"name": "G=8 -> 16", "model": {"num_kv_heads": 4}},
        {"name": "b200", "hardware": "b200"},
    ],
    "report_batches": [1, 16],
}


def _err(study) -> str:
    with pytest.raises(SpecplanError) as e:
        expand(load_study(study))
    return str(e.value)


def _with(path, value):
    st = copy.deepcopy(STUDY)
    node = st
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return st


def test_overrides_apply():
    sc = expand(load_study(STUDY))
    assert [s["name"] for s in sc] == ["base", "BW x1.5", "G=8 -> 16", "b200"]
    assert sc[1]["hardware"][0].mem_bandwidth_bytes_s == pytest.approx(1.5 * sc[0]["hardware"][0].mem_bandwidth_bytes_s)
    assert sc[2]["model"].group_size == 2 * sc[0]["model"].group_size
    assert sc[3]["hardware"][0].id == "b200"


def test_a_variants_own_device_replaces_the_base_devices_once():
    """A variant naming one device (an id, or overrides with their own `device:`) runs on that device once, whatever
    the base lists; overrides without a device apply to each base device (it used to price b200 once per base
    device: every row twice)."""
    st = _with(("base", "hardware"), ["h100-sxm", "h200-sxm"])
    st["variants"].append({"name": "b200 fast", "hardware": {"device": "b200", "mem_bandwidth_bytes_s": {"scale": 2}}})
    sc = {s["name"]: [h.id for h in s["hardware"]] for s in expand(load_study(st))}
    assert sc["base"] == ["h100-sxm", "h200-sxm"] and sc["b200"] == ["b200"] and sc["b200 fast"] == ["b200"]
    assert len(sc["BW x1.5"]) == 2


@pytest.mark.parametrize("path,value,message", [
    (("variants", 0, "hardware"), {"mem_bandwidth_bytes_s": -1},
     "variants[0].hardware.mem_bandwidth_bytes_s: must be >= 1e+06, got -1"),
    (("variants", 0, "hardware"), {"mem_bandwidth_bytes_s": {"scale": -2}},
     "variants[0].hardware.mem_bandwidth_bytes_s: must be >= 1e+06, got -"),
    (("variants", 1, "model"), {"num_kv_heads": 5},
     "variants[1].model.num_q_heads: must be a multiple of num_kv_heads (5), got 32"),
    (("variants", 1, "model"), {"num_layers": {"scale": 0.55}}, "variants[1].model.num_layers: must be an integer"),
    (("variants", 0, "hardware"), {"mem_bw": 1}, "variants[0].hardware.mem_bw: unknown field"),
    (("variants", 0, "hardware"), {"attention": {"tile_rows": 0}},
     "variants[0].hardware.attention.tile_rows: must be > 0, got 0"),
    (("variants", 2, "hardware"), "no-such-gpu", "variants[2].hardware: unknown hardware id 'no-such-gpu'"),
    (("variants", 0, "max_draft_len"), -1, "variants[0].max_draft_len: must be >= 0, got -1"),
    (("variants", 0, "colour"), "red", "variants[0].colour: unknown field"),
    (("base", "batch_max"), 0, "base.batch_max: must be > 0, got 0"),
    (("plots",), ["pie"], "plots[0]: must be one of"),
])
def test_schema_errors_name_path_and_value(path, value, message):
    assert message in _err(_with(path, value))


def test_missing_fields():
    st = copy.deepcopy(STUDY)
    del st["base"]["model"]
    assert _err(st) == "base.model: required field missing"


def test_run_outputs_byte_identical(tmp_path):
    a = run_study(STUDY, tmp_path / "a", progress=False)
    run_study(STUDY, tmp_path / "b", progress=False)
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    for must in ("results.csv", "results.parquet", "frontier.csv", "summary.md", "summary.json",
                 "frontier_variants.svg", "frontier_variants.png", "speedup.svg", "recommended_d.svg"):
        assert must in names
    for n in names:
        if n.endswith((".csv", ".json", ".svg", ".md")):
            assert (tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes(), n
    svg = (tmp_path / "a" / "speedup.svg").read_text()
    assert "<dc:date>" not in svg
    assert [v["variant"] for v in a["variants"]] == ["base", "BW x1.5", "G=8 -> 16", "b200"]
    md = (tmp_path / "a" / "summary.md").read_text()
    assert "| **base** | **BW x1.5** | **G=8 -> 16** | **b200** |" in md
    assert "best speedup" in md and "recommended D" in md


def test_study_layer_draws_no_figures(tmp_path):
    """specplan.study.spec / study_report import neither matplotlib nor specplan.plots nor the CLI; without a plotter
    run_study writes the tables and summary only, identical to the ones written with the figures."""
    import subprocess
    import sys

    code = ("import sys, specplan.study.spec, specplan.study.report; "
            "bad = [m for m in sys.modules if m.split('.')[0] == 'matplotlib' or m in ('specplan.plots', "
            "'specplan.plots.study_plots') or m.startswith('specplan.cli')]; print(bad)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", (r.stdout, r.stderr)
    from specplan.study import spec as study

    s = study.run_study(STUDY, tmp_path / "bare", progress=False)
    full = run_study(STUDY, tmp_path / "full", progress=False)
    assert s["plots"] == [] and full["plots"]
    assert not list((tmp_path / "bare").glob("*.svg")) and not list((tmp_path / "bare").glob("*.png"))
    for n in ("results.csv", "frontier.csv"):
        assert (tmp_path / "bare" / n).read_bytes() == (tmp_path / "full" / n).read_bytes(), n


@pytest.mark.parametrize("path", sorted((REPO / "examples" / "studies").glob("*.yaml")), ids=lambda p: p.stem)
def test_example_studies_validate(path):
    sc = expand(load_study(path))
    assert len(sc) >= 3


SERVING = {
    "name": "serving-tiny",
    "base": {"model": "llama-3.1-8b", "hardware": "h100-sxm", "isl": 1024, "osl": 256, "engine": "vllm",
             "max_tpot_ms": 20, "max_draft_len": 4, "mechanisms": {"eagle3": 0.7}, "tp": [1]},
    "variants": [{"name": "trtllm", "engine": "trtllm"}, {"name": "h200", "hardware": "h200-sxm"}],
}


def test_a_serving_study_sweeps_the_tps_its_schema_says(tmp_path):
    """Without `tp` a serving study sweeps TP 1, 2, 4, 8 where the heads divide (docs/studies.md's schema; it swept
    TP 1 only); with `tp` the TPs given."""
    import pandas as pd

    st = copy.deepcopy(SERVING)
    del st["base"]["tp"]
    st["base"].update(max_draft_len=1)
    st["variants"] = []
    run_study(st, tmp_path)
    assert sorted(pd.read_csv(tmp_path / "serving_results.csv")["tp"].unique()) == [1, 2, 4, 8]


def test_a_serving_study_answers_as_recommend_does_per_variant(tmp_path):
    """isl/osl make a study a serving one: each variant's best is what `recommend --isl --osl` answers for that
    engine and device (the same search, priced through another entry), its no-speculation best too; the files."""
    from specplan.planning.recommend_serving import recommend_serving
    from specplan.serving.workload import Workload

    s = run_study(copy.deepcopy(SERVING), tmp_path)
    assert s["kind"] == "serving" and [v["variant"] for v in s["variants"]] == ["base", "trtllm", "h200"]
    for v, (hw, eng) in zip(s["variants"], (("h100-sxm", "vllm"), ("h100-sxm", "trtllm"), ("h200-sxm", "vllm"))):
        r = recommend_serving("llama-3.1-8b", hw, Workload(1024, 256, concurrency=1), engine=eng,
                              drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": "0.7"}, max_draft_len=4),
                              sla=Sla(max_tpot_ms=20), grid=GridOptions(search_concurrency=True))
        assert v["best"]["tokens_per_s_per_gpu"] == pytest.approx(r["best"]["tokens_per_s_per_gpu"], rel=1e-9)
        assert (v["best"]["draft_len"], v["best"]["concurrency"]) == (r["best"]["draft_len"],
                                                                       r["best"]["concurrency"])
        assert v["best_without_speculation"]["tokens_per_s_per_gpu"] == pytest.approx(
            r["baseline"]["tokens_per_s_per_gpu"], rel=1e-9)
        assert v["speculation_gain"] == pytest.approx(r["best"]["speedup_vs_none"], rel=1e-9)
        assert v["best"]["tpot_ms"] <= 20
    assert s["variants"][0]["vs_base_variant"] == pytest.approx(1.0)
    for f in ("serving_results.csv", "serving_frontier.csv", "summary.md", "summary.json", "serving_frontier.png"):
        assert (tmp_path / f).exists(), f


@pytest.mark.parametrize("path,value,needle", [
    (("base", "osl"), None, "base.osl: a serving study needs both isl and osl, got only isl"),
    (("base", "batch"), [1, 4], "base.batch: not used by a serving study"),
    (("base", "isl"), 0, "base.isl"),
    (("base", "concurrency"), [0, 8], "base.concurrency"),
    (("base", "mode"), "split", "base.mode"),
])
def test_serving_study_errors_name_the_field(path, value, needle):
    st = copy.deepcopy(SERVING)
    st[path[0]][path[1]] = value
    if value is None:
        del st[path[0]][path[1]]
        st["base"]["isl"] = 1024
    with pytest.raises(SpecplanError) as e:
        load_study(st)
    assert needle in str(e.value)


def test_a_step_study_refuses_a_serving_field():
    st = copy.deepcopy(STUDY)
    st["variants"][0]["engine"] = "vllm"
    with pytest.raises(SpecplanError, match=r"variants\[0\]\.engine: a serving field; give base.isl and base.osl"):
        load_study(st)


def test_serving_study_compares_with_the_first_variant_even_when_it_meets_nothing(tmp_path):
    """The first variant is the reference of 'vs the first variant': when nothing meets its SLA, the others show no
    ratio (it used to take the next variant with a result as the reference); the figure names no SLA line when the
    variants' SLAs differ."""
    st = copy.deepcopy(SERVING)
    st["base"]["max_tpot_ms"] = 1
    st["variants"] = [{"name": "loose", "max_tpot_ms": 20}, {"name": "looser", "max_tpot_ms": 30}]
    s = run_study(st, tmp_path)
    first, a, b = s["variants"]
    assert first["best"] is None and first["best_without_speculation"] is None
    assert a["best"] is not None and a["vs_base_variant"] is None and b["vs_base_variant"] is None


def test_a_study_where_nothing_fits_writes_its_results(tmp_path):
    """Nothing fits (batch 4096 at 128K): the frontier figure drew log axes over nothing and crashed."""
    st = {"name": "nofit", "base": {"model": "llama-3.1-8b", "hardware": "h100-sxm", "tp": [1], "batch": [4096],
                                     "max_draft_len": 2, "context": [131072], "mechanisms": {"eagle3": 0.7}}}
    run_study(st, tmp_path)
    assert (tmp_path / "frontier_variants.png").exists() and (tmp_path / "summary.md").exists()


@pytest.mark.parametrize("path,value,needle", [
    (("base", "context"), [10_000_000], "base.context[0]: 10000000 tokens exceeds llama-3.1-8b's context of 131072"),
    (("report_batches",), [0, -1], "report_batches[0]: must be >= 1, got 0"),
    (("summary_context",), 4096, "summary_context: must be one of the study's contexts (2048), got 4096"),
])
def test_study_fields_refused_before_the_sweep(path, value, needle):
    """A context beyond the model's, a batch below 1 to report, a summary context the grid does not hold: each was
    accepted (rows at 10M tokens, log(0) warnings, every recommended D '-' blamed on memory)."""
    assert needle in _err(_with(path, value))


def test_a_tp_given_twice_is_swept_once():
    from specplan.planning.sweep import tp_choices
    from specplan.profiles.registry import load_hardware, load_model

    assert tp_choices(load_model("llama-3.1-8b"), load_hardware("h100-sxm"), [1, 1, 2]) == [1, 2]


def test_a_dotted_override_error_names_its_path_once_and_names_are_escaped_in_markdown():
    from specplan.study.report import md_cell

    st = copy.deepcopy(STUDY)
    st["variants"] = [{"name": "z", "hardware": {"peak_flops.bf16": {"scale": 0}}}]
    assert _err(st).startswith("variants[0].hardware.peak_flops.bf16: must be in")  # was peak_flops.peak_flops.bf16
    assert md_cell('a,b"c\nd|e') == 'a,b"c d\\|e'

"""recommend --gpus for MoE models: TEP / DEP layouts and pools of their own layouts (issue 38)."""

from types import SimpleNamespace

import pytest

from specplan.model.parallel import Layout
from specplan.planning.layout_search import _splits, _unimodal, family, moe_layout_rows, moe_layouts
from specplan.planning.options import ServingOptions, Sla
from specplan.profiles.registry import load_hardware, load_model
from specplan.speculation.spec import DraftSearch


def test_moe_layout_families_within_the_budget():
    """DeepSeek (256 experts, 128 heads): TEP 8 and DEP 8 / 16 / 32 on 32 H200; GB200 NVL72 adds DEP 64 (not 72:
    EP must divide the 256 experts)."""
    m = load_model("deepseek-r1")
    assert moe_layouts(m, load_hardware("h200-sxm"), 32) == [Layout(tp=8, ep=8), Layout(dp=8, ep=8),
                                                             Layout(dp=16, ep=16), Layout(dp=32, ep=32)]
    assert Layout(dp=64, ep=64) in moe_layouts(m, load_hardware("gb200"), 72)
    assert [family(x) for x in (8, Layout(tp=8, ep=8), Layout(dp=16, ep=16))] == ["TP", "TEP", "DEP"]


def test_pool_splits_fill_the_budget_with_decode_instances():
    """32 GPUs, prefill TP 8, decode DEP 16: x = 1 leaves 24 GPUs (one DEP-16), x = 2 leaves 16 (one)."""
    assert _splits(32, Layout(tp=8), Layout(dp=16, ep=16)) == [(1, 1, "tp8"), (2, 1, "tp8")]
    assert _splits(32, Layout(dp=8, ep=8), Layout(tp=8, ep=8)) == [(1, 3, "dp8ep8"), (2, 2, "dp8ep8"),
                                                                   (3, 1, "dp8ep8")]


def test_dep_sizes_stop_once_throughput_falls():
    """A DEP family is priced in increasing size and stops after the first size below the one before it."""
    val = {8: 10.0, 16: 12.0, 32: 11.0, 64: 50.0}
    seen = []

    def price(lay, pools):
        seen.append(lay.gpus)
        return SimpleNamespace(best=SimpleNamespace(tokens_per_s_per_gpu=val[lay.gpus]))

    out = _unimodal([(Layout(dp=n, ep=n), None) for n in (64, 8, 32, 16)], price, "agg")
    assert seen == [8, 16, 32] and [x[1].gpus for x in out] == [8, 16, 32]


def test_search_rows_name_their_layouts_and_count_every_gpu():
    """DeepSeek-R1 on 16 H200, no speculation: aggregated DEP / TEP rows and disaggregated rows whose prefill and
    decode layouts differ or not; GPUs used = x |P| + y |D| <= 16; tokens/s/GPU over them."""
    m, hw = load_model("deepseek-r1"), load_hardware("h200-sxm")
    rows = moe_layout_rows(m, hw, 1024, 1024, gpus=16, modes=("agg", "disagg"), engine="sglang", sla=Sla(),
                           drafts=DraftSearch(["none"]), options=ServingOptions(dtype="fp8"))
    agg = [r for r in rows if r["mode"] == "agg"]
    dis = [r for r in rows if r["mode"] == "disagg" and r["best"] is not None]
    assert {r["layout"] for r in agg} >= {"dp8ep8", "tp8ep8"}
    assert dis and all({"prefill_layout", "decode_layout", "pools"} <= set(r) for r in dis)
    for r in dis:
        x, y = (int(v) for v in r["pools"][:-1].split("P"))
        from specplan.model.parallel import parse_layout

        assert r["gpus_used"] == x * parse_layout(r["prefill_layout"]).gpus + y * parse_layout(r["decode_layout"]).gpus
        assert r["gpus_used"] <= 16
    for r in agg:
        if r["best"] is not None:
            assert r["gpus_used"] == r["replicas"] * parse_layout_gpus(r["layout"]) <= 16


def parse_layout_gpus(name):
    from specplan.model.parallel import parse_layout

    return parse_layout(name).gpus


def test_issue38_must_show_recommend_lists_dp_ep_layouts_and_mixed_pools():
    """Must show 2 (candidates): recommend --gpus 32 on H200 for DeepSeek-R1 with MTP lists DEP / TEP layouts and
    disaggregated pools whose prefill and decode layouts differ, every one within the 32 GPUs."""
    import json
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "specplan", "recommend", "--model", "deepseek-r1", "--hardware",
                        "h200-sxm", "--gpus", "32", "--isl", "4096", "--osl", "1024", "--max-ttft-ms", "2000",
                        "--max-tpot-ms", "50", "--mechanisms", "mtp", "--json"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    fams = {x.get("family") for x in r["layouts"] if x["best"] is not None}
    assert {"DEP", "TEP"} <= fams
    mixed = [x for x in r["layouts"] if x["mode"] == "disagg" and x["best"] is not None
             and x.get("prefill_layout") not in (None, x.get("decode_layout"))]
    assert mixed and all(x["gpus_used"] <= 32 for x in r["layouts"] if x["best"] is not None)
    assert {"agg DEP", "disagg DEP"} <= set(r["best_by_family"])


def test_launch_carries_the_pool_layouts_of_an_answer():
    """A disaggregated answer with its own layouts (recommend --gpus row, layouts in the --layouts grammar):
    Dynamo's prefill worker TP 8, its decode worker --attn-dp-size 8 --ep-size 8 with DeepEP low-latency kernels;
    an aggregated dp8ep8 answer to SGLang with DeepEP (auto) and to TensorRT-LLM with enable_attention_dp."""
    from specplan.planning.launch.emit import build, check_launch, plan_from_answer

    row = {"model": "deepseek-r1", "mode": "disagg", "prefill_layout": "tp8", "decode_layout": "dp8ep8",
           "best": {"mechanism": "mtp", "draft_len": 2, "concurrency": 256, "pools": "1P2D"}, "isl": 1024}
    plan = plan_from_answer({"model": "deepseek-r1", "best": row})
    assert plan["pools"]["prefill"]["tp"] == 8 and (plan["pools"]["decode"]["dp"], plan["pools"]["decode"]["ep"]) == (
        8, 8)
    dyn = build("dynamo", plan, backend="sglang")
    svc = dyn.files["dynamo-graph-deployment.yaml"]["spec"]["services"]
    pre, dec = (svc[r]["extraPodSpec"]["mainContainer"]["args"] for r in ("prefill", "decode"))
    assert "--attn-dp-size" not in pre and pre[pre.index("--tp-size") + 1] == "8"
    assert dec[dec.index("--attn-dp-size") + 1] == "8" and dec[dec.index("--deepep-mode") + 1] == "low_latency"
    agg = plan_from_answer({"model": "deepseek-r1", "layout": "dp8ep8", "tp": 1,
                            "best": {"mechanism": "none", "draft_len": 0, "concurrency": 64}})
    s = build("sglang", agg)
    assert not check_launch(s)
    assert s.argv[s.argv.index("--moe-a2a-backend") + 1] == "deepep" and "--enable-dp-lm-head" in s.argv
    t = build("trtllm", agg)
    opts = next(iter(t.files.values()))
    assert opts["enable_attention_dp"] is True and opts["moe_expert_parallel_size"] == 8

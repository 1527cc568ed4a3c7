"""Launch emitters: every flag / key / value kind / choice against the lists extracted from the engines' code."""

import json
import zipfile

import pytest
import yaml

from specplan.core.errors import SpecplanError
from specplan.planning.launch import emit
from specplan.planning.launch.emit import build, build_dynamo, check_launch, flag_list, plan_from_answer, render
from specplan.planning.options import GridOptions
from specplan.speculation.spec import DraftSearch

# The shape of `recommend --model llama-3.1-8b --hardware h100-sxm --isl 1024 --osl 256 --max-tpot-ms 20
# --engine vllm --mechanisms eagle3 --acceptance eagle3=0.8 --json` (fields the emitters read; numbers as printed).
SERVING_ANSWER = {"model": "llama-3.1-8b", "engine": "vllm", "mode": "agg", "isl": 1024, "osl": 256, "tp": 1,
                  "best": {"mechanism": "eagle3", "draft_len": 4, "feasible": True, "concurrency": 128.0,
                           "pools": None, "tpot_ms": 19.0, "tokens_per_s_per_gpu": 6428.9}}

# A disaggregated DeepSeek-V3 answer written by hand (today's recommend evaluates xPyD pools at the target's TP only;
# the deployment search with per-pool layouts is issue 20): 2 prefill replicas of TP 8, 1 decode replica of
# DP 8 x EP 8 attention-DP, MTP D = 3, FP8 KV.
DISAGG_ANSWER = {"model": "deepseek-v3", "hardware": "h200-sxm", "mode": "disagg", "isl": 4096, "osl": 1024,
                 "kv_dtype": "fp8",
                 "best": {"mechanism": "mtp", "draft_len": 3, "concurrency": 512,
                          "pools": {"prefill": {"replicas": 2, "tp": 8},
                                    "decode": {"replicas": 1, "tp": 1, "dp": 8, "ep": 8}}}}


def _flag(argv, name):
    return argv[argv.index(name) + 1]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_must_show_1_every_flag_is_in_the_extracted_lists(engine):
    launch = build(engine, plan_from_answer(SERVING_ANSWER))
    assert check_launch(launch) == []
    assert launch.version == flag_list(engine)["version"]
    assert render(launch).startswith(f"# {engine}: {launch.version}")


def test_vllm_command_carries_method_d_tp_batch_and_kv():
    a = build("vllm", plan_from_answer(SERVING_ANSWER, kv_dtype="fp8")).argv
    assert a[:3] == ["vllm", "serve", "meta-llama/Meta-Llama-3.1-8B"]
    assert _flag(a, "--tensor-parallel-size") == "1" and _flag(a, "--max-num-seqs") == "128"
    assert _flag(a, "--max-num-batched-tokens") == "8192"  # max(8192, 128 x (1 + 4) = 640)
    assert _flag(a, "--kv-cache-dtype") == "fp8"
    sc = json.loads(_flag(a, "--speculative-config"))
    assert sc == {"method": "eagle3", "num_speculative_tokens": 4, "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}


def test_sglang_chain_flags():
    a = build("sglang", plan_from_answer(SERVING_ANSWER)).argv
    assert _flag(a, "--speculative-algorithm") == "EAGLE3"
    assert (_flag(a, "--speculative-num-steps"), _flag(a, "--speculative-eagle-topk"),
            _flag(a, "--speculative-num-draft-tokens")) == ("4", "1", "5")  # chain: D steps, top-1, D + 1 tokens
    assert _flag(a, "--max-running-requests") == "128" and _flag(a, "--tp-size") == "1"


def test_trtllm_yaml():
    launch = build("trtllm", plan_from_answer(SERVING_ANSWER))
    opts = launch.files["extra-llm-api.yaml"]
    assert opts["speculative_config"] == {"decoding_type": "Eagle3", "max_draft_len": 4,
                                          "speculative_model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}
    assert opts["max_batch_size"] == 128 and opts["tensor_parallel_size"] == 1
    assert yaml.safe_load(render(launch).split("# file: extra-llm-api.yaml\n")[1].split("\ntrtllm-serve")[0]) == opts


def test_trtllm_yaml_pads_decode_batches_to_a_graph():
    """engine_profiles/trtllm.yaml prices every decode batch up to graph_max_batch (128) as a graph replay; TensorRT-LLM
    does that only with cuda_graph_config.enable_padding (its default, False, captures batches 1-31, 32, 64 and 128
    and runs the others eagerly: llm_args.py BaseCudaGraphConfig). The launch sets it, and leaves the cap at its
    default, the profile's 128."""
    from specplan.profiles.registry import load_engine

    opts = build("trtllm", plan_from_answer(SERVING_ANSWER)).files["extra-llm-api.yaml"]
    assert opts["cuda_graph_config"] == {"enable_padding": True}
    assert load_engine("trtllm").graph_max_batch == 128
    bad = build("trtllm", plan_from_answer(SERVING_ANSWER))
    bad.files["extra-llm-api.yaml"]["cuda_graph_config"] = {"enable_paddings": True}
    assert any("enable_paddings" in b for b in check_launch(bad))


def test_d_schedule_is_emitted_per_engine():
    ans = {**SERVING_ANSWER, "best": {**SERVING_ANSWER["best"], "d_schedule": [[1, 32, 5], [33, 128, 3]]}}
    p = plan_from_answer(ans)
    sc = json.loads(_flag(build("vllm", p).argv, "--speculative-config"))
    assert sc["num_speculative_tokens_per_batch_size"] == [[1, 32, 5], [33, 128, 3]]
    assert sc["num_speculative_tokens"] == 5
    t = build("trtllm", p)
    assert t.files["extra-llm-api.yaml"]["speculative_config"]["draft_len_schedule"] == {32: 5, 128: 3}
    assert t.files["extra-llm-api.yaml"]["speculative_config"]["max_draft_len"] == 5
    s = build("sglang", p)
    # SGLang takes one D: the answer's own (4, priced at its concurrency), not the schedule's largest (5)
    assert _flag(s.argv, "--speculative-num-steps") == "4" and any("schedule" in n for n in s.notes)
    for launch in (build("vllm", p), t, s):
        assert check_launch(launch) == []


def test_layouts_dp_ep():
    ans = {"model": "deepseek-v3", "best": {"mechanism": "mtp", "draft_len": 2, "batch": 64,
                                            "layout": {"tp": 1, "dp": 8, "ep": 8, "pp": 1}}}
    p = plan_from_answer(ans)
    v = build("vllm", p).argv
    assert _flag(v, "--data-parallel-size") == "8" and "--enable-expert-parallel" in v
    s = build("sglang", p).argv
    assert (_flag(s, "--tp-size"), _flag(s, "--attn-dp-size"), _flag(s, "--ep-size")) == ("8", "8", "8")
    t = build("trtllm", p).files["extra-llm-api.yaml"]
    assert t["enable_attention_dp"] is True and t["moe_expert_parallel_size"] == 8 and t["tensor_parallel_size"] == 8
    for e in ("vllm", "sglang", "trtllm"):
        assert check_launch(build(e, p)) == []


@pytest.mark.parametrize("backend", ["sglang", "vllm", "trtllm"])
def test_must_show_1_dynamo_disaggregated_deepseek(backend):
    launch = build_dynamo(plan_from_answer(DISAGG_ANSWER), backend)
    assert check_launch(launch) == []
    dgd = launch.files["dynamo-graph-deployment.yaml"]
    svc = dgd["spec"]["services"]
    assert (svc["prefill"]["replicas"], svc["decode"]["replicas"]) == (2, 1)
    assert svc["prefill"]["resources"]["limits"]["gpu"] == "8" and svc["decode"]["resources"]["limits"]["gpu"] == "8"
    assert (svc["prefill"]["subComponentType"], svc["decode"]["subComponentType"]) == ("prefill", "decode")
    args = svc["decode"]["extraPodSpec"]["mainContainer"]["args"]
    pre = svc["prefill"]["extraPodSpec"]["mainContainer"]["args"]
    if backend == "sglang":
        assert _flag(args, "--speculative-algorithm") == "NEXTN" and _flag(args, "--speculative-num-steps") == "3"
        assert _flag(args, "--disaggregation-mode") == "decode"
        # the prefill side sends the draft state the decode side starts from only when it speculates too
        assert _flag(pre, "--speculative-algorithm") == "NEXTN" and _flag(pre, "--speculative-num-steps") == "3"
    elif backend == "vllm":
        assert json.loads(_flag(args, "--speculative-config")) == {"method": "mtp", "num_speculative_tokens": 3}
        assert _flag(args, "--disaggregation-mode") == "decode" and _flag(pre, "--disaggregation-mode") == "prefill"
        assert "--is-decode-worker" not in args and "--is-prefill-worker" not in pre  # deprecated in Dynamo 1.3.1
        assert json.loads(_flag(pre, "--kv-transfer-config")) == {"kv_connector": "NixlConnector",
                                                                  "kv_role": "kv_both"}
    else:
        assert launch.files["decode.yaml"]["speculative_config"] == {"decoding_type": "MTP", "max_draft_len": 3}


@pytest.mark.parametrize("backend", ["sglang", "vllm", "trtllm"])
def test_dynamo_aggregated_answer_is_one_worker_service(backend):
    """An aggregated answer is Dynamo's agg.yaml: a frontend and one worker service without a role, its replicas."""
    launch = build("dynamo", plan_from_answer({**SERVING_ANSWER, "replicas": 3}), backend)
    assert check_launch(launch) == []
    svc = launch.files["dynamo-graph-deployment.yaml"]["spec"]["services"]
    assert set(svc) == {"Frontend", "worker"} and svc["worker"]["replicas"] == 3
    assert "subComponentType" not in svc["worker"]
    args = svc["worker"]["extraPodSpec"]["mainContainer"]["args"]
    assert "--disaggregation-mode" not in args and "--kv-transfer-config" not in args


def _worker_args(launch, role):
    return launch.files["dynamo-graph-deployment.yaml"]["spec"]["services"][role]["extraPodSpec"]["mainContainer"]["args"]


def test_dynamo_rule_vllm_prefill_needs_kv_transfer_config():
    """Dynamo 1.3.1 (dynamo/vllm/args.py) refuses a prefill worker without --kv-transfer-config: the checker does."""
    launch = build_dynamo(plan_from_answer(DISAGG_ANSWER), "vllm")
    args = _worker_args(launch, "prefill")
    i = args.index("--kv-transfer-config")
    del args[i:i + 2]
    assert any(p.startswith("prefill worker: --kv-transfer-config is required") for p in check_launch(launch))


def test_dynamo_rule_sglang_roles_speculate_alike():
    """A SGLang decode worker that speculates beside a prefill worker that does not is caught (the flags differ)."""
    launch = build_dynamo(plan_from_answer(DISAGG_ANSWER), "sglang")
    args = _worker_args(launch, "prefill")
    for f in ("--speculative-algorithm", "--speculative-num-steps", "--speculative-eagle-topk",
              "--speculative-num-draft-tokens"):
        i = args.index(f)
        del args[i:i + 2]
    bad = check_launch(launch)
    assert any("prefill and decode workers differ in --speculative-algorithm: None vs 'NEXTN'" in b for b in bad)
    assert len([b for b in bad if "differ" in b]) == 4


def test_dynamo_worker_flags_come_from_the_dynamo_wheel():
    """The workers' own flags are those the ai-dynamo 1.3.1 wheel's add_argument calls define (counted by hand
    there: dynamo.vllm has --disaggregation-mode with the DisaggregationMode values plus 'pd'; --is-prefill-worker
    is deprecated; dynamo.trtllm's --model-path is the obsolete spelling of --model)."""
    w = flag_list("dynamo")["workers"]
    assert sorted(w["vllm"]["own_flags"]["--disaggregation-mode"]["choices"]) == [
        "agg", "decode", "encode", "pd", "prefill"]
    assert w["vllm"]["own_flags"]["--is-prefill-worker"].get("deprecated") is True
    assert w["trtllm"]["own_flags"]["--model-path"].get("deprecated") is True
    assert w["trtllm"]["model_flag"] == "--model" and "ai_dynamo-1.3.1" in w["trtllm"]["own_flags_source"]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_a_mechanism_the_engine_lacks_is_one_line(engine):
    ans = {**SERVING_ANSWER, "best": {**SERVING_ANSWER["best"], "mechanism": "medusa"}}
    with pytest.raises(SpecplanError) as e:
        build(engine, plan_from_answer(ans))
    assert "\n" not in str(e.value) and "medusa" in str(e.value)


def test_checker_catches_wrong_names_kinds_and_choices():
    launch = build("vllm", plan_from_answer(SERVING_ANSWER))
    launch.argv += ["--tensor-parallel", "2", "--max-num-seqs", "many", "--kv-cache-dtype", "fp9"]
    bad = check_launch(launch)
    assert any("--tensor-parallel:" in b for b in bad) and any("many" in b for b in bad)
    assert any("fp9" in b for b in bad)
    s = build("sglang", plan_from_answer(SERVING_ANSWER))
    s.argv += ["--enable-dp-attention"]  # deprecated in SGLang 0.5.23 (use --attn-dp-size)
    assert any("deprecated" in b for b in check_launch(s))
    t = build("trtllm", plan_from_answer(SERVING_ANSWER))
    t.files["extra-llm-api.yaml"]["speculative_config"]["decoding_type"] = "Medusa"
    assert any("Medusa" in b for b in check_launch(t))


def test_committed_lists_name_version_and_source():
    for e in ("vllm", "sglang", "trtllm", "dynamo"):
        fl = flag_list(e)
        assert fl["version"] and fl["source"]
    assert flag_list("vllm")["version"] == "0.34.0" and flag_list("sglang")["version"] == "0.5.23"
    # choices that came from the engines' Literal types / enums
    assert "eagle3" in flag_list("vllm")["speculative_config"]["method"]["choices"]
    assert "medusa" not in flag_list("vllm")["speculative_config"]["method"]["choices"]
    assert "NEXTN" in flag_list("sglang")["flags"]["--speculative-algorithm"]["choices"]


def test_extractor_on_a_small_wheel(tmp_path):
    """The extraction script reads add_argument calls, config annotations and nested Literal aliases."""
    wheel = tmp_path / "vllm-9.9.9-py3-none-any.whl"
    arg_utils = '''
class EngineArgs:
    def add_cli_args(parser):
        parallel_kwargs = get_kwargs(ParallelConfig)
        cache_kwargs = get_kwargs(CacheConfig)
        g = parser.add_argument_group()
        g.add_argument("--tensor-parallel-size", "-tp", **parallel_kwargs["tensor_parallel_size"])
        g.add_argument("--enable-expert-parallel", **parallel_kwargs["enable_expert_parallel"])
        g.add_argument("--kv-cache-dtype", **{**cache_kwargs["cache_dtype"], "default": None})
'''
    config = '''
Inner = Literal["fp8", "fp8_e4m3"]
CacheDType = Literal["auto", Inner]
class ParallelConfig:
    tensor_parallel_size: int = 1
    enable_expert_parallel: bool = False
class CacheConfig:
    cache_dtype: CacheDType | str = "auto"
class SpeculativeConfig:
    num_speculative_tokens: int | None = None
'''
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("vllm/engine/arg_utils.py", arg_utils)
        z.writestr("vllm/config/parallel.py", config)
    from specplan.planning.launch.extract import extract_vllm

    out = extract_vllm(wheel)
    assert out["version"] == "9.9.9"
    assert out["flags"]["--tensor-parallel-size"] == {"kind": "int", "config": "ParallelConfig.tensor_parallel_size"}
    assert out["flags"]["--enable-expert-parallel"]["kind"] == "bool"
    assert out["flags"]["--kv-cache-dtype"]["choices"] == ["auto", "fp8", "fp8_e4m3"]
    assert out["speculative_config"]["num_speculative_tokens"] == {"kind": "int"}


def test_bad_answers_are_one_line():
    with pytest.raises(SpecplanError, match="model"):
        plan_from_answer({"best": {"mechanism": "eagle3", "draft_len": 2}})
    with pytest.raises(SpecplanError, match="pools"):
        plan_from_answer({**SERVING_ANSWER, "best": {**SERVING_ANSWER["best"], "pools": "2X1"}})
    with pytest.raises(SpecplanError, match="draft_len"):
        plan_from_answer({**SERVING_ANSWER, "best": {**SERVING_ANSWER["best"], "draft_len": -1}})
    with pytest.raises(SpecplanError, match="engine"):
        emit.build("ollama", plan_from_answer(SERVING_ANSWER))


# The shape of `recommend --model llama-3.3-70b --hardware h200-sxm --dtype fp8 --engine vllm --isl 2048 --osl 512
# --max-ttft-ms 1000 --max-tpot-ms 30 --gpus 8 [--mechanisms eagle3 --acceptance eagle3=0.7] --json`: the best
# layout, its serving point (per replica / over the pools) under its own "best".
GPUS_AGG_ANSWER = {"model": "llama-3.3-70b", "hardware": "h200-sxm", "engine": "vllm", "isl": 2048, "osl": 512,
                   "gpus": 8, "best": {"mode": "agg", "dtype": "fp8", "tp": 1, "fits": True, "replicas": 8,
                                       "gpus_used": 8, "total_concurrency": 152.0, "layout": "8 x TP 1",
                                       "best": {"mechanism": "eagle3", "draft_len": 4, "concurrency": 19.0,
                                                "pools": None, "tpot_ms": 26.98}}}
GPUS_DISAGG_ANSWER = {"model": "llama-3.3-70b", "hardware": "h200-sxm", "engine": "vllm", "isl": 2048, "osl": 512,
                      "gpus": 8, "best": {"mode": "disagg", "dtype": "fp8", "tp": 2, "fits": True, "gpus_used": 8,
                                          "total_concurrency": 91.0, "layout": "2P2D x TP 2",
                                          "best": {"mechanism": "none", "draft_len": 0, "concurrency": 91.0,
                                                   "pools": "2P2D", "tpot_ms": 20.78}}}


def test_a_deployment_search_answer_launches_its_best_layout():
    """recommend --gpus nests the serving point under the best layout: the launch takes its mechanism and D, the
    layout's TP and dtype, the batch per replica (agg: 19 of 152) or per decode instance (disagg: ceil(91 / 2))."""
    p = plan_from_answer(GPUS_AGG_ANSWER, draft_model="yuhuili/EAGLE3-LLaMA3.3-Instruct-70B")
    assert (p["mechanism"], p["draft_len"], p["tp"], p["dtype"], p["max_batch"], p["replicas"]) == (
        "eagle3", 4, 1, "fp8", 19, 8)
    launch = build("vllm", p)
    assert json.loads(_flag(launch.argv, "--speculative-config"))["num_speculative_tokens"] == 4
    assert _flag(launch.argv, "--max-num-seqs") == "19"
    assert any("8 replicas" in n and "8 x 1 GPUs" in n for n in launch.notes)
    q = plan_from_answer(GPUS_DISAGG_ANSWER)
    assert (q["mode"], q["tp"], q["max_batch"], q["replicas"]) == ("disagg", 2, 46, 1)
    assert q["pools"] == {"prefill": {"replicas": 2}, "decode": {"replicas": 2}}
    dyn = build_dynamo(q, "vllm").files["dynamo-graph-deployment.yaml"]["spec"]["services"]
    assert dyn["prefill"]["replicas"] == 2 and dyn["decode"]["replicas"] == 2
    one = build("vllm", q)  # one engine command of a disaggregated answer says what it leaves out
    assert any("disaggregated (2P2D, 4 x 2 GPUs)" in n and "--engine dynamo" in n for n in one.notes)
    assert not any("replicas of this server" in n for n in build("vllm", plan_from_answer(SERVING_ANSWER)).notes)


def test_an_instruct_draft_beside_a_base_checkpoint_is_named():
    """llama-3.1-8b's profile is read from the base config (meta-llama/Meta-Llama-3.1-8B; the Instruct one is the
    same shape) while its EAGLE-3 head, yuhuili/EAGLE3-LLaMA3.1-Instruct-8B, was trained on the Instruct model."""
    launch = build("vllm", plan_from_answer(SERVING_ANSWER))
    assert any(n.startswith("the draft yuhuili/EAGLE3-LLaMA3.1-Instruct-8B was trained on an Instruct model")
               for n in launch.notes)
    plan = plan_from_answer({**SERVING_ANSWER, "hf_repo": "meta-llama/Llama-3.1-8B-Instruct"})
    assert not any("Instruct model" in n for n in build("vllm", plan).notes)


# The shape of `recommend --target-tps --json` (GPUs for a load): `answer` picks the aggregated replicas or the
# disaggregated pools (`best`: prefill GPUs in TP-node groups, decode instances of one layout).
CAPACITY = {"model": "deepseek-v3", "hardware": "h200-sxm", "isl": 2048, "osl": 2048, "node_gpus": 8, "counts": [],
            "best": {"gpus": 24, "prefill_gpus": 8, "decode_gpus": 16, "layout": "dp16ep16", "instances": 1,
                     "mechanism": "mtp", "draft_len": 2, "batch": 736},
            "aggregated": {"mode": "agg", "gpus": 32, "tp": 8, "replicas": 4, "mechanism": "mtp", "draft_len": 2,
                           "concurrency_per_replica": 64.0, "fits_budget": True},
            "answer": {"mode": "disagg", "gpus": 24}}


def test_a_gpus_for_a_load_answer_launches_the_mode_it_picked():
    p = plan_from_answer(CAPACITY)
    assert (p["mode"], p["tp"], p["dp"], p["ep"], p["max_batch"], p["mechanism"], p["draft_len"]) == (
        "disagg", 1, 16, 16, 736, "mtp", 2)
    assert p["pools"] == {"prefill": {"replicas": 1, "tp": 8}, "decode": {"replicas": 1}}  # 8 prefill GPUs / TP 8
    dec = build_dynamo(p, "sglang").files["dynamo-graph-deployment.yaml"]["spec"]["services"]["decode"]
    assert dec["multinode"] == {"nodeCount": 2}  # dp16 = 16 GPUs over two nodes of 8
    q = plan_from_answer({**CAPACITY, "answer": {"mode": "agg", "gpus": 32}})
    assert (q["mode"], q["tp"], q["replicas"], q["max_batch"]) == ("agg", 8, 4, 64)
    with pytest.raises(SpecplanError, match="no configuration that meets the targets"):
        plan_from_answer({**CAPACITY, "answer": None})


@pytest.mark.parametrize("pool", [{"replicas": "x"}, {"replicas": 0}, 2, {"replicas": 1.5}])
def test_pool_replicas_must_be_whole_numbers(pool):
    bad = {"model": "llama-3.1-8b", "mode": "disagg", "batch": 8, "pools": {"prefill": pool, "decode": {"replicas": 1}}}
    with pytest.raises(SpecplanError, match="pools.prefill' must hold replicas >= 1"):
        build("vllm", plan_from_answer(bad))


def test_running_request_caps_per_data_parallel_rank():
    """DeepSeek-V3 at DP 8 x EP 8 with 880 requests in all: vLLM's max_num_seqs applies per data-parallel rank
    (vllm 0.34.0 config/scheduler.py) and TensorRT-LLM's max_batch_size per attention-DP rank: 880 / 8 = 110 each;
    SGLang's --max-running-requests is the instance's 880."""
    ans = {"model": "deepseek-v3", "layout": {"tp": 1, "dp": 8, "ep": 8},
           "best": {"mechanism": "mtp", "draft_len": 2, "batch": 880}}
    p = plan_from_answer(ans)
    assert _flag(build("vllm", p).argv, "--max-num-seqs") == "110"
    assert trtllm_options_of(p)["max_batch_size"] == 110
    assert _flag(build("sglang", p).argv, "--max-running-requests") == "880"


def trtllm_options_of(plan):
    return emit.trtllm_options(plan)[0]


def test_a_model_id_that_is_no_repo_is_named():
    """An imported config without _name_or_path in a folder 'q' gets hf_repo 'q': the launch says to replace it."""
    plan = plan_from_answer({**SERVING_ANSWER, "hf_repo": "q"})
    assert any(n.startswith("'q' is not a Hugging Face org/name repo") for n in build("vllm", plan).notes)
    assert not any("org/name" in n for n in build("vllm", plan_from_answer(SERVING_ANSWER)).notes)


def test_engine_overrides_the_emitted_flags_would_meet():
    """What the engines do with the flags (sglang 0.5.23 arg_groups/speculative_hook.py, vllm 0.34.0
    config/vllm.py, TensorRT-LLM llm_args.py @ 0004396): SGLang's n-gram sets eagle_topk from
    --speculative-ngram-max-bfs-breadth (default 10: a chain became a breadth-10 tree) and refuses DP attention;
    DFlash runs one drafting step; vLLM drops a D schedule with DP > 1; TensorRT-LLM stops speculating above the
    schedule's last key, so that key reaches the server's max_batch_size."""
    ng = plan_from_answer({**SERVING_ANSWER, "best": {**SERVING_ANSWER["best"], "mechanism": "ngram",
                                                      "draft_len": 5}})
    s = build("sglang", ng)
    assert _flag(s.argv, "--speculative-ngram-max-bfs-breadth") == "1" and "--speculative-eagle-topk" not in s.argv
    assert _flag(s.argv, "--speculative-num-draft-tokens") == "6" and check_launch(s) == []
    with pytest.raises(SpecplanError, match="n-gram speculation does not run with DP attention"):
        build("sglang", {**ng, "dp": 2})
    df = plan_from_answer({**SERVING_ANSWER, "best": {**SERVING_ANSWER["best"], "mechanism": "dflash",
                                                      "draft_len": 15}}, draft_model="z-lab/some-dflash")
    d = build("sglang", df)
    assert _flag(d.argv, "--speculative-num-steps") == "1" and _flag(d.argv, "--speculative-num-draft-tokens") == "16"
    sched = {**SERVING_ANSWER, "best": {**SERVING_ANSWER["best"], "d_schedule": [[1, 32, 5], [33, 64, 3]],
                                        "concurrency": 200}}
    v = build("vllm", {**plan_from_answer(sched), "dp": 2})
    sc = json.loads(_flag(v.argv, "--speculative-config"))
    assert "num_speculative_tokens_per_batch_size" not in sc and sc["num_speculative_tokens"] == 4
    assert any("ignores num_speculative_tokens_per_batch_size" in n for n in v.notes)
    t = build("trtllm", plan_from_answer(sched))
    assert t.files["extra-llm-api.yaml"]["speculative_config"]["draft_len_schedule"] == {32: 5, 200: 3}
    assert t.files["extra-llm-api.yaml"]["max_batch_size"] == 200


def test_a_saved_serving_answer_keeps_its_dtypes_for_launch(tmp_path):
    """recommend --json left dtype / kv_dtype null, so `specplan launch` on the file lost --quantization fp8 and
    --kv-cache-dtype fp8 that the embedded --emit launch had."""
    from specplan.planning.recommend_serving import recommend_serving
    from specplan.serving.workload import Workload

    r = recommend_serving("llama-3.1-8b", "h100-sxm", Workload(1024, 256, concurrency=1.0), engine="vllm",
                          dtype="fp8", kv_dtype="fp8", drafts=DraftSearch(mechanisms=["none"], max_draft_len=16),
                          grid=GridOptions(search_concurrency=True, d_by_load=False))
    assert r["dtype"] == "fp8" and r["kv_dtype"] == "fp8"
    from specplan.core.jsonable import to_jsonable

    argv = build("vllm", plan_from_answer(json.loads(json.dumps(to_jsonable(r))))).argv  # as --json saved it
    assert _flag(argv, "--kv-cache-dtype") == "fp8" and _flag(argv, "--quantization") == "fp8"

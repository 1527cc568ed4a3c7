"""Serving model: the ideal disaggregated decode pool is `specplan step`, a hand-solved aggregated point,
invariants of the steady state, and the CLI's JSON keys."""

import json
import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import brentq

from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_engine, load_hardware, load_model
from specplan.serving.aggregated import aggregated
from specplan.serving.disaggregated import disaggregated
from specplan.serving.prefill import mixed_step_s, StepMix
from specplan.serving.workload import Workload
from specplan.speculation.acceptance import Acceptance
from specplan.model.step import step_time
from specplan.planning.options import GridOptions, Sla
from specplan.model.deployment import Deployment
from specplan.speculation.spec import Speculation


def run(*args):
    return subprocess.run([sys.executable, "-m", "specplan", *args], capture_output=True, text=True)


def test_ideal_disagg_decode_tpot_is_specplan_step_at_the_decode_batch_and_mean_context():
    # ISL 2048, OSL 512, open loop at the rate that holds 24 requests decoding: lambda = 24 / (511 * step(24)),
    # step at batch 24 and context 2048 + 512/2 = 2304 (ideal engine: no host cost). The decode batch is B = 24
    # and TPOT is that step. (Was: a closed loop at C = 24 with B = 24, i.e. the requests in prefill ignored.)
    s = run("step", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--batch", "24", "--context", "2304", "--json")
    step_s = json.loads(s.stdout)["step_ms"] / 1e3
    lam = 24 / (511 * step_s)
    r = disaggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="ideal"), Speculation(),
                      Workload(2048, 512, request_rate=lam, mode="disagg"))
    assert float(r["decode_batch"]) == pytest.approx(24.0, rel=1e-5)
    assert float(r["tpot_s"]) == pytest.approx(step_s, rel=1e-5)
    assert r["pools"] == (1, 1)


def test_hand_solved_aggregated_tpot_and_ttft():
    # llama-3.2-1b on H100, ideal engine, ISL 512, OSL 65, C = 4 (closed loop). The documented equations,
    # solved here independently (brentq on B): T(B) decode step at context 512 + 32 (OSL/2 rounded down); dP(B) = mixed step
    # with one 512-token chunk minus the decode step; N_d = 64 iterations per request;
    # tau = T + B dP / N_d; X = B / (N_d tau); prefill busy fraction u = X * (T / k + dP) with k = (8192 - B) / 512
    # prompts per step (chunked prefill); service = max(tau, T + dP);
    # TTFT = busy tau/2 + u / (2 (1 - u)) * service + service, busy = 1 - (1 - B/4)^3 (the chance another of the
    # 4 clients is decoding when a prompt arrives); C = B + X * TTFT.
    # Step costs are priced at whole batches 1..4 and interpolated linearly in log batch (docs/serving.md).
    m, hw = load_model("llama-3.2-1b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    ctx, n_d = 512 + 65 // 2, 64.0
    whole = np.array([1.0, 2.0, 3.0, 4.0])
    t_w = step_time(m, hw, 1, whole, 1, ctx, precision=prec).total_s
    dp_w = (mixed_step_s(m, hw, 1, StepMix(whole, ctx, 512, 0), precision=prec)
            - mixed_step_s(m, hw, 1, StepMix(whole, ctx, 0, 0), precision=prec))

    def parts(b):
        t = float(np.interp(np.log(max(b, 1.0)), np.log(whole), t_w))
        dp = float(np.interp(np.log(max(b, 1.0)), np.log(whole), dp_w))
        tau = t + b * dp / n_d
        x = b / (n_d * tau)
        u = x * (t * 512 / (8192 - b) + dp)
        service = max(tau, t + dp)
        busy = 1 - (1 - b / 4) ** 3
        return tau, x, busy * tau / 2 + u / (2 * (1 - u)) * service + service

    b = brentq(lambda b: b + parts(b)[1] * parts(b)[2] - 4.0, 1.0, 4.0, xtol=1e-10)
    tau, x, ttft = parts(b)
    r = aggregated(Deployment(m, hw, engine="ideal"), Speculation(), Workload(512, 65, concurrency=4))
    assert float(r["tpot_s"]) == pytest.approx(tau, rel=1e-6)
    assert float(r["ttft_s"]) == pytest.approx(ttft, rel=1e-6)
    assert float(r["decode_batch"]) == pytest.approx(b, rel=1e-6)
    assert float(r["request_latency_s"]) == pytest.approx(ttft + 64 * tau, rel=1e-6)
    assert float(r["tokens_per_s_per_gpu"]) == pytest.approx(x * 65, rel=1e-6)


def test_prompt_tokens_per_step_follow_b_isl_al_over_osl():
    wl = Workload(2048, 257, concurrency=np.array([8.0, 32.0]))
    base = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="vllm"), Speculation(), wl)
    np.testing.assert_allclose(base["prefill_tokens_per_step"], base["decode_batch"] * 2048 / 256, rtol=1e-9)
    assert np.all(base["decode_batch"] < wl.concurrency)  # requests in prefill are not decoding
    spec = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="vllm"),
                      Speculation("eagle3", 3, Acceptance.from_rate(0.8)), wl)
    al = float(np.asarray(spec["acceptance_length"]).reshape(-1)[0])
    np.testing.assert_allclose(spec["prefill_tokens_per_step"], spec["decode_batch"] * 2048 * al / 256, rtol=1e-9)


def test_tpot_grows_with_concurrency_and_exceeds_decode_only():
    c = np.array([1.0, 4, 16, 64])
    r = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="trtllm"), Speculation(),
                   Workload(4096, 128, concurrency=c))
    assert np.all(np.diff(r["tpot_s"]) > 0)
    dec = step_time("llama-3.1-8b", "h100-sxm", 1, np.maximum(r["decode_batch"], 1), 1, 4096 + 64).total_s
    # prefill interference and engine costs on top of the decode step from two clients on; one client decodes
    # alone (its next prompt comes after it finishes), at the decode step itself (the host overlapped) and the
    # engine's step gap
    gap = load_engine("trtllm").step_gap_s
    assert np.all(r["tpot_s"][1:] > dec[1:]) and r["tpot_s"][0] == pytest.approx(dec[0] + gap, rel=1e-9)


def test_disagg_counts_both_pools_in_tokens_per_gpu():
    # Open loop at 5 requests/s: the same decode pool (1 instance, same B) behind 1 or 2 prefill instances, so the
    # same TPOT, and tokens/s/GPU = 5 * 512 / (x + y) GPUs: 1280 at 1P1D, 853.3 at 2P1D. (Was a closed loop at
    # C = 16 with B = C / y: the decode batch did not depend on the prefill pool.)
    one = disaggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="ideal"), Speculation(),
                        Workload(1024, 512, request_rate=5.0, mode="disagg"))
    two = disaggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="ideal"), Speculation(),
                        Workload(1024, 512, request_rate=5.0, mode="disagg",
                                                             pools=(2, 1)))
    assert float(two["tpot_s"]) == pytest.approx(float(one["tpot_s"]))  # same decode pool
    assert float(one["tokens_per_s_per_gpu"]) == pytest.approx(5 * 512 / 2)
    assert float(two["tokens_per_s_per_gpu"]) == pytest.approx(5 * 512 / 3)
    assert float(two["ttft_s"]) < float(one["ttft_s"])  # less prefill queueing


def test_prefill_bound_disagg_shrinks_the_decode_batch():
    # ISL 8192 / OSL 16 at C = 256 on 1P1D: the prefill pool (S ~ 0.21 s a prompt) binds; requests/s within 1 % of
    # its capacity 1 / S, TTFT finite and from Little's law: (C - B) / X (was: X = 1/S exactly with C ignored)
    r = disaggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="ideal"), Speculation(),
                      Workload(8192, 16, concurrency=256, mode="disagg"))
    b, x, s = float(r["decode_batch"]), float(r["requests_per_s"]), float(r["prefill_s"])
    assert bool(r["prefill_bound"]) and b < 256
    assert x == pytest.approx(1.0 / s, rel=1e-2) and x <= 1.0 / s
    assert float(r["ttft_s"]) == pytest.approx((256 - b) / x, rel=1e-6)


def test_predict_json_has_the_issue_keys():
    p = run("predict", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--engine", "vllm", "--isl", "1024", "--osl", "256",
            "--concurrency", "16", "--mechanism", "eagle3", "-D", "3", "--acceptance-rate", "0.8", "--json")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)["serving"]
    keys = {"tpot_ms", "ttft_ms", "request_latency_ms", "tokens_per_s_per_user", "tokens_per_s_per_gpu"}
    assert keys <= set(s["baseline"]) and keys <= set(s["speculative"])
    assert s["speedup_tpot"] == pytest.approx(s["baseline"]["tpot_ms"] / s["speculative"]["tpot_ms"])
    assert s["speedup_throughput"] == pytest.approx(s["speculative"]["tokens_per_s_per_gpu"]
                                                    / s["baseline"]["tokens_per_s_per_gpu"])


def test_predict_without_isl_behaves_as_before_and_serving_alias_is_the_vllm_engine(tmp_path):
    a = run("predict", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-b", "1", "-c", "1024", "--mechanism", "eagle3",
            "-D", "3", "--acceptance-rate", "0.8", "--serving", "vllm-v1-eagle-2025", "--json")
    b = run("predict", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-b", "1", "-c", "1024", "--mechanism", "eagle3",
            "-D", "3", "--acceptance-rate", "0.8", "--engine", "vllm-0.10", "--json")
    ja, jb = json.loads(a.stdout), json.loads(b.stdout)
    assert "serving" not in ja and ja["speedup"] == jb["speedup"]
    # the two speculative host costs of the vllm-0.10 profile (1.034 ms + 3 x 0.633 ms) are in the iteration:
    # against the same engine (its kernel families and GEMM scales) without them
    import yaml

    from specplan.profiles.registry import load_engine

    data = load_engine("vllm-0.10").model_dump(mode="json", exclude_defaults=True)
    data["id"] = "vllm-no-spec"
    for k in ("spec_iteration_overhead_s", "spec_draft_step_overhead_s"):
        data.pop(k)
        data["sources"].pop(k)
    (tmp_path / "vllm-no-spec.yaml").write_text(yaml.safe_dump(data))
    c = run("predict", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-b", "1", "-c", "1024", "--mechanism", "eagle3",
            "-D", "3", "--acceptance-rate", "0.8", "--engine", str(tmp_path / "vllm-no-spec.yaml"), "--json")
    jc = json.loads(c.stdout)
    assert ja["speculative"]["step_ms"] - jc["speculative"]["step_ms"] == pytest.approx(1.034 + 3 * 0.633, rel=1e-6)


@pytest.mark.parametrize("args, field", [
    (["--isl", "1024", "--osl", "0", "--concurrency", "8"], "osl"),
    (["--isl", "32768", "--osl", "64", "--concurrency", "8"], "max_context_len"),
    (["--isl", "1024", "--osl", "64", "--concurrency", "0"], "concurrency"),
    (["--isl", "1024", "--osl", "64", "--concurrency", "8", "--mode", "disagg", "--pools", "2PxD"], "pools"),
    (["--isl", "1024", "--concurrency", "8"], "--osl"),
])
def test_bad_serving_input_is_one_line_and_exit_2(args, field):
    p = run("predict", "-m", "llama-2-7b-32k", "-H", "h100-sxm", *args)  # a 32768-token context
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and "Traceback" not in p.stderr


def test_engine_yaml_with_negative_overhead_on_the_cli(tmp_path):
    y = tmp_path / "neg.yaml"
    y.write_text("id: neg\neager_launch_s: -5.0e-6\nsources: {eager_launch_s: test}\n")
    p = run("predict", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--engine", str(y), "--isl", "512", "--osl", "64",
            "--concurrency", "4")
    assert p.returncode == 2 and "eager_launch_s" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_recommend_sla_nothing_meets_is_explained_exit_1():
    p = run("recommend", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--isl", "1024", "--osl", "256",
            "--max-tpot-ms", "0.5")
    assert p.returncode == 1
    assert "infeasible: no configuration fits and meets TPOT <= 0.5 ms" in p.stdout
    assert "lowest TPOT reachable" in p.stdout


def test_recommend_serving_maximizes_throughput_under_the_sla():
    from specplan.planning.recommend_serving import recommend_serving

    wl = Workload(1024, 256, concurrency=1.0)
    r = recommend_serving("llama-3.1-8b", "h100-sxm", wl, engine="vllm", sla=Sla(max_tpot_ms=12.0),
                          grid=GridOptions(search_concurrency=True))
    best = r["best"]
    assert best["tpot_ms"] <= 12.0
    # one more concurrency step past the best breaks the SLA (throughput grows with concurrency here)
    grid = [x for x in r["ranked"] if x["feasible"]]
    assert best["tokens_per_s_per_gpu"] == max(x["tokens_per_s_per_gpu"] for x in grid)


def test_prefill_utilization_hand_computed():
    from specplan.profiles.registry import load_engine
    from specplan.serving.aggregated import prefill_utilization

    trt = load_engine("trtllm")  # no chunked prefill, 8192-token budget
    assert not trt.chunked_prefill and trt.max_num_batched_tokens == 8192
    # ISL 5000 with 192 decode tokens: floor(8000 / 5000) = 1 prompt per step, so u = X (T + dP)
    # = 1.5 * (0.025 + 0.39) = 0.6225
    u = prefill_utilization(trt, Workload(5000, 500, concurrency=50), 192.0, 1.5, 0.025, 0.39)
    assert float(u) == pytest.approx(0.6225)
    # ISL 1000: floor(8000 / 1000) = 8 prompts share a step: u = 1.5 * (0.025 / 8 + 0.39)
    u = prefill_utilization(trt, Workload(1000, 500, concurrency=50), 192.0, 1.5, 0.025, 0.39)
    assert float(u) == pytest.approx(1.5 * (0.025 / 8 + 0.39))
    # chunked (vllm): ISL 16000 over 8000 free tokens = half a prompt per step, its chunks take two steps
    vl = load_engine("vllm")
    assert vl.chunked_prefill and vl.max_num_batched_tokens == 8192
    u = prefill_utilization(vl, Workload(16000, 500, concurrency=50), 192.0, 0.1, 0.02, 0.5)
    assert float(u) == pytest.approx(0.1 * (0.02 * 2 + 0.5))


def test_bunched_start_only_for_aiconfigurator_rows():
    from specplan.validation.serving import bunched_start, load_rows

    d = load_rows()
    assert not d.loc[d["framework"].str.startswith("NIM"), "bunched"].any()
    assert d.loc[d["source"].str.contains("aiconfigurator"), "bunched"].all()
    assert bunched_start("https://github.com/ai-dynamo/aiconfigurator/blob/x/silicon_sample.csv")


def test_nim_group_ignores_the_startup_term():
    from specplan.validation.serving import groups, load_rows

    d = load_rows()
    (g,) = groups(d[d["framework"].str.startswith("NIM")])
    a = g.predict(g.engine.model_copy(update={"startup_client_s": 0.01}))["ttft_s"]
    b = g.predict(g.engine.model_copy(update={"startup_client_s": 0.0}))["ttft_s"]
    np.testing.assert_allclose(a, b, rtol=1e-12)


def test_nim_group_ignores_the_prefill_startup_term_too():
    from specplan.validation.serving import groups, load_rows

    d = load_rows()
    (g,) = groups(d[d["framework"].str.startswith("NIM")])
    a = g.predict(g.engine.model_copy(update={"startup_prefill_frac": 0.5}))["ttft_s"]
    b = g.predict(g.engine.model_copy(update={"startup_prefill_frac": 0.0, "startup_client_s": 0.0}))["ttft_s"]
    np.testing.assert_allclose(a, b, rtol=1e-12)


def test_fit_startup_recovers_a_known_prefill_fraction():
    """Rows whose measured TTFT is the model's own at startup_prefill_frac 0.07 (host numbers held): the Cauchy fit
    of the engine's start-up number returns 0.07 (the flat startup_client_s held at 0 while it does)."""
    from specplan.validation.serving import fit_startup, fitted_names, groups, load_rows, startup_name

    d = load_rows()
    d = d[d["framework"].str.startswith("vLLM") & (d["tp"] == 4) & (d["input_len"] == 1024)]
    gs = groups(d)
    assert startup_name(gs[0].engine) == "startup_prefill_frac"
    truth = {"startup_prefill_frac": 0.07, "startup_client_s": 0.0}
    for g in gs:
        g.rows = g.rows.assign(ttft_ms=g.predict(g.engine.model_copy(update=truth))["ttft_s"] * 1e3)
    host = [getattr(gs[0].engine, k) for k in fitted_names(gs[0].engine)]
    assert fit_startup(gs, host) == pytest.approx(0.07, abs=2e-4)


@pytest.mark.parametrize("text, pools", [("1P1D", (1, 1)), ("2P3D", (2, 3)), (" 4p1d ", (4, 1)), ("10P2D", (10, 2))])
def test_pools_parse_any_whole_counts(text, pools):
    from specplan.serving.workload import parse_pools

    assert parse_pools(text) == pools


@pytest.mark.parametrize("text", ["0P1D", "1P0D", "2PxD", "P1D", "1.5P1D", "-1P1D"])
def test_pools_refuse_what_is_not_two_counts_of_at_least_one(text):
    from specplan.core.errors import SpecplanError
    from specplan.serving.workload import parse_pools

    with pytest.raises(SpecplanError, match="pools"):
        parse_pools(text)


def test_ttft_quantile_closed_form():
    # the M/D/1 wait is 0 with probability 1 - u, else exponential with mean w / u: P(W > t) = u exp(-t u / w), so
    # the q-quantile of the wait is (w / u) ln(u / (1 - q)) when u > 1 - q, else 0; the rest of TTFT is fixed
    from specplan.serving.aggregated import ttft_quantile_s

    t90 = float(ttft_quantile_s(1.0, 0.2, 0.5, 0.9))  # (0.2 / 0.5) ln(0.5 / 0.1) = 0.4 ln 5
    assert t90 == pytest.approx(1.0 - 0.2 + 0.4 * np.log(5.0), rel=1e-12)
    assert 0.5 * np.exp(-(t90 - 0.8) * 0.5 / 0.2) == pytest.approx(0.1, rel=1e-12)  # the tail at that wait is 10 %
    assert float(ttft_quantile_s(1.0, 0.2, 0.05, 0.9)) == pytest.approx(0.8, rel=1e-12)  # u <= 1 - q: no wait
    assert float(ttft_quantile_s(1.0, 0.2, 0.5, 0.5)) == pytest.approx(0.8, rel=1e-12)  # median: u = 1 - q


def test_osl_one_open_loop_ttft_is_the_md1_wait_on_the_prefill():
    # OSL 1: the prefill alone serves the request. Open loop at rate lambda, one prompt per step (ISL above the
    # budget): TTFT = s + u / (2 (1 - u)) s with u = lambda s (M/D/1); s is the TTFT at a vanishing rate
    from specplan.serving.aggregated import aggregated
    from specplan.serving.workload import Workload

    def ttft(rate):
        return float(aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="ideal"), Speculation(),
                                Workload(20000, 1, request_rate=rate))["ttft_s"])

    s = ttft(1e-9)
    for u in (0.25, 0.5, 0.9):
        assert ttft(u / s) == pytest.approx(s + u / (2 * (1 - u)) * s, rel=1e-6)


def test_prefill_service_of_a_chunked_prompt_closed_form():
    # mixed prefill: a prompt of n chunks rides n iterations, each the longer of the mean iteration tau and the
    # base step plus its chunk's share dP / n: n · max(tau, t + dP / n). Prefill apart: its own steps, dP.
    from specplan.profiles.registry import load_engine
    from specplan.serving.aggregated import prefill_service_s

    mixed = load_engine("vllm")
    assert mixed.mixed_prefill
    assert float(prefill_service_s(mixed, 0.010, 0.008, 0.030, 3)) == pytest.approx(3 * max(0.010, 0.008 + 0.010))
    assert float(prefill_service_s(mixed, 0.020, 0.008, 0.030, 3)) == pytest.approx(3 * 0.020)  # tau binds
    apart = mixed.model_copy(update={"mixed_prefill": False})
    assert float(prefill_service_s(apart, 0.010, 0.008, 0.030, 3)) == pytest.approx(0.030)


def test_pools_only_with_disaggregated_mode():
    from specplan.core.errors import SpecplanError
    from specplan.serving.workload import Workload

    with pytest.raises(SpecplanError, match=r"pools \(--pools\): only with --mode disagg"):
        Workload(1024, 128, concurrency=8, mode="agg", pools=(1, 1))
    assert Workload(1024, 128, concurrency=8, mode="disagg", pools=(2, 1)).pools == (2, 1)

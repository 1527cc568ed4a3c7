"""Little's law and the disaggregated path, checked against closed forms worked out in each test body.

Closed loop: C requests in flight = B decoding (y·B over y decode instances) + X·TTFT waiting for or in prefill,
and X × request latency = C. The ideal engine adds nothing to the roofline, so each test prices its own steps
with `step_time` / `prefill_s` and solves the documented equations with brentq."""

import json
import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import brentq

from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_hardware, load_model
from specplan.serving.aggregated import aggregated
from specplan.serving.disaggregated import disaggregated
from specplan.serving.prefill import mixed_step_s, StepMix, prefill_s
from specplan.serving.workload import Workload
from specplan.model.step import step_time
from specplan.model.deployment import Deployment
from specplan.costs.precision import Dtypes
from specplan.speculation.spec import Speculation
from specplan.serving.aggregated import StepOptions
from specplan.speculation.spec import Speculation

KV_BYTES_PER_TOKEN_L8B = 32 * 2 * 8 * 128 * 2  # Llama-3.1-8B bf16: layers x (K, V) x kv heads x head dim x bytes


def run(*args):
    return subprocess.run([sys.executable, "-m", "specplan", *args], capture_output=True, text=True)


@pytest.mark.parametrize("engine", ["trtllm", "vllm", "ideal"])
def test_aggregated_littles_law_at_every_concurrency(engine):
    c = np.array([1.0, 3.0, 64.0, 1e4])
    r = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine=engine), Speculation(),
                   Workload(1024, 256, concurrency=c))
    np.testing.assert_allclose(r["requests_per_s"] * r["request_latency_s"], c, rtol=1e-2)
    # the C = 10^4 point is held by the running cap (KV cache / max_num_seqs): the rest wait for admission
    assert float(r["decode_batch"][-1]) <= float(r["running_cap"])
    assert float(r["admission_wait_s"][-1]) > 0


def test_issue25_one_client_with_a_long_prompt_is_one_request_in_flight():
    # Llama-3.1-8B, H100, trtllm, ISL 100000 / OSL 4 at C = 1 implied 161 requests in flight (X·latency) when the
    # decode batch was clamped to >= 1: one client has one request, mostly in prefill, so B << 1.
    r = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="trtllm"), Speculation(),
                   Workload(100000, 4, concurrency=1))
    assert float(r["requests_per_s"] * r["request_latency_s"]) == pytest.approx(1.0, rel=1e-2)
    assert float(r["decode_batch"]) < 0.2
    # X = 1 / latency: a single client sends the next request when the last one ends
    assert float(r["requests_per_s"]) == pytest.approx(1.0 / float(r["request_latency_s"]), rel=1e-2)


def test_single_client_aggregated_hand_solved_below_one_decoding_sequence():
    # llama-3.2-1b, H100, ideal, ISL 512 / OSL 65, C = 1. One client: no other prompt can be ahead (the M/D/1
    # wait is capped at (C - 1) prompts = 0). Steps priced at batch 1 (a fraction of a sequence decodes at the
    # cost of one): T = step(1, ctx 544), dP = mixed(1, 512-token chunk) - step. With B < 1 decoding on average:
    # its own next prompt comes after it finishes, so no prompt shares its decode steps: tau = T; the engine is
    # idle when its prompt arrives (no half iteration to wait); X = B / (N_d tau), TTFT = service = max(tau, T + dP),
    # and C = 1 = B + X TTFT.
    m, hw = load_model("llama-3.2-1b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    ctx, n_d = 512 + 65 // 2, 64.0
    t = float(step_time(m, hw, 1, 1.0, 1, ctx, precision=prec).total_s)
    dp = float(mixed_step_s(m, hw, 1, StepMix(1.0, ctx, 512, 0), precision=prec)
               - mixed_step_s(m, hw, 1, StepMix(1.0, ctx, 0, 0), precision=prec))

    def parts(b):
        tau = t
        x = b / (n_d * tau)
        return tau, x, max(tau, t + dp)

    b = brentq(lambda b: b + parts(b)[1] * parts(b)[2] - 1.0, 1e-6, 1.0, xtol=1e-12)
    tau, x, ttft = parts(b)
    r = aggregated(Deployment(m, hw, engine="ideal"), Speculation(), Workload(512, 65, concurrency=1))
    assert b < 1.0
    assert float(r["decode_batch"]) == pytest.approx(b, rel=1e-6)
    assert float(r["ttft_s"]) == pytest.approx(ttft, rel=1e-6)
    assert float(r["tpot_s"]) == pytest.approx(tau, rel=1e-6)
    assert float(r["requests_per_s"]) == pytest.approx(x, rel=1e-6)


@pytest.mark.parametrize("pools", [(1, 1), (2, 1), (1, 3), (3, 2)])
def test_disaggregated_littles_law_requests_in_prefill_count(pools):
    c = np.array([1.0, 8.0, 64.0, 512.0])
    r = disaggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="vllm"), Speculation(),
                      Workload(2048, 256, concurrency=c, mode="disagg", pools=pools))
    x, y = pools
    b, xr, ttft = r["decode_batch"], r["requests_per_s"], r["ttft_s"]
    assert np.all(np.isfinite(ttft))
    np.testing.assert_allclose(y * b + xr * ttft, c, rtol=1e-2)  # C = y·B + X·TTFT
    np.testing.assert_allclose(xr * r["request_latency_s"], c, rtol=1e-2)
    # throughput counts every decode instance: X = y·B / (N_d·tau), N_d = 255 iterations, tau = TPOT here
    np.testing.assert_allclose(xr, y * b / (255 * r["iteration_s"]), rtol=1e-9)
    np.testing.assert_allclose(r["tokens_per_s_per_gpu"], xr * 256 / (x + y), rtol=1e-9)


def test_disaggregated_hand_solved_1p2d():
    # Llama-3.1-8B, H100, ideal, ISL 2048 / OSL 256, 1P2D at C = 16. Prefill S = prefill_s(2048) (one 2048-token
    # step, no host cost); KV of 2048 tokens x 131072 B over NVLink (3 GPUs in one 8-GPU node, 450 GB/s);
    # decode tau(B) = step at B (linear between whole batches), ctx 2048 + 128; X = 2 B / (255 tau);
    # rho = X S; wait = min(rho / (2 (1 - rho)) S, 15 S); TTFT = S + wait + kv; solve 2 B + X TTFT = 16.
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    s = float(prefill_s(m, hw, 1, 2048, precision=prec, engine="ideal"))
    kv = 2048 * KV_BYTES_PER_TOKEN_L8B / 450e9
    whole = np.arange(1.0, 17.0)
    t_w = step_time(m, hw, 1, whole, 1, 2048 + 128, precision=prec).total_s

    def parts(b):
        tau = float(np.interp(max(b, 1.0), whole, t_w))
        x = 2 * b / (255 * tau)
        rho = x * s
        wait = min(rho / (2 * (1 - rho)) * s, 15 * s)
        return tau, x, s + wait + kv

    b = brentq(lambda b: 2 * b + parts(b)[1] * parts(b)[2] - 16.0, 1e-6, 8.0, xtol=1e-12)
    tau, x, ttft = parts(b)
    r = disaggregated(Deployment(m, hw, engine="ideal"), Speculation(),
                      Workload(2048, 256, concurrency=16, mode="disagg", pools=(1, 2)))
    assert float(r["prefill_s"]) == pytest.approx(s, rel=1e-9)
    assert float(r["kv_transfer_s"]) == pytest.approx(kv, rel=1e-9)
    assert float(r["decode_batch"]) == pytest.approx(b, rel=1e-6)
    assert float(r["tpot_s"]) == pytest.approx(tau, rel=1e-6)
    assert float(r["ttft_s"]) == pytest.approx(ttft, rel=1e-6)
    assert float(r["tokens_per_s_per_gpu"]) == pytest.approx(x * 256 / 3, rel=1e-6)


@pytest.mark.parametrize("tp, link_bytes_s", [(4, 450e9), (8, 50e9)])
def test_kv_transfer_in_ttft_nvlink_in_a_node_nic_across(tp, link_bytes_s):
    # One client (no queue): TTFT = S + KV transfer. 1P1D at TP 4 is 8 GPUs, one H100 node: NVLink 450 GB/s per
    # direction; at TP 8 it is 16 GPUs, two nodes: the NIC, 50 GB/s per GPU (hardware_profiles/h100-sxm.yaml).
    # Each rank moves its 1/TP of 8192 tokens x 131072 B.
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    kv = 8192 * KV_BYTES_PER_TOKEN_L8B / tp / link_bytes_s
    r = disaggregated(Deployment(m, hw, tp=tp, engine="ideal"), Speculation(),
                      Workload(8192, 64, concurrency=1, mode="disagg"))
    s = float(prefill_s(m, hw, tp, 8192, precision=prec, engine="ideal"))
    assert float(r["kv_transfer_s"]) == pytest.approx(kv, rel=1e-9)
    assert float(r["ttft_s"]) == pytest.approx(s + kv, rel=1e-9)


def test_issue26_ideal_disagg_ttft_is_finite_and_obeys_littles_law():
    # `predict ... --engine ideal --mode disagg --isl 4096 --osl 256 --concurrency 64` printed TTFT 4.87e13 ms:
    # the prefill pool at utilization 1 - 1e-12. A request can wait at most for the 63 other prompts:
    # TTFT <= 64 S + kv, and X x latency = 64.
    p = run("predict", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--engine", "ideal", "--mode", "disagg",
            "--isl", "4096", "--osl", "256", "--concurrency", "64", "--json")
    assert p.returncode == 0, p.stderr
    b = json.loads(p.stdout)["serving"]["baseline"]
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    s = float(prefill_s(m, hw, 1, 4096, precision=resolve_precision(m, hw, None, None), engine="ideal"))
    assert b["ttft_ms"] <= 1e3 * (64 * s + 4096 * KV_BYTES_PER_TOKEN_L8B / 450e9)
    assert b["requests_per_s"] * b["request_latency_ms"] / 1e3 == pytest.approx(64, rel=1e-2)


@pytest.mark.parametrize("mode", ["agg", "disagg"])
def test_osl_one_has_no_tpot_and_a_finite_ttft(mode):
    p = run("predict", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--engine", "ideal", "--mode", mode,
            "--isl", "2048", "--osl", "1", "--concurrency", "1", "--json")
    assert p.returncode == 0, p.stderr
    b = json.loads(p.stdout)["serving"]["baseline"]
    assert b["tpot_ms"] is None and b["tokens_per_s_per_user"] is None
    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    s = float(prefill_s(m, hw, 1, 2048, precision=resolve_precision(m, hw, None, None), engine="ideal"))
    kv = 2048 * KV_BYTES_PER_TOKEN_L8B / 450e9 if mode == "disagg" else 0.0
    assert b["ttft_ms"] == pytest.approx(1e3 * (s + kv), rel=1e-3)  # one client: its prompt alone
    assert b["request_latency_ms"] == pytest.approx(b["ttft_ms"], rel=1e-6)


@pytest.mark.parametrize("mode", ["agg", "disagg"])
def test_open_loop_overload_is_an_answer(mode):
    p = run("predict", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--mode", mode, "--isl", "4096", "--osl", "128",
            "--request-rate", "1e9")
    assert p.returncode == 0, p.stderr
    assert "unstable: arrivals (1e+09 req/s) exceed capacity" in p.stdout
    wl = Workload(4096, 128, request_rate=1e9, mode=mode)
    fn = aggregated if mode == "agg" else disaggregated
    dep = Deployment("llama-3.1-8b", "h100-sxm", engine="vllm")
    sat = float(fn(dep, Speculation(), wl)["saturation_requests_per_s"])
    assert 0 < sat < 1e3
    below = fn(dep, Speculation(), Workload(4096, 128, request_rate=0.9 * sat, mode=mode))
    above = fn(dep, Speculation(), Workload(4096, 128, request_rate=1.1 * sat, mode=mode))
    assert bool(below["stable"]) and not bool(above["stable"])


def test_prefill_first_engine_hand_solved():
    # SGLang's order (mixed_prefill: false): a prompt runs in a prefill step of its own while decoding waits.
    # llama-3.2-1b, H100, the ideal engine with mixed_prefill off, ISL 512 / OSL 65, C = 4: P = the 512-token
    # prefill step alone (no decode rows); tau = T(B) + B P / 64; X = B / (64 tau); u = X P; wait =
    # min(u / (2 (1 - u)) P, 3 P); TTFT = busy tau / 2 + wait + P, busy = 1 - (1 - B/4)^3 (another client
    # decoding when the prompt arrives); C = 4 = B + X TTFT.
    from specplan.profiles.registry import load_engine

    eng = load_engine("ideal").model_copy(update={"mixed_prefill": False})
    m, hw = load_model("llama-3.2-1b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    ctx = 512 + 65 // 2
    whole = np.array([1.0, 2.0, 3.0, 4.0])
    t_w = step_time(m, hw, 1, whole, 1, ctx, precision=prec).total_s
    p = float(mixed_step_s(m, hw, 1, StepMix(0.0, ctx, 512, 0), precision=prec))

    def parts(b):
        t = float(np.interp(np.log(max(b, 1.0)), np.log(whole), t_w))
        tau = t + b * p / 64
        x = b / (64 * tau)
        u = x * p
        busy = 1 - (1 - b / 4) ** 3
        return tau, x, busy * tau / 2 + min(u / (2 * (1 - u)) * p, 3 * p) + p

    b = brentq(lambda b: b + parts(b)[1] * parts(b)[2] - 4.0, 1e-6, 4.0, xtol=1e-12)
    tau, x, ttft = parts(b)
    r = aggregated(Deployment(m, hw, engine=eng), Speculation(), Workload(512, 65, concurrency=4))
    assert float(r["tpot_s"]) == pytest.approx(tau, rel=1e-6)
    assert float(r["ttft_s"]) == pytest.approx(ttft, rel=1e-6)
    assert float(r["decode_batch"]) == pytest.approx(b, rel=1e-6)


def test_startup_term_adds_c_minus_one_client_times_at_a_fixed_batch():
    # The opt-in start-up term of a benchmark that starts all C clients at once: (C - 1) x startup_client_s on
    # TTFT, whatever the prompt (it is not in prompts of dP), and nothing without --startup-cohort.
    import dataclasses

    from specplan.profiles.registry import load_engine
    from specplan.serving.aggregated import gpu_tables, state

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    c = np.array([1.0, 8.0, 64.0])
    eng = load_engine("vllm").model_copy(update={"startup_client_s": 2.5e-3, "startup_prefill_frac": 0.0})
    for isl in (1024, 4096):
        wl = Workload(isl, 256, concurrency=c, startup_cohort=True)
        spec = StepOptions(Speculation("none", np.zeros(3)))
        tab = gpu_tables(m, hw, 1, wl, eng, spec, prec, 64.0)
        b = np.array([0.5, 6.0, 50.0])
        _, x_on, on = state(tab, eng, wl, b)
        _, x_off, off = state(tab, eng, dataclasses.replace(wl, startup_cohort=False), b)
        np.testing.assert_allclose(on - off, [0.0, 7 * 2.5e-3, 63 * 2.5e-3], rtol=1e-12, atol=1e-15)
        np.testing.assert_array_equal(x_on, x_off)
    # closed loop with the term on: Little's law still holds (the term is TTFT the loop's clients spend waiting)
    r = aggregated(Deployment(m, hw, engine=eng), Speculation(), Workload(1024, 256, concurrency=c,
                                                                          startup_cohort=True))
    np.testing.assert_allclose(r["requests_per_s"] * r["request_latency_s"], c, rtol=1e-2)


def test_startup_prefill_frac_adds_c_minus_one_fractions_of_a_prompts_service_at_a_fixed_batch():
    # The start-up term in units of one prompt's engine service time: (C - 1) x startup_prefill_frac x (t_it / k +
    # dP), k = the prompts one step's leftover budget holds ((budget - decode rows) / ISL, chunked prefill), so the
    # wait per other client grows with the prompt; it adds to the flat startup_client_s, and nothing without
    # --startup-cohort. t_it and dP are the engine's round and what one prompt adds to it (step_terms).
    import dataclasses

    from specplan.profiles.registry import load_engine
    from specplan.serving.aggregated import gpu_tables, state, step_terms

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    c = np.array([1.0, 8.0, 64.0])
    b = np.array([0.5, 6.0, 50.0])
    eng = load_engine("vllm").model_copy(update={"startup_client_s": 0.0, "startup_prefill_frac": 0.25})
    assert eng.chunked_prefill and eng.mixed_prefill
    per_other = {}
    for isl in (1024, 4096):
        wl = Workload(isl, 256, concurrency=c, startup_cohort=True)
        tab = gpu_tables(m, hw, 1, wl, eng, StepOptions(Speculation("none", np.zeros(3))), prec, 64.0)
        t_it, d_p, _ = step_terms(tab, eng, b)
        k = (eng.max_num_batched_tokens - b) / isl  # one token per decoding request
        prompt_s = t_it / k + d_p
        _, x_on, on = state(tab, eng, wl, b)
        _, x_off, off = state(tab, eng, dataclasses.replace(wl, startup_cohort=False), b)
        np.testing.assert_allclose(on - off, (c - 1.0) * 0.25 * prompt_s, rtol=1e-9, atol=1e-15)
        np.testing.assert_array_equal(x_on, x_off)
        both = eng.model_copy(update={"startup_client_s": 2.5e-3})
        np.testing.assert_allclose(state(tab, both, wl, b)[2] - on, (c - 1.0) * 2.5e-3, rtol=1e-9, atol=1e-15)
        per_other[isl] = (on - off)[2] / 63.0
    assert per_other[4096] > 3.0 * per_other[1024]  # a four times longer prompt: about four times the wait


def test_disaggregated_decode_iteration_is_the_engines_round():
    # (vllm-0.10: the synchronous round, whose host time adds to the GPU's; issue 40)
    # Disaggregated decode pools price each iteration as the engine's speculative round (issue 19): GPU extras
    # (draft extend, rejection) and the round's host time per sequence; they used to take eng.step_s of the bare
    # evaluate() iteration. Hand: at the solved decode batch B (between whole batches b0, b0 + 1, interpolated
    # linearly as the tables are), round_s(engine, iter + extras, b, D, q, kernels, draft kernels).
    from specplan.profiles.registry import load_engine
    from specplan.serving.aggregated import step_kernels
    from specplan.speculation.acceptance import Acceptance
    from specplan.speculation.round import RoundShape, round_gpu_extra_s, round_s
    from specplan.speculation.drafters import eagle3_head
    from specplan.speculation.speedup import evaluate

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    eng = load_engine("vllm-0.10").model_copy(update={"spec_host_per_seq_s": 2e-4})
    acc = Acceptance.from_rate(0.7)
    wl = Workload(1024, 256, concurrency=16, mode="disagg")
    r = disaggregated(Deployment(m, hw, engine=eng), Speculation("eagle3", 3, acc), wl)
    b = float(r["decode_batch"])
    head = eagle3_head(m, None)
    draft = (head, resolve_precision(head, hw, None, None))
    k = step_kernels(m, hw, 1)

    def at(bw):
        e = evaluate(Deployment(m, hw, tp=1, engine=eng, dtypes=Dtypes(dtype=prec.compute, kv_dtype=prec.kv)),
                     Speculation(mechanism="eagle3", draft_len=3.0, acceptance=acc), batch=bw,
                     context_len=wl.decode_context)
        q = float(e["verify_tokens"])
        gpu = float(e["iter_s"]) + float(round_gpu_extra_s(m, hw, 1, RoundShape(bw, 3.0, q, wl.decode_context),
                                                           "eagle3", draft))
        return float(round_s(eng, gpu, bw, 3.0, q, k, k * float(e["rho_d"])))

    b0 = float(np.floor(b))
    expect = at(b0) + (b - b0) * (at(b0 + 1) - at(b0))
    assert float(r["iteration_s"]) == pytest.approx(expect, rel=1e-9)
    # the round's host time is in it: 16 sequences x 200 us would be missing with the old pricing
    plain = load_engine("vllm-0.10")
    assert float(eng.step_s(1e-3, b, k, True)) == pytest.approx(float(plain.step_s(1e-3, b, k, True)))
    r0 = disaggregated(Deployment(m, hw, engine=plain), Speculation("eagle3", 3, acc), wl)
    assert float(r["iteration_s"]) > float(r0["iteration_s"]) + 0.5 * b * 2e-4


def test_disaggregated_decode_table_holds_every_whole_batch_up_to_64():
    # the decode iteration table is priced at every whole batch 1..64 (geometric beyond, up to the largest batch
    # asked for) and interpolated linearly between: at C = 64 beside C = 1000 (a table up to ~360) the decode batch
    # is 63.3, priced between the whole batches 63 and 64 (hand: one decode step each through the engine's step_s)
    from specplan.profiles.registry import load_engine
    from specplan.serving.aggregated import step_kernels

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    # graphs up to 64 and costly eager launches beyond: the step jumps between 64 and 65
    eng = load_engine("vllm-0.10").model_copy(update={"graph_max_batch": 64, "eager_launch_s": 1e-4})
    wl = Workload(1024, 256, concurrency=np.array([64.0, 1000.0]), mode="disagg")
    r = disaggregated(Deployment(m, hw, engine=eng), Speculation(), wl)
    b = float(r["decode_batch"][0])
    assert 63.0 < b < 64.0
    k = step_kernels(m, hw, 1)

    def at(bw):
        from specplan.speculation.speedup import evaluate

        gpu = float(evaluate(Deployment(m, hw, tp=1, engine=eng, dtypes=Dtypes(dtype=prec.compute, kv_dtype=prec.kv)),
                             batch=bw, context_len=wl.decode_context)["iter_s"])  # the engine's GPU step (its GEMM scales)
        return float(eng.step_s(gpu, bw, k, bw <= eng.graph_max_batch))

    assert float(r["iteration_s"][0]) == pytest.approx(at(63.0) + (b - 63.0) * (at(64.0) - at(63.0)), rel=1e-9)


@pytest.mark.parametrize("mode", ["agg", "disagg"])
def test_osl_two_has_one_decode_step(mode):
    # OSL 2: the prefill makes the first token, one decode step the second: a finite TPOT (that step), a decode
    # batch, tokens/s/user = 1 / TPOT, and Little's law over the whole request
    wl = Workload(1024, 2, concurrency=np.array([1.0, 16.0]), mode=mode)
    r = (aggregated if mode == "agg" else disaggregated)(Deployment("llama-3.1-8b", "h100-sxm", engine="vllm"),
                                                         Speculation(), wl)
    tpot = np.asarray(r["tpot_s"], dtype=float)
    assert np.all(np.isfinite(tpot)) and np.all(tpot > 0) and np.all(np.asarray(r["decode_batch"]) > 0)
    np.testing.assert_allclose(r["tokens_per_s_per_user"], 1.0 / tpot, rtol=1e-12)
    np.testing.assert_allclose(r["request_latency_s"], np.asarray(r["ttft_s"]) + tpot, rtol=1e-9)
    np.testing.assert_allclose(r["requests_per_s"] * r["request_latency_s"], [1.0, 16.0], rtol=1e-2)


def test_disaggregated_ttft_p90_above_its_mean_under_load():
    # the prefill wait is 0 with probability 1 - rho, else exponential: at a loaded prefill pool (rho >= 0.5) its
    # p90 lies above the mean, (w / rho) ln(rho / 0.1) > w, and p50 below the p90
    r = disaggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="vllm"), Speculation(),
                      Workload(8192, 256, concurrency=256, mode="disagg"))
    assert float(r["prefill_utilization"]) >= 0.5
    assert float(r["ttft_p90_s"]) > float(r["ttft_s"]) > 0 and float(r["ttft_p50_s"]) < float(r["ttft_p90_s"])


def test_kv_transfer_of_one_instance_pair_by_default():
    # without a GPU count, one prefill + one decode instance: 2 x TP GPUs, inside a node up to TP 4 on H100s (8)
    from specplan.serving.disaggregated import kv_transfer_s

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, None, None)
    for tp, link in ((4, 450e9), (8, 50e9)):
        assert kv_transfer_s(m, hw, tp, 8192, prec) == pytest.approx(8192 * KV_BYTES_PER_TOKEN_L8B / tp / link)


def test_an_open_loop_counts_requests_in_prefill_in_its_concurrency():
    # open loop at rate lambda: requests in flight = decode batch + lambda x TTFT (Little's law on both stages)
    from specplan.serving.aggregated import aggregated
    from specplan.serving.workload import Workload

    r = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="vllm"), Speculation(),
                   Workload(1024, 256, request_rate=5.0))
    assert float(r["concurrency"]) == pytest.approx(float(r["decode_batch"]) + 5.0 * float(r["ttft_s"]), rel=1e-12)
    assert float(r["ttft_s"]) > 0


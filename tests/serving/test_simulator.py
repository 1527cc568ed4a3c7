"""The request-level serving simulator (serving/simulator.py, step_table.py, sim_serving.py): it agrees with the
steady-state model where both hold, prefix hits cut exactly the hit tokens' prefill, a closed loop's first wave
queues as each engine packs its prompts (hand-summed steps), Little's law holds on its outputs, and bad input is
one line."""

import json
import subprocess
import sys

import numpy as np
import pytest

from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_engine, load_hardware, load_model
from specplan.serving.aggregated import aggregated, step_kernels
from specplan.serving.arrivals import closed_loop, lengths, open_loop, with_prefix_hit
from specplan.serving.prefill import mixed_step_s, StepMix
from specplan.serving.sim_serving import SimSetup, simulate_serving
from specplan.serving.simulator import SimConfig, SimRequests, admission_kind, simulate
from specplan.serving.step_table import build_step_table
from specplan.serving.workload import Workload
from specplan.speculation.round import round_s

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
from harness import run_cli  # noqa: E402
from specplan.model.deployment import Deployment
from specplan.speculation.spec import Speculation
from specplan.serving.aggregated import StepOptions
from specplan.speculation.spec import Speculation

M8 = "llama-3.1-8b"
SPEC0 = StepOptions(Speculation("none", 0))


@pytest.fixture(scope="module")
def h100_8b():
    m, hw = load_model(M8), load_hardware("h100-sxm")
    return m, hw, resolve_precision(m, hw, None, None)


@pytest.mark.parametrize("c", [1, 8, 32, 128, 256])
def test_steady_state_tpot_agrees_with_the_analytical_model(h100_8b, c):
    """A closed loop run long enough to settle (the first 3 rounds of requests left out) gives the steady-state
    model's TPOT within 3 % at concurrency 1-256 (Llama-3.1-8B, H100, vLLM, 512/512: the KV cache holds every
    client, so no preemption)."""
    m, hw, prec = h100_8b
    n = max(12 * c, 60)
    req = closed_loop(lengths(512, None, n, 0), lengths(512, None, n, 0), c)
    sim = simulate_serving(m, hw, req, SimSetup(1, load_engine("vllm"), prec, warmup=3 * c))
    ana = aggregated(Deployment(M8, "h100-sxm", engine="vllm"), Speculation(), Workload(512, 512, concurrency=c))
    assert sim.preemptions == 0
    assert sim.tpot_mean_s == pytest.approx(float(ana["tpot_s"]), rel=0.03)


def _one_client_ttft(h100_8b, hit):
    m, hw, prec = h100_8b
    req = closed_loop(lengths(8192, None, 3, 0), lengths(64, None, 3, 0), 1)
    req = req if hit is None else with_prefix_hit(req, hit)
    return simulate_serving(m, hw, req, SimSetup(1, load_engine("vllm"), prec)).ttft_p50_s


def test_prefix_hit_cuts_the_hit_tokens_prefill_at_one_client(h100_8b):
    """Llama-3.1-8B, H100, vLLM, ISL 8192, one client: with --prefix-hit 0.6 the prompt's first 4915 tokens are
    cached, so TTFT is one eager step of the 3277 other tokens attending to 4915 + their own (vLLM's budget of
    8192 holds them in one step): priced here by hand from prefill.mixed_step_s and the engine's step formula,
    and at most 0.7 x the TTFT without the hit (one step of all 8192)."""
    m, hw, prec = h100_8b
    eng = load_engine("vllm")
    full, hit = _one_client_ttft(h100_8b, None), _one_client_ttft(h100_8b, 0.6)
    assert hit <= 0.7 * full
    k = step_kernels(m, hw, 1, eng, prec)
    for tokens, ctx, got in ((8192, 0, full), (8192 - 4915, 4915, hit)):
        gpu = float(mixed_step_s(m, hw, 1, StepMix(0, 0, tokens, ctx), precision=prec, engine=eng))
        assert got == pytest.approx(float(eng.step_s(gpu, 1, k, False, tokens)), rel=0.02)


def _first_wave(h100_8b, engine, c):
    m, hw, prec = h100_8b
    eng = load_engine(engine)
    tab = build_step_table(m, hw, 1, eng, prec, SPEC0, b_max=c, ctx_max=1024 + 64, tok_max=8192)
    req = SimRequests(np.full(c, 1024), np.full(c, 64), np.zeros(c), np.ones(c))
    cfg = SimConfig(1024, 8192, 1e9, admission_kind(eng), clients=c)
    run = simulate(tab, eng, req, cfg)
    return run.first_token_s[:c] - run.arrival_s[:c], eng, m, hw, prec


def test_first_wave_sglang_packs_prompts_into_prefill_steps_of_their_own(h100_8b):
    """16 clients start together with 1024-token prompts: SGLang packs 8 prompts into each 8192-token prefill batch
    and runs both batches before any decode, so the last admitted client's TTFT is two prefill steps of 8 prompts,
    hand-priced (mixed_step_s with no decode rows, 8 prompts, and EngineProfile.step_s)."""
    ttft, eng, m, hw, prec = _first_wave(h100_8b, "sglang", 16)
    k = step_kernels(m, hw, 1, eng, prec)
    one = float(eng.step_s(float(mixed_step_s(m, hw, 1, StepMix(0, 0, 8192, 0, prefill_seqs=8), precision=prec,
                                              engine=eng)), 8, k, False, 8192))
    assert ttft[:8] == pytest.approx(np.full(8, one), rel=0.02)
    assert ttft[15] == pytest.approx(2 * one, rel=0.02)


def test_first_wave_vllm_budget_mixes_the_running_rows_first(h100_8b):
    """The same 16 clients on vLLM: step 1 prefills 8 prompts (8192 tokens); step 2 runs the 8 running requests'
    decode rows first and fills the 8184 tokens left with 8 prompts' chunks (the eighth cut at 1016 tokens); step 3
    finishes its last 8 tokens beside 15 decode rows. The last client's TTFT is those three hand-priced steps
    (mixed_step_s; speculation.round.round_s for a step with decode rows), a step more than SGLang's two."""
    ttft, eng, m, hw, prec = _first_wave(h100_8b, "vllm", 16)
    k = step_kernels(m, hw, 1, eng, prec)
    s1 = float(eng.step_s(float(mixed_step_s(m, hw, 1, StepMix(0, 0, 8192, 0, prefill_seqs=8), precision=prec,
                                             engine=eng)), 8, k, False, 8192))
    g2 = float(mixed_step_s(m, hw, 1, StepMix(8, 1024, 8184, 0, prefill_seqs=8), precision=prec, engine=eng))
    s2 = float(round_s(eng, g2, 16, 0, 1, k, 0, eager=True, prompt_tokens=8184))
    g3 = float(mixed_step_s(m, hw, 1, StepMix(15, 1025, 8, 1016), precision=prec, engine=eng))
    s3 = float(round_s(eng, g3, 16, 0, 1, k, 0, eager=True, prompt_tokens=8))
    assert ttft[15] == pytest.approx(s1 + s2 + s3, rel=0.03)
    assert ttft[0] == pytest.approx(s1, rel=0.02)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_littles_law_on_the_simulated_outputs(h100_8b, engine):
    """Open loop at 4 requests/s (below capacity): the time-average of requests in the system, integrated step by
    step, equals throughput x mean latency from the per-request times (L = X W, within 1 %); a closed loop of 16
    clients keeps 16 in the system until its last round drains."""
    m, hw, prec = h100_8b
    eng = load_engine(engine)
    n = 400
    req = open_loop(lengths(1024, None, n, 0), lengths(128, None, n, 1), 4.0, seed=3)
    s = simulate_serving(m, hw, req, SimSetup(1, eng, prec))
    assert s.mean_in_system == pytest.approx(s.requests_per_s * s.e2e_mean_s, rel=0.01)
    cl = simulate_serving(m, hw, closed_loop(lengths(1024, None, 320, 0), lengths(128, None, 320, 0), 16),
                          SimSetup(1, eng, prec))
    assert 0.9 * 16 < cl.mean_in_system <= 16.0 + 1e-9


def run(*args):
    r = run_cli(list(args), timeout_s=600)
    assert not r.exc and not r.hang, r.exc
    return subprocess.CompletedProcess(list(args), r.rc, r.out, r.err)


PRED = ("predict", "-m", M8, "-H", "h100-sxm", "--engine", "vllm")


def test_trace_replay_fills_the_analytical_json_blocks():
    """predict --workload (the shipped synthetic trace) answers serving.baseline with the simulated TTFT median,
    p90 and p99, TPOT and tokens/s/GPU, in order (p50 <= p90 <= p99)."""
    r = run(*PRED, "--workload", str(ROOT / "specplan" / "data" / "traces" / "synthetic_chat.csv"), "--json")
    assert r.returncode == 0, r.stderr
    b = json.loads(r.stdout)["serving"]["baseline"]
    assert 0 < b["ttft_ms"] <= b["ttft_p90_ms"] <= b["ttft_p99_ms"]
    assert b["tpot_ms"] > 0 and b["tokens_per_s_per_gpu"] > 0
    assert b["simulated"]["requests"] == 300


@pytest.mark.parametrize("args, needle", [
    (("--workload", "TRACE"), "missing column 'osl'"),
    (("--isl", "512", "--osl", "64", "--request-rate", "-2", "--simulate"), "--request-rate"),
    (("--isl", "512", "--osl", "64", "--concurrency", "4", "--prefix-hit", "1.5"), "--prefix-hit"),
    (("--isl", "512", "--osl", "64", "--concurrency", "4", "--isl-dist", "zipf:3"), "--isl-dist"),
    (("--isl", "512", "--osl", "64", "--request-rate", "2", "--arrival-cv", "-1"), "--arrival-cv"),
])
def test_bad_input_is_one_line_and_a_nonzero_exit(tmp_path, args, needle):
    """A trace missing a column, a negative rate, a hit fraction out of range, an unknown distribution: one line
    naming the flag or file and field, non-zero exit, no traceback."""
    bad = tmp_path / "t.csv"
    bad.write_text("arrival_s,isl\n0,10\n")
    r = run(*PRED, *[str(bad) if a == "TRACE" else a for a in args])
    assert r.returncode != 0
    err = r.stderr.strip()
    assert needle in err and "Traceback" not in err and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("d", [0, 3])
def test_step_overheads_lookup_is_round_s(engine, d):
    """The simulator's per-batch lookup of the engine's host / launch costs equals speculation.round.round_s at
    GPU times on both sides of the host time, eager or graphed, with and without prompt tokens."""
    from specplan.serving.simulator import StepOverheads

    eng = load_engine(engine)
    rnd = (float(d), 1.0 + d, 291.0, 40.0 if d else 0.0)
    ov = StepOverheads(eng, rnd, 300)
    for b in (1, 7, 64, 299):
        for gpu in (1e-5, 3e-3, 0.05):
            for eager, p in ((False, 0.0), (True, 0.0), (True, 700.0)):
                want = float(round_s(eng, gpu, b, *rnd, eager=eager, prompt_tokens=p))
                assert ov.step_s(gpu, b, eager, p) == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_trace_prefixes_hit_from_ids_and_from_mooncake_block_hashes(tmp_path):
    """A shared prefix_id is prefilled by its first request and found by later ones (prefix_len tokens); JSONL
    block hashes (Mooncake's hash_ids, 512 tokens a block) hit the leading blocks an earlier request computed, the
    run stopping at the first new block, at most the prompt less one token."""
    from specplan.serving.traces import cached_prefix_tokens, read_trace

    csv = tmp_path / "t.csv"
    csv.write_text("arrival_s,isl,osl,prefix_id,prefix_len\n0,1000,10,a,600\n1,900,10,a,600\n2,700,10,b,300\n"
                   "3,800,10,,0\n")
    assert cached_prefix_tokens(read_trace(str(csv))).tolist() == [0, 600, 0, 0]
    js = tmp_path / "t.jsonl"
    js.write_text('{"arrival_s": 0, "isl": 1500, "osl": 5, "hash_ids": [1, 2, 3]}\n'
                  '{"arrival_s": 1, "isl": 1400, "osl": 5, "hash_ids": [1, 2, 9]}\n'
                  '{"arrival_s": 2, "isl": 1024, "osl": 5, "hash_ids": [1, 2]}\n'
                  '{"arrival_s": 3, "isl": 600, "osl": 5, "hash_ids": [5, 1]}\n')
    assert cached_prefix_tokens(read_trace(str(js))).tolist() == [0, 1024, 1023, 0]


@pytest.mark.parametrize("c", [1, 8, 32])
def test_speculation_per_request_acceptance(h100_8b, c):
    """EAGLE-3 at D = 3 with an i.i.d. acceptance rate of 0.7 (AL (1 - 0.7^4) / 0.3 = 2.533): every request at that
    rate gives the steady-state TPOT within 3 %; rates drawn per request around it (same mean AL) give a TPOT at
    least as long (the mean of 1 / AL_i is at least 1 / the mean AL) and within 6 %."""
    from dataclasses import replace

    from specplan.speculation.acceptance import Acceptance

    m, hw, prec = h100_8b
    acc = Acceptance.from_rate(0.7)
    n = max(12 * c, 60)
    req = closed_loop(lengths(512, None, n, 0), lengths(512, None, n, 0), c)
    setup = SimSetup(1, load_engine("vllm"), prec, mechanism="eagle3", draft_len=3, acceptance=acc, warmup=3 * c)
    fixed = simulate_serving(m, hw, replace(req, alpha=np.full(n, 0.7)), setup)
    drawn = simulate_serving(m, hw, req, setup)
    ana = float(aggregated(Deployment(M8, "h100-sxm", engine="vllm"), Speculation("eagle3", 3, acc),
                           Workload(512, 512, concurrency=c))["tpot_s"])
    assert fixed.acceptance_length == pytest.approx((1 - 0.7 ** 4) / 0.3, rel=1e-6)
    assert fixed.tpot_mean_s == pytest.approx(ana, rel=0.03)
    assert fixed.tpot_mean_s * 0.999 <= drawn.tpot_mean_s <= 1.06 * ana


def test_length_distributions_and_bursty_arrivals():
    """Named length distributions draw what they name (lognormal: the median; exponential: the mean; uniform: the
    bounds), whole tokens >= 1; gamma gaps at cv 3 have the rate's mean gap and a coefficient of variation near 3,
    Poisson (cv 1) near 1."""
    from specplan.serving.arrivals import draw_lengths, open_loop_arrivals, parse_length_dist

    x = draw_lengths(parse_length_dist("lognormal:1000,0.5", "--isl-dist"), 20000, 1)
    assert np.median(x) == pytest.approx(1000, rel=0.03) and x.min() >= 1 and x.dtype.kind == "i"
    assert np.mean(draw_lengths(parse_length_dist("exponential:300", "--osl-dist"), 20000, 2)) == pytest.approx(
        300, rel=0.03)
    u = draw_lengths(parse_length_dist("uniform:100,200", "--isl-dist"), 5000, 3)
    assert u.min() >= 100 and u.max() <= 200
    for cv in (1.0, 3.0):
        gaps = np.diff(open_loop_arrivals(5.0, 40000, 7, cv))
        assert gaps.mean() == pytest.approx(0.2, rel=0.05)
        assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.08)


def test_a_staggered_closed_loop_sends_each_request_once():
    """Found by the simulator's fuzz draws (tests/fuzz/test_fuzz_simulator.py): 48 clients whose starts are spaced
    over one request's latency, 50 requests in all, so the first clients finish and send the last requests before
    the late clients start: the late starts have nothing left to send (it raised IndexError). Every one of the 50
    requests is simulated and the loop never holds more than its 48 clients (Little's law)."""
    r = run("predict", "-m", "llama-3.2-1b", "-H", "a100-sxm-80gb", "--isl", "256", "--osl", "200",
            "--concurrency", "48", "--engine", "vllm-0.10", "--requests", "50", "--simulate", "--json")
    assert r.returncode == 0, r.stderr
    sim = json.loads(r.stdout)["serving"]["baseline"]["simulated"]
    assert json.loads(r.stdout)["serving"]["requests_simulated"] == 50 and 0 < sim["requests"] <= 50
    assert sim["requests_per_s"] * sim["e2e_mean_s"] <= 48 * 1.01


def test_startup_cohort_is_answered_by_the_simulator(h100_8b):
    """predict --startup-cohort at one concurrency is simulated (clients start together), not the analytical
    start-up term: 2 vLLM clients sending 1024-token prompts at 0 share one step of 2048 prompt tokens, so both
    TTFTs are that step, hand-priced (prefill.mixed_step_s with 2 prompts, EngineProfile.step_s); --simulate gives
    the same answer; without either the answer is the steady-state model's."""
    m, hw, prec = h100_8b
    eng = load_engine("vllm")
    base = PRED + ("--isl", "1024", "--osl", "8", "--concurrency", "2", "--requests", "2", "--json")
    got = json.loads(run(*base, "--startup-cohort").stdout)["serving"]
    assert got["method"] == "simulated" and "starting together" in got["arrivals"]
    gpu = float(mixed_step_s(m, hw, 1, StepMix(0, 0, 2048, 0, prefill_seqs=2), precision=prec, engine=eng))
    step = float(eng.step_s(gpu, 2, step_kernels(m, hw, 1, eng, prec), False, 2048))
    assert got["baseline"]["ttft_ms"] == pytest.approx(step * 1e3, rel=0.02)
    assert got["baseline"]["simulated"]["ttft_p99_s"] == pytest.approx(step, rel=0.02)
    sim = json.loads(run(*base, "--simulate").stdout)["serving"]
    assert sim["baseline"]["ttft_ms"] == pytest.approx(got["baseline"]["ttft_ms"], rel=1e-9)
    plain = json.loads(run(*PRED, "--isl", "1024", "--osl", "8", "--concurrency", "2", "--json").stdout)["serving"]
    assert plain.get("method") != "simulated"


def _trt_steps(h100_8b, eng, b_max, ctx_max):
    """Hand pricing of TensorRT-LLM steps on Llama-3.1-8B TP 1: a prompt step alone, a mixed step (decode rows
    beside whole prompts), a decode step (graph replay), from the analytical model's own functions."""
    m, hw, prec = h100_8b
    k = step_kernels(m, hw, 1, eng, prec)
    tab = build_step_table(m, hw, 1, eng, prec, SPEC0, b_max=b_max, ctx_max=ctx_max, tok_max=8192)

    def alone(tokens, seqs=1):
        gpu = float(mixed_step_s(m, hw, 1, StepMix(0, 0, tokens, 0, prefill_seqs=seqs), precision=prec, engine=eng))
        return float(eng.step_s(gpu, seqs, k, False, tokens))

    def mixed(b, ctx, tokens):
        gpu = float(mixed_step_s(m, hw, 1, StepMix(b, ctx, tokens, 0), precision=prec, engine=eng))
        return float(round_s(eng, gpu, b + 1, 0, 1, k, 0, eager=True, prompt_tokens=tokens))

    def decode(b, ctx):
        return float(round_s(eng, float(tab.decode_s(b, ctx)), b, 0, 1, k, 0))

    return tab, alone, mixed, decode


def test_trtllm_reserves_whole_prompts_within_its_token_budget(h100_8b):
    """3 TensorRT-LLM clients start together with 4096-token prompts. The idle PyExecutor's fetch blocks on the empty
    queue and returns the first request alone (executor_request_queue `_get_from_request_queue`: timeout None while
    no request is active, one `request_queue.get`), so step 1 prefills prompt 1 alone; the next fetch takes the
    other two, and max_num_tokens 8192 holds prompt 2 beside prompt 1's decode row but not prompt 3 (8193 tokens; no
    context chunking): prompt 3 rides step 3. TTFT: step 1; steps 1 + 2; steps 1 + 2 + 3, hand-priced."""
    eng = load_engine("trtllm")
    req = closed_loop(lengths(4096, None, 3, 0), lengths(64, None, 3, 0), 3, "together")
    tab, alone, mixed, _ = _trt_steps(h100_8b, eng, 3, 4096 + 64)
    s1, s2, s3 = alone(4096), mixed(1, 4096, 4096), mixed(2, 4096.5, 4096)
    run_ = simulate(tab, eng, SimRequests(req.isl, req.osl, req.cached_tokens, np.ones(3)),
                    SimConfig(2048, 8192, 1e9, admission_kind(eng), clients=3))
    ttft = run_.first_token_s - run_.arrival_s
    assert ttft == pytest.approx([s1, s1 + s2, s1 + s2 + s3], rel=0.02)


def test_trtllm_answers_its_clients_last_token_then_fetches(h100_8b):
    """TensorRT-LLM's overlap loop (py_executor.py `_executor_loop_overlap`: fetch, schedule, launch step n + 1,
    `_update_requests` of step n, `_handle_responses`) sends a request's last token (step n) while step n + 1 runs
    and fetches right after: the client's next request cannot be in that fetch (step n + 2's) and joins step n + 3.
    Two clients: A (64 / 2) and B (64 / 40). Step 1: A's prompt alone (the idle fetch returns one request); step 2:
    B's prompt beside A's decode row, A's last token; steps 3 and 4: B decodes (A's slot frees after step 3); step 5:
    A's next prompt beside B's row. Its TTFT is steps 3 + 4 + 5 (vLLM's rule would give steps 3 + 4)."""
    eng = load_engine("trtllm")
    req = closed_loop(lengths(64, None, 3, 0), np.array([2, 40, 2]), 2, "together")
    tab, _, mixed, decode = _trt_steps(h100_8b, eng, 3, 64 + 40)
    run_ = simulate(tab, eng, SimRequests(req.isl, req.osl, req.cached_tokens, np.ones(3)),
                    SimConfig(2048, 8192, 1e9, admission_kind(eng), clients=2))
    assert run_.arrival_s[2] == pytest.approx(run_.finish_s[0])
    hand = decode(1, 64) + decode(1, 65) + mixed(1, 66, 64)
    assert run_.first_token_s[2] - run_.arrival_s[2] == pytest.approx(hand, rel=0.02)


def test_kv_offload_adds_the_host_link_copy_of_the_hit_to_ttft():
    """--kv-offload keeps the cached prefix in host memory: at one client (Llama-3.1-8B, H100, vLLM, ISL 8192,
    --prefix-hit 0.6) TTFT is the HBM-hit TTFT plus the copy of the 4915 hit tokens' KV over PCIe Gen5 x16:
    4915 x 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 bytes = 644 MB at 64 GB/s = 10.07 ms (hand count)."""
    base = PRED + ("--isl", "8192", "--osl", "64", "--concurrency", "1", "--requests", "3", "--prefix-hit", "0.6",
                   "--json")
    hbm = json.loads(run(*base).stdout)["serving"]["baseline"]["ttft_ms"]
    host = json.loads(run(*base, "--kv-offload").stdout)["serving"]
    copy_ms = 4915 * 32 * 8 * 128 * 2 * 2 / 64e9 * 1e3
    assert host["baseline"]["ttft_ms"] - hbm == pytest.approx(copy_ms, rel=1e-3)
    assert "64 GB/s" in host["kv_offload"]


@pytest.mark.parametrize("args, needle", [
    (("-H", "gb300", "--prefix-hit", "0.6", "--kv-offload"), "host_link_bandwidth_bytes_s"),
    (("-H", "h100-sxm", "--kv-offload"), "--kv-offload"),
])
def test_kv_offload_bad_input_is_one_line(args, needle):
    """--kv-offload on hardware without a host-link figure, or without cached prefixes: one line, non-zero exit."""
    r = run("predict", "-m", M8, "--engine", "vllm", "--isl", "1024", "--osl", "8", "--concurrency", "1", *args)
    assert r.returncode != 0 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_d_schedule_expands_as_vllm_does():
    """vLLM's dense lookup (v1/spec_decode/dynamic/utils.py build_dynamic_sd_schedule_lookup, whose comment gives
    this example): [(1, 16, 3), (32, 128, 2)] maps batch sizes 17-31 to K = 3, and batches past the last range
    carry its K."""
    from specplan.serving.d_schedule import dense_schedule, parse_schedule

    k = dense_schedule(parse_schedule("1-16:3,32-128:2"), 200)
    assert list(k[[1, 16, 17, 31, 32, 128, 129, 200]]) == [3, 3, 3, 3, 2, 2, 2, 2]


SPEC = PRED + ("--isl", "1024", "--osl", "256", "--mechanism", "eagle3", "--acceptance-rate", "0.7", "--json")


def test_d_schedule_drafts_the_k_of_the_batch_the_step_holds():
    """predict --d-schedule: one client always holds a batch of 1, so '1-1:1,2-512:3' with --draft-len 3 drafts
    K = 1 every step: its TPOT is --draft-len 1's (not 3's); 64 clients hold 64, so '1-16:3,17-512:0' drafts
    nothing once they run and TPOT is the baseline's within 1 % (its D = 0 rounds keep the speculative launch's
    host costs)."""
    def spec(*args):
        return json.loads(run(*SPEC, *args).stdout)["serving"]

    one = spec("--concurrency", "1", "--draft-len", "3", "--d-schedule", "1-1:1,2-512:3")["speculative"]
    d1 = spec("--concurrency", "1", "--draft-len", "1", "--simulate")["speculative"]
    d3 = spec("--concurrency", "1", "--draft-len", "3", "--simulate")["speculative"]
    assert one["tpot_ms"] == pytest.approx(d1["tpot_ms"], rel=1e-6)
    assert abs(one["tpot_ms"] - d3["tpot_ms"]) > 0.1 * d3["tpot_ms"]
    many = spec("--concurrency", "64", "--draft-len", "3", "--d-schedule", "1-16:3,17-512:0")
    assert many["speculative"]["tpot_ms"] == pytest.approx(many["baseline"]["tpot_ms"], rel=0.01)


@pytest.mark.parametrize("sched, needle", [("0-4:2", "LO <= HI"), ("2-8:2", "start at batch 1"),
                                           ("1-8:2,4-16:1", "not overlap"), ("1-8", "LO-HI:K")])
def test_d_schedule_bad_input_is_one_line(sched, needle):
    """A schedule vLLM would refuse: one line naming --d-schedule, non-zero exit."""
    r = run(*SPEC[:-1], "--concurrency", "4", "--draft-len", "3", "--d-schedule", sched)
    assert r.returncode != 0 and "--d-schedule" in r.stderr and needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1

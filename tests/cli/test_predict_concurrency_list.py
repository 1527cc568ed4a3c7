"""predict --concurrency 1,8,... / --request-rate 1,4,...: the serving answer at several loads in one vectorized pass,
the same numbers as one predict per load; bad lists get one line and a non-zero exit."""

import json
import subprocess
import sys

import pytest

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]
BASE = ("predict", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--engine", "vllm", "--isl", "128", "--osl", "1024",
        "--mechanism", "eagle3", "-D", "3", "--acceptance-profile", "eagle3-llama-3.1-8b-mtbench")


sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
from harness import run_cli  # noqa: E402


def run(*args):
    """`specplan ARGS` in this process (the program's entry point: exit code, stdout, stderr), as a subprocess
    would answer without its second of imports per run."""
    r = run_cli(list(args), timeout_s=600)
    assert not r.exc and not r.hang, r.exc
    return subprocess.CompletedProcess(list(args), r.rc, r.out, r.err)


@pytest.fixture(scope="module")
def sweep():
    r = run(*BASE, "--concurrency", "1,17,32,128", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_each_point_equals_predict_at_that_concurrency(sweep):
    """The vectorized pass prices what one predict per concurrency prices. The step tables are priced on whole
    batches up to a run's largest concurrency (geometric beyond the first ones) and interpolated in log batch, so
    a concurrency between grid points (17 here) comes out within 1 % of its one-load run, not exactly."""
    points = sweep["serving"]["points"]
    assert [p["concurrency"] for p in points] == [1.0, 17.0, 32.0, 128.0]
    for p in points:
        r = run(*BASE, "--concurrency", f"{p['concurrency']:g}", "--json")
        assert r.returncode == 0, r.stderr
        one = json.loads(r.stdout)["serving"]
        for side in ("baseline", "speculative"):
            for k in ("tpot_ms", "ttft_ms", "tokens_per_s_per_gpu", "decode_batch"):
                assert p[side][k] == pytest.approx(one[side][k], rel=1e-2), (p["concurrency"], side, k)
        assert p["speedup_tpot"] == pytest.approx(one["speedup_tpot"], rel=1e-2)


def test_speedups_are_the_ratios_of_the_points(sweep):
    """TPOT speedup = baseline TPOT / speculative TPOT, throughput speedup = spec tok/s/GPU / baseline's; a closed
    loop holds Little's law, C = decode batch + requests/s x TTFT (no request waits for admission here)."""
    for p in sweep["serving"]["points"]:
        b, s = p["baseline"], p["speculative"]
        assert p["speedup_tpot"] == pytest.approx(b["tpot_ms"] / s["tpot_ms"], rel=1e-6)
        assert p["speedup_throughput"] == pytest.approx(s["tokens_per_s_per_gpu"] / b["tokens_per_s_per_gpu"],
                                                        rel=1e-6)
        for x in (b, s):
            assert x["decode_batch"] + x["requests_per_s"] * x["ttft_ms"] / 1e3 == pytest.approx(p["concurrency"],
                                                                                                 rel=1e-3)


def test_table_has_one_row_per_concurrency():
    r = run(*BASE, "--concurrency", "1,8,64")
    assert r.returncode == 0, r.stderr
    rows = [ln.split() for ln in r.stdout.splitlines() if ln.split() and ln.split()[0].replace(".", "").isdigit()]
    assert [float(x[0]) for x in rows] == [1.0, 8.0, 64.0]
    assert "TPOT speedup" in r.stdout and "note: engine vllm" in r.stdout


@pytest.mark.parametrize("value, needle", [("1,8,x", "--concurrency: expected numbers"),
                                           ("1,0", "--concurrency: must be >= 1"),
                                           ("1,nan", "--concurrency: must be a finite number"),
                                           (",", "--concurrency: got no value"),
                                           (",".join(["8"] * 4097), "--concurrency: at most 4096 values, got 4097")])
def test_bad_lists_one_line(value, needle):
    r = run(*BASE, "--concurrency", value)
    assert r.returncode != 0
    assert needle in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("opt, values", [("--concurrency", ["4", "64"]), ("--request-rate", ["2", "20"])])
def test_disaggregated_lists_equal_one_load_at_a_time(opt, values):
    """--mode disagg --pools 1P2D: each listed load prices what predict at that one load prices."""
    args = (*BASE, "--mode", "disagg", "--pools", "1P2D")
    r = run(*args, opt, ",".join(values), "--json")
    assert r.returncode == 0, r.stderr
    points = json.loads(r.stdout)["serving"]["points"]
    for v, p in zip(values, points):
        one = json.loads(run(*args, opt, v, "--json").stdout)["serving"]
        assert p["pools"] == one["pools"] == "1P2D"
        for side in ("baseline", "speculative"):
            for k in ("tpot_ms", "ttft_ms", "tokens_per_s_per_gpu"):
                assert p[side][k] == pytest.approx(one[side][k], rel=1e-6), (v, side, k)


def test_request_rates_each_equal_predict_at_that_rate():
    """Open loop: each listed rate prices what predict at that one rate prices (the highest one saturates the engine
    here: unstable, no TTFT, its note says so)."""
    r = run(*BASE, "--request-rate", "1,16,64", "--json")
    assert r.returncode == 0, r.stderr
    points = json.loads(r.stdout)["serving"]["points"]
    assert [p["request_rate"] for p in points] == [1.0, 16.0, 64.0]
    for p in points:
        one = json.loads(run(*BASE, "--request-rate", f"{p['request_rate']:g}", "--json").stdout)["serving"]
        for side in ("baseline", "speculative"):
            assert p[side]["stable"] == one[side]["stable"]
            for k in ("tpot_ms", "ttft_ms", "decode_batch"):
                if one[side][k] is None:
                    assert p[side][k] is None
                else:
                    assert p[side][k] == pytest.approx(one[side][k], rel=5e-3), (p["request_rate"], side, k)
    assert not points[-1]["baseline"]["stable"] and "unstable" in points[-1]["baseline"]["note"]
    assert points[0]["baseline"]["tokens_per_s_per_gpu"] == pytest.approx(1.0 * 1024)  # X = lambda: OSL 1024 tok/s


@pytest.mark.parametrize("cmd", [["recommend", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--isl", "128", "--osl", "128",
                                  "--mechanisms", "eagle3", "--acceptance", "eagle3=0.8"]])
@pytest.mark.parametrize("opt", ["--concurrency", "--request-rate"])
def test_recommend_takes_one_load(cmd, opt):
    r = run(*cmd, opt, "4,8")
    assert r.returncode != 0 and f"{opt}: one value here" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_table_columns_are_the_json_points():
    """The printed sweep holds each point's baseline and speculative numbers in their own columns, and a row's note
    names its row (the two unstable rows have different capacities)."""
    args = (*BASE, "--request-rate", "1,64")
    js = json.loads(run(*args, "--json").stdout)["serving"]["points"]
    text = run(*args).stdout.splitlines()
    head = next(ln for ln in text if ln.startswith("req/s"))
    cols = [c.strip() for c in head.split("  ") if c.strip()]
    row = next(ln for ln in text if ln.startswith("1 ")).split()
    got = dict(zip(cols, row))
    p = js[0]
    assert float(got["spec tok/s/GPU"]) == pytest.approx(p["speculative"]["tokens_per_s_per_gpu"], rel=1e-3)
    assert float(got["spec TPOT ms"]) == pytest.approx(p["speculative"]["tpot_ms"], rel=1e-3)
    assert float(got["base TPOT ms"]) == pytest.approx(p["baseline"]["tpot_ms"], rel=1e-3)
    assert float(got["spec decode batch"]) == pytest.approx(p["speculative"]["decode_batch"], rel=1e-3)
    hi = js[1]
    for side in ("baseline", "speculative"):
        sat = hi[side]["saturation_requests_per_s"]
        assert f"note: req/s 64 {side}: unstable: arrivals (64 req/s) exceed capacity {sat:.4g} req/s" in text
        assert hi[side]["tpot_ms"] is None and hi[side]["tokens_per_s_per_user"] is None  # no steady state


def test_osl_1_list_prices_each_rate():
    """OSL 1 (the prefill alone): each listed rate gets its own TTFT (M/D/1 wait grows with the rate), the same as
    its one-rate run; the note is printed once for every row."""
    args = ("predict", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--isl", "1024", "--osl", "1")
    pts = json.loads(run(*args, "--request-rate", "1,20", "--json").stdout)["serving"]["points"]
    one = [json.loads(run(*args, "--request-rate", v, "--json").stdout)["serving"] for v in ("1", "20")]
    assert [p["baseline"]["ttft_ms"] for p in pts] == pytest.approx([o["baseline"]["ttft_ms"] for o in one], rel=1e-9)
    assert pts[1]["baseline"]["ttft_ms"] > pts[0]["baseline"]["ttft_ms"]
    text = run(*args, "--request-rate", "1,2,4").stdout
    assert text.count("no TPOT") == 1


def test_summary_comes_from_the_lowest_load_wherever_it_is_listed():
    """The model / precision / notes beside the table are those of the lowest load's step, in any list order."""
    args = ("predict", "-m", "deepseek-v3", "-H", "h200-sxm", "--tp", "8", "--engine", "trtllm", "--isl", "128",
            "--osl", "128", "--mechanism", "mtp", "-D", "3", "--acceptance-rate", "0.7")
    a = json.loads(run(*args, "--request-rate", "1e6,1", "--json").stdout)
    b = json.loads(run(*args, "--request-rate", "1,1e6", "--json").stdout)
    assert a["notes"] == b["notes"] and a["verify_tokens"] == b["verify_tokens"]


def test_pays_line_reads_the_speedups_in_load_order():
    """The sweep's one-line answer: loads where the same-load speedup is <= 1, in load order whatever the list
    order; a closed loop reads the throughput speedup, an open loop the TPOT speedup; loads without a steady state
    are named apart."""
    from specplan.cli.predict_render import pays_line

    pts = [{"concurrency": c, "speedup_throughput": x} for c, x in ((128, 0.9), (1, 1.5), (8, 1.2))]
    assert pays_line(pts, "concurrency", "concurrency") == (
        "speculation does not pay (throughput speedup <= 1) at concurrency 128; it pays at concurrency 1, 8")
    assert pays_line(pts[1:], "concurrency", "concurrency") == (
        "speculation pays at every listed load with a steady state (throughput speedup 1.200x-1.500x, the lowest at "
        "concurrency 8)")
    rates = [{"request_rate": 1.0, "speedup_tpot": 1.7}, {"request_rate": 64.0, "speedup_tpot": None}]
    assert pays_line(rates, "request_rate", "req/s").endswith("the lowest at req/s 1); no steady state at req/s 64")
    assert "TPOT speedup 1.700x-1.700x" in pays_line(rates, "request_rate", "req/s")

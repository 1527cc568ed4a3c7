"""recommend --objective tokens-per-gpu | cost | energy, one device and several (must-show 3)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE = ["recommend", "--model", "llama-3.1-8b", "--isl", "128", "--osl", "1024", "--max-tpot-ms", "8", "--engine",
        "vllm", "--mechanisms", "eagle3", "--acceptance", "eagle3=0.8", "--json"]


def run(*args):
    r = subprocess.run([sys.executable, "-m", "specplan", *args], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_objective_energy_ranks_by_joules_per_token_and_can_pick_another_point():
    e = run(*BASE, "-H", "h100-sxm", "--objective", "energy")
    t = run(*BASE, "-H", "h100-sxm")
    ok = [x for x in e["ranked"] if x["feasible"]]
    assert [x["joules_per_token"] for x in ok] == sorted(x["joules_per_token"] for x in ok)
    assert e["best"]["joules_per_token"] <= t["best"]["joules_per_token"]
    assert t["best"]["tokens_per_s_per_gpu"] >= e["best"]["tokens_per_s_per_gpu"]
    # every row: J/token = W / (tokens/s/GPU); $/Mtok = $1.30 / (tokens/s/GPU x 3600 / 1e6) (H100 default price)
    for x in ok:
        assert x["joules_per_token"] == pytest.approx(x["power_w_per_gpu"] / x["tokens_per_s_per_gpu"], rel=1e-4)
        assert x["usd_per_mtok"] == pytest.approx(1.30 / (x["tokens_per_s_per_gpu"] * 3600 / 1e6), rel=1e-4)


def test_objective_cost_across_devices_picks_the_cheapest_per_token():
    r = run(*BASE, "-H", "h100-sxm", "-H", "h200-sxm", "-H", "b200", "--objective", "cost")
    costs = {d["hardware"]: d["best"]["usd_per_mtok"] for d in r["devices"]}
    assert set(costs) == {"h100-sxm", "h200-sxm", "b200"}
    assert r["best"]["hardware"] == min(costs, key=costs.get)
    # a price given without power adds energy: --gpu-hour-usd 1 --kwh-usd 0.1 costs more than --gpu-hour-usd 1
    a = run(*BASE, "-H", "h100-sxm", "--gpu-hour-usd", "1.0")
    b = run(*BASE, "-H", "h100-sxm", "--gpu-hour-usd", "1.0", "--kwh-usd", "0.1")
    x, y = a["best"], b["best"]
    assert x["usd_per_mtok"] == pytest.approx(1.0 / (x["tokens_per_s_per_gpu"] * 3600 / 1e6), rel=1e-4)
    assert y["usd_per_mtok"] - x["usd_per_mtok"] == pytest.approx(x["joules_per_token"] * 1.3 * 0.1 / 3.6, rel=1e-3)


def test_pareto_serving_writes_the_energy_frontier_and_figure(tmp_path):
    import csv

    r = subprocess.run([sys.executable, "-m", "specplan", "pareto", "--model", "llama-3.1-8b", "--hardware", "h100-sxm",
                        "--isl", "128", "--osl", "1024", "--engine", "vllm", "--mechanisms", "eagle3", "--acceptance",
                        "eagle3=0.8", "--max-draft-len", "4", "-o", str(tmp_path), "--figures", "energy"],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "serving_energy_frontier.png").stat().st_size > 10_000
    rows = list(csv.DictReader(open(tmp_path / "serving_energy_frontier.csv")))
    assert rows and all(float(x["power_w_per_gpu"]) <= 700.0 for x in rows)
    # along the frontier a faster user never costs fewer J/token (non-dominated in both)
    pts = sorted((float(x["tokens_per_s_per_user"]), float(x["joules_per_token"])) for x in rows)
    assert all(b[1] >= a[1] for a, b in zip(pts, pts[1:]))

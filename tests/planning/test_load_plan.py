"""recommend at a load over several devices (issue 42 must-show 2): GPUs, $/hour, $/Mtok per device, ranked."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from specplan.planning.load_plan import DeviceAtLoad, device_at_load, rank_devices, usd_per_mtok

ROOT = Path(__file__).resolve().parents[2]
PRICES = yaml.safe_load((ROOT / "specplan" / "planning" / "prices.yaml").read_text())


def test_usd_per_mtok_closed_form():
    # 3 GPUs at $1.30 = $3.90/hour serving 50 req/s x 300 tokens = 15,000 tok/s = 54 Mtok/hour: $0.0722/Mtok
    assert usd_per_mtok(3.90, 15000.0) == pytest.approx(3.90 / 54.0)


def test_device_at_load_from_an_aggregated_answer():
    from types import SimpleNamespace as ns

    r = ns(hardware="h100-sxm", target_tps=15000.0, answer=ns(mode="agg", gpus=3),
           aggregated=ns(tp=1, replicas=3, mechanism="eagle3", draft_len=2, tokens_per_s_per_user=50.2,
                         joules_per_token=0.09))
    x = device_at_load(r, 1.30)
    assert (x.gpus, x.layout, x.mechanism, x.draft_len) == (3, "3 x TP 1", "eagle3", 2)
    assert x.usd_per_hour == pytest.approx(3.90) and x.usd_per_mtok == pytest.approx(3.90 / 54.0)
    none = device_at_load(ns(hardware="a100-sxm", target_tps=15000.0, answer=None, infeasible="too slow",
                             prefill_unreachable=None), 1.0)
    assert none.gpus is None and none.why == "too slow"


def test_rank_devices_puts_the_cheapest_first_and_the_infeasible_last():
    def row(hw, gpus, usd, j):
        return DeviceAtLoad(hw, gpus, "agg", "-", "none", 0, 50.0, 1.0, usd, usd, j, None)

    rows = [row("a", 3, 3.9, 0.05), row("b", None, None, None), row("c", 2, 2.8, 0.09)]
    assert [x.hardware for x in rank_devices(rows, "cost")] == ["c", "a", "b"]
    assert [x.hardware for x in rank_devices(rows, "energy")] == ["a", "c", "b"]
    assert [x.hardware for x in rank_devices(rows, "tokens-per-gpu")] == ["c", "a", "b"]


def test_must_show_2_one_command_over_three_devices():
    """recommend -m llama-3.1-8b -H h100-sxm -H h200-sxm -H b200 --isl 1000 --osl 300 --request-rate 50
    --max-tpot-ms 20 --objective cost: each device's whole GPUs with its $/hour (GPUs x the price table's $/GPU-hour)
    and $/Mtok (over 50 x 300 tokens/s), speculation considered (the shipped EAGLE-3 profile), ranked by $/Mtok."""
    r = subprocess.run([sys.executable, "-m", "specplan", "recommend", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-H",
                        "h200-sxm", "-H", "b200", "--isl", "1000", "--osl", "300", "--request-rate", "50",
                        "--max-tpot-ms", "20", "--objective", "cost", "--json"], capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["target_tps"] == 15000 and out["target_tps_per_user"] == pytest.approx(50.0)
    devs = out["devices"]
    assert sorted(d["hardware"] for d in devs) == ["b200", "h100-sxm", "h200-sxm"]
    tier = PRICES["default_tier"]
    for d in devs:
        price = PRICES["devices"][d["hardware"]]["gpu_hour_usd"][tier]
        assert d["gpus"] >= 1 and d["usd_per_hour"] == pytest.approx(d["gpus"] * price)
        assert d["usd_per_mtok"] == pytest.approx(d["usd_per_hour"] / (15000 * 3600 / 1e6))
        assert d["tokens_per_s_per_user"] >= 50.0 - 1e-6
    assert [d["usd_per_mtok"] for d in devs] == sorted(d["usd_per_mtok"] for d in devs)
    assert out["best"] == devs[0]
    assert any(d["mechanism"] != "none" for d in devs)  # speculation considered: EAGLE-3's shipped profile
    h100 = next(d for d in devs if d["hardware"] == "h100-sxm")
    assert h100["gpus"] > 1  # one H100 cannot hold 15,000 tok/s at 50 tok/s/user: replicas


def test_load_target_of_the_options_by_hand():
    """--request-rate R gives R x OSL output tokens/s; a user's rate is --target-tps-per-user or 1000 / --max-tpot-ms."""
    import pytest

    from specplan.core.errors import SpecplanError
    from specplan.planning.options import LoadTarget

    lt = LoadTarget.of_load(20.0, None, None, 20.0, 1024, 256)
    assert (lt.tps, lt.tps_per_user, lt.isl, lt.osl) == (5120.0, 50.0, 1024, 256)
    assert LoadTarget.of_load(None, 20000.0, 40.0, 20.0, 1024, 256).tps_per_user == 40.0  # the explicit rate wins
    with pytest.raises(SpecplanError, match="--max-tpot-ms or --target-tps-per-user"):
        LoadTarget.of_load(None, 20000.0, None, None, 1024, 256)

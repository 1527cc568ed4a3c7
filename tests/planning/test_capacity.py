"""recommend --target-tps: the smallest GPU count for a load, checked by brute force over the same space.

Must-show 3 of issue 9: DeepSeek-V3 on H200, ISL 2048 / OSL 2048, MTP at acceptance rate 0.8, >= 50 tokens/s/user,
20,000 tokens/s in total, up to 64 GPUs."""

import dataclasses
import json

import numpy as np
import pytest

from specplan.planning.capacity import candidate_layouts, prefill_gpus, search
from specplan.core.errors import SpecplanError
from specplan.costs.precision import resolve_precision
from specplan.profiles.registry import load_hardware, load_model
from specplan.speculation.acceptance import Acceptance
from specplan.speculation.speedup import evaluate
from specplan.planning.options import LoadTarget
from specplan.speculation.spec import DraftSearch
from specplan.model.deployment import Deployment
from specplan.speculation.spec import Speculation

LOAD = LoadTarget(20000.0, 50.0, isl=2048, osl=2048)
ARGS = dict(load=LOAD, max_gpus=64, drafts=DraftSearch(["mtp"], {"mtp": 0.8}, 8))


@pytest.fixture(scope="module")
def answer():
    return search("deepseek-v3", "h200-sxm", **ARGS)


def _meets(lay, decode_gpus, m, hw):
    """Brute force: does any (mechanism, D, batch) of `decode_gpus / lay.gpus` instances of `lay` meet both targets?"""
    if decode_gpus <= 0 or decode_gpus % lay.gpus:
        return False
    n = decode_gpus // lay.gpus
    for mech, ds in (("none", [0]), ("mtp", range(1, 9))):
        for d in ds:
            for b in (np.arange(1, 4097, dtype=float),):
                r = evaluate(Deployment(m, hw, layout=lay),
                             Speculation(mechanism=mech, draft_len=d, acceptance=None if mech == "none" else Acceptance.from_rate(0.8)),
                             batch=b, context_len=2048 + 1024)
                user = np.asarray(r["tokens_per_s_per_user"])
                ok = np.asarray(r["fits"]) & (user >= 50.0) & (n * b * user >= 20000.0)
                if ok.any():
                    return True
    return False


def test_answer_meets_both_targets(answer):
    b = answer["best"]
    assert b is not None and b["gpus"] % 8 == 0 and b["gpus"] <= 64
    m, hw = load_model("deepseek-v3"), load_hardware("h200-sxm")
    lay = next(x for x in candidate_layouts(m, 8, 64) if x.name == b["layout"])
    r = evaluate(Deployment(m, hw, layout=lay),
                 Speculation(mechanism=b["mechanism"], draft_len=b["draft_len"], acceptance=Acceptance.from_rate(0.8)),
                 batch=b["batch"], context_len=3072)
    user = float(r["tokens_per_s_per_user"])
    assert bool(r["fits"]) and user >= 50.0
    assert b["instances"] * lay.gpus + b["prefill_gpus"] == b["gpus"]
    assert b["instances"] * b["batch"] * user >= 20000.0


def test_no_smaller_count_meets_both_by_brute_force(answer):
    """Every count below the answer, every split into a prefill pool of whole nodes that keeps up with the
    request rate and a decode pool, every candidate layout, mechanism, D and batch: none meets both targets."""
    m, hw = load_model("deepseek-v3"), load_hardware("h200-sxm")
    need, _ = prefill_gpus(m, hw, resolve_precision(m, hw, None, None), 2048, 2048, 20000.0, 8)
    assert need >= 8  # 20,000 / 2048 requests/s need at least one prefill node
    lays = candidate_layouts(m, 8, 64)
    for g in range(8, answer["best"]["gpus"], 8):
        for pre in range(need, g, 8):
            for lay in lays:
                assert not _meets(lay, g - pre, m, hw), (g, pre, lay.name)
    assert "16 GPUs" in answer["smaller_fails"] and "< 20,000" in answer["smaller_fails"]


_SEARCHES = {}  # the searches the CLI tests ran, by their arguments


@pytest.fixture
def cli(monkeypatch):
    """Run `specplan ARGS` in process (typer's CliRunner) -> (exit code, stdout); a search with arguments an earlier
    run of this module searched gets a copy of that result (the JSON and the text answer of one question come from
    one search)."""
    import copy

    from typer.testing import CliRunner

    import specplan.planning.capacity as cap
    from specplan.cli import app

    real = cap.search

    def once(*a, **k):
        key = repr((a, sorted(k.items())))
        if key not in _SEARCHES:
            _SEARCHES[key] = real(*a, **k)
        return copy.deepcopy(_SEARCHES[key])

    monkeypatch.setattr(cap, "search", once)

    def run(*args):
        r = CliRunner().invoke(app, list(args))
        return r.exit_code, r.stdout

    return run


def test_cli_answers_with_a_layout_and_gpu_count(answer, cli):
    args = ["recommend", "--model", "deepseek-v3", "--hardware", "h200-sxm", "--isl", "2048", "--osl", "2048",
            "--mechanisms", "mtp", "--acceptance", "mtp=0.8", "--target-tps-per-user", "50", "--target-tps", "20000",
            "--max-gpus", "64"]
    rc, js = cli(*args, "--json")
    assert rc == 0, js
    out = json.loads(js)
    assert out["best"]["gpus"] == answer["best"]["gpus"] and out["best"]["layout"] and out["smaller_fails"]
    rc, txt = cli(*args)
    assert rc == 0, txt
    assert f"answer: {answer['best']['gpus']} GPUs" in txt and "why not fewer:" in txt


def test_unreachable_per_user_target_is_explained():
    r = search("deepseek-v3", "h200-sxm", **{**ARGS, "load": dataclasses.replace(LOAD, tps_per_user=5000.0),
                                                "max_gpus": 16})
    assert r["best"] is None and "5000 tokens/s/user" in r["infeasible"]
    with pytest.raises(SpecplanError, match="both --isl and --osl"):
        search("deepseek-v3", "h200-sxm", **{**ARGS, "load": dataclasses.replace(LOAD, osl=None)})


def test_the_answer_is_the_fewer_gpus_of_both_modes():
    """answer_of by hand: the aggregated replicas win with fewer GPUs inside the budget; the disaggregated pools on a
    tie or when the replicas are over the budget; None when neither meets the targets."""
    from types import SimpleNamespace as agg

    from specplan.planning.capacity import answer_of

    d = agg(gpus=48)
    assert dict(answer_of(d, agg(gpus=40, fits_budget=True))) == {"mode": "agg", "gpus": 40}
    assert dict(answer_of(d, agg(gpus=48, fits_budget=True))) == {"mode": "disagg", "gpus": 48}
    assert dict(answer_of(d, agg(gpus=40, fits_budget=False))) == {"mode": "disagg", "gpus": 48}
    assert dict(answer_of(None, agg(gpus=40, fits_budget=True))) == {"mode": "agg", "gpus": 40}
    assert answer_of(None, None) is None and answer_of(None, agg(gpus=9, fits_budget=False)) is None


def test_cli_answers_aggregated_when_its_replicas_need_fewer_gpus(cli):
    """Llama-3.3-70B on H100 at 20,000 tokens/s and >= 30 tokens/s/user: 9 aggregated TP-4 replicas (36 GPUs,
    2,273 tokens/s each: 20,457 >= 20,000) beat the disaggregated 48; the answer line said 48 before."""
    args = ["recommend", "-m", "llama-3.3-70b", "-H", "h100-sxm", "--isl", "2048", "--osl", "512", "--target-tps",
            "20000", "--target-tps-per-user", "30", "--max-ttft-ms", "2000", "--mechanisms", "eagle3", "--acceptance",
            "eagle3=0.7"]
    out = json.loads(cli(*args, "--json")[1])
    a = out["aggregated"]
    assert a["replicas"] * a["tokens_per_s_per_replica"] >= 20000 > (a["replicas"] - 1) * a["tokens_per_s_per_replica"]
    assert out["answer"] == {"mode": "agg", "gpus": a["gpus"]} and a["gpus"] < out["best"]["gpus"]
    txt = cli(*args)[1]
    assert f"answer: {a['gpus']} GPUs, aggregated: {a['replicas']} x TP {a['tp']} replicas" in txt
    assert f"disaggregated: {out['best']['gpus']} GPUs" in txt and f"answer: {out['best']['gpus']} GPUs" not in txt


def test_without_a_ttft_target_the_answer_says_the_modes_ttfts_differ(cli):
    """Without --max-ttft-ms the prefill pool is sized to a TTFT of twice one prefill (a sizing rule) while the
    aggregated replicas have no TTFT limit; an aggregated answer then says both TTFTs (and how to hold them to one)."""
    args = ["recommend", "-m", "llama-3.3-70b", "-H", "h100-sxm", "--isl", "2048", "--osl", "512", "--target-tps",
            "20000", "--target-tps-per-user", "30", "--mechanisms", "eagle3", "--acceptance", "eagle3=0.7"]
    out = json.loads(cli(*args, "--json")[1])
    assert out["prefill_ttft_target_ms"] == pytest.approx(2e3 * out["prefill_s_per_request"])
    txt = cli(*args)[1]
    if out["answer"]["mode"] == "agg":
        assert (f"aggregated replicas' TTFT is {out['aggregated']['ttft_ms']:.0f} ms, the disaggregated prefill pool "
                f"is sized to {out['prefill_ttft_target_ms']:.0f} ms") in txt
    with_target = cli(*args, "--max-ttft-ms", "2000")[1]
    assert "no --max-ttft-ms" not in with_target

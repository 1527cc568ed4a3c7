"""recommend (serving) answers with the best D per concurrency band (issue 19 'D that changes with load'): each band
priced at its own steady state, the schedule in vLLM's and TensorRT-LLM's forms, the winner re-priced with it."""

import numpy as np
import pytest

from specplan.planning.recommend_serving import recommend_serving
from specplan.serving.aggregated import aggregated
from specplan.serving.workload import Workload
from specplan.speculation.acceptance import Acceptance
from specplan.planning.options import GridOptions, Ranking, Sla
from specplan.speculation.spec import DraftSearch, Speculation
from specplan.model.deployment import Deployment


def test_bands_take_the_d_of_most_tokens_per_gpu_and_the_winner_is_repriced_with_its_band():
    r = recommend_serving("llama-3.1-8b", "h100-sxm", Workload(128, 1024, concurrency=1), engine="vllm",
                          drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": "0.8"}, max_draft_len=6),
                          sla=Sla(max_tpot_ms=8), grid=GridOptions(search_concurrency=True))
    s = r["d_by_load"]
    acc = Acceptance.from_rate(0.8)
    # each band, brute force one D at a time at the band's priced concurrency: the argmax of tokens/s/GPU
    for lo, hi, c, k, tps, x in s["bands"]:
        assert abs(c - np.sqrt(lo * hi)) < 1e-9
        dep, wl = Deployment("llama-3.1-8b", "h100-sxm", engine="vllm"), Workload(128, 1024, concurrency=c)
        each = [float(aggregated(dep, Speculation("eagle3" if dd else "none", dd, acc if dd else None),
                                 wl)["tokens_per_s_per_gpu"]) for dd in range(7)]
        assert k == int(np.argmax(each)), (lo, hi, each)
        # one vectorized pricing of all bands interpolates its GPU tables in log batch between grid points up to
        # the largest band: within 0.5 % of a pricing of that one concurrency alone
        assert abs(tps - each[k]) <= 5e-3 * each[k]
        assert abs(x - each[k] / each[0]) <= 1e-2 * x
    # vLLM ranges: contiguous from 1, neighbouring bands of one D merged; TensorRT-LLM keys their ends (upper batch
    # limits: llm_args.py @ 0004396, speculation off above the last), its smallest key carrying the largest D
    v = s["vllm"]
    assert v[0][0] == 1 and all(b[0] == a[1] + 1 for a, b in zip(v, v[1:]))
    assert all(a[2] != b[2] for a, b in zip(v, v[1:]))
    if s["trtllm"] is not None:
        assert s["trtllm"] == {hi: k for _, hi, k in v} and s["trtllm"][v[0][1]] == max(k for *_, k in v)
    # the winner's concurrency priced with the D of its band, beside its fixed D
    a = s["at_best"]
    best = r["best"]
    assert a["concurrency"] == best["concurrency"] and a["fixed_draft_len"] == best["draft_len"]
    band_d = next(k for lo, hi, k in v if lo <= a["concurrency"] <= hi)
    assert a["draft_len"] == band_d
    # one number per point (issue 42): the fixed D at the winner's concurrency is the ranked answer itself
    assert (a["fixed_tokens_per_s_per_gpu"], a["fixed_tpot_ms"]) == (best["tokens_per_s_per_gpu"], best["tpot_ms"])
    if a["draft_len"] == best["draft_len"]:
        assert (a["tokens_per_s_per_gpu"], a["tpot_ms"]) == (best["tokens_per_s_per_gpu"], best["tpot_ms"])
    else:  # another D at the same concurrency: priced alone, as aggregated prices it
        alone = aggregated(Deployment("llama-3.1-8b", "h100-sxm", engine="vllm"),
                           Speculation("eagle3", a["draft_len"], acc), Workload(128, 1024,
                                                                                concurrency=a["concurrency"]))
        assert a["tokens_per_s_per_gpu"] == pytest.approx(float(alone["tokens_per_s_per_gpu"]), rel=1e-9)


def test_no_schedule_without_speculation():
    r = recommend_serving("llama-3.1-8b", "h100-sxm", Workload(128, 256, concurrency=1), engine="vllm",
                          drafts=DraftSearch(mechanisms=["none"], max_draft_len=16),
                          grid=GridOptions(search_concurrency=True))
    assert "d_by_load" not in r


def test_each_ranked_row_reports_the_lowest_tpot_and_ttft_of_its_grid():
    # min_tpot_ms / min_ttft_ms (what an infeasible answer quotes as the best reachable) are the minimum over the
    # concurrencies searched for that (mechanism, D): checked against the kept grid, row by row
    r = recommend_serving("llama-3.1-8b", "h100-sxm", Workload(512, 256, concurrency=1), engine="vllm",
                          drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": "0.7"}, max_draft_len=3),
                          sla=Sla(max_tpot_ms=6), ranking=Ranking(top=20),
                          grid=GridOptions(search_concurrency=True, keep_grid=True))
    from specplan.planning.recommend_serving import grid_frame

    df = grid_frame(r["grid"])
    for row in r["ranked"]:
        g = df[(df["mechanism"] == row["mechanism"]) & (df["draft_len"] == row["draft_len"])]
        assert len(g) > 10
        assert row["min_tpot_ms"] == min(g["tpot_ms"])
        assert row["min_ttft_ms"] == min(g["ttft_ms"])


def test_energy_objective_picks_the_feasible_point_of_least_joules_per_token():
    r = recommend_serving("llama-3.1-8b", "h100-sxm", Workload(512, 256, concurrency=1), engine="vllm",
                          drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": "0.7"}, max_draft_len=3),
                          sla=Sla(max_tpot_ms=8), ranking=Ranking(objective="energy"),
                          grid=GridOptions(search_concurrency=True, keep_grid=True))
    from specplan.planning.recommend_serving import grid_frame

    df = grid_frame(r["grid"])
    ok = df[df["meets_sla"] & df["joules_per_token"].notna()]
    assert len(ok) > 10
    assert r["best"]["joules_per_token"] == min(ok["joules_per_token"])


def test_serving_grid_searches_d_up_to_8_by_default():
    from specplan.planning.recommend_serving import serving_grid

    g = serving_grid("llama-3.1-8b", "h100-sxm", Workload(512, 128, concurrency=np.array([1.0, 8.0])), engine="vllm",
                     drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": "0.7"}, max_draft_len=8))
    assert sorted(set(g["draft_len"])) == list(range(0, 9))


def test_grid_frame_keeps_every_priced_point_and_a_refined_point_once():
    """grid_frame: a pricing's points in order (pool by pool, load by load, column by column); a refined point whose
    (mechanism, D, concurrency, pools) an earlier point has is dropped, an unpriced one kept; an unstable point has
    no numbers (NaN). Hand-built blocks, so the expected frame is written out."""
    from types import SimpleNamespace

    from specplan.planning.recommend_serving import _grid_block, grid_frame

    tpot = np.array([[0.010, 0.020], [0.030, 0.040]])  # 2 loads x 2 columns
    arr = {"tpot_s": tpot, "ttft_s": tpot * 10, "tokens_per_s_per_user": 1 / tpot, "tokens_per_s_per_gpu": 2 / tpot}
    get = SimpleNamespace(**arr)  # the grid's per-point fields, as _GridPoints holds them
    stable = np.array([[True, True], [True, False]])
    yes = np.ones((2, 2), dtype=bool)
    main = _grid_block(("eagle3", np.array([1.0, 2.0]), np.array([[4.0, 4.0], [8.0, 8.0]]), [None, None]), get,
                       (stable, yes, yes), None)
    ref = _grid_block(("eagle3", np.array([1.0, 2.0]), np.array([[8.0, 8.0], [6.0, 6.0]]), [None, None]), get,
                      (yes, yes, yes), None, refined=True)
    df = grid_frame([main, ref])
    assert list(df["concurrency"].fillna(-1)) == [4.0, 4.0, 8.0, -1, 8.0, 6.0, 6.0]  # (8, D 1) refined: dropped
    assert list(df["draft_len"]) == [1, 2, 1, 2, 2, 1, 2]
    assert np.isnan(df["tpot_ms"][3]) and df["tpot_ms"][0] == pytest.approx(10.0)
    assert list(df.columns)[:4] == ["mechanism", "draft_len", "concurrency", "pools"]

"""Acceptance per dataset (issue 45): profiles from the published table, their AL(D) fit, the choice for a model,
mechanism and dataset or class, and --dataset on the commands."""

import csv
import json
import subprocess
import sys

import numpy as np
import pytest

from specplan.core.errors import SpecplanError
from specplan.profiles.registry import load_model
from specplan.speculation.acceptance import Acceptance, find_profile, profile_ids
from specplan.speculation.datasets import (TABLE, choices_for, choose, dataset_profile, dataset_profiles, fit_alpha,
                                           leave_one_out, loo_errors, parse_dataset)


def run(*args):
    return subprocess.run([sys.executable, "-m", "specplan", *args], capture_output=True, text=True)


def _csv_rows() -> dict:
    with open(TABLE, newline="", encoding="utf-8") as f:
        return {r["row_id"]: r for r in csv.DictReader(f)}


def test_at_least_40_profiles_each_naming_its_rows():
    rows = _csv_rows()
    profs = dataset_profiles()
    assert len(profs) >= 40
    assert all(p.rows and all(r in rows for r in p.rows) for p in profs)
    assert sum(len(p.rows) for p in profs) == len(rows) == 597  # every published number in exactly one profile
    assert len([p for p in profs if p.priced]) >= 40


def test_profiles_list_dataset_humaneval_lists_them():
    p = run("profiles", "list", "--dataset", "humaneval")
    assert p.returncode == 0, p.stderr
    ids = [x.id for x in dataset_profiles() if x.dataset == "humaneval"]
    assert len(ids) >= 40
    assert all(i in p.stdout for i in ids)
    q = run("profiles", "list", "--model", "qwen3-8b", "--dataset", "code", "--json")
    got = json.loads(q.stdout)
    assert got and all(r["model"] == "qwen3-8b" and r["class"] == "code" and r["rows"] for r in got)


def test_fit_alpha_closed_form_by_hand():
    # α = 0.8: AL(2) = 1 + 0.8 + 0.64 = 2.44, AL(4) = 1 + .8 + .64 + .512 + .4096 = 3.3616
    a, rms = fit_alpha([2, 4], [2.44, 3.3616])
    assert a == pytest.approx(0.8, abs=2e-6) and rms < 1e-3
    a1, rms1 = fit_alpha([2], [2.44])  # one D: the α that reproduces it
    assert a1 == pytest.approx(0.8, abs=2e-6) and rms1 < 1e-3
    # exact data: holding a point out predicts it exactly
    assert np.max(leave_one_out([1, 2, 3, 4], [1.8, 2.44, 2.952, 3.3616])) < 1e-3


def test_per_position_values_give_al_at_each_d():
    # vllm-accltest-llama-3.1-8b-instruct: 0.7296;0.5208;0.3545 (accepted_i / drafts), AL 2.60 at k = 3
    p = next(x for x in dataset_profiles() if x.rows == ("vllm-accltest-llama-3.1-8b-instruct",))
    assert p.d == (1.0, 2.0, 3.0)
    assert p.al == pytest.approx((1.7296, 2.2504, 2.6049))


def test_alpha_row_is_one_plus_alpha_at_d1():
    p = next(x for x in dataset_profiles() if "dsv3report-mtp-alpha-low" in x.rows)
    assert set(p.d) == {1.0} and sorted(p.al) == pytest.approx([1.85, 1.90])


def test_leave_one_out_median_within_5_percent():
    errs = loo_errors(3)
    assert len(errs) >= 5  # vLLM per-K sweeps, speculators k = 1..7, per-position rows
    assert float(np.median(np.concatenate([e for _, e in errs]))) <= 5.0


def test_chains_and_trees_apart_and_tree_tokens_priced():
    p = dataset_profile("eagle3-llama-3.1-8b-humaneval-eagle3paper-tree61-t0")
    assert p.shape == "tree" and p.tree_tokens == 61  # '60 total draft tokens' + the root
    assert p.acceptance().meta["tree_tokens"] == 61
    chain = dataset_profile("eagle3-llama-3.1-8b-humaneval-specbundle-chain-t0")
    assert chain.shape == "chain" and "tree_tokens" not in chain.acceptance().meta
    rows = _csv_rows()
    for q in dataset_profiles():  # no profile mixes temperatures
        assert len({rows[r]["temperature"].split(" ")[0] for r in q.rows}) == 1


def test_choice_code_vs_chat_differs_and_is_the_models_own():
    m = "llama-3.1-8b"
    code = choose(m, "eagle3", parse_dataset("code"))
    chat = choose(m, "eagle3", parse_dataset("chat"))
    assert code.profile.target == chat.profile.target == m and not code.borrowed and not chat.borrowed
    assert code.profile.dataset_class == "code" and chat.profile.dataset_class == "chat"
    assert code.profile.acceptance().al(3) != chat.profile.acceptance().al(3)
    # SpecBundle's Llama-3.1-8B HumanEval chain: AL 3.34 at D 3 (published, s3k1n4)
    assert code.profile.acceptance().al(3) == pytest.approx(3.34, rel=0.05)


def test_borrowing_is_said():
    ng = choose("llama-3.1-8b", "ngram", parse_dataset("chat"))
    assert ng.profile.target != "llama-3.1-8b" and "n-gram" in ng.line() and "borrowed model" in ng.line()
    fam = choose("llama-3.1-405b", "eagle3", parse_dataset("code"))  # not in the table: its family is
    assert fam.profile.family == "llama-3" and "same family llama-3" in fam.line()
    ag = choose("llama-3.1-8b", "eagle3", parse_dataset("agentic"))  # nothing published: code proxy
    assert ag.profile.dataset_class == "code" and "for agentic" in ag.line()
    assert choose("qwen2.5-7b", "eagle3", parse_dataset("code")).profile is None  # no family in the table


def test_only_t0_is_said():
    c = choose("llama-3.1-8b", "ngram", parse_dataset("humaneval"))  # Vicuna-13B PLD: EAGLE-3 paper, T = 0 only
    assert c.only_t0 and "only T = 0 is published" in c.line()
    e = choose("llama-3.1-8b", "eagle3", parse_dataset("humaneval"))  # EAGLE-3 paper also at T = 1
    assert not e.only_t0


def test_unknown_dataset_one_line():
    with pytest.raises(SpecplanError, match="--dataset: unknown dataset or class 'poetry'"):
        parse_dataset("poetry")
    assert parse_dataset("editing").dataset_class == "summarization"
    assert parse_dataset("HumanEval").dataset == "humaneval"


def test_dataset_profile_id_as_acceptance_and_shipped_unchanged():
    acc = Acceptance.from_profile("eagle3-llama-3.1-8b-mt-bench-vllm20780-chain")
    assert acc.kind == "rate" and acc.d_max == 7 and "vllm20780-llama3.1-8b-eagle3-k2" in acc.source
    assert "eagle3-llama-3.1-8b-mt-bench-vllm20780-chain" not in profile_ids()  # shipped defaults untouched
    assert find_profile("eagle3", "qwen3-8b") is None


def test_choices_for_skips_mtp_without_module_and_given():
    q, ch = choices_for(load_model("qwen3-8b"), "code", given={"dflash"})
    mechs = {c.mechanism for c in ch}
    assert "mtp" not in mechs and "dflash" not in mechs and "eagle3" in mechs


def test_recommend_dataset_code_vs_chat_cli():
    base = ["recommend", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--context", "4096", "--target-tps-per-user", "150",
            "--mechanisms", "eagle3,ngram"]
    out = {}
    for ds in ("code", "chat"):
        p = run(*base, "--dataset", ds, "--json")
        assert p.returncode == 0, p.stderr
        used = {ln.split(":")[0].strip(): ln.split(":")[1].split()[0] for ln in p.stderr.splitlines()[1:]}
        r = json.loads(p.stdout)
        out[ds] = (used, {x["mechanism"]: x["acceptance_length"] for x in r["per_mechanism"]})
    assert set(out["code"][0]) == {"eagle3", "ngram"}
    for mech in ("eagle3", "ngram"):
        assert out["code"][0][mech] != out["chat"][0][mech]
        assert out["code"][1][mech] != pytest.approx(out["chat"][1][mech], rel=0.02)


def test_predict_dataset_and_errors():
    p = run("predict", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-b", "1", "-c", "2048", "--mechanism", "eagle3",
            "-D", "3", "--dataset", "mt-bench")
    assert p.returncode == 0, p.stderr
    assert "eagle3-llama-3.1-8b-mt-bench" in p.stdout
    q = run("predict", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-b", "1", "-c", "2048", "--mechanism", "eagle3",
            "-D", "3", "--dataset", "poetry")
    assert q.returncode != 0 and "Traceback" not in q.stderr and "--dataset: unknown" in q.stderr


def test_study_dataset_field(tmp_path):
    from specplan.study.spec import expand, load_study, sweep_kwargs

    st = load_study({"name": "d", "base": {"model": "llama-3.1-8b", "hardware": "h100-sxm", "mechanisms": ["eagle3"],
                                          "dataset": "code"}})
    sc = expand(st)[0]
    assert sweep_kwargs(sc)["drafts"].acceptance["eagle3"] == choose("llama-3.1-8b", "eagle3", parse_dataset("code")).profile.id
    assert sc["acceptance_dataset"] and "humaneval" in sc["acceptance_dataset"][0]
    with pytest.raises(SpecplanError, match="base.dataset"):
        expand(load_study({"name": "d", "base": {"model": "llama-3.1-8b", "hardware": "h100-sxm", "dataset": "x"}}))


def test_docs_page_current():
    from specplan.docgen.acceptance_datasets import DOC, render

    assert DOC.read_text() == render()


def test_pareto_dataset_uses_the_profile(tmp_path):
    import pandas as pd

    p = run("pareto", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--tp", "1", "--context", "1024", "--mechanisms",
            "eagle3", "--max-draft-len", "4", "--batch-max", "4", "--dataset", "humaneval", "--no-plots",
            "--no-progress", "-o", str(tmp_path))
    assert p.returncode == 0, p.stderr
    pid = choose("llama-3.1-8b", "eagle3", parse_dataset("humaneval")).profile.id
    assert f"eagle3: {pid}" in p.stdout
    df = pd.read_parquet(tmp_path / "grid.parquet")
    al3 = df.loc[(df["mechanism"] == "eagle3") & (df["draft_len"] == 3), "acceptance_length"].unique()
    assert al3 == pytest.approx([float(dataset_profile(pid).acceptance().al(3))])
    # SpecBundle HumanEval s3k1n4: AL 3.34 at D 3; the 2-point fit reproduces it within its RMS error
    assert al3[0] == pytest.approx(3.34, rel=dataset_profile(pid).fit_rms_pct / 100 * 2)


def test_mapping_file_is_parsed_once_into_typed_entries():
    from specplan.speculation.datasets import mapping, read_table

    m = mapping()
    # mapping.yaml: "HumanEval": {name: humaneval, class: code}; Qwen3-4B (thinking enabled) names a variant
    assert (m.datasets["HumanEval"].name, m.datasets["HumanEval"].dataset_class) == ("humaneval", "code")
    assert m.targets["Qwen3-4B (thinking enabled)"].variant == "thinking on" and m.targets["Qwen3-8B"].variant == ""
    assert m.model_free == ("ngram",) and m.proxies["agentic"] == ("code", "summarization")
    assert [(r.prefix, r.draft_len) for r in m.assumed_draft_len][-1] == ("angelslim", 2.0)
    rows = read_table()
    assert len(rows) == 597 and rows[0].row_id == "eagle3paper-T0-v13b-sps-mtbench" and rows[0].value == "2.27"

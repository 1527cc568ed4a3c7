"""Issue 12, what users see: YAML paths never reloaded by id, study `8k` and nearest-field errors, one option
spelling everywhere, recommend's best-of-each-mechanism answer, the plots checked on the Figure objects, and
the vectorized table writer."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from specplan.core.errors import SpecplanError
from specplan.planning.options import DeploymentSpace, GridOptions, Ranking, Sla
from specplan.speculation.spec import DraftSearch
from specplan.planning.options import LoadTarget

REPO = Path(__file__).resolve().parents[2]


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "specplan", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def custom_profiles(tmp_path_factory):
    """A model and a device YAML whose ids are not built-in ones (copies of llama-3.1-8b / h100-sxm)."""
    from specplan.profiles.registry import load_hardware, load_model, write_profile_yaml

    d = tmp_path_factory.mktemp("profiles")
    m, h = d / "my-model.yaml", d / "my-gpu.yaml"
    write_profile_yaml(load_model("llama-3.1-8b").model_copy(update={"id": "my-llama"}), m)
    write_profile_yaml(load_hardware("h100-sxm").model_copy(update={"id": "my-h100"}), h)
    return m, h


# ------------------------------------------------------------------ Fails: paths are not reloaded by id

def test_pareto_with_yaml_paths_writes_tables_and_all_plots(custom_profiles, tmp_path):
    m, h = custom_profiles
    p = run("pareto", "-m", m, "-H", h, "-H", "b200", "--batch-max", "16", "--max-draft-len", "3", "--tp", "1",
            "--mechanisms", "eagle3", "--acceptance", "eagle3=0.8", "--no-progress", "--figures", "all",
            "--grid-csv", "-o", tmp_path / "o")
    assert p.returncode == 0, p.stderr
    for stem in ("frontier", "speedup_heatmap", "attention_tiles", "acceptance", "breakdown"):
        assert (tmp_path / "o" / f"{stem}.png").is_file(), stem
    import pandas as pd

    assert set(pd.read_csv(tmp_path / "o" / "grid.csv")["hardware"]) == {"my-h100", "b200"}


@pytest.mark.parametrize("cmd", [
    ["step", "-b", "4", "-c", "1k"],
    ["predict", "-b", "4", "-c", "1k", "--mechanism", "eagle3", "-D", "3", "--acceptance-rate", "0.8"],
    ["recommend", "-c", "1k", "--mechanisms", "eagle3", "--acceptance", "eagle3=0.8", "--max-draft-len", "4"],
    ["adaptive", "-c", "1k", "--trace", "0.9@8x20", "--max-draft-len", "4"],
])
def test_every_command_taking_a_path_runs_on_custom_ids(custom_profiles, cmd):
    m, h = custom_profiles
    p = run(*cmd, "-m", m, "-H", h)
    assert p.returncode == 0, p.stderr
    assert "my-llama" in p.stdout or "my-h100" in p.stdout or cmd[0] == "adaptive"


def test_profiles_show_and_study_take_custom_paths(custom_profiles, tmp_path):
    m, h = custom_profiles
    p = run("profiles", "show", m)
    assert p.returncode == 0 and "id: my-llama" in p.stdout
    study = tmp_path / "s.yaml"
    study.write_text(f"name: paths\nbase:\n  model: {m}\n  hardware: {h}\n  batch: [1, 8]\n  tp: [1]\n"
                     f"  max_draft_len: 2\n  mechanisms: {{ngram: 0.5}}\n"
                     f"variants:\n  - name: b200\n    hardware: b200\nplots: [frontier, attention]\n")
    p = run("study", study, "-o", tmp_path / "out", "--no-progress")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "out" / "attention_tiles.png").is_file()


# ------------------------------------------------------------------ Fails: study YAML context: [8k]

def test_study_context_takes_the_k_suffix():
    from specplan.study.spec import expand, load_study

    st = {"name": "k", "base": {"model": "llama-3.1-8b", "hardware": "h100-sxm", "context": ["8k", 1024, "2K"],
                                "mechanisms": {"ngram": 0.5}}, "summary_context": "8k"}
    sc = expand(load_study(st))[0]
    assert sc["grid"]["context"] == [8192, 1024, 2048]  # 8 x 1024, as the CLI reads 8k
    assert load_study(st).summary_context == 8192
    st["base"]["context"] = ["8x"]
    with pytest.raises(SpecplanError, match=r"base\.context\[0\]: must be an integer, got '8x'"):
        load_study(st)


def test_study_errors_name_the_file_and_the_nearest_field(tmp_path):
    from specplan.study.spec import expand, load_study

    f = tmp_path / "typo.yaml"
    f.write_text("name: t\nbase: {model: llama-3.1-8b, hardware: h100-sxm}\n"
                 "variants:\n  - {name: a, hardware: b200}\n  - {name: b, hardwre: b200}\n")
    with pytest.raises(SpecplanError) as e:
        load_study(f)
    assert str(e.value) == f"{f}: variants[1].hardwre: unknown field; did you mean hardware?"
    st = {"name": "t", "base": {"model": "llama-3.1-8b", "hardware": "h100-sxm"},
          "variants": [{"name": "a", "hardware": {"mem_bandwith_bytes_s": 1}}]}
    with pytest.raises(SpecplanError, match=r"variants\[0\]\.hardware\.mem_bandwith_bytes_s: unknown field; "
                                            r"did you mean mem_bandwidth_bytes_s\?"):
        expand(load_study(st))
    p = run("study", f, "-o", tmp_path / "o")
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "did you mean hardware?" in p.stderr


# ------------------------------------------------------------------ consistent interface

def _help(*cmd) -> str:
    p = run(*cmd, "--help")
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize("cmd", [["step"], ["predict"], ["recommend"], ["pareto"], ["study"], ["adaptive"],
                                 ["validate"], ["calibrate"], ["bench"], ["profiles", "list"],
                                 ["profiles", "show"], ["model", "import"]])
def test_help_has_no_bool_metavar_and_one_output_spelling(cmd):
    text = _help(*cmd)
    assert "<bool>" not in text
    if cmd[0] in ("pareto", "study", "validate", "calibrate", "bench", "model"):
        assert "-o, --out" in text


def test_serving_options_are_one_definition_in_every_command():
    import typer.main

    from specplan.cli import app

    cmd = typer.main.get_command(app)
    want = {"--engine", "--mode", "--isl", "--osl", "--concurrency", "--request-rate", "--pools"}
    helps = {}
    for name in ("predict", "recommend", "pareto"):
        opts = {o: (p.help, p.default) for p in cmd.commands[name].params for o in p.opts if o in want}
        assert set(opts) == want, name
        helps[name] = opts
    assert helps["predict"] == helps["recommend"]
    assert {k: v[0] for k, v in helps["pareto"].items()} == {k: v[0] for k, v in helps["predict"].items()}  # help
    assert helps["predict"]["--mode"][1] == "agg"
    assert helps["pareto"]["--mode"][1] is None  # pareto's serving frontier: agg and disagg unless --mode


def test_adaptive_help_shows_trace_brackets_and_sla_spelling():
    text = _help("adaptive")
    assert "alpha[@batch]xITER" in text and "--max-tpot-ms" in text and "--slo-tpot-ms" in text


def test_profiles_show_help_and_error_name_the_same_argument():
    assert "ID" in _help("profiles", "show").split("\n")[0]
    p = run("profiles", "show")
    assert p.returncode == 2 and "'ID'" in p.stderr
    p = run("profiles", "show", "h100-sx")
    assert p.returncode == 2 and p.stderr.startswith("error: ID: unknown profile id 'h100-sx'")


def test_predict_takes_the_recommend_spelling():
    import json

    base = ["predict", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-b", "8", "-c", "4k", "-D", "4", "--json"]
    a = json.loads(run(*base, "--mechanism", "eagle3", "--acceptance-rate", "0.8").stdout)
    b = json.loads(run(*base, "--mechanisms", "eagle3", "--acceptance", "eagle3=0.8").stdout)
    c = json.loads(run(*base, "--mechanism", "eagle3", "--acceptance", "0.8").stdout)
    assert a["speedup"] == b["speedup"] == c["speedup"] and a["acceptance_length"] == pytest.approx(
        (1 - 0.8 ** 5) / (1 - 0.8))  # i.i.d. AL = sum_{k=0..D} a^k
    p = run(*base, "--mechanism", "eagle3", "--acceptance", "ngram=0.8")
    assert p.returncode == 2 and "names ngram, but --mechanism is eagle3" in p.stderr


def test_recommend_and_pareto_take_the_singular_mechanism():
    import json

    p = run("recommend", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-c", "1k", "--mechanism", "ngram",
            "--acceptance", "ngram=0.5", "--max-draft-len", "4", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["mechanisms"] == ["ngram"]


def test_adaptive_sla_alias_gives_the_same_answer():
    base = ["adaptive", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-c", "1k", "--trace", "0.9@8x20",
            "--max-draft-len", "4", "--json"]
    a, b = run(*base, "--max-tpot-ms", "9"), run(*base, "--slo-tpot-ms", "9")
    assert a.returncode == 0, a.stderr
    assert a.stdout == b.stdout


def test_one_max_draft_len_default_everywhere():
    import typer.main

    from specplan.cli import app
    from specplan.planning.sweep import MAX_DRAFT_LEN

    cli = typer.main.get_command(app)
    for name in ("recommend", "pareto", "adaptive"):
        opt = next(p for p in cli.commands[name].params if p.name == "max_draft_len")
        assert opt.default == MAX_DRAFT_LEN == 32, name  # reaches G2's D = 128/4 - 1 = 31 of a G = 4 model
    from specplan.study.spec import sweep_kwargs

    assert sweep_kwargs({"grid": {}, "draft_model": None, "draft_hardware": None})["drafts"].max_draft_len == 32
    doc = (REPO / "docs" / "studies.md").read_text()
    assert "--max-draft-len" in doc and "default 32" in doc


# ------------------------------------------------------------------ answers: recommend and pareto

README_CMD = ["recommend", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--context", "4096",
              "--target-tps-per-user", "150", "--mechanisms", "eagle3,dflash,ngram", "--acceptance", "eagle3=0.8",
              "--acceptance", "dflash=0.7", "--acceptance", "ngram=0.4"]


def test_recommend_shows_the_best_of_each_mechanism():
    p = run(*README_CMD)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    head, _, rest = out.partition("best of each mechanism")
    table = rest.split("runners-up")[0]
    rows = [ln.split()[0] for ln in table.splitlines()[3:] if ln.strip()]
    assert rows[:1] == ["eagle3"] and set(rows) == {"eagle3", "dflash", "ngram", "none"}
    for ln in table.splitlines()[4:]:
        if ln.strip():
            assert re.search(r"-\d+\.\d%: ", ln), ln  # why it lost, by how much
    # notes are about the chosen operating point (batch 54 here), with digits enough to differ
    notes = [ln for ln in out.splitlines() if ln.startswith("note:")]
    assert notes and all("batch 54" in n or "batch 55" in n for n in notes)
    for a, b in re.findall(r"([\d.]+) GB > ([\d.]+) GB", out):
        assert a != b
    assert "terms: AL" in out and "G_dev" in out and "ridge" in out
    assert "G2 vs the choice: D = 6 < 31" in out  # G = 32/8 = 4 -> 128/4 - 1 = 31


def _step_row(**given):
    """A recommend row (planning/recommend.StepRow) with the fields a test names, the others zero."""
    from dataclasses import fields

    from specplan.planning.recommend import StepRow

    zero = {f.name: 0 for f in fields(StepRow) if f.name not in StepRow.OPTIONAL}
    return StepRow(**{**zero, "mechanism": "none", "feasible": True, **given})


def test_why_lost_splits_the_throughput_ratio():
    from specplan.planning.recommend import why_lost

    from dataclasses import replace

    best = _step_row(mechanism="eagle3", batch=50, acceptance_length=4.0, iter_s=0.02, draft_s=0.004,
                     target_devices=1, tokens_per_s_per_gpu=50 * 4.0 / 0.02)
    x = replace(best, mechanism="dflash", batch=40, acceptance_length=3.0, tokens_per_s_per_gpu=40 * 3.0 / 0.02)
    # 40 * 3 / (50 * 4) = 0.6 -> 40 % fewer tokens/s/GPU, from AL and (as a consequence) batch
    assert why_lost(x, best) == "-40.0%: AL 3.00 vs 4.00; so batch 40 vs 50"
    # a loser that runs a larger batch: its batch is not a reason (it helps): 60 x 3 / (50 x 4) = 0.9
    y = replace(best, mechanism="dflash", batch=60, acceptance_length=3.0, tokens_per_s_per_gpu=60 * 3.0 / 0.02)
    assert why_lost(y, best) == "-10.0%: AL 3.00 vs 4.00"
    # the same batch: only the AL
    z = replace(best, mechanism="dflash", acceptance_length=3.0, tokens_per_s_per_gpu=50 * 3.0 / 0.02)
    assert why_lost(z, best) == "-25.0%: AL 3.00 vs 4.00"
    # a slower iteration at the same batch and AL: 0.02 / 0.025 = 0.8
    it = replace(best, mechanism="dflash", iter_s=0.025, draft_s=0.006, tokens_per_s_per_gpu=50 * 4.0 / 0.025)
    assert why_lost(it, best) == "-20.0%: iteration 25.00 vs 20.00 ms (draft 6.00 vs 4.00)"


def test_gb_pair_prints_enough_digits():
    from specplan.planning.recommend import gb_pair

    assert gb_pair(77.34e9, 77.31e9) == ("77.34", "77.31")
    assert gb_pair(80.0e9, 77.3e9) == ("80.0", "77.3")


def test_pareto_states_its_defaults(tmp_path):
    p = run("pareto", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--batch-max", "8", "--tp", "1", "--no-plots",
            "--max-draft-len", "2", "-o", tmp_path)
    assert p.returncode == 0, p.stderr
    assert "context: 1,024 tokens (default" in p.stdout
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("mechanisms:"))
    assert "eagle3" in line and "default: those with a shipped acceptance profile" in line and "ngram" in line


# ------------------------------------------------------------------ plots (checked on the Figure objects)

def _boxes(fig, texts):
    r = fig.canvas.get_renderer()
    return [t.get_window_extent(r) for t in texts]


def test_frontier_labels_five_per_device_inside_and_disjoint(small_grid):
    from specplan import plots as P

    from specplan.planning.figures import frontier_figure

    fig = P.plot_frontier(frontier_figure(small_grid), title="t")
    ax = fig.axes[0]
    fig.draw_without_rendering()
    frame = ax.get_window_extent(fig.canvas.get_renderer())
    labels = [t for t in ax.texts if (t.get_gid() or "").startswith("frontier-label:")]
    for hw in ("h100-sxm", "b200"):
        assert sum((t.get_gid() or "").startswith(f"frontier-label:{hw}") for t in labels) >= 5, hw
        for ctx in (1024, 65536):  # two contexts: each (device, context) is its own curve, with its labels
            assert any(t.get_gid() == f"frontier-label:{hw}, context {ctx:,}" for t in labels), (hw, ctx)
    boxes = _boxes(fig, labels)
    for b in boxes:
        assert frame.x0 <= b.x0 and b.x1 <= frame.x1 and frame.y0 <= b.y0 and b.y1 <= frame.y1
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            assert not boxes[i].overlaps(boxes[j]), (labels[i].get_text(), labels[j].get_text())
    mechs = set(small_grid["mechanism"].astype(str)) | {"no spec"}
    for t in labels:
        m = re.fullmatch(r"(.+) \((\d+), (\d+), (\d+)\)", t.get_text())
        assert m and m.group(1) in mechs, t.get_text()


def test_breakdown_has_every_d_at_its_true_position():
    from specplan import plots as P

    ds = [0, 1, 2, 3, 5, 9, 16, 31]
    from specplan.planning.figures import step_breakdown

    fig = P.plot_breakdown(step_breakdown("llama-3.1-8b", "h100-sxm", 1, 8, 8192, draft_lens=ds))
    ax = fig.axes[0]
    centres = sorted({round(p.get_x() + p.get_width() / 2, 6) for p in ax.patches})
    assert centres == ds


def test_heatmap_colorbar_ticks_on_both_sides_of_one_and_every_batch_row(small_grid):
    import matplotlib.markers

    from specplan import plots as P

    fig = P.plot_speedup_heatmap(small_grid)
    cb = next(a for a in fig.axes if getattr(a, "_colorbar", None) is not None)
    lo, hi = cb.get_ylim()
    ticks = [t for t in cb.get_yticks() if lo - 1e-9 <= t <= hi + 1e-9]
    assert any(t < 1 for t in ticks) and any(t > 1 for t in ticks) and 1.0 in ticks
    ax = fig.axes[0]
    n_batches = small_grid["batch"].nunique()
    # a tick mark on every batch row: one line of tick markers on the left spine, outside the clip box
    marks = [ln for ln in ax.get_lines() if ln.get_gid() == "batch-row-ticks"]
    assert len(marks) == 1 and set(marks[0].get_ydata()) == set(range(n_batches))
    assert marks[0].get_marker() == matplotlib.markers.TICKLEFT and not marks[0].get_clip_on()
    assert set(marks[0].get_xdata()) == {0} and marks[0].get_transform() == ax.get_yaxis_transform()
    assert set(ax.get_yticks()) < set(range(n_batches))  # the labelled rows


def test_colorbar_ticks_closed_form():
    from specplan.plots import colorbar_ticks

    assert colorbar_ticks(0.6, 2.0) == pytest.approx([0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0])


def test_attention_tile_lines_that_coincide_stay_visible():
    from specplan import plots as P

    from specplan.planning.figures import attention_tiles

    fig = P.plot_attention_tiles(attention_tiles("h100-sxm"))
    for ax in fig.axes:
        lines = [ln for ln in ax.get_lines() if ln.get_label().startswith("G = ")]
        assert len(lines) == 8 and len(ax.get_legend().get_texts()) == 8
        marks = {(ln.get_marker(), tuple(ln.get_markevery())) for ln in lines}
        assert len(marks) == 8  # every line marks its own D values, so overlapping curves both show
        # the first context's lines are drawn wider than the second's, which sit on top of them
        assert min(ln.get_linewidth() for ln in lines[::2]) > max(ln.get_linewidth() for ln in lines[1::2]) or \
            min(ln.get_linewidth() for ln in lines[:4]) > max(ln.get_linewidth() for ln in lines[4:])


# ------------------------------------------------------------------ fast outputs

def test_csv_writer_matches_pandas_formatting_and_is_deterministic(small_grid, tmp_path):
    from specplan.core.tables import csv_bytes, write_table

    sub = small_grid.iloc[::37]
    want = sub.to_csv(index=False, float_format="%.6g", lineterminator="\n").encode()
    assert csv_bytes(sub) == want  # the old pandas output, byte for byte, for ordinary magnitudes
    write_table(small_grid, tmp_path / "a")
    write_table(small_grid, tmp_path / "b")
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()


def test_round_significant_by_hand():
    from specplan.core.tables import round_significant

    got = round_significant(np.array([123456789.0, 0.000123456789, -2.5, 0.0, np.nan, np.inf]))
    assert got[:4].tolist() == [123457000.0, 0.000123457, -2.5, 0.0]
    assert np.isnan(got[4]) and np.isinf(got[5])


# ------------------------------------------------------------------ study plots

def _study_figs(study):
    from specplan.study import spec as S
    from specplan.plots import study_plots as SP
    from specplan.planning.frontier import frontier
    from specplan.planning.sweep import sweep

    st = S.load_study(study)
    scs = S.expand(st)
    grids = [sweep(sc["model"], sc["hardware"], progress=False, **S.sweep_kwargs(sc)) for sc in scs]
    return st, scs, grids, [frontier(g) for g in grids], SP


def test_study_recommended_d_panels_whole_d_reference_lines_and_search_limit():
    """One panel per variant, D at its true whole value (no offsets: base and 'same' both read D = 3)."""
    study = {"name": "g", "base": {"model": "llama-3.1-8b", "hardware": "h100-sxm", "tp": [1], "batch": [1, 4, 16],
                                   "max_draft_len": 3, "context": [2048], "mechanisms": {"ngram": 0.9}},
             "variants": [{"name": "G 8", "model": {"num_kv_heads": 4}}, {"name": "same", "model": {}}]}
    st, scs, grids, fronts, SP = _study_figs(study)
    per_batch = []
    for sc, df in zip(scs, grids):
        fit = df[df["fits"] & (df["draft_len"] >= 1)]
        per_batch.append((sc["name"], fit.loc[fit.groupby("batch")["speedup"].idxmax().to_numpy()], 2048))
    fig = SP.plot_recommended_d(st, scs, [int(g["draft_len"].max()) for g in grids], per_batch)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == ["base", "G 8", "same"]
    for ax, (_, s, _) in zip(axes, per_batch):
        y = ax.get_lines()[0].get_ydata()
        assert np.array_equal(np.asarray(y, float), s["draft_len"].to_numpy(float))  # whole D, as recommended
        assert np.all(np.asarray(y) == np.round(y))
    texts = {ax.get_title(): [t.get_text() for t in ax.texts] for ax in axes}
    assert texts["base"] == ["D = 128/G − 1 = 31 (G = 4)"] and texts["G 8"] == ["D = 128/G − 1 = 15 (G = 8)"]
    refs = [ln for ln in axes[1].get_lines() if len(ln.get_ydata()) == 2 and ln.get_ydata()[0] == ln.get_ydata()[1]]
    assert refs and refs[0].get_ydata()[0] == 15  # 128 rows / G = 8 query heads per KV head - 1
    ringed = [ln for ln in axes[0].get_lines() if ln.get_markersize() == 11]
    assert ringed and np.all(ringed[0].get_ydata() == 3)  # alpha 0.9 picks D = 3 = the limit
    assert "at the search limit D = 3" in fig._suptitle.get_text()


def test_study_frontier_shows_the_lpu_chips_it_spends():
    study = {"name": "lpu", "base": {"model": "qwen3.5-122b-a10b", "hardware": "b200", "tp": [2], "batch": [1, 16],
                                     "max_draft_len": 3, "context": [8192], "draft_model": "qwen3.5-35b-a3b",
                                     "mechanisms": {"external": 0.8}},
             "variants": [{"name": "on LPU", "draft_hardware": "groq-3-lpu"}]}
    from specplan.planning.frontier import frontier

    st, scs, grids, fronts, SP = _study_figs(study)
    fig = SP.plot_frontier_variants(st, scs, fronts, [frontier(g, sets=["baseline", "overall"], per="device")
                                                      for g in grids])
    assert len(fig.axes) == 2  # per target GPU, and per device with the draft's chips counted
    assert "draft devices counted" in fig.axes[1].get_ylabel()
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    lpu = next(t for t in legend if t.startswith("on LPU"))
    chips = int(grids[1]["draft_devices"].max())
    assert "groq-3-lpu chips" in lpu and str(chips) in lpu and chips > 0


def test_study_summary_says_when_d_sits_at_the_search_limit(tmp_path):
    from specplan.study.spec import run_study

    study = {"name": "lim", "base": {"model": "llama-3.1-8b", "hardware": "h100-sxm", "tp": [1], "batch": [1, 4],
                                     "max_draft_len": 2, "context": [2048], "mechanisms": {"ngram": 0.95}}}
    s = run_study(study, tmp_path, progress=False)
    assert s["variants"][0]["best"]["draft_len"] == 2 == s["variants"][0]["max_draft_len_searched"]
    assert "(1, 2, 1) — at the search limit" in (tmp_path / "summary.md").read_text()


# ------------------------------------------------------------------ Fails: output modes follow the umask

def test_pareto_study_and_model_import_outputs_respect_the_umask(tmp_path):
    import os
    import stat

    def under_umask():
        os.umask(0o022)

    def go(*args):
        p = subprocess.run([sys.executable, "-m", "specplan", *map(str, args)], capture_output=True, text=True,
                           preexec_fn=under_umask, timeout=300)
        assert p.returncode == 0, p.stderr

    go("pareto", "-m", "llama-3.1-8b", "-H", "h100-sxm", "--batch-max", "4", "--max-draft-len", "2", "--tp", "1",
       "--mechanisms", "ngram", "--acceptance", "ngram=0.5", "--no-progress", "-o", tmp_path / "p")
    study = tmp_path / "s.yaml"
    study.write_text("name: m\nbase: {model: llama-3.1-8b, hardware: h100-sxm, batch: [1, 2], tp: [1], "
                     "max_draft_len: 1, mechanisms: {ngram: 0.5}}\n")
    go("study", study, "-o", tmp_path / "s", "--no-progress")
    go("model", "import", REPO / "reference" / "hf_configs" / "Qwen--Qwen3-8B_config.json", "-o", tmp_path / "m.yaml")
    files = [*(tmp_path / "p").iterdir(), *(tmp_path / "s").iterdir(), tmp_path / "m.yaml"]
    modes = {f.name: stat.S_IMODE(f.stat().st_mode) for f in files}
    assert len(modes) > 10 and set(modes.values()) == {0o644}, modes  # 0666 & ~0022, not mkstemp's 0600


def test_a_memory_bound_choice_says_the_next_batch_would_not_fit():
    # Llama-3.3-70B TP 4 at 32K context, 5 tok/s/user: the batch is bound by memory, and the note names the next
    # batch and its memory against the usable capacity (what that next batch needs, not the chosen one's)
    r = subprocess.run([sys.executable, "-m", "specplan", "recommend", "--model", "llama-3.3-70b", "--hardware",
                        "h100-sxm", "--tp", "4", "--context", "32768", "--target-tps-per-user", "5", "--mechanisms",
                        "eagle3", "--acceptance", "eagle3=0.7"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    best = next(x for x in r.stdout.splitlines() if x.startswith("best:"))
    b = int(best.split(" at batch ")[1].split()[0])
    assert f"note: batch {b + 1} would not fit (" in r.stdout, r.stdout


def test_best_of_each_mechanism_is_its_row_of_most_tokens_per_gpu():
    # the per-mechanism table shows, for each mechanism, its feasible (D, batch) of most tokens/s/GPU
    from specplan.planning.recommend import best_per_mechanism

    rows = [_step_row(mechanism=m, draft_len=d, batch=8, acceptance_length=al, iter_s=0.01, draft_s=0.001,
                      target_devices=1, tokens_per_s_per_gpu=t)
            for m, d, al, t in (("eagle3", 4, 3.0, 900.0), ("ngram", 3, 2.0, 800.0), ("eagle3", 6, 3.2, 700.0),
                                ("ngram", 5, 2.1, 600.0), ("none", 0, 1.0, 300.0))]
    out = best_per_mechanism(rows, rows[0], ["eagle3", "ngram"])
    assert [(x.mechanism, x.draft_len) for x in out] == [("eagle3", 4), ("ngram", 3), ("none", 0)]
    assert out[0].why_lost == "best"


def test_gpus_for_a_load_takes_a_one_token_prompt():
    # ISL 1 is a prompt (one token): the GPU-count search takes it as it takes any ISL >= 1
    from specplan.planning.capacity import search

    r = search("llama-3.1-8b", "h100-sxm", load=LoadTarget(tps=1000, tps_per_user=20, isl=1, osl=64), max_gpus=8)
    assert r["isl"] == 1 and r["counts"][0]["gpus"] == 8


def test_mechanisms_none_alone_names_the_draft_mechanisms():
    from specplan.planning.recommend import recommend

    with pytest.raises(SpecplanError) as e:
        recommend("llama-3.1-8b", "h100-sxm", drafts=DraftSearch(mechanisms=["none"], max_draft_len=32))
    known = str(e.value).split("known: ")[1].rstrip(")").split(", ")
    assert "none" not in known and {"eagle3", "ngram", "mtp"} <= set(known)


def test_mechanisms_given_are_kept_in_order_without_none():
    # --mechanisms none,self,eagle3: the draft mechanisms in the order given ('none' is the baseline, always there)
    from specplan.planning.recommend import _mechanisms

    assert _mechanisms("llama-3.1-8b", ["none", "self", "eagle3", "self"], {}) == ["self", "eagle3"]


def test_a_deployment_that_fits_at_no_tp_says_what_each_gpu_would_hold():
    # Llama-3.1-405B in bf16 (~811 GB of weights) on H100s: no TP up to 8 fits; each row says the weights per GPU
    from specplan.planning.recommend_serving import search_deployment

    r = search_deployment("llama-3.1-405b", "h100-sxm", 1024, 256, engine="vllm",
                          space=DeploymentSpace(gpus=8, dtypes=["bf16"]))
    rows = {x["tp"]: x for x in r["layouts"] if x["mode"] == "agg"}
    for tp in (2, 8):
        why = rows[tp]["why"]
        need = float(why.split("the weights need ")[1].split(" GB")[0])
        per = float(why.split("(")[1].split(" GB per GPU")[0])
        assert per == pytest.approx(need / tp, abs=1.0) and "no TP up to 8 fits" in why


def test_a_tp_that_does_not_fit_names_the_smallest_that_holds_one_request():
    # Llama-3.3-70B bf16 on H100s, ISL 32000 + OSL 768: TP 1 cannot hold the weights; TP 2 holds exactly one
    # request of 32,768 tokens (memory_usage max_batch 1), so TP 1's row says TP 2 fits
    from specplan.costs.precision import resolve_precision
    from specplan.model.memory import memory_usage
    from specplan.planning.recommend_serving import search_deployment
    from specplan.profiles.registry import load_hardware, load_model

    m, hw = load_model("llama-3.3-70b"), load_hardware("h100-sxm")
    prec = resolve_precision(m, hw, "bf16", None)
    assert [float(memory_usage(m, hw, t, 1, 32768, prec).max_batch) for t in (1, 2)] == [0.0, 1.0]
    r = search_deployment("llama-3.3-70b", "h100-sxm", 32000, 768, engine="vllm",
                          space=DeploymentSpace(gpus=8, dtypes=["bf16"]))
    why = next(x["why"] for x in r["layouts"] if x["mode"] == "agg" and x["tp"] == 1)
    assert why.endswith("; TP 2 fits"), why


def test_mechanisms_found_from_data_leave_out_an_external_draft_without_its_model():
    # with acceptance data for an external draft but no --draft-model, the search leaves it out; with one, it is in
    from specplan.planning.recommend import _mechanisms

    assert _mechanisms("llama-3.1-8b", None, {"external": 0.7}) == ["eagle3"]
    assert _mechanisms("llama-3.1-8b", None, {"external": 0.7}, draft_model="llama-3.2-1b") == ["external", "eagle3"]


def test_aggregated_replicas_for_a_load_by_hand():
    # the aggregated answer: one replica of TP t serves (its tok/s/GPU) x t tokens/s; ceil(target / that) replicas
    import math

    from specplan.planning.capacity import search
    from specplan.planning.recommend_serving import recommend_serving
    from specplan.serving.workload import Workload

    r = search("llama-3.1-8b", "h100-sxm", load=LoadTarget(tps=20000, tps_per_user=30, isl=1024, osl=256),
               max_gpus=16)
    a = r["aggregated"]
    one = recommend_serving("llama-3.1-8b", "h100-sxm", Workload(1024, 256, concurrency=1.0), tp=a["tp"],
                            drafts=DraftSearch(mechanisms=["none"], max_draft_len=16), sla=Sla(max_tpot_ms=1e3 / 30),
                            ranking=Ranking(top=1), grid=GridOptions(search_concurrency=True))["best"]
    assert a["tokens_per_s_per_replica"] == pytest.approx(one["tokens_per_s_per_gpu"] * a["tp"], rel=1e-12)
    assert a["replicas"] == math.ceil(20000 / a["tokens_per_s_per_replica"]) and a["gpus"] == a["replicas"] * a["tp"]


def test_draft_range_stops_where_the_acceptance_data_end_unless_extrapolating():
    from specplan.planning.recommend import _draft_range
    from specplan.speculation.acceptance import Acceptance

    short = Acceptance.from_table([1, 2, 3, 4], [1.8, 2.4, 2.8, 3.0])  # data up to D = 4
    notes = []
    assert list(_draft_range(short, 8, False, notes, "eagle3")) == [0, 1, 2, 3, 4]
    assert notes == ["eagle3: acceptance data cover D <= 4; larger D not searched (--extrapolate to search)"]
    notes = []
    assert list(_draft_range(short, 8, True, notes, "eagle3")) == list(range(9)) and notes == []
    assert list(_draft_range(short, 3, False, notes, "eagle3")) == [0, 1, 2, 3] and notes == []  # data cover 3
    assert list(_draft_range(Acceptance.from_rate(0.7), 6, False, notes, "x")) == list(range(7)) and notes == []


def test_candidate_layouts_grow_in_doubling_node_counts_within_the_budget():
    # whole nodes of 8, doubling: at most 24 GPUs gives instance sizes of 1 and 2 nodes (8 and 16 GPUs), not 32
    from specplan.planning.capacity import candidate_layouts
    from specplan.profiles.registry import load_model

    lays = candidate_layouts(load_model("llama-3.3-70b"), 8, 24)
    assert sorted({lay.gpus for lay in lays}) == [8, 16]


def test_gpus_for_a_load_decodes_at_the_mean_context():
    from specplan.planning.capacity import search

    r = search("llama-3.1-8b", "h100-sxm", load=LoadTarget(tps=1000, tps_per_user=20, isl=1000, osl=301), max_gpus=8)
    assert r["context_len"] == 1000 + 301 // 2


def test_a_ttft_target_below_one_prompts_prefill_is_said():
    from specplan.planning.capacity import search

    r = search("llama-3.3-70b", "h100-sxm", load=LoadTarget(tps=1000, tps_per_user=20, isl=32000, osl=256),
               max_gpus=16, max_ttft_ms=1.0)
    assert r["prefill_gpus"] == 0
    assert r["prefill_unreachable"].startswith("one prompt's prefill takes ") and "over the TTFT target 1 ms" in \
        r["prefill_unreachable"]


def test_near_best_lists_runners_up_within_two_percent_with_their_gap():
    from specplan.planning.recommend import near_best

    rows = [_step_row(mechanism="eagle3", draft_len=d, batch=8, tokens_per_s_per_gpu=t)
            for d, t in ((6, 1000.0), (5, 990.0), (7, 985.0), (4, 970.0))]
    out = near_best(rows, rows[0])
    assert [(x.draft_len, round(x.below_best_pct, 9)) for x in out] == [(5, 1.0), (7, 1.5)]

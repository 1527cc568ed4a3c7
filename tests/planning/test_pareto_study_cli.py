"""`specplan pareto` and `specplan study`: files written, byte-identical reruns, one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from specplan.cli import app

ARGS = ["pareto", "--model", "llama-3.1-8b", "-H", "h100-sxm", "-H", "b200", "--batch-max", "16",
        "--max-draft-len", "4", "--mechanisms", "eagle3,ngram", "--acceptance", "ngram=0.5", "--tp", "1,2",
        "--context", "1024,8k", "--no-progress"]


def test_pareto_writes_everything_identically(tmp_path):
    r = CliRunner()
    for d in ("a", "b"):
        res = r.invoke(app, [*ARGS, "--formats", "png,svg", "--figures", "all", "--grid-csv", "-o", str(tmp_path / d)])
        assert res.exit_code == 0, res.output
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    for stem in ("frontier", "speedup_heatmap", "attention_tiles", "acceptance", "breakdown"):
        assert f"{stem}.png" in names and f"{stem}.svg" in names
    for f in ("grid.csv", "grid.parquet", "frontier.csv", "best_at_interactivity.csv", "columns.md"):
        assert f in names
    for n in names:
        if n.endswith((".csv", ".svg", ".md", ".parquet")):
            assert (tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes(), n
    import pandas as pd

    grid = pd.read_parquet(tmp_path / "a" / "grid.parquet")
    assert set(grid["context_len"]) == {1024, 8192}
    assert len(grid) == 2 * 2 * 2 * 16 * (1 + 2 * 4)


def test_pareto_bad_input_is_one_line(tmp_path):
    res = subprocess.run([sys.executable, "-m", "specplan", *ARGS[:-1], "--acceptance", "eagle3",
                          "-o", str(tmp_path)], capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.strip().startswith("error: --acceptance: expected MECH=VALUE")
    assert "Traceback" not in res.stderr


def test_study_command(tmp_path):
    repo = Path(__file__).resolve().parents[2]
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nbase: {model: llama-3.1-8b, hardware: h100-sxm}\n"
                   "variants:\n  - {name: a}\n  - {name: b}\n  - {name: c, hardware: {mem_bandwidth_bytes_s: -1}}\n")
    res = subprocess.run([sys.executable, "-m", "specplan", "study", str(bad), "-o", str(tmp_path / "o")],
                         capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.strip() == f"error: {bad}: variants[2].hardware.mem_bandwidth_bytes_s: must be >= 1e+06, got -1"
    assert (repo / "examples" / "studies").is_dir()


HEAVY = ("pandas", "matplotlib", "scipy", "torch", "pyarrow")


def test_cli_start_does_not_import_heavy_modules():
    code = f"import sys, specplan.cli; print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stderr


def _imported(argv) -> set[str]:
    """Top-level packages a `python -m specplan ...` run imported (from -X importtime's report)."""
    res = subprocess.run([sys.executable, "-X", "importtime", "-m", "specplan", *argv], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    names = [ln.rsplit("|", 1)[1].strip() for ln in res.stderr.splitlines() if ln.startswith("import time:")]
    return {n.split(".")[0] for n in names}


@pytest.mark.parametrize("argv,allowed", [
    (["step", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-b", "8", "-c", "1024"], ()),
    (["predict", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-b", "8", "-c", "1024", "--mechanism", "eagle3",
      "-D", "3", "--acceptance-rate", "0.7"], ()),
    (["recommend", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-b", "8", "-c", "1024", "--mechanisms", "eagle3",
      "--acceptance", "eagle3=0.7"], ()),
    # the built-in acceptance tables are interpolated by PCHIP in numpy (scipy's, bit for bit; no scipy import)
    (["recommend", "-m", "llama-3.1-8b", "-H", "h100-sxm", "-b", "8", "-c", "1024"], ()),
    (["profiles", "list"], ()),
], ids=["step", "predict", "recommend-rate", "recommend-tables", "profiles-list"])
def test_light_commands_do_not_import_heavy_modules(argv, allowed):
    assert _imported(argv) & (set(HEAVY) - set(allowed)) == set()


def test_pareto_draws_the_frontier_as_png_unless_figures_and_formats_ask(tmp_path):
    """Default: the frontier figure as PNG and the grid as Parquet only; --figures and --formats add the rest."""
    r = CliRunner()
    res = r.invoke(app, [*ARGS, "-o", str(tmp_path / "png")])
    assert res.exit_code == 0, res.output
    out = {p.name for p in (tmp_path / "png").iterdir()}
    assert {n for n in out if n.endswith((".png", ".svg"))} == {"frontier.png"}
    assert "grid.parquet" in out and "grid.csv" not in out and "frontier.csv" in out
    res = r.invoke(app, [*ARGS, "--figures", "all", "-o", str(tmp_path / "all")])
    assert res.exit_code == 0, res.output
    figs = sorted(p.name for p in (tmp_path / "all").iterdir() if p.suffix in (".png", ".svg"))
    assert figs == sorted(f"{s}.png" for s in ("frontier", "speedup_heatmap", "attention_tiles", "acceptance",
                                                "breakdown"))
    res = r.invoke(app, [*ARGS, "--figures", "breakdown,heatmap", "--formats", "svg", "-o", str(tmp_path / "svg")])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / "svg").iterdir() if p.suffix in (".png", ".svg")) == [
        "breakdown.svg", "speedup_heatmap.svg"]
    assert _pareto_error(tmp_path / "bad", "--formats", "png,jpg") == ("error: --formats: jpg is not a figure "
                                                                       "format; use a comma list of png, svg")
    assert _pareto_error(tmp_path / "bad2", "--figures", "frontier,pie") == (
        "error: --figures: pie is not a figure; use all, none or a comma list of frontier, heatmap, tiles, "
        "acceptance, breakdown, energy")


def _pareto_error(tmp_path, *extra):
    res = subprocess.run([sys.executable, "-m", "specplan", "pareto", "-m", "llama-3.1-8b", "-H", "h100-sxm",
                          "--no-plots", "--no-progress", "--batch-max", "2", "-o", str(tmp_path), *extra],
                         capture_output=True, text=True)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "grid.csv").exists() and not (tmp_path / "grid.parquet").exists()
    return res.stderr.strip()


def test_pareto_tp_not_dividing_heads_is_an_error(tmp_path):
    # 32 query heads: TP 3 used to become TP 1 silently
    assert _pareto_error(tmp_path, "--tp", "3") == "error: tp: 3 does not divide the 32 query heads of llama-3.1-8b"
    assert _pareto_error(tmp_path, "--tp", "16") == ("error: tp: none of 16 fits the scale-up domain of h100-sxm "
                                                     "(8 devices)")


def test_pareto_negative_max_draft_len_is_an_error(tmp_path):
    assert _pareto_error(tmp_path, "--max-draft-len", "-3") == "error: max draft length: must be >= 0, got -3"


def test_pareto_frontier_csv_has_rows_for_each_device_and_context(tmp_path):
    """`pareto -H h100-sxm -H h200-sxm -c 4k,32k`: frontier.csv keeps a frontier for each of the 4 pairs (the
    overall one keeps only the faster device's short-context points)."""
    import pandas as pd

    res = CliRunner().invoke(app, ["pareto", "--model", "llama-3.1-8b", "-H", "h100-sxm", "-H", "h200-sxm", "-c",
                                   "4k,32k", "--batch-max", "32", "--max-draft-len", "3", "--mechanisms", "eagle3",
                                   "--acceptance", "eagle3=0.7", "--tp", "1", "--no-plots", "--no-progress", "-o",
                                   str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "scope column" in res.output
    f = pd.read_csv(tmp_path / "frontier.csv")
    for h in ("h100-sxm", "h200-sxm"):
        for c in (4096, 32768):
            s = f[f["scope"] == f"hardware={h} context_len={c}"]
            assert set(s["set"]) >= {"baseline", "speculation", "overall"}, (h, c)
            assert set(s["hardware"]) == {h} and set(s["context_len"]) == {c}
    o = f[(f["scope"] == "overall") & (f["set"] == "overall")]
    assert len(o) > 0 and "h100-sxm" not in set(o["hardware"])  # what the scope column now keeps


def test_pareto_several_layouts_get_a_frontier_each(tmp_path):
    import pandas as pd

    res = CliRunner().invoke(app, ["pareto", "--model", "llama-3.1-8b", "-H", "h100-sxm", "--layouts", "tp1,tp2",
                                   "--batch-max", "16", "--max-draft-len", "2", "--mechanisms", "eagle3",
                                   "--acceptance", "eagle3=0.7", "--no-plots", "--no-progress", "-o", str(tmp_path)])
    assert res.exit_code == 0, res.output
    scopes = set(pd.read_csv(tmp_path / "frontier.csv")["scope"])
    assert scopes == {"overall", "hardware=h100-sxm context_len=1024 layout=tp1",
                      "hardware=h100-sxm context_len=1024 layout=tp2"}


def test_every_study_error_names_its_file(tmp_path):
    """An unknown id is found after the schema check (while the variants are resolved): it named no file before."""
    bad = tmp_path / "typo.yaml"
    bad.write_text("name: x\nbase: {model: llama-3.1-8bb, hardware: h100-sxm}\n")
    res = subprocess.run([sys.executable, "-m", "specplan", "study", str(bad), "-o", str(tmp_path / "o")],
                         capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.startswith(f"error: {bad}: base.model: unknown model id"), res.stderr


def test_serving_grid_rows_without_a_steady_state_carry_no_numbers():
    """Open loop at 60 req/s of ISL 1024 / OSL 256 on one H100 (TensorRT-LLM): above every configuration's capacity
    (about 22-25 req/s, predict), so each row is stable false with empty times and throughputs; it used to print
    60 x 256 = 15,360 tokens/s/GPU and an inf TTFT for each. At 10 req/s every stable row delivers 10 x 256 = 2,560."""
    import numpy as np

    from specplan.planning.recommend_serving import serving_grid
    from specplan.serving.workload import Workload

    from specplan.speculation.spec import DraftSearch

    kw = dict(engine="trtllm", drafts=DraftSearch(["eagle3"], {"eagle3": 0.8}, 3))
    over = serving_grid("llama-3.1-8b", "h100-sxm", Workload(1024, 256, request_rate=60.0), **kw)
    assert not over["stable"].any() and not over["meets_sla"].any()
    assert over[["tpot_ms", "ttft_ms", "tokens_per_s_per_gpu", "usd_per_mtok"]].isna().all().all()
    under = serving_grid("llama-3.1-8b", "h100-sxm", Workload(1024, 256, request_rate=10.0), **kw)
    ok = under[under["stable"]]
    assert len(ok) and np.allclose(ok["tokens_per_s_per_gpu"], 2560.0) and np.isfinite(ok["ttft_ms"]).all()

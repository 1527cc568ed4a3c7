"""One regression test per example of issue 13 (every bad input a clear line, no hang, no silent overflow).

Each case runs the CLI in-process (tests/fuzz/harness.py) and checks: the expected exit code, the one error line
(exit 2) containing the expected text, and no problem found by the judge (traceback, hang, a non-finite number
or a negative / overflowed integer column in stdout or in any written file, a temp file left behind)."""

from __future__ import annotations

import os
import signal
import stat
import sys
import tempfile
from pathlib import Path

import pytest
from specplan.speculation.spec import DraftSearch
from specplan.planning.sweep import SweepAxes

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cases import FAST, PARETO_SMALL, example_cases  # noqa: E402
from harness import judge, run_cli  # noqa: E402

_NAMES = [c.name for c in example_cases(Path(tempfile.mkdtemp(prefix="specplan-cases-")))]


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    return {c.name: c for c in example_cases(tmp_path_factory.mktemp("cases"))}


@pytest.mark.parametrize("name", _NAMES)
def test_issue13_example(cases, name):
    c = cases[name]
    r = run_cli(c.argv, timeout_s=60)
    assert judge(r, c.outdir) == [], (r.err, r.exc)
    assert r.rc == c.rc, (r.rc, r.out[-500:], r.err)
    if c.rc == 2:
        assert c.needle in r.err.strip(), r.err
    else:
        assert c.needle in r.out
    if "column" in c.extra:  # a grid column that used to overflow: the value the user gave comes back
        import pandas as pd

        col, value = c.extra["column"]
        grid = pd.read_parquet(c.outdir / "grid.parquet")
        assert str(grid[col].dtype) == "int64"
        assert set(grid[col]) == {value}


def test_hardware_twice_gives_one_device(cases):
    import pandas as pd

    c = cases["hardware_twice_pareto"]
    assert run_cli(c.argv).rc == 0
    assert list(pd.read_parquet(c.outdir / "grid.parquet")["hardware"].cat.categories) == ["h100-sxm"]


def test_two_profiles_sharing_an_id_are_an_error(tmp_path):
    other = tmp_path / "h100-other.yaml"
    other.write_text((Path(__file__).resolve().parents[2] / "hardware_profiles" / "h100-sxm.yaml").read_text()
                     .replace("mem_bandwidth_bytes_s: 3.35e12", "mem_bandwidth_bytes_s: 4.0e12"))
    r = run_cli(["pareto", "--model", "llama-3.2-1b", "--hardware", "h100-sxm", "--hardware", other,
                 *PARETO_SMALL, "-o", tmp_path / "o"])
    assert r.rc == 2 and "two different profiles share the id 'h100-sxm'" in r.err


def test_grid_integer_columns_are_64_bit():
    from specplan.planning.sweep import sweep

    df = sweep("llama-3.2-1b", "h100-sxm", axes=SweepAxes(batch=[1], draft_lens=[0, 1], tp=[1], contexts=[2**31 + 5]),
               drafts=DraftSearch(mechanisms=["eagle3"], acceptance={"eagle3": 0.7}, max_draft_len=32),
               progress=False)
    for col in ("batch", "context_len", "draft_len", "tp", "target_devices", "draft_devices"):
        assert str(df[col].dtype) == "int64", col
    assert set(df["context_len"]) == {2**31 + 5}


def test_outputs_get_the_umask_mode_not_0600(tmp_path):
    from specplan.core.io import atomic_write_text

    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "a.txt", "x")
        r = run_cli(["pareto", *FAST, *PARETO_SMALL, "-o", tmp_path / "p"])
    finally:
        os.umask(old)
    assert r.rc == 0, r.err
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o644
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "p").iterdir()}
    assert modes and set(modes.values()) == {0o644}, modes


def test_failed_write_leaves_no_temp_file(tmp_path):
    from specplan.core.io import atomic_write_bytes


    with pytest.raises(TypeError):
        atomic_write_bytes(tmp_path / "out.csv", object())  # type: ignore[arg-type]  # fails inside the write
    assert list(tmp_path.iterdir()) == []


def test_killed_run_leaves_no_temp_file(tmp_path, monkeypatch):
    """SIGTERM in the middle of writing the grid: exit 130, one line, no hidden partial file."""
    import specplan.core.io as sio

    real = os.replace

    def slow_replace(src, dst):  # the signal arrives while the temp file exists
        os.kill(os.getpid(), signal.SIGTERM)
        return real(src, dst)

    monkeypatch.setattr(sio.os, "replace", slow_replace)
    out = tmp_path / "p"
    r = run_cli(["pareto", *FAST, *PARETO_SMALL, "-o", out])
    assert r.rc == 130 and "interrupted" in r.err and not r.exc
    left = [p.name for p in out.rglob("*")] if out.exists() else []
    assert not [n for n in left if n.startswith(".")], left
    assert judge(r, out, allowed_rc=(130,)) == []


def test_interrupted_run_exits_130_in_one_line(tmp_path, monkeypatch):
    """Ctrl-C during a sweep: one line, exit 130, no traceback. The signal is sent from inside the sweep (when its
    first chunk is written), so the run is always interrupted: no timing race, and no path that turns a failure
    into a skip."""
    from specplan.planning import sweep as sw

    real, sent = sw._write_chunk, []

    def interrupt_then_write(*a, **kw):
        if not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)
        return real(*a, **kw)

    monkeypatch.setattr(sw, "_write_chunk", interrupt_then_write)
    r = run_cli(["pareto", "--model", "llama-3.1-8b", "--hardware", "h100-sxm", "--max-draft-len", "4",
                 "--no-plots", "--no-progress", "-o", tmp_path / "o"])
    assert sent == [1]  # the sweep ran and got the signal
    assert r.rc == 130 and not r.exc, (r.rc, r.err[-500:])
    assert [ln for ln in r.err.splitlines() if ln.strip()] == ["error: interrupted (no partial output left behind)"]
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())
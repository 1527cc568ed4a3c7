"""Sweep: columns and units, infeasible points kept, one evaluate() per (device, TP, mechanism) chunk."""

from __future__ import annotations

import numpy as np
import pytest

from specplan.core.errors import SpecplanError
from specplan.planning.sweep import COLUMNS, batch_grid, sweep, tp_choices
from specplan.speculation.spec import DraftSearch
from specplan.planning.sweep import SweepAxes


def test_columns_documented_and_grid_complete(small_grid):
    df = small_grid
    assert list(df.columns) == list(COLUMNS)
    # 2 devices x 2 TP x 2 contexts x 48 batches x (1 baseline + 3 mechanisms x 6 D)
    assert len(df) == 2 * 2 * 2 * 48 * (1 + 3 * 6)
    assert (df.loc[df["draft_len"] == 0, "mechanism"] == "none").all()
    assert np.allclose(df.loc[df["draft_len"] == 0, "speedup"], 1.0)
    al = df["acceptance_length"]
    assert (al >= 1 - 1e-6).all() and (al <= 1 + df["draft_len"] + 1e-5).all()
    assert np.allclose(df["tok_s_gpu"], df["batch"] * df["tok_s_user"] / df["target_devices"], rtol=1e-5)


def test_infeasible_points_are_marked_not_dropped(small_grid):
    df = small_grid
    bad = df[~df["fits"]]
    assert len(bad) > 0  # 48 sequences x 64K context do not fit one H100 with llama-3.1-8b
    assert bad["memory_gb"].min() > 0 and np.isfinite(bad["tok_s_user"]).all()


def test_vectorized_one_call_per_combo_and_chunking(monkeypatch):
    import specplan.speculation.speedup as sp

    calls = []
    real = sp.evaluate

    def counting(*a, **k):
        calls.append(np.broadcast(k["batch"], k["context_len"], a[1].draft_len).shape)  # (Deployment, Speculation)
        return real(*a, **k)

    monkeypatch.setattr(sp, "evaluate", counting)
    kw = dict(axes=SweepAxes(batch_max=32, tp=[1, 2], contexts=[1024, 4096]),
              drafts=DraftSearch(["ngram"], {"ngram": 0.5}, 4), progress=False)
    a = sweep("llama-3.1-8b", "h100-sxm", **kw)
    assert len(calls) == 2 * 2  # (TP) x (none, ngram)
    calls.clear()
    b = sweep("llama-3.1-8b", "h100-sxm", chunk_points=40, **kw)
    assert len(calls) > 4 and max(np.prod(s) for s in calls) <= 40
    assert a.equals(b)


def test_grid_helpers_and_errors():
    assert list(batch_grid(5)) == [1, 2, 3, 4, 5]
    g = batch_grid(1000, 50)
    assert g[0] == 1 and g[-1] == 1000 and len(g) <= 51
    assert tp_choices("llama-3.1-8b", "h100-sxm") == [1, 2, 4, 8]
    assert tp_choices("llama-3.1-8b", "groq-3-lpu") == [1]
    with pytest.raises(SpecplanError, match="mechanism: unknown 'eagle9'"):
        sweep("llama-3.1-8b", "h100-sxm", axes=SweepAxes(batch=[1]),
              drafts=DraftSearch(mechanisms=["eagle9"], max_draft_len=32), progress=False)
    with pytest.raises(SpecplanError, match="batch: must be >= 1"):
        sweep("llama-3.1-8b", "h100-sxm", axes=SweepAxes(batch=[0]),
              drafts=DraftSearch(mechanisms=["ngram"], acceptance={"ngram": 0.5}, max_draft_len=32))


def test_default_mechanisms_are_those_that_apply():
    df = sweep("llama-3.1-8b", "h100-sxm", axes=SweepAxes(batch=[1, 8], tp=[1]), drafts=DraftSearch(max_draft_len=2),
               progress=False)
    mechs = set(df["mechanism"].astype(str))
    assert "eagle3" in mechs  # a shipped acceptance profile exists for llama-3.1-8b
    assert "mtp" not in mechs  # llama-3.1-8b has no MTP module


def test_progress_bar_silent_off_tty_and_draws_on_tty():
    import io

    from specplan.core.progress import Progress

    buf = io.StringIO()  # not a TTY: silent
    with Progress(3, "sweep", stream=buf) as p:
        p.update(3)
    assert buf.getvalue() == ""

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    with Progress(2, "sweep", stream=tty) as p:
        p.update(1)
        p.update(1)
    assert "100% 2/2" in tty.getvalue() and tty.getvalue().endswith("\n")
    quiet = Tty()
    with Progress(2, "sweep", stream=quiet, enabled=False) as p:
        p.update(2)
    assert quiet.getvalue() == ""


def test_explicit_tp_is_checked_not_replaced():
    assert tp_choices("llama-3.1-8b", "h100-sxm", [2, 8]) == [2, 8]
    assert tp_choices("llama-3.1-8b", "b200", [1, 2, 4, 8, 16]) == [1, 2, 4, 8]  # 16 > the NVL8 domain: skipped
    with pytest.raises(SpecplanError, match=r"^tp: 3 does not divide the 32 query heads of llama-3.1-8b$"):
        tp_choices("llama-3.1-8b", "h100-sxm", [3])
    with pytest.raises(SpecplanError, match=r"^tp: none of 16 fits the scale-up domain of h100-sxm \(8 devices\)$"):
        tp_choices("llama-3.1-8b", "h100-sxm", [16])
    with pytest.raises(SpecplanError, match=r"^max draft length: must be >= 0, got -3$"):
        sweep("llama-3.1-8b", "h100-sxm", axes=SweepAxes(batch=[1]),
              drafts=DraftSearch(max_draft_len=-3, mechanisms=["ngram"], acceptance={"ngram": 0.5}), progress=False)


def test_sweep_options_are_keyword_only():
    # sweep(model, hardware, *, options...): the model and hardware may be named, every option must be
    import inspect

    from specplan.planning.sweep import sweep

    params = list(inspect.signature(sweep).parameters.values())
    assert [p.name for p in params[:2]] == ["model", "hardware"]
    assert all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params[:2])
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[2:])


def test_largest_fitting_batch_is_the_memory_bound_on_a_gpu_and_256_on_an_lpu():
    # a GPU's largest batch is what its memory holds at the context (Llama-3.1-8B at 128K tokens on one H100: a
    # handful of sequences, by memory_usage), an LPU's the fixed 256 (its chips are added per batch)
    from specplan.costs.precision import resolve_precision
    from specplan.model.memory import memory_usage
    from specplan.model.parallel import Layout
    from specplan.planning.sweep import largest_fitting_batch
    from specplan.profiles.registry import load_hardware, load_model

    m, hw = load_model("llama-3.1-8b"), load_hardware("h100-sxm")
    mb = int(memory_usage(m, hw, 1, 1, 131072, resolve_precision(m, hw, None, None)).max_batch)
    assert 1 <= mb < 16
    assert largest_fitting_batch("llama-3.1-8b", ["h100-sxm"], lambda h: [Layout(tp=1)], 131072) == mb
    assert largest_fitting_batch("llama-3.1-8b", ["groq-3-lpu"], lambda h: [Layout(tp=1)], 131072) == 256


def test_the_default_draft_lengths_reach_one_past_the_tile_edge_at_g4():
    # G2's tile edge for G = 4 (Llama 3.x: 32 query / 8 KV heads) is D = 128/4 - 1 = 31: the default search goes
    # to D = 32 so that the step past the edge is priced
    from specplan.planning.sweep import MAX_DRAFT_LEN

    assert MAX_DRAFT_LEN >= 128 // 4

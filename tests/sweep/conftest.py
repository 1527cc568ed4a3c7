"""Shared fixtures: a small sweep. Until the speculation layer (specplan.speculation.speedup) lands, a
test-local stand-in with the same contract is installed; it is never shipped."""

from __future__ import annotations

import importlib
import sys
import types

import numpy as np
import pytest


def _install_stub() -> None:
    from specplan.memory import memory_usage
    from specplan.precision import resolve_precision
    from specplan.profiles.registry import load_hardware, load_model
    from specplan.speculation.acceptance import Acceptance
    from specplan.step import step_time

    def mechanism_names():
        return ("none", "eagle3", "mtp", "ngram")

    def evaluate(model, hardware, *, tp=1, batch=1, context_len=1024, draft_len=0, mechanism="none",
                 acceptance=None, dtype=None, kv_dtype=None, **_):
        m, h = load_model(model), load_hardware(hardware)
        b = np.asarray(batch, dtype=float)
        c = np.asarray(context_len, dtype=float)
        d = np.asarray(draft_len, dtype=float)
        base = step_time(m, h, tp, b, 1, c, dtype, kv_dtype).total_s
        ver = step_time(m, h, tp, b, 1 + d, c, dtype, kv_dtype).total_s
        rho = {"none": 0.0, "eagle3": 0.03, "mtp": 0.03, "ngram": 0.0}[mechanism]
        draft = d * rho * base
        acc = acceptance or Acceptance.from_rate({"none": 0.0, "eagle3": 0.7, "mtp": 0.8, "ngram": 0.4}[mechanism])
        al = acc.al(d)
        it = ver + draft
        user = al / it
        prec = resolve_precision(m, h, dtype, kv_dtype)
        mem = memory_usage(m, h, tp, b, c, prec, q_len=1 + d)
        shape = np.broadcast(b, c, d).shape
        return {"baseline_step_s": base, "verify_s": ver, "draft_s": draft, "iter_s": it, "acceptance_length": al,
                "speedup": al * base / it, "tokens_per_s_per_user": user, "tokens_per_s_per_gpu": b * user / tp,
                "tokens_per_s_per_device": b * user / tp, "memory_total_bytes": np.broadcast_to(mem.total_bytes, shape),
                "fits": np.broadcast_to(mem.fits, shape), "break_even_al": it / base, "target_devices": tp,
                "draft_devices": 0, "rho": rho, "rho_d": rho * d}

    mod = types.ModuleType("specplan.speculation.speedup")
    mod.evaluate = evaluate
    mod.mechanism_names = mechanism_names
    mod.STUB = True
    sys.modules["specplan.speculation.speedup"] = mod


try:
    importlib.import_module("specplan.speculation.speedup")
except ModuleNotFoundError as exc:
    if exc.name != "specplan.speculation.speedup":
        raise
    _install_stub()


@pytest.fixture(scope="session")
def small_grid():
    from specplan.sweep import sweep

    return sweep("llama-3.1-8b", ["h100-sxm", "b200"], batch_max=64, max_draft_len=6,
                 mechanisms=["eagle3", "mtp"] if "mtp" in _mechs() else None, tp=[1, 2],
                 contexts=[1024, 32768], progress=False)


def _mechs():
    from specplan.speculation.speedup import mechanism_names

    return mechanism_names()

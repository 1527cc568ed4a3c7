"""Shared fixtures for the planning (sweep, frontier), plots and study tests: one small real sweep."""

from __future__ import annotations

import pytest

ACC = {"eagle3": 0.7, "ngram": 0.4, "dflash": 0.75}


@pytest.fixture(scope="session")
def small_grid():
    from specplan.planning.sweep import sweep

    return sweep("llama-3.1-8b", ["h100-sxm", "b200"], batch_max=48, max_draft_len=6, mechanisms=list(ACC),
                 acceptance=ACC, tp=[1, 2], contexts=[1024, 65536], progress=False)

"""The data and setup mapping of `specplan validate-speculation` (reference/speculation_load/)."""

from __future__ import annotations

import numpy as np

from specplan.profiles.params import param_counts
from specplan.profiles.registry import load_engine, load_hardware, load_model
from specplan.validation.speculation_load import load_setups, scored


def test_every_scored_setup_has_three_loads_and_profiles():
    setups, not_scored = load_setups()
    assert len(setups) >= 7 and not_scored
    for st in setups:
        s = st.spec
        assert len(st.loads) >= 3 and np.all(np.diff(st.loads) > 0), s["id"]
        assert np.all(st.measured > 0)
        load_model(s["model"]), load_hardware(s["hardware"]), load_engine(s["engine"])
        if s["al"] == "row":
            assert np.all(np.isfinite(st.al_rows)) and np.all(st.al_rows <= 1 + s["draft_len"])
        else:  # AL fitted on the lowest load: that row does not count
            assert not scored(st)[0] and scored(st)[1:].all()
        if s.get("baseline_group"):
            assert np.all(st.base_tok_s > 0)


def test_qwen25_7b_profile_matches_its_published_size():
    # Qwen2.5-7B: 7.61B parameters (Qwen's model card); the profile omits only the q/k/v biases (~0.8M)
    assert abs(param_counts(load_model("qwen2.5-7b"))["total"] / 7.61e9 - 1) < 0.01

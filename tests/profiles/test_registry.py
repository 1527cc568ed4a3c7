"""The profile registry: ids, paths and Hugging Face repos resolved to profiles; drafts by repo id."""

import pytest

from specplan.core.errors import SpecplanError


def test_a_model_by_its_hugging_face_repo():
    """A built-in profile is found by the `hf_repo` its YAML names (case-insensitive), as users paste it."""
    from specplan.profiles.registry import load_model

    assert load_model("meta-llama/Llama-3.3-70B-Instruct").id == "llama-3.3-70b"
    assert load_model("qwen/qwen3-8b").id == "qwen3-8b"
    with pytest.raises(SpecplanError, match="no built-in model profile has this Hugging Face repo"):
        load_model("nosuch-org/NoSuchModel")


def test_resolve_draft_by_repo_id():
    """--draft-model: a built-in head by its repo is that profile; an unknown head repo is priced from the target's
    shape and kept for the launch; an unknown external draft is refused (it needs its own profile)."""
    from specplan.profiles.registry import load_model
    from specplan.speculation.drafters import resolve_draft

    t = load_model("llama-3.1-8b")
    known = resolve_draft("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", t, ["eagle3"])
    assert (known.profile, known.hf_repo, known.note) == (
        "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", None)
    assert load_model(known.profile).id == "eagle3-llama-3.1-8b"
    new = resolve_draft("someone/EAGLE3-Llama-3.1-8B-v2", t, ["eagle3"])
    assert (new.profile, new.hf_repo) == (None, "someone/EAGLE3-Llama-3.1-8B-v2") and "hidden size 4096" in new.note
    with pytest.raises(SpecplanError, match="external draft is priced from its profile"):
        resolve_draft("someone/tiny-draft", t, ["external"])
    assert resolve_draft(None, t) == type(new)(None, None)

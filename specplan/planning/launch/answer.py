"""A recommend answer as it is saved and launched: its identity (Hugging Face repos, checkpoint dtype), the --json
document, and the --emit launch built from it (docs/launch.md)."""

from __future__ import annotations

from dataclasses import asdict

from specplan.core.errors import SpecplanError


def draft_and_identity(model: str, draft_model, mechs) -> tuple:
    """(the draft profile the pricing reads, what a saved answer carries to launch: the model's Hugging Face repo and
    checkpoint dtype and the draft's repo) from --model and --draft-model (an id, a YAML or a Hugging Face repo)."""
    from specplan.planning.launch.emit import answer_identity
    from specplan.profiles.registry import load_model
    from specplan.speculation.drafters import resolve_draft

    prof = load_model(model)
    draft = resolve_draft(draft_model, prof, mechs)
    ident = answer_identity(prof, draft)
    if draft.note:
        ident["draft_note"] = draft.note
    return draft.profile, ident


def check_answer_emittable(emit: str, model: str, mechs, acc: dict, draft_model, ident: dict) -> None:
    """--emit: refuse before the search a launch that could not be built (docs/launch.md)."""
    from specplan.planning.launch.emit import check_emittable
    from specplan.planning.recommend import default_mechanisms
    from specplan.profiles.registry import load_model
    from specplan.speculation.drafters import DraftRef

    prof = load_model(model)
    wanted = mechs if mechs is not None else default_mechanisms(model, acc, draft_model)
    check_emittable(emit, prof, wanted, DraftRef(draft_model, ident.get("draft_model")))


def answer_json(r: dict, launch, given: dict) -> dict:
    """The --json answer: the planning answer, what a saved answer needs to launch (kept where the answer has
    its own), and the --emit launch."""
    ident = {k: v for k, v in (given.get("identity") or {}).items() if k not in r and k != "draft_note"}
    out = {**r, **ident}
    return out if launch is None else {**out, "launch": launch}


def _plain(obj):
    """An answer with its records (core/records.Record) as dicts, at every depth; numbers as they are."""
    from collections.abc import Mapping

    if isinstance(obj, Mapping):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_plain(v) for v in obj)
    return obj


def launch_or_error(r: dict, engine, given: dict, json_out: bool):
    """(launch, None), or in text mode (None, the SpecplanError) when the launch cannot be written, so that the
    answer is printed before the one error line (JSON mode raises at once: one document or one error)."""
    try:
        return launch_of_answer(r, engine, given), None
    except SpecplanError as exc:
        if json_out:
            raise
        return None, exc


def launch_of_answer(r: dict, engine, given: dict) -> dict | None:
    """The --emit launch of an answer as {engine, argv, files, notes, text}; None without --emit or a best point."""
    if engine is None or (r.get("best") is None and not r.get("answer")):
        return None
    from specplan.planning.launch.emit import build, engine_notes, plan_from_answer, render

    r = _plain(r)  # a planning answer's records as the JSON objects a saved answer holds
    ident = given.get("identity") or {}
    rest = {k: v for k, v in given.items() if k != "identity"}
    launch = build(engine, plan_from_answer({**{k: v for k, v in ident.items() if k not in r}, **r}, **rest))
    launch.notes += engine_notes(r.get("engine"), launch.engine, launch.files) + (
        [ident["draft_note"]] if ident.get("draft_note") else [])
    return {**asdict(launch), "text": render(launch)}

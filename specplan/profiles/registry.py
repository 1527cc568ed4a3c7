"""Built-in profile ids, YAML loading with one-line errors, and close-match suggestions."""

from __future__ import annotations

import difflib
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from specplan.core.records import record
from specplan.core import loader
from specplan.core.errors import SpecplanError, brief, without_repeat
from specplan.profiles.engine import EngineProfile, KernelFamily
from specplan.profiles.file_record import FileRecord
from specplan.profiles.hardware import HardwareProfile
from specplan.profiles.model import ModelProfile

T = TypeVar("T", bound=BaseModel)

_PKG = Path(__file__).resolve().parents[1]


def _builtin_dir(name: str) -> Path:
    """Folder of built-in profiles: the repository's top-level folder, else the copy inside the wheel."""
    repo = _PKG.parent / name
    if repo.is_dir():
        return repo
    return _PKG / "builtin" / name


def hardware_dir() -> Path:
    """Folder holding the built-in hardware profiles."""
    return _builtin_dir("hardware_profiles")


def model_dir() -> Path:
    """Folder holding the built-in model profiles."""
    return _builtin_dir("model_profiles")


def engine_dir() -> Path:
    """Folder holding the built-in engine profiles (kernel families in its kernels/ subfolder)."""
    return _builtin_dir("engine_profiles")


@record
class ValidationIssue(FileRecord):
    """The fields we read of one pydantic error: where (loc), what (msg), the value (input) and its kind (type)."""

    loc: tuple = ()
    msg: str = "invalid"
    input: Any = None
    type: str | None = None


def format_validation_error(err: ValidationError, where: str) -> str:
    """One line: file, dotted field path, message and offending value."""
    e = ValidationIssue.read(err.errors()[0])
    loc = ".".join(str(p) for p in e.loc) or "(top level)"
    msg = e.msg.removeprefix("Value error, ")
    val = e.input
    shown = repr(brief(val)) if isinstance(val, str) else brief(val)  # '1' (text) is not 1 (a number)
    got = "" if isinstance(val, dict) or "got" in msg else f", got {shown}"
    if e.type == "missing":
        got = ""
    head, sep, rest = msg.partition(": ")
    if sep and loc != "(top level)" and without_repeat(loc, head) != loc:  # the validator names its field again
        path = without_repeat(loc, head)
        return f"{where}: {path + '.' if path else ''}{head}: {rest}{got}"
    return f"{where}: {loc}: {msg}{got}"


def shipped(path: Path) -> bool:
    """Whether `path` is one of the built-in profiles (hardware, model, engine, kernel family)."""
    folder = Path(path).resolve().parent
    return any(folder == d.resolve() for d in (hardware_dir(), model_dir(), engine_dir(), engine_dir() / "kernels"))


def read_yaml(path: Path) -> dict:
    """Read a YAML mapping with the bounds of `specplan.core.loader` (size, nesting, aliases, duplicate keys, finite
    numbers), or raise a one-line error naming the file; a built-in profile is parsed by libyaml's parser."""
    return loader.read_yaml(path, shipped=shipped(path))


def build(cls: type[T], data: dict, where: str) -> T:
    """Validate a mapping into a profile, turning the first validation error into one line."""
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        raise SpecplanError(format_validation_error(err, where)) from None
    except SpecplanError as err:
        raise SpecplanError(f"{where}: {err}") from None


def _ids(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.yaml"))


def hardware_ids() -> list[str]:
    """Ids of the built-in hardware profiles."""
    return _ids(hardware_dir())


def model_ids() -> list[str]:
    """Ids of the built-in model profiles."""
    return _ids(model_dir())


def engine_ids() -> list[str]:
    """Ids of the built-in engine profiles."""
    return _ids(engine_dir())


def kernel_family_ids() -> list[str]:
    """Ids of the built-in attention kernel families."""
    return _ids(engine_dir() / "kernels")


MAX_REF_CHARS = 255  # an id or path longer than a file name may be is an error, not an OSError


def _resolve(ref: str, folder: Path, kind: str) -> Path:
    if not ref or len(ref) > MAX_REF_CHARS * 16 or len(Path(ref).name) > MAX_REF_CHARS:
        raise SpecplanError(f"{kind}: {brief(ref, 60)}: not a known id or a profile path "
                            f"(ids and file names have at most {MAX_REF_CHARS} characters)")
    p = Path(ref)
    try:
        exists = p.exists()
    except (OSError, ValueError) as exc:  # a name the file system refuses (NUL byte, too long)
        raise SpecplanError(f"{kind}: {brief(ref, 60)}: not a usable path ({exc})") from None
    if kind == "model" and "/" in ref and not exists and p.suffix not in (".yaml", ".yml"):
        by_repo = hf_repo_index(str(folder)).get(ref.lower())
        if by_repo is not None:  # a Hugging Face org/name of a built-in profile: meta-llama/Llama-3.3-70B-Instruct
            return by_repo
        raise SpecplanError(f"{ref}: no such file, and no built-in model profile has this Hugging Face repo "
                            f"(`specplan profiles list` shows them; import its config.json with `specplan model "
                            f"import`)")
    if p.suffix in (".yaml", ".yml") or exists or "/" in ref:
        if not p.is_file():
            raise SpecplanError(f"{ref}: file not found" if not p.is_dir() else f"{ref}: is a folder, expected a "
                                f"{kind} profile YAML")
        return p
    for name in dict.fromkeys((ref, ref.lower())):  # ids are lower case: vLLM, H100-SXM work too
        cand = folder / f"{name}.yaml"
        if cand.is_file():
            return cand
    ids = _ids(folder)
    close = difflib.get_close_matches(ref, ids, n=1, cutoff=0.4)
    hint = f"; did you mean '{close[0]}'?" if close else f"; known: {', '.join(ids)}"
    raise SpecplanError(f"unknown {kind} id '{ref}'{hint}")


@lru_cache(maxsize=8)
def hf_repo_index(folder: str) -> dict[str, Path]:
    """{lower-case Hugging Face repo: profile path} of the built-in profiles in a folder (their `hf_repo` lines)."""
    out = {}
    for path in sorted(Path(folder).glob("*.yaml")):
        for line in path.read_text().splitlines():
            if line.startswith("hf_repo:"):
                repo = line.split(":", 1)[1].split("#")[0].strip().strip("'\"")
                if repo:
                    out.setdefault(repo.lower(), path)
                break
    return out


_CLASSES = {"hardware": HardwareProfile, "model": ModelProfile, "engine": EngineProfile, "kernel family": KernelFamily}


@lru_cache(maxsize=256)
def _load_cached(cls_name: str, path: str, mtime: float):
    cls = _CLASSES[cls_name]
    if shipped(Path(path)) and not (cls is EngineProfile and _extends(Path(path))):
        from specplan.profiles import validated_cache  # a shipped file, kept validated (issue 43)

        return validated_cache.load_or_validate(cls_name, Path(path), cls, lambda: _validated(cls_name, path))
    return _validated(cls_name, path)


def _extends(path: Path) -> bool:
    """Whether an engine file names a base engine (its profile depends on another file: never kept validated)."""
    try:
        return b"extends" in path.read_bytes()
    except OSError:
        return False


def _validated(cls_name: str, path: str):
    """Read and validate one profile file (one-line errors naming the file)."""
    cls = _CLASSES[cls_name]
    data = read_yaml(Path(path))
    if cls is ModelProfile and isinstance(data, dict) and "id" not in data and (
            "architectures" in data or "model_type" in data):
        raise SpecplanError(f"{path}: a Hugging Face config.json, not a specplan model profile: import it with "
                            f"`specplan model import {path}`")
    if cls is EngineProfile and isinstance(data, dict) and "extends" in data:
        data = _extended_engine(data, path)
    return build(cls, data, path)


def _extended_engine(data: dict, path: str) -> dict:
    """An engine YAML that names `extends: <built-in engine id>` (a version of that engine whose round differs):
    the base profile's fields with this file's on top, sources merged (this file's win)."""
    base_id = data.pop("extends")
    if not isinstance(base_id, str) or base_id not in engine_ids() or Path(path).stem == base_id:
        raise SpecplanError(f"{path}: extends: {base_id!r} is not another built-in engine id "
                            f"(known: {', '.join(engine_ids())})")
    base = read_yaml(engine_dir() / f"{base_id}.yaml")
    if isinstance(base, dict) and "extends" in base:
        raise SpecplanError(f"{path}: extends: {base_id} itself extends another engine (one level only)")
    merged = {**base, **data}
    merged["sources"] = {**(base.get("sources") or {}), **(data.get("sources") or {})}
    return merged


def load_hardware(ref: str | HardwareProfile) -> HardwareProfile:
    """A hardware profile from a built-in id or a YAML path."""
    if isinstance(ref, HardwareProfile):
        return ref
    p = _resolve(str(ref), hardware_dir(), "hardware")
    return _load_cached("hardware", str(p), p.stat().st_mtime)


def load_model(ref: str | ModelProfile) -> ModelProfile:
    """A model profile from a built-in id or a YAML path."""
    if isinstance(ref, ModelProfile):
        return ref
    p = _resolve(str(ref), model_dir(), "model")
    return _load_cached("model", str(p), p.stat().st_mtime)


def load_engine(ref: "str | EngineProfile | None") -> EngineProfile:
    """An engine profile from a built-in id (trtllm, vllm, sglang, ideal) or a YAML path; None = ideal."""
    if isinstance(ref, EngineProfile):
        return ref
    p = _resolve("ideal" if ref is None else str(ref), engine_dir(), "engine")
    return _load_cached("engine", str(p), p.stat().st_mtime)


def load_kernel_family(ref: "str | KernelFamily") -> KernelFamily:
    """An attention kernel family from a built-in id (engine_profiles/kernels/) or a YAML path."""
    if isinstance(ref, KernelFamily):
        return ref
    p = _resolve(str(ref), engine_dir() / "kernels", "kernel family")
    return _load_cached("kernel family", str(p), p.stat().st_mtime)


def write_profile_yaml(profile: BaseModel, path: Path | None = None) -> str:
    """Serialize a profile to YAML text (and to `path` when given), dropping unset defaults."""
    text = yaml.safe_dump(profile.model_dump(exclude_defaults=True, mode="json"), sort_keys=False)
    if path is not None:
        from specplan.core.io import atomic_write_text

        atomic_write_text(Path(path), text)
    return text

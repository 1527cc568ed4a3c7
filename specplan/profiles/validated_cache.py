"""The shipped profiles kept already validated, so a cold command builds no pydantic validator for them (issue 43).

Only files shipped with specplan are kept (`registry.shipped`); a user's file is always validated, and its errors
are the same one line. An entry is keyed on the sha256 of the YAML file's bytes, the profile kind, the source of the
modules that define, parse and validate profiles, and the pydantic and Python versions: an edit of any of them is a
miss, and the profile is validated and kept again. The folder is $SPECPLAN_CACHE_DIR, else
$XDG_CACHE_HOME/specplan, else ~/.cache/specplan; SPECPLAN_CACHE_DIR=off turns the cache off. A folder that cannot
be written, or an entry that cannot be read, is no error: the profile is validated as without the cache.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from functools import lru_cache
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")

_PKG = Path(__file__).resolve().parents[1]
# the modules whose code decides what a profile file validates into (classes, validators, YAML reading)
CODE_FILES = ("profiles/hardware.py", "profiles/model.py", "profiles/engine.py", "profiles/registry.py",
              "profiles/validated_cache.py", "core/dtypes.py", "core/limits.py", "core/loader.py", "core/errors.py")
OFF = ("", "0", "off", "no", "false")


def cache_dir() -> Path | None:
    """Folder of the validated profiles, or None when the cache is off (SPECPLAN_CACHE_DIR=off)."""
    env = os.environ.get("SPECPLAN_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in OFF else Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "specplan"


@lru_cache(maxsize=1)
def code_digest() -> bytes:
    """sha256 of the profile code (CODE_FILES) and the pydantic and Python versions."""
    from pydantic.version import VERSION

    h = hashlib.sha256()
    for name in CODE_FILES:
        h.update(name.encode() + b"\0" + (_PKG / name).read_bytes() + b"\0")
    h.update(f"pydantic {VERSION}; python {sys.version}".encode())
    return h.digest()


def entry_key(kind: str, data: bytes) -> str:
    """Hex key of one profile file's bytes validated as `kind` by today's code."""
    return hashlib.sha256(code_digest() + kind.encode() + b"\0" + data).hexdigest()


def load_or_validate(kind: str, path: Path, cls: type[T], validate: Callable[[], T]) -> T:
    """The profile of a shipped file `path`: the kept one when its key matches, else `validate()` (kept for next
    time when the folder can be written)."""
    folder = cache_dir()
    try:
        data = Path(path).read_bytes()
    except OSError:
        folder = None
    if folder is None:
        return validate()
    entry = folder / f"{kind.replace(' ', '_')}-{entry_key(kind, data)}.pickle"
    try:
        obj = pickle.loads(entry.read_bytes())
        if type(obj) is cls:
            return obj
    except Exception:  # missing, truncated or written by other code: validate again
        pass
    obj = validate()
    _keep(entry, obj)
    return obj


def _keep(entry: Path, obj) -> None:
    """Write one entry atomically (a temporary file renamed over it); an unwritable folder is ignored."""
    tmp = entry.with_name(f"{entry.name}.{os.getpid()}.tmp")
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(tmp, entry)
    except (OSError, pickle.PicklingError):
        try:
            tmp.unlink()
        except OSError:
            pass

"""Output files: checked before any work starts, written atomically with the umask's mode, no temp file left.

- `check_output_dir` / `check_output_file`: an output path that cannot be written (a folder named by an
  existing file, a path under a file, a file named by an existing folder, a name too long) is a one-line error
  before the command computes anything.
- `atomic_write_bytes` / `atomic_write_text`: a temp file in the same folder, then an atomic rename; the file
  gets mode 0666 & ~umask like any file a shell creates (mkstemp alone would leave 0600); on any failure or
  interruption (Ctrl-C, and SIGTERM, which the CLI turns into Ctrl-C) the temp file is removed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from specplan.core.errors import SpecplanError, brief

MAX_NAME_CHARS = 255  # one path component


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _check_parents(path: Path, what: str) -> None:
    """Every existing ancestor of `path` is a folder, and no component is longer than a file name may be."""
    for part in path.parts:
        if len(part.encode("utf-8", "surrogateescape")) > MAX_NAME_CHARS:
            raise SpecplanError(f"{what} {brief(str(path), 120)}: a name in the path is longer than "
                                f"{MAX_NAME_CHARS} bytes")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise SpecplanError(f"{what} {path}: {parent} is a file, not a folder")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise SpecplanError(f"{what} {path}: cannot write in {parent} (permission denied)")
            return


def check_output_dir(path, what: str = "output folder") -> Path:
    """`path` as a folder that is (or can be made) writable, else a one-line error; creates nothing."""
    p = Path(path)
    _check_parents(p, what)
    if p.exists():
        if not p.is_dir():
            raise SpecplanError(f"{what} {p}: is an existing file, not a folder")
        if not os.access(p, os.W_OK | os.X_OK):
            raise SpecplanError(f"{what} {p}: cannot write in it (permission denied)")
    return p


def ready_output_dir(path, what: str = "output folder") -> Path:
    """`path` made (if missing) and proven writable by creating and removing one file in it, before a long run
    whose outputs would otherwise fail only at its end (/dev/null, /proc/self/x, a read-only mount); an OSError
    (one line in the CLI) or a SpecplanError otherwise."""
    import tempfile

    p = check_output_dir(path, what)
    try:
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=p, prefix=".specplan-probe-"):
            pass
    except OSError as exc:
        raise SpecplanError(f"{what} {p}: cannot write there ({exc.strerror or exc})") from None
    return p


def check_output_file(path, what: str = "output file") -> Path:
    """`path` as a file that can be (over)written, else a one-line error; creates nothing."""
    p = Path(path)
    if str(path).endswith(os.sep) or p.name in ("", ".", ".."):
        raise SpecplanError(f"{what} {path}: names a folder, expected a file name")
    _check_parents(p, what)
    if p.is_dir():
        raise SpecplanError(f"{what} {p}: is an existing folder, expected a file")
    if p.exists() and not os.access(p, os.W_OK):
        raise SpecplanError(f"{what} {p}: cannot overwrite it (permission denied)")
    return p


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write bytes to `path` via a temporary file in the same folder and an atomic rename (mode 0666 & ~umask)."""
    path = Path(path)
    check_output_file(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:200]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write UTF-8 text atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))

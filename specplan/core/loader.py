"""The one loader of user files (YAML and JSON): bounded, safe, and every failure one line naming the file.

Every profile, study, engine, shapes and Hugging Face config file goes through `read_yaml` / `read_json`:

- the file is read as bytes, at most `MAX_FILE_BYTES`; a missing file, a folder, a name too long or a file that is
  not UTF-8 text is one line;
- YAML is composed into nodes first; before anything is constructed (or formatted into an error message) the
  node graph is checked: at most `MAX_DEPTH` levels of nesting and at most `MAX_NODES` nodes once every alias
  is expanded (an alias bomb is refused in linear time, legitimate anchors still work); only the safe tags
  (no python objects); a key given twice in one mapping is an error (`<<` merges may still override);
- JSON: a key given twice in one object is an error, nesting is capped the same way;
- after parsing, every number is checked: NaN, inf (`.inf`, `Infinity`, `1e400`) and integers beyond 64 bits are
  one-line errors naming the dotted field path (so no loader downstream sees them).

Files users write for specplan (profiles, studies, engine files) are strict as above. A Hugging Face config is a
foreign document (`read_json(..., foreign=True)`): the bounds on size and nesting still hold, but its values are not
judged when it is read (Nemotron-H ships `"time_step_limit": [0.0, Infinity]`); a key given twice and an integer
beyond 64 bits become `Unreadable` markers, and the importer checks (`check_values`) each field it reads, so only a
field it uses can fail, with the same one line.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from specplan.core.errors import SpecplanError, brief

MAX_FILE_BYTES = 16 * 1024 * 1024  # profiles and studies are kilobytes; HF configs tens of kilobytes
MAX_DEPTH = 64  # levels of nested mappings / lists
MAX_NODES = 200_000  # YAML nodes after alias expansion
INT_LIMIT = 2**63  # integers must fit in 64 bits (signed)


def read_bytes(path, what: str = "file") -> bytes:
    """The bytes of a user file (at most MAX_FILE_BYTES), or a one-line error naming it."""
    p = Path(path)
    try:
        if not p.exists():
            raise SpecplanError(f"{p}: {what} not found")
        if p.is_dir():
            raise SpecplanError(f"{p}: is a folder, expected a {what}")
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise SpecplanError(f"{p}: {size:,} bytes, larger than the {MAX_FILE_BYTES:,} bytes a {what} may have")
        with open(p, "rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise SpecplanError(f"{brief(str(p), 120)}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise SpecplanError(f"{p}: larger than the {MAX_FILE_BYTES:,} bytes a {what} may have")
    return data


def read_text(path, what: str = "file") -> str:
    """UTF-8 text of a user file (a BOM is allowed); a binary or latin-1 file is a one-line error."""
    data = read_bytes(path, what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecplanError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                            f"save it as UTF-8") from None


# ---------------------------------------------------------------- checks shared by YAML and JSON

class Unreadable:
    """A value of a foreign document that cannot be used (a key given twice, an integer beyond 64 bits); raises
    its one line only when something reads it (check_values)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason

    def __repr__(self) -> str:
        return f"<{self.reason}>"


def check_values(data, where: str, path: str = "") -> None:
    """Raise a one-line error at the first NaN / inf float, integer beyond 64 bits, Unreadable value, or nesting
    past MAX_DEPTH (`path`: the dotted field path of `data` in its document, for the message)."""
    stack = [(data, path, 0)]
    while stack:
        v, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise SpecplanError(f"{where}: {path or '(top level)'}: nested more than {MAX_DEPTH} levels deep")
        if isinstance(v, bool) or v is None or isinstance(v, str):
            continue
        if isinstance(v, Unreadable):
            raise SpecplanError(f"{where}: {path or '(top level)'}: {v.reason}")
        if isinstance(v, float):
            if not math.isfinite(v):
                raise SpecplanError(f"{where}: {path or '(top level)'}: must be a finite number, got {v}")
        elif isinstance(v, int):
            if not -INT_LIMIT <= v < INT_LIMIT:
                raise SpecplanError(f"{where}: {path or '(top level)'}: integer out of range "
                                    f"(more than 64 bits), got {brief(v)}")
        elif isinstance(v, dict):
            for k, x in reversed(list(v.items())):
                stack.append((x, f"{path}.{k}" if path else str(k), depth + 1))
        elif isinstance(v, list):
            for i, x in reversed(list(enumerate(v))):
                stack.append((x, f"{path}[{i}]", depth + 1))


# ---------------------------------------------------------------- YAML

class _NoDuplicateKeys:
    """A loader mix-in that refuses duplicate keys (the bounds are checked on the node graph before construction)."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            if isinstance(key_node, ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                k = key_node.value
                if k in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key '{brief(k, 60)}' (first at line {seen[k] + 1})",
                        key_node.start_mark)
                seen[k] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


class _Loader(_NoDuplicateKeys, yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys."""


# YAML 1.2 floats: PyYAML (YAML 1.1) reads `3.35e12` (no dot or no exponent sign) as a string; profiles are
# written that way, so such scalars resolve to floats here (and strict profile models refuse strings for numbers).
_Loader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                |\.[0-9_]+(?:[eE][-+]?[0-9]+)?
                |[-+]?\.(?:inf|Inf|INF)
                |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."))

# The same loader over libyaml's C parser (about 8x faster), for the files shipped with specplan only
# (`parse_yaml(..., shipped=True)`): tests/core/test_loader_shipped.py checks that it reads every shipped YAML file
# as _Loader does; a user's file always goes through _Loader, whose error messages the CLI prints.
_CLoader = None
if getattr(yaml, "__with_libyaml__", False):
    class _CLoader(_NoDuplicateKeys, yaml.CSafeLoader):
        """_Loader over libyaml's parser (same resolvers, same duplicate-key check)."""

    _CLoader.yaml_implicit_resolvers = _Loader.yaml_implicit_resolvers


def _check_nodes(root, where: str) -> None:
    """Refuse a node graph nested deeper than MAX_DEPTH or larger than MAX_NODES with aliases expanded."""
    size: dict[int, int] = {}
    # Iterative post-order walk; a node reached again through an alias reuses its computed size.
    stack = [(root, 0, False)]
    on_path: set[int] = set()
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            kids = _children(node)
            total = 1 + sum(size[id(k)] for k in kids)
            size[key] = total
            if total > MAX_NODES:
                raise SpecplanError(f"{where}: more than {MAX_NODES:,} values once its aliases (*anchors) are "
                                    f"expanded (line {node.start_mark.line + 1}); refusing to load it")
            continue
        if key in size:
            continue
        if key in on_path:  # a recursive alias
            raise SpecplanError(f"{where}: recursive alias (line {node.start_mark.line + 1})")
        if depth > MAX_DEPTH:
            raise SpecplanError(f"{where}: nested more than {MAX_DEPTH} levels deep "
                                f"(line {node.start_mark.line + 1})")
        on_path.add(key)
        stack.append((node, depth, True))
        for k in _children(node):
            if id(k) not in size:
                stack.append((k, depth + 1, False))


def _children(node) -> list:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [x for pair in node.value for x in pair]
    return []


def _yaml_error(exc: yaml.YAMLError, where: str) -> SpecplanError:
    mark = getattr(exc, "problem_mark", None)
    at = f" (line {mark.line + 1})" if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return SpecplanError(f"{where}: malformed YAML{at}: {brief(problem, 200)}")


def parse_yaml(text: str, where: str, shipped: bool = False):
    """Parse one YAML document with the bounds of this module; one-line errors prefixed with `where`.
    shipped: a file shipped with specplan (libyaml's parser when installed; any error is reported as _Loader
    reports it)."""
    if shipped and _CLoader is not None:
        try:
            return _parse_with(_CLoader, text, where)
        except (SpecplanError, yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError):
            pass  # the error as the Python loader words it
    return _parse_with(_Loader, text, where)


def _parse_with(loader_cls, text: str, where: str):
    try:
        loader = loader_cls(text)
    except yaml.YAMLError as exc:  # a character YAML refuses (NUL, other control characters)
        raise _yaml_error(exc, where) from None
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise SpecplanError(f"{where}: nested more than {MAX_DEPTH} levels deep") from None
        if node is None:
            return None
        _check_nodes(node, where)
        data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, where) from None
    except (ValueError, TypeError, OverflowError) as exc:  # e.g. a timestamp out of range, an unhashable key
        if isinstance(exc, SpecplanError):
            raise
        raise SpecplanError(f"{where}: malformed YAML: {brief(str(exc), 200)}") from None
    finally:
        loader.dispose()
    check_values(data, where)
    return data


def _read(parse, path, what: str, mapping: bool):
    """Read, parse and (when `mapping`) require a mapping at the top level."""
    data = parse(read_text(path, what), str(path))
    if mapping and not isinstance(data, dict):
        raise SpecplanError(f"{path}: expected a mapping of fields, got {type(data).__name__}")
    return data


def read_yaml(path, what: str = "YAML file", mapping: bool = True, shipped: bool = False):
    """A YAML file parsed with the bounds of this module (a mapping unless `mapping` is False); shipped: a file
    shipped with specplan (see parse_yaml)."""
    return _read(lambda text, where: parse_yaml(text, where, shipped), path, what, mapping)


# ---------------------------------------------------------------- JSON

def _pairs(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise SpecplanError(f"duplicate key '{brief(k, 60)}'")
        out[k] = v
    return out


def _foreign_pairs(pairs):
    out = {}
    for k, v in pairs:
        out[k] = Unreadable("duplicate key (given twice in one object)") if k in out else v
    return out


def _foreign_int(text: str):
    v = int(text) if len(text) <= 40 else None  # 40 digits: far past 64 bits, and under Python's 4300-digit cap
    return v if v is not None and -INT_LIMIT <= v < INT_LIMIT else Unreadable("integer out of range (more than 64 bits)")


def parse_json(text: str, where: str, foreign: bool = False):
    """Parse JSON with duplicate keys refused, nesting capped and numbers checked; one-line errors.

    `foreign`: a document specplan did not define (a Hugging Face config): nesting is capped, nothing else is judged
    here; a key given twice or an integer beyond 64 bits is an `Unreadable` marker, NaN / inf stay floats, and the
    reader checks the fields it uses with `check_values`."""
    try:
        if foreign:
            data = json.loads(text, object_pairs_hook=_foreign_pairs, parse_int=_foreign_int)
        else:
            data = json.loads(text, object_pairs_hook=_pairs)
    except json.JSONDecodeError as exc:
        raise SpecplanError(f"{where}: malformed JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}") from None
    except SpecplanError as exc:
        raise SpecplanError(f"{where}: {exc}") from None
    except RecursionError:
        raise SpecplanError(f"{where}: nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise SpecplanError(f"{where}: malformed JSON: {brief(str(exc), 200)}") from None
    if foreign:
        _check_depth(data, where)
    else:
        check_values(data, where)
    return data


def _check_depth(data, where: str) -> None:
    """Raise a one-line error when a parsed document nests deeper than MAX_DEPTH (its values are not judged)."""
    stack = [(data, 0)]
    while stack:
        v, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise SpecplanError(f"{where}: nested more than {MAX_DEPTH} levels deep")
        if isinstance(v, dict):
            stack.extend((x, depth + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, depth + 1) for x in v)


def read_json(path, what: str = "JSON file", mapping: bool = True, foreign: bool = False):
    """A JSON file parsed with the bounds of this module (an object unless `mapping` is False); `foreign`: see
    parse_json."""
    if foreign:
        return _read(lambda text, where: parse_json(text, where, foreign=True), path, what, mapping)
    return _read(parse_json, path, what, mapping)


def read_yaml_or_json(path, what: str = "file", mapping: bool = True):
    """`.json` files as JSON, everything else as YAML (which also reads JSON)."""
    reader = read_json if os.fspath(path).endswith(".json") else read_yaml
    return reader(path, what, mapping)

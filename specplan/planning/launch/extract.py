"""Extract the flag lists of vLLM and SGLang from their own wheels (source read with `ast`, nothing imported).

Run: `pip download --no-deps vllm sglang ai-dynamo -d /tmp/wheels` then
`python -m specplan.planning.launch.extract /tmp/wheels` (writes specplan/planning/launch/flags/{vllm,sglang}.json
and the workers' own flags in flags/dynamo.json).
Each flag gets its value kind (bool | int | float | str | json | list), its allowed choices where the engine's
parser closes them, and the config field it sets; the emitters' tests check every flag they print against these
lists. TensorRT-LLM's LLM-API keys and Dynamo's deployment keys are read from their repositories (not on PyPI as
source) and committed by hand in flags/trtllm.json and flags/dynamo.json with the commit they were read at; the
Dynamo workers' own flags (`python -m dynamo.vllm|sglang|trtllm`) are extracted from the ai-dynamo wheel.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import zipfile
from pathlib import Path

FLAGS_DIR = Path(__file__).with_name("flags")


def _read_member(wheel: Path, member: str) -> str:
    """Text of one file inside a wheel (a zip)."""
    with zipfile.ZipFile(wheel) as z:
        return z.read(member).decode("utf-8")


def _members(wheel: Path, prefix: str) -> list[str]:
    """Names of the .py files under `prefix` in a wheel."""
    with zipfile.ZipFile(wheel) as z:
        return [n for n in z.namelist() if n.startswith(prefix) and n.endswith(".py")]


def _literal_aliases(trees: list[ast.Module]) -> dict[str, list]:
    """Module-level `Name = Literal[...]` (and unions of such names) over several modules."""
    raw: dict[str, ast.expr] = {}
    for tree in trees:
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                raw[node.targets[0].id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                raw[node.target.id] = node.value
    out: dict[str, list] = {}

    def lit(expr, depth=0):
        if depth > 8:
            return None
        if isinstance(expr, ast.Subscript) and _name(expr.value) == "Literal":
            elts = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
            vals = []
            for e in elts:
                sub = [e.value] if isinstance(e, ast.Constant) else lit(e, depth + 1)
                if sub is None:
                    return None
                vals += sub
            return vals
        if isinstance(expr, ast.Name) and expr.id in raw:
            return lit(raw[expr.id], depth + 1)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
            a, b = lit(expr.left, depth + 1), lit(expr.right, depth + 1)
            return (a or []) + (b or []) if (a or b) else None
        return None

    for k, v in raw.items():
        vals = lit(v)
        if vals:
            out[k] = vals
    return out


def _name(expr) -> str:
    """Dotted name of an expression's head (Literal, typing.Literal -> Literal)."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return ""


def _union_parts(expr) -> list:
    """The members of `A | B | None`, `Optional[A]`, `Union[A, B]`."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
        return _union_parts(expr.left) + _union_parts(expr.right)
    if isinstance(expr, ast.Subscript) and _name(expr.value) in ("Optional", "Union"):
        elts = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
        return [p for e in elts for p in _union_parts(e)]
    if isinstance(expr, ast.Subscript) and _name(expr.value) in ("Annotated", "A"):
        elts = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
        return _union_parts(elts[0])
    return [expr]


def _kind(annotation, literals: dict[str, list]) -> tuple[str, list | None]:
    """(value kind, choices or None) of a type annotation, in the order vLLM's and SGLang's parsers test them."""
    parts = [p for p in _union_parts(annotation) if not (isinstance(p, ast.Constant) and p.value is None)
             and _name(p) != "None"]
    names = {_name(p) if not isinstance(p, ast.Subscript) else _name(p.value) for p in parts}
    if "bool" in names:
        return "bool", None
    choices = None
    for p in parts:
        if isinstance(p, ast.Subscript) and _name(p.value) == "Literal":
            elts = p.slice.elts if isinstance(p.slice, ast.Tuple) else [p.slice]
            for e in elts:
                choices = (choices or []) + ([e.value] if isinstance(e, ast.Constant) else literals.get(_name(e), []))
        elif isinstance(p, ast.Name) and p.id in literals:
            choices = (choices or []) + literals[p.id]
    if choices:
        first = choices[0]
        return ("int" if isinstance(first, int) else "float" if isinstance(first, float) else "str"), choices
    if names & {"list", "List", "tuple", "Tuple", "set", "Set"}:
        return "list", None
    if "int" in names:
        return "int", None
    if "float" in names:
        return "float", None
    if names & {"dict", "Dict"}:
        return "json", None
    return "str", None


def _class_fields(tree: ast.Module, literals: dict[str, list]) -> dict[str, dict[str, dict]]:
    """{class name: {field: {kind, choices}}} for annotated class attributes."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            f = {}
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                    kind, choices = _kind(st.annotation, literals)
                    f[st.target.id] = {"kind": kind, "choices": choices}
            out[node.name] = f
    return out


def extract_vllm(wheel: Path) -> dict:
    """vLLM's `vllm serve` engine flags (EngineArgs.add_cli_args) and the keys of --speculative-config."""
    version = re.search(r"vllm-([^-]+)-", wheel.name).group(1)
    config_files = _members(wheel, "vllm/config/")
    trees = {m: ast.parse(_read_member(wheel, m)) for m in config_files}
    literals = _literal_aliases(list(trees.values()))
    classes: dict[str, dict] = {}
    for t in trees.values():
        classes.update(_class_fields(t, literals))
    arg_utils = ast.parse(_read_member(wheel, "vllm/engine/arg_utils.py"))
    classes.update(_class_fields(arg_utils, literals))
    kw_class: dict[str, str] = {}  # parallel_kwargs -> ParallelConfig
    flags: dict[str, dict] = {}
    for node in ast.walk(arg_utils):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _name(node.value.func) == "get_kwargs"
                and isinstance(node.targets[0], ast.Name) and node.value.args):
            kw_class[node.targets[0].id] = _name(node.value.args[0])
    for node in ast.walk(arg_utils):
        if not (isinstance(node, ast.Call) and _name(node.func) == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if not names or not names[0].startswith("--"):
            continue
        cls = field = None
        explicit = {k.arg: k.value for k in node.keywords if k.arg}
        for k in node.keywords:
            sub = k.value
            if k.arg is None and isinstance(sub, ast.Dict):  # **{**x_kwargs["f"], ...}
                sub = next((v for kk, v in zip(sub.keys, sub.values) if kk is None), None)
            if k.arg is None and isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name):
                cls = kw_class.get(sub.value.id)
                field = sub.slice.value if isinstance(sub.slice, ast.Constant) else None
        info = classes.get(cls, {}).get(field) if cls and field else None
        kind, choices = (info["kind"], info["choices"]) if info else ("str", None)
        if "action" in explicit and _name(explicit["action"]) in ("BooleanOptionalAction", "store_true"):
            kind = "bool"
        if "choices" in explicit and isinstance(explicit["choices"], (ast.List, ast.Tuple)):
            choices = [e.value for e in explicit["choices"].elts if isinstance(e, ast.Constant)]
        if names[0] == "--speculative-config":
            kind = "json"
        entry = {"kind": kind, "config": f"{cls}.{field}" if cls else None}
        if choices and kind != "bool":
            entry["choices"] = choices
        for n in names:
            if n.startswith("--"):
                flags[n] = entry
    spec = {k: ({"kind": v["kind"], "choices": v["choices"]} if v["choices"] else {"kind": v["kind"]})
            for k, v in classes["SpeculativeConfig"].items()}
    return {"engine": "vllm", "version": version, "command": "vllm serve MODEL",
            "source": f"PyPI wheel {wheel.name}: vllm/engine/arg_utils.py (EngineArgs.add_cli_args) and vllm/config/*.py "
                      "(field annotations, Literal choices), extracted by specplan.planning.launch.extract",
            "flags": dict(sorted(flags.items())), "speculative_config": dict(sorted(spec.items()))}


def _sglang_arg(meta) -> dict:
    """The keyword arguments of an `Arg(...)` call, literal values only (names kept as their identifier)."""
    out = {}
    if isinstance(meta, ast.Call):
        for k in meta.keywords:
            v = k.value
            if isinstance(v, ast.Constant):
                out[k.arg] = v.value
            elif isinstance(v, (ast.List, ast.Tuple)):
                out[k.arg] = [e.value for e in v.elts if isinstance(e, ast.Constant)]
            elif isinstance(v, ast.Name):
                out[k.arg] = {"name": v.id}
            else:
                out[k.arg] = {"expr": True}
    return out


def _sglang_spec_algorithms(wheel: Path) -> list[str]:
    """Builtin names `SpeculativeAlgorithm.from_string` accepts: the enum's members (not NONE) and reserved aliases."""
    info = ast.parse(_read_member(wheel, "sglang/srt/speculative/spec_info.py"))
    names = []
    for node in info.body:
        if isinstance(node, ast.ClassDef) and node.name == "SpeculativeAlgorithm":
            names = [st.targets[0].id for st in node.body if isinstance(st, ast.Assign)
                     and isinstance(st.targets[0], ast.Name) and st.targets[0].id != "NONE"]
    reg = ast.parse(_read_member(wheel, "sglang/srt/speculative/spec_registry.py"))
    for node in reg.body:
        if isinstance(node, ast.Assign) and _name(node.targets[0]) == "_RESERVED_ALIASES":
            names += [c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    return names


def extract_sglang(wheel: Path) -> dict:
    """SGLang's `python -m sglang.launch_server` flags: the arg_groups field dataclasses plus ServerArgs' manual ones."""
    version = re.search(r"sglang-([^-]+)-", wheel.name).group(1)
    base = "sglang/srt/arg_groups/"
    trees = {m: ast.parse(_read_member(wheel, m)) for m in _members(wheel, base)}
    literals = _literal_aliases(list(trees.values()))
    consts: dict[str, list] = {}
    for t in trees.values():
        for node in t.body:
            if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, (ast.List, ast.Tuple))):
                vals = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
                if vals and len(vals) == len(node.value.elts):
                    consts[node.targets[0].id] = vals
    flags: dict[str, dict] = {}
    for m, t in trees.items():
        if not m.startswith(base + "fields/"):
            continue
        for cls in (n for n in t.body if isinstance(n, ast.ClassDef)):
            for st in cls.body:
                if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
                    continue
                ann = st.annotation
                if not (isinstance(ann, ast.Subscript) and _name(ann.value) in ("A", "Annotated")):
                    continue  # no Arg / help text: not registered on the CLI
                elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
                meta = elts[1] if len(elts) > 1 else None
                arg = _sglang_arg(meta) if isinstance(meta, ast.Call) and _name(meta.func) == "Arg" else {}
                if not (isinstance(meta, ast.Constant) or arg) or arg.get("no_cli") is True:
                    continue
                kind, choices = _kind(elts[0], literals)
                ch = arg.get("choices")
                if isinstance(ch, list):
                    choices = ch
                elif isinstance(ch, dict) and "name" in ch:
                    choices = consts.get(ch["name"])  # None: computed at run time, left open
                if arg.get("action") is not None:
                    kind = "bool" if kind == "bool" else kind
                if arg.get("type_parser") is not None and kind not in ("bool",):
                    kind = "str" if kind in ("json", "list") else kind
                name = arg.get("cli_name") or "--" + st.target.id.replace("_", "-")
                entry = {"kind": kind, "field": f"{cls.name}.{st.target.id}"}
                if choices and kind != "bool":
                    entry["choices"] = choices
                for n in [name] + [a for a in (arg.get("aliases") or []) if isinstance(a, str)]:
                    flags[n] = entry
    server = ast.parse(_read_member(wheel, "sglang/srt/server_args.py"))
    for node in ast.walk(server):
        if isinstance(node, ast.Call) and _name(node.func) == "add_argument":
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if not names or not names[0].startswith("--"):
                continue
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            action = _name(kw["action"]) if "action" in kw else (kw["action"].value if "action" in kw and
                                                                 isinstance(kw["action"], ast.Constant) else "")
            act = kw.get("action")
            action = act.value if isinstance(act, ast.Constant) else _name(act) if act is not None else ""
            entry = {"kind": "bool" if action in ("store_true", "DeprecatedStoreTrueAction") else
                     _name(kw["type"]) if "type" in kw and _name(kw["type"]) in ("int", "float") else "str",
                     "field": "ServerArgs (manual)"}
            if action.startswith("Deprecated"):
                entry["deprecated"] = True
            for n in names:
                flags[n] = entry
    algos = _sglang_spec_algorithms(wheel)
    for n, e in flags.items():
        if e.get("field") == "Spec.speculative_algorithm":
            e["choices"] = algos  # the parser takes any string; these are the builtins SpeculativeAlgorithm knows
    return {"engine": "sglang", "version": version, "command": "python -m sglang.launch_server",
            "source": f"PyPI wheel {wheel.name}: sglang/srt/arg_groups/fields/*.py (Arg annotations, choices) and "
                      "sglang/srt/server_args.py (manual add_argument calls), extracted by "
                      "specplan.planning.launch.extract",
            "flags": dict(sorted(flags.items()))}


DYNAMO_ARG_FILES = {  # per worker module: the files whose add_argument(flag_name=...) calls define its own flags
    "vllm": ["dynamo/vllm/backend_args.py"],
    "sglang": ["dynamo/sglang/backend_args.py"],
    "trtllm": ["dynamo/trtllm/backend_args.py"],
}
DYNAMO_COMMON_PREFIX = "dynamo/common/configuration/groups/"  # runtime, router, http ... args every worker takes
DYNAMO_CONSTANTS = {"vllm": ["dynamo/common/constants.py"], "sglang": ["dynamo/common/constants.py"],
                    "trtllm": ["dynamo/common/constants.py", "dynamo/trtllm/constants.py"]}


def _module_strings(tree: ast.Module) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Module-level string constants and the string values of each Enum class of a module."""
    consts, enums = {}, {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            consts[node.targets[0].id] = node.value.value
        elif isinstance(node, ast.ClassDef):
            enums[node.name] = [b.value.value for b in node.body if isinstance(b, ast.Assign)
                                and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str)]
    return consts, enums


def _choices(expr, consts: dict, enums: dict) -> list | None:
    """The values of a `choices=` expression: a list of constants or names, `[m.value for m in Enum]`, `+` of
    such lists and `*` unpacking; None where it is anything else."""
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        a, b = _choices(expr.left, consts, enums), _choices(expr.right, consts, enums)
        return None if a is None or b is None else a + b
    if isinstance(expr, ast.ListComp) and len(expr.generators) == 1 and _name(expr.generators[0].iter) in enums:
        return list(enums[_name(expr.generators[0].iter)])
    if isinstance(expr, ast.List):
        out = []
        for e in expr.elts:
            if isinstance(e, ast.Constant):
                out.append(e.value)
            elif isinstance(e, ast.Name) and e.id in consts:
                out.append(consts[e.id])
            elif isinstance(e, ast.Starred):
                sub = _choices(e.value, consts, enums)
                if sub is None:
                    return None
                out += sub
            else:
                return None
        return out
    return None


def _dynamo_flags(tree: ast.Module, enums: dict | None = None) -> dict[str, dict]:
    """Flags of Dynamo's `add_argument(parser, flag_name=..., arg_type=..., choices=[...], obsolete_flag=...)` and
    `add_negatable_bool_argument(...)` calls (dynamo/common/configuration/utils.py): kind, literal choices, and the
    obsolete spelling as a deprecated alias; a flag whose own warning says "--flag is deprecated" is marked so."""
    consts, own_enums = _module_strings(tree)
    enums = {**(enums or {}), **own_enums}
    flags: dict[str, dict] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _name(node.func) in ("add_argument", "add_negatable_bool_argument")):
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        name = kw.get("flag_name")
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            continue
        if _name(node.func) == "add_negatable_bool_argument":
            entry = {"kind": "bool"}
        else:
            t = kw.get("arg_type")
            kind = "str" if t is None else _name(t) if _name(t) in ("int", "float") else "str"
            if isinstance(t, ast.Constant) and t.value is None:
                kind = "bool"
            entry = {"kind": kind}
            ch = _choices(kw["choices"], consts, enums) if "choices" in kw else None
            if ch is not None:
                entry["choices"] = ch
        flags[name.value] = entry
        if entry["kind"] == "bool" and _name(node.func) == "add_negatable_bool_argument":
            flags["--no-" + name.value[2:]] = dict(entry)
        old = kw.get("obsolete_flag")
        if isinstance(old, ast.Constant) and isinstance(old.value, str):
            flags[old.value] = {**entry, "deprecated": True}
    for node in ast.walk(tree):  # warnings such as "--is-prefill-worker is deprecated, use --disaggregation-mode"
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for flag in re.findall(r"(--[a-z0-9-]+)(?:=\S+)? is deprecated", node.value):
                if flag in flags and "=" not in node.value.split(" is deprecated")[0]:
                    flags[flag]["deprecated"] = True
    return flags


def extract_dynamo(wheel: Path, current: dict) -> dict:
    """flags/dynamo.json with each worker's own flags read from the ai-dynamo wheel (the rest kept as committed)."""
    common: dict[str, dict] = {}
    for member in sorted(_members(wheel, DYNAMO_COMMON_PREFIX)):
        common.update(_dynamo_flags(ast.parse(_read_member(wheel, member))))
    version = wheel.name.split("-")[1]
    out = json.loads(json.dumps(current))
    for backend, files in DYNAMO_ARG_FILES.items():
        enums: dict[str, list] = {}
        for member in DYNAMO_CONSTANTS[backend]:
            enums.update(_module_strings(ast.parse(_read_member(wheel, member)))[1])
        own = dict(common)
        for member in files:
            own.update(_dynamo_flags(ast.parse(_read_member(wheel, member)), enums))
        out["workers"][backend]["own_flags"] = dict(sorted(own.items()))
        out["workers"][backend]["own_flags_source"] = (
            f"PyPI wheel {wheel.name}: {', '.join(files)} and {DYNAMO_COMMON_PREFIX}*.py (add_argument calls), "
            f"extracted by specplan.planning.launch.extract (ai-dynamo {version})")
    return out


def main(argv: list[str] | None = None) -> None:
    """Write flags/vllm.json and flags/sglang.json from the wheels in a folder."""
    argv = sys.argv[1:] if argv is None else argv
    folder = Path(argv[0] if argv else "/tmp/wheels")
    out = Path(argv[1]) if len(argv) > 1 else FLAGS_DIR
    for pattern, fn in (("vllm-*.whl", extract_vllm), ("sglang-*.whl", extract_sglang)):
        wheels = sorted(folder.glob(pattern))
        if not wheels:
            raise SystemExit(f"error: {folder}: no {pattern} (pip download --no-deps vllm sglang -d {folder})")
        data = fn(wheels[-1])
        path = out / f"{data['engine']}.json"
        path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
        print(f"{path}: {len(data['flags'])} flags from {wheels[-1].name}")
    wheels = sorted(folder.glob("ai_dynamo-*.whl"))
    if wheels:
        path = out / "dynamo.json"
        data = extract_dynamo(wheels[-1], json.loads((FLAGS_DIR / "dynamo.json").read_text()))
        path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
        print(f"{path}: {sum(len(w['own_flags']) for w in data['workers'].values())} worker flags from {wheels[-1].name}")


if __name__ == "__main__":
    main()

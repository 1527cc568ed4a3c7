"""YAML what-if studies: a base scenario plus variants that override hardware, model, mechanisms and grids.

Schema (pydantic, see docs/studies.md): `name`, `description`, `base` (a Scenario), `variants` (list of
Variant), `include_base`, `report_batches`, `summary_context`, `plots`. Hardware/model overrides are mappings
of profile field -> value, `{set: value}` or `{scale: factor}`; nested fields by nesting or dotted keys;
`device:` / `profile:` switches the starting profile. Every error names the YAML path and the value, e.g.
`variants[2].hardware.mem_bandwidth_bytes_s: must be > 0, got -1`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from specplan.core.errors import SpecplanError, brief, without_repeat
from specplan.profiles.hardware import HardwareProfile
from specplan.profiles.model import ModelProfile
from specplan.profiles.registry import _builtin_dir, load_hardware, load_model, read_yaml
from specplan.planning.sweep import MAX_DRAFT_LEN

Ref = Union[str, dict[str, Any]]  # an id / YAML path, or an override mapping


def _kilo(x):
    """'8k' / '8K' -> 8192 (the CLI's token suffix); anything else unchanged for the schema to check."""
    if isinstance(x, str) and x.strip().lower().endswith("k") and x.strip()[:-1].isdigit():
        return int(x.strip()[:-1]) * 1024
    return x


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Grid(_Strict):
    """Grid fields shared by the base scenario and the variants (None: inherit / default)."""

    batch: list[int] | None = None
    batch_max: int | None = Field(None, gt=0)
    batch_points: int | None = Field(None, gt=1)
    draft_len: list[int] | None = None
    max_draft_len: int | None = Field(None, ge=0)
    context: list[int] | None = None
    tp: list[int] | None = None
    layouts: list[str] | None = None  # instead of tp: 'tp8', 'dp8ep8', ... (docs/parallel.md)
    mechanisms: dict[str, Any] | list[str] | None = None  # name -> acceptance spec (None: its default)
    dataset: str | None = None  # acceptance from published per-dataset profiles: a dataset or class (--dataset)
    dtype: str | None = None
    kv_dtype: str | None = None
    draft_dtype: str | None = None
    attention_style: str | None = None
    routing: str | None = None
    # serving studies (isl and osl given): the serving model's workload, engine and SLA (docs/studies.md)
    isl: int | None = Field(None, gt=0)
    osl: int | None = Field(None, gt=0)
    engine: str | None = None
    mode: Literal["agg", "disagg"] | None = None
    concurrency: list[int] | None = None  # None: searched (1 ... 1024, refined), as recommend does
    max_ttft_ms: float | None = Field(None, gt=0)
    max_tpot_ms: float | None = Field(None, gt=0)

    @field_validator("concurrency")
    @classmethod
    def _positive_concurrency(cls, v):
        if v is not None and (not v or any(c < 1 for c in v)):
            raise ValueError(f"must be a non-empty list of concurrencies >= 1, got {v}")
        return None if v is None else sorted(set(v))  # each concurrency priced once

    @field_validator("context", mode="before")
    @classmethod
    def _kilo_context(cls, v):
        """`context: [8k]` as on the command line: 8k = 8192 tokens."""
        return [_kilo(x) for x in v] if isinstance(v, list) else v


class Scenario(Grid):
    """The base: a model, one or more devices, optional external draft placement, grids."""

    model: Ref
    hardware: Union[Ref, list[Ref]]
    draft_model: Ref | None = None
    draft_hardware: Ref | None = None


class Variant(Grid):
    """One variant: a name plus the fields it changes (hardware/model: a new profile or field overrides)."""

    name: str = Field(min_length=1)
    model: Ref | None = None
    hardware: Union[Ref, list[Ref], None] = None
    draft_model: Ref | None = None
    draft_hardware: Ref | None = None


class Study(_Strict):
    name: str = Field(min_length=1)
    description: str = ""
    base: Scenario
    variants: list[Variant] = Field(default_factory=list)
    include_base: bool = True
    base_name: str = Field("base", min_length=1)
    report_batches: list[Annotated[int, Field(ge=1)]] = Field(default_factory=lambda: [1, 16, 64])
    summary_context: int | None = Field(None, ge=0)
    plots: list[str] = Field(default_factory=lambda: ["frontier", "speedup", "recommended_d"])

    @field_validator("summary_context", mode="before")
    @classmethod
    def _kilo_summary_context(cls, v):
        return _kilo(v)


PLOTS = ("frontier", "speedup", "recommended_d", "attention")
GRID_FIELDS = tuple(Grid.model_fields)
SERVING_FIELDS = ("isl", "osl", "engine", "mode", "concurrency", "max_ttft_ms", "max_tpot_ms")
STEP_ONLY_FIELDS = ("batch", "batch_max", "batch_points", "draft_len", "context", "layouts", "attention_style",
                    "routing", "draft_hardware")  # the serving search: D up to max_draft_len, batch from the load


# ---------------------------------------------------------------- error messages

def _val(v) -> str:
    """A user value for an error line, bounded in length however large the value (errors.brief)."""
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (dict, list)):
        return brief(v)
    return brief(v) if not isinstance(v, str) else brief(v, 80) if len(v) > 80 else repr(v)


def _path(prefix: str, loc) -> str:
    out = prefix
    for p in loc:
        if isinstance(p, int):
            out += f"[{p}]"
        elif p in ("str", "list[union[str,dict[str,any]]]", "dict[str,any]") or "[" in str(p) or p == "int":
            continue  # pydantic union branch tags
        else:
            out += f".{p}" if out else str(p)
    return out


def _message(e: dict) -> str:
    t, ctx = e.get("type", ""), e.get("ctx") or {}
    simple = {"greater_than": "must be > {gt}", "greater_than_equal": "must be >= {ge}",
              "less_than": "must be < {lt}", "less_than_equal": "must be <= {le}"}
    if t in simple:
        return simple[t].format(**{k: _val(v) for k, v in ctx.items()})
    if t.startswith("int_"):
        return "must be an integer"
    if t.startswith("float_"):
        return "must be a number"
    if t == "missing":
        return "required field missing"
    if t == "extra_forbidden":
        return "unknown field"
    return e.get("msg", "invalid").removeprefix("Value error, ")


def did_you_mean(name, known) -> str:
    """'; did you mean X?' for the closest of `known` to `name` (difflib), else ''."""
    import difflib

    close = difflib.get_close_matches(str(name), sorted(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def _fields_at(loc) -> list[str] | None:
    """Field names of the study schema model that holds the last key of `loc` (None when not a model)."""
    model = Study
    for key in loc[:-1]:
        if isinstance(key, int):
            continue
        f = model.model_fields.get(key)
        ann = getattr(f, "annotation", None)
        nxt = next((a for a in (ann, *getattr(ann, "__args__", ())) if isinstance(a, type) and
                    issubclass(a, BaseModel)), None)
        if nxt is None:
            return None
        model = nxt
    return list(model.model_fields)


def format_error(err: ValidationError, prefix: str = "") -> str:
    """The first validation error as `path: message, got value` (unknown fields: the nearest known one)."""
    e = err.errors()[0]
    msg = _message(e)
    if e.get("type") == "extra_forbidden" and not prefix:
        known = _fields_at(e.get("loc", ()))
        hint = did_you_mean(e["loc"][-1], known) if known else ""
        return f"{_path(prefix, e.get('loc', ()))}: {msg}{hint}"
    got = "" if e.get("type") == "missing" or "got" in msg else f", got {_val(e.get('input'))}"
    path = _path(prefix, e.get("loc", ()))
    head, sep, rest = msg.partition(": ")
    if sep and re.fullmatch(r"[A-Za-z_][\w.]*", head):  # a validator naming its own field (path not repeated)
        path = without_repeat(path, head)
        return f"{path}.{head}: {rest}" if path else msg
    return f"{path}: {msg}{got}"


# ---------------------------------------------------------------- overrides

def _apply(data: dict, overrides: dict, where: str, fields: dict | None) -> dict:
    out = dict(data)
    for key, val in overrides.items():
        head, _, rest = str(key).partition(".")
        here = f"{where}.{head}"
        if fields is not None and head not in fields:
            raise SpecplanError(f"{here}: unknown field{did_you_mean(head, fields) or ' (known: ' + ', '.join(sorted(fields)) + ')'}")
        if rest:
            val = {rest: val}
        cur = out.get(head)
        if isinstance(val, dict) and set(val) <= {"scale", "set"} and len(val) == 1:
            if "set" in val:
                out[head] = val["set"]
                continue
            f = val["scale"]
            if not isinstance(f, (int, float)) or isinstance(f, bool):
                raise SpecplanError(f"{here}.scale: must be a number, got {_val(f)}")
            if not isinstance(cur, (int, float)) or isinstance(cur, bool):
                raise SpecplanError(f"{here}: only numeric fields can be scaled, got {_val(cur)}")
            new = cur * f
            out[head] = int(round(new)) if isinstance(cur, int) and float(new).is_integer() else new
        elif isinstance(val, dict) and isinstance(cur, dict):
            sub = fields[head].annotation if fields is not None else None
            sub_fields = getattr(sub, "model_fields", None)
            out[head] = _apply(cur, val, here, sub_fields)
        else:
            out[head] = val
    return out


def resolve_profile(ref, cls, where: str, start=None):
    """A hardware/model profile from an id/path, or from `start` (or `device:`/`profile:`) plus overrides."""
    load = load_hardware if cls is HardwareProfile else load_model
    try:
        if ref is None:
            return start
        if isinstance(ref, (str, cls)):
            return load(ref)
        ov = dict(ref)
        base_ref = ov.pop("device", None) or ov.pop("profile", None)
        base = load(base_ref) if base_ref else start
        if base is None:
            raise SpecplanError(f"{where}: give a profile id (device: ...) to override")
        if not ov:
            return base
        data = _apply(base.model_dump(), ov, where, cls.model_fields)
    except SpecplanError as exc:
        msg = str(exc)
        raise SpecplanError(msg if msg.startswith(where) else f"{where}: {msg}") from None
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        raise SpecplanError(format_error(err, where)) from None


def example_study_path(name: str) -> Path:
    """Path of a shipped example study (examples/studies/NAME.yaml): the repository's copy, else the wheel's."""
    return _builtin_dir("examples/studies") / f"{name}.yaml"


def load_study(path_or_dict) -> Study:
    """Parse and validate a study (path or mapping); one-line errors with the file and the YAML path."""
    data = read_yaml(Path(path_or_dict)) if not isinstance(path_or_dict, dict) else path_or_dict
    try:
        st = Study.model_validate(data)
    except ValidationError as err:
        where = "" if isinstance(path_or_dict, dict) else f"{path_or_dict}: "
        raise SpecplanError(where + format_error(err)) from None
    for i, p in enumerate(st.plots):
        if p not in PLOTS:
            raise SpecplanError(f"plots[{i}]: must be one of {', '.join(PLOTS)}, got {p!r}")
    if not st.variants and not st.include_base:
        raise SpecplanError("variants: nothing to run: no variants and include_base: false")
    names = [v.name for v in st.variants]
    for i, n in enumerate(names):
        if n in names[:i] or (st.include_base and n == st.base_name):
            raise SpecplanError(f"variants[{i}].name: must be unique, got {n!r}")
    _check_kind(st)
    return st


def is_serving(st: Study) -> bool:
    """A serving study: the base gives the serving workload (isl and osl)."""
    return st.base.isl is not None or st.base.osl is not None


def _check_kind(st: Study) -> None:
    """One-line errors where a study mixes the step grid's and the serving model's fields."""
    serving = is_serving(st)
    if serving and (st.base.isl is None or st.base.osl is None):
        missing = "isl" if st.base.isl is None else "osl"
        raise SpecplanError(f"base.{missing}: a serving study needs both isl and osl, got only "
                            f"{'osl' if missing == 'isl' else 'isl'}")
    parts = [("base", st.base)] + [(f"variants[{i}]", v) for i, v in enumerate(st.variants)]
    for where, g in parts:
        if serving:
            bad = [k for k in STEP_ONLY_FIELDS if getattr(g, k) is not None]
            if bad:
                raise SpecplanError(f"{where}.{bad[0]}: not used by a serving study (isl/osl given: it searches D up "
                                    f"to max_draft_len and derives batch and context from the load), got "
                                    f"{_val(getattr(g, bad[0]))}")
        else:
            bad = [k for k in SERVING_FIELDS if getattr(g, k) is not None]
            if bad:
                raise SpecplanError(f"{where}.{bad[0]}: a serving field; give base.isl and base.osl to run a serving "
                                    f"study, got {_val(getattr(g, bad[0]))}")


def expand(st: Study) -> list[dict]:
    """Resolved scenarios (name, model, hardware list, draft profiles, sweep kwargs), base first."""
    out = []
    base_m = resolve_profile(st.base.model, ModelProfile, "base.model")
    hw_refs = st.base.hardware if isinstance(st.base.hardware, list) else [st.base.hardware]
    base_h = [resolve_profile(h, HardwareProfile, f"base.hardware[{i}]" if len(hw_refs) > 1 else "base.hardware")
              for i, h in enumerate(hw_refs)]
    base_dm = resolve_profile(st.base.draft_model, ModelProfile, "base.draft_model")
    base_dh = resolve_profile(st.base.draft_hardware, HardwareProfile, "base.draft_hardware")
    base_grid = {k: getattr(st.base, k) for k in GRID_FIELDS}
    items = ([(st.base_name, None, "base")] if st.include_base else []) + [
        (v.name, v, f"variants[{i}]") for i, v in enumerate(st.variants)]
    for name, v, where in items:
        m, hws, dm, dh, grid = base_m, base_h, base_dm, base_dh, dict(base_grid)
        if v is not None:
            m = resolve_profile(v.model, ModelProfile, f"{where}.model", base_m)
            if isinstance(v.hardware, list):
                hws = [resolve_profile(h, HardwareProfile, f"{where}.hardware[{j}]") for j, h in enumerate(v.hardware)]
            elif v.hardware is not None:  # overrides without a device of their own apply to each base device
                per_base = isinstance(v.hardware, dict) and not (v.hardware.get("device") or v.hardware.get("profile"))
                hws = ([resolve_profile(v.hardware, HardwareProfile, f"{where}.hardware", h) for h in base_h]
                       if per_base else [resolve_profile(v.hardware, HardwareProfile, f"{where}.hardware")])
            dm = resolve_profile(v.draft_model, ModelProfile, f"{where}.draft_model", base_dm)
            dh = resolve_profile(v.draft_hardware, HardwareProfile, f"{where}.draft_hardware", base_dh)
            grid.update({k: getattr(v, k) for k in GRID_FIELDS if getattr(v, k) is not None})
        _check_contexts(m, grid.get("context"), f"{where}.context" if v is not None and v.context else "base.context")
        out.append({"name": name, "where": where, "model": m, "hardware": hws, "draft_model": dm,
                    "draft_hardware": dh, "grid": grid, **_dataset_choice(m, grid, dm, where)})
    contexts = sorted({c for sc in out for c in (sc["grid"].get("context") or [1024])})
    if st.summary_context is not None and not is_serving(st) and st.summary_context not in contexts:
        raise SpecplanError(f"summary_context: must be one of the study's contexts ({', '.join(map(str, contexts))}), "
                            f"got {st.summary_context}")
    return out


def _check_contexts(model, contexts, where: str) -> None:
    """Refuse a context beyond the model's (max_context_len) in one line naming the study field, as pareto does."""
    cap = getattr(model, "max_context_len", None)
    for i, c in enumerate(contexts or []):
        if cap is not None and c > cap:
            raise SpecplanError(f"{where}[{i}]: {c} tokens exceeds {model.id}'s context of {cap} tokens "
                                f"(max_context_len)")


def sweep_kwargs(sc: dict) -> dict:
    """Keyword arguments of `specplan.planning.sweep.sweep` for one resolved scenario."""
    g = sc["grid"]
    mech = g.get("mechanisms")
    from specplan.costs.precision import Dtypes
    from specplan.model.step import StepKernels
    from specplan.planning.sweep import SweepAxes
    from specplan.speculation.spec import DraftPlacement, DraftSearch

    axes = SweepAxes(batch=g.get("batch"), batch_max=g.get("batch_max"), draft_lens=g.get("draft_len"), tp=g.get("tp"),
                     layouts=g.get("layouts"), contexts=g.get("context") or [1024],
                     **({"batch_points": g["batch_points"]} if g.get("batch_points") else {}))
    mk = _mechanism_kwargs(mech, sc)
    drafts = DraftSearch(mk.get("mechanisms"), mk.get("acceptance"),
                         g.get("max_draft_len") if g.get("max_draft_len") is not None else MAX_DRAFT_LEN)
    return dict(axes=axes, drafts=drafts, dtypes=Dtypes(g.get("dtype"), g.get("kv_dtype")),
                draft=DraftPlacement(sc["draft_model"], sc["draft_hardware"], g.get("draft_dtype")),
                kernels=StepKernels(attention_style=g.get("attention_style") or "shared",
                                    routing=g.get("routing") or "random"))


def _mechanism_kwargs(mech, sc: dict | None = None) -> dict:
    """`mechanisms` (and `acceptance`) keyword arguments from a scenario's mechanisms field (mapping or list),
    with the scenario's `dataset` profiles for the mechanisms that have no acceptance of their own."""
    if isinstance(mech, dict):
        out = {"mechanisms": list(mech), "acceptance": {k: v for k, v in mech.items() if v is not None}}
    else:
        out = {"mechanisms": mech} if isinstance(mech, list) else {}
    if sc and sc.get("dataset_acceptance"):
        out["acceptance"] = {**sc["dataset_acceptance"], **out.get("acceptance", {})}
    return out


def _dataset_choice(model, grid: dict, draft_model, where: str) -> dict:
    """A scenario's `dataset`: {mechanism: profile id} and the lines saying what each uses (and borrowed)."""
    if not grid.get("dataset"):
        return {}
    from specplan.speculation.datasets import choices_for

    mech = grid.get("mechanisms")
    given = [k for k, v in mech.items() if v is not None] if isinstance(mech, dict) else []
    try:
        _, choices = choices_for(model, grid["dataset"], list(mech) if mech else None, given, draft_model)
    except SpecplanError as e:
        raise SpecplanError(f"{where}.dataset: {str(e).split(': ', 1)[-1]}") from None
    return {"dataset_acceptance": {c.mechanism: c.profile.id for c in choices if c.profile is not None},
            "acceptance_dataset": [f"--dataset {grid['dataset']}: {c.line()}" for c in choices]}


def serving_kwargs(sc: dict) -> dict:
    """Keyword arguments of `specplan.planning.recommend_serving.serving_grid` for one serving scenario."""
    g = sc["grid"]
    from specplan.planning.options import GridOptions, Sla
    from specplan.speculation.spec import DraftSearch

    mech = _mechanism_kwargs(g.get("mechanisms"), sc)
    kw = dict(engine=g.get("engine"), drafts=DraftSearch(
        mech.get("mechanisms"), mech.get("acceptance"),
        g.get("max_draft_len") if g.get("max_draft_len") is not None else MAX_DRAFT_LEN),
        sla=Sla(g.get("max_ttft_ms"), g.get("max_tpot_ms")),
        grid=GridOptions(search_concurrency=g.get("concurrency") is None, d_by_load=False))
    for k in ("dtype", "kv_dtype", "draft_dtype"):
        if g.get(k) is not None:
            kw[k] = g[k]
    if sc["draft_model"] is not None:
        kw["draft_model"] = sc["draft_model"]
    return kw


def serving_grid_of(sc: dict):
    """One serving scenario's grid (every device x TP of the scenario; recommend's search, SLA flags included)."""
    import pandas as pd

    from specplan.planning.recommend_serving import serving_grid
    from specplan.planning.sweep import tp_choices
    from specplan.serving.workload import Workload

    g = sc["grid"]
    conc = np.asarray(g["concurrency"] if g.get("concurrency") else [1], dtype=float)
    wl = Workload(int(g["isl"]), int(g["osl"]), concurrency=conc if conc.size > 1 else float(conc[0]),
                  mode=g.get("mode") or "agg")
    parts = []
    for hw in sc["hardware"]:
        for tp in tp_choices(sc["model"], hw, g.get("tp")):  # default 1, 2, 4, 8 where heads divide (the schema)
            df = serving_grid(sc["model"], hw, wl, tp=tp, **serving_kwargs(sc))
            df.insert(0, "tp", tp)
            df.insert(0, "hardware", hw.id)
            df.insert(0, "mode", wl.mode)
            df.insert(0, "variant", sc["name"])
            parts.append(df)
    return pd.concat(parts, ignore_index=True)


def run_study(path_or_dict, outdir, progress: bool | None = None, plot=None) -> dict:
    """Expand, run every variant, write results (CSV, Parquet), frontier CSV and summary.md/json.

    Figures only through `plot` (see `specplan.study.report.write_outputs`); `specplan.plots.study_plots.run_study`
    passes the standard ones."""
    from specplan.study.report import write_outputs
    from specplan.planning.sweep import sweep

    file = "" if isinstance(path_or_dict, dict) else f"{path_or_dict}: "
    try:
        st = load_study(path_or_dict)
        scenarios = expand(st)
    except SpecplanError as exc:  # every study error names the file once
        msg = str(exc)
        raise SpecplanError(msg if msg.startswith(file) else file + msg) from None
    grids = []
    for sc in scenarios:
        try:
            if is_serving(st):
                df = serving_grid_of(sc)
            else:
                df = sweep(sc["model"], sc["hardware"], progress=progress, **sweep_kwargs(sc))
                df.insert(0, "variant", sc["name"])
        except SpecplanError as exc:
            raise SpecplanError(f"{file}{sc['where']}: {exc}") from None
        grids.append(df)
    if is_serving(st):
        from specplan.study.report import write_serving_outputs

        return write_serving_outputs(st, scenarios, grids, Path(outdir), plot=plot)
    return write_outputs(st, scenarios, grids, Path(outdir), plot=plot)

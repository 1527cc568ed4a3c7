"""Acceptance per dataset: profiles per (target, draft, dataset) built from the published table, and the choice
of one for a model, a mechanism and a dataset name or class (`--dataset`).

Data: specplan/data/acceptance_datasets/acceptance_by_dataset.csv (597 published ALs with source and location),
mapping.yaml (dataset names and classes, target -> model id and family, the draft-length rule). A profile groups
the rows of one source with the same target, draft, mechanism, dataset (and context), tree shape and temperature;
chains, blocks and trees are never mixed. AL(D): the project's i.i.d. closed form AL = (1 − α^(D+1)) / (1 − α)
with α fitted (least squares on the relative error) to every published D; with one D, the α that reproduces it
(`Acceptance.from_length`'s rule). Per-position values (vLLM's accepted_i / drafts, unconditional) give
AL(d) = 1 + Σ_{i<=d} p_i at each d of the row.
"""

from __future__ import annotations

import csv
import re
from dataclasses import fields
from functools import lru_cache
from pathlib import Path
from typing import ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from specplan.core.errors import SpecplanError
from specplan.core.records import Record, record
from specplan.speculation.acceptance import Acceptance, al_from_rate

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "acceptance_datasets"
TABLE = DATA_DIR / "acceptance_by_dataset.csv"
MAPPING = DATA_DIR / "mapping.yaml"
ALPHA_GRID = np.linspace(0.0, 1.0, 1001)  # the fit's coarse grid of α (then refined to 1e-6)
_LONGBENCH = re.compile(r"LongBench (\w+) .*context (\d+)K")


@record
class DatasetMeta(Record):
    """What an Acceptance built from a dataset profile says about it (a read-only mapping, as a shipped profile's)."""

    id: str
    dataset_profile: bool
    rows: tuple[str, ...]
    tree_tokens: int | None = None

    OPTIONAL: ClassVar[tuple[str, ...]] = ("tree_tokens",)


@record
class DatasetProfile:
    """One acceptance profile from the published table: its rows, set-up and fitted AL(D)."""

    id: str
    mechanism: str  # specplan's draft mechanism (eagle3, mtp, dflash, ngram, ...) or the table's (eagle, eagle2, other)
    target: str  # specplan model id (or the table's name, slugged)
    family: str
    variant: str
    draft: str
    dataset: str  # short name (humaneval, mt-bench, ...)
    dataset_raw: str
    dataset_class: str
    context_tokens: int | None  # LongBench's context, else None
    shape: str  # chain | block | tree | not stated
    tree_tokens: int | None  # verified tokens per sequence of a tree (root included), else None
    temperature: str  # '0', '1', '0.6', ... or 'not stated'
    engine: str
    source: str  # the source's URL or repository
    location: str
    rows: tuple[str, ...]
    d: tuple[float, ...]  # published D of each point (empty: no D published)
    al: tuple[float, ...]  # AL at each D (with the bonus token)
    unplaced_al: tuple[float, ...]  # ALs whose D the source does not give
    d_rule: str  # '' or where an assumed D comes from
    alpha: float | None  # fitted i.i.d. α (None: not priced)
    fit_rms_pct: float | None  # RMS relative error of the fit over the published points (%)

    @property
    def priced(self) -> bool:
        """True when AL(D) is known (a D is published or assumed by a stated rule)."""
        return self.alpha is not None

    @property
    def d_values(self) -> tuple[int, ...]:
        """The distinct published D."""
        return tuple(sorted({int(x) for x in self.d}))

    def rule(self) -> str:
        """How AL(D) follows from the rows, in words."""
        if not self.priced:
            return "not priced: the source gives no draft length"
        n = len(self.d_values)
        if n == 1:
            return f"one D published ({self.d_values[0]}): the i.i.d. α = {self.alpha:.4f} that reproduces it"
        return (f"i.i.d. α = {self.alpha:.4f} fitted to {n} D ({', '.join(map(str, self.d_values))}), "
                f"RMS error {self.fit_rms_pct:.1f}%")

    def acceptance(self) -> Acceptance:
        """This profile as an Acceptance (closed form of the fitted α, data up to the largest published D)."""
        if not self.priced:
            raise SpecplanError(f"acceptance profile {self.id}: {self.rule()}")
        meta = DatasetMeta(id=self.id, dataset_profile=True, rows=self.rows, tree_tokens=self.tree_tokens)
        src = (f"{self.id} (acceptance_by_dataset.csv rows {', '.join(self.rows)}; {self.source}, {self.location}; "
               f"{self.rule()}{'; D: ' + self.d_rule if self.d_rule else ''})")
        return Acceptance(kind="rate", alpha=self.alpha, d_max=float(max(self.d)), source=src, name=self.id,
                          meta=meta, tree_tokens=self.tree_tokens)


def fit_alpha(d, al) -> tuple[float, float]:
    """The i.i.d. α minimising the squared relative error of AL(D) = (1 − α^(D+1)) / (1 − α) over the points, and
    the RMS relative error (%) at that α (a 1e-3 grid of α, then a 1e-6 grid around its best)."""
    d = np.asarray(d, dtype=float)
    al = np.asarray(al, dtype=float)

    def sse(grid):
        err = (al_from_rate(grid[:, None], d[None, :]) - al[None, :]) / al[None, :]
        return np.sum(err ** 2, axis=1)

    coarse = ALPHA_GRID
    a0 = coarse[int(np.argmin(sse(coarse)))]
    fine = np.clip(np.linspace(a0 - 1e-3, a0 + 1e-3, 2001), 0.0, 1.0)
    s = sse(fine)
    i = int(np.argmin(s))
    return float(fine[i]), float(100.0 * np.sqrt(s[i] / d.size))


def leave_one_out(d, al) -> np.ndarray:
    """Relative errors (%) of AL at each published D predicted by the α fitted to the other D (one per point)."""
    d = np.asarray(d, dtype=float)
    al = np.asarray(al, dtype=float)
    out = []
    for k in range(d.size):
        keep = d != d[k]
        a, _ = fit_alpha(d[keep], al[keep])
        out.append(100.0 * float(abs(al_from_rate(a, d[k]) - al[k])) / al[k])
    return np.array(out)


class _Entry(BaseModel):
    """A frozen part of mapping.yaml, with no unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class DatasetEntry(_Entry):
    """A raw dataset of the table: its short name and class."""

    name: str
    dataset_class: str = Field(alias="class")


class TargetEntry(_Entry):
    """A raw target of the table: specplan model id, family and the set-up detail its name carries."""

    model: str
    family: str
    variant: str = ""


class AssumedDraftLen(_Entry):
    """The documented default D of a method where a source's rows give none."""

    prefix: str
    mechanism: str
    draft_len: float
    source: str


class DatasetMapping(_Entry):
    """mapping.yaml: dataset classes (with what they hold), their aliases and proxies, raw dataset / target /
    mechanism names, the model-free mechanisms and the draft-length rule."""

    classes: dict[str, str]
    class_aliases: dict[str, str] = {}
    proxies: dict[str, tuple[str, ...]] = {}
    datasets: dict[str, DatasetEntry]
    targets: dict[str, TargetEntry]
    mechanisms: dict[str, str]
    model_free: tuple[str, ...] = ()
    assumed_draft_len: tuple[AssumedDraftLen, ...] = ()


@lru_cache(maxsize=1)
def mapping() -> DatasetMapping:
    """mapping.yaml: classes, datasets, targets, mechanisms and the draft-length rule (parsed once)."""
    from specplan.core.loader import read_yaml

    return DatasetMapping.model_validate(read_yaml(MAPPING, "acceptance dataset mapping"))


@record
class PublishedRow:
    """One row of acceptance_by_dataset.csv: the columns a profile reads (text as the table has it)."""

    row_id: str
    target_model: str
    draft: str
    mechanism: str
    draft_len: str
    tree: str
    temperature: str
    dataset: str
    metric: str
    value: str
    per_position_values: str
    engine: str
    source_url_or_repo: str
    location: str


def read_table(path: Path = TABLE) -> list[PublishedRow]:
    """The rows of the published table, each parsed once into a PublishedRow (columns by header name)."""
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        cols = [header.index(x.name) for x in fields(PublishedRow)]
        return [PublishedRow(*(r[i] for i in cols)) for r in reader]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-")


def _dataset(raw: str) -> tuple[str, str, int | None]:
    """(short name, class, context tokens) of a raw dataset."""
    lb = _LONGBENCH.match(raw)
    if lb:
        return f"longbench-{lb.group(1).replace('_', '-')}", "long-context", int(lb.group(2)) * 1024
    known = mapping().datasets.get(raw)
    if known is None:
        raise SpecplanError(f"{MAPPING}: datasets: no entry for the table's dataset '{raw}'")
    return known.name, known.dataset_class, None


def _shape(tree: str, d: float | None) -> tuple[str, int | None]:
    """(chain | block | tree | not stated, verified tokens of a tree)."""
    t = tree.lower()
    if t.startswith("chain"):
        return "chain", None
    if t.startswith("block") and "not stated" not in t:
        return "block", None
    if "tree" in t:
        m = re.search(r"(\d+) (?:total )?draft tokens", t)
        if m is None:
            return "tree", None
        n = int(m.group(1))
        # SGLang's num_draft_tokens counts the root; EAGLE's total_token does not (its root is verified too)
        return "tree", n if ("incl. root" in t or "num_steps" in t) else n + 1
    return "not stated", None


def _temperature(raw: str) -> str:
    raw = raw.strip()
    return raw.split(" ")[0] if raw else "not stated"


def _points(row: PublishedRow) -> list[tuple[float, float]]:
    """(D, AL) pairs of a row: per-position values give one per position; an acceptance rate α at D gives 1 + α
    (its D is 1 in every such row); no D: none."""
    if not row.draft_len:
        return []
    d = float(row.draft_len)
    v = float(row.value)
    if row.per_position_values:
        p = np.cumsum([float(x) for x in row.per_position_values.split(";")])
        return [(float(i + 1), 1.0 + float(x)) for i, x in enumerate(p)]
    if row.metric == "alpha":
        return [(d, float(al_from_rate(v, d)))]
    return [(d, v)]


def _assumed_d(prefix: str, mechanism: str) -> tuple[float | None, str]:
    for r in mapping().assumed_draft_len:
        if r.prefix == prefix and r.mechanism == mechanism:
            return float(r.draft_len), r.source
    return None, ""


def _mechanism(row: PublishedRow) -> str:
    if row.mechanism == "other" and "dspark" in row.draft.lower():
        return "dspark"
    return mapping().mechanisms[row.mechanism]


def _group_key(row: PublishedRow) -> tuple:
    shape, tokens = _shape(row.tree, None)
    if row.mechanism == "ngram" and shape == "not stated":
        shape = "chain"  # prompt lookup proposes one copied run: a chain by construction
    return (row.row_id.split("-")[0], row.target_model, row.draft, row.mechanism, row.dataset,
            shape, tokens, _temperature(row.temperature))


@lru_cache(maxsize=1)
def dataset_profiles() -> tuple[DatasetProfile, ...]:
    """Every acceptance profile of the published table (read once)."""
    groups: dict[tuple, list[PublishedRow]] = {}
    for r in read_table():
        groups.setdefault(_group_key(r), []).append(r)
    out, seen = [], {}
    for key, rs in groups.items():
        prefix, target_raw, draft, mech_raw, ds_raw, shape, tokens, temp = key
        tgt = mapping().targets.get(target_raw)
        if tgt is None:
            raise SpecplanError(f"{MAPPING}: targets: no entry for the table's target '{target_raw}'")
        mech = _mechanism(rs[0])
        name, cls, ctx = _dataset(ds_raw)
        pts = [p for r in rs for p in _points(r)]
        unplaced = tuple(float(r.value) for r in rs if not r.draft_len)
        d_rule = ""
        if not pts:
            d_assumed, d_rule = _assumed_d(prefix, mech)
            if d_assumed is not None:
                pts = [(d_assumed, v) for v in unplaced]
                unplaced = ()
        alpha = rms = None
        if pts:
            alpha, rms = fit_alpha([p[0] for p in pts], [p[1] for p in pts])
        base = "-".join(x for x in (mech, tgt.model, _slug(tgt.variant) if tgt.variant else "",
                                    name, f"{ctx // 1024}k" if ctx else "", prefix,
                                    shape.replace(" ", "") + (str(tokens) if tokens else ""), f"t{temp}"
                                    if temp != "not stated" else "") if x)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.append(DatasetProfile(
            id=base if n == 0 else f"{base}-{_slug(draft)[:24]}", mechanism=mech, target=tgt.model,
            family=tgt.family, variant=tgt.variant, draft=draft, dataset=name, dataset_raw=ds_raw,
            dataset_class=cls, context_tokens=ctx, shape=shape, tree_tokens=tokens, temperature=temp,
            engine=rs[0].engine, source=rs[0].source_url_or_repo, location=rs[0].location,
            rows=tuple(r.row_id for r in rs), d=tuple(p[0] for p in pts), al=tuple(p[1] for p in pts),
            unplaced_al=unplaced, d_rule=d_rule, alpha=alpha, fit_rms_pct=rms))
    ids = [p.id for p in out]
    if len(set(ids)) != len(ids):
        raise SpecplanError("acceptance_by_dataset: two profiles share an id")
    return tuple(sorted(out, key=lambda p: p.id))


def dataset_profile(profile_id: str) -> DatasetProfile | None:
    """A dataset profile by id (None when there is none)."""
    return next((p for p in dataset_profiles() if p.id == profile_id), None)


def class_names() -> list[str]:
    """The dataset classes (chat, code, math, ...)."""
    return list(mapping().classes)


def dataset_names() -> list[str]:
    """The short dataset names of the table."""
    return sorted({p.dataset for p in dataset_profiles()})


@record
class DatasetQuery:
    """What --dataset asked for: a class or one dataset (by short name), and its class."""

    text: str
    dataset: str | None  # a dataset's short name, or None when a class was asked
    dataset_class: str


def parse_dataset(text: str, where: str = "--dataset") -> DatasetQuery:
    """A dataset name (humaneval, mt-bench, ...) or a class (chat, code, math, summarization, long-context,
    agentic); one line naming the known ones otherwise."""
    t = str(text).strip().lower()
    t = mapping().class_aliases.get(t, t)
    if t in mapping().classes:
        return DatasetQuery(text=str(text), dataset=None, dataset_class=t)
    hit = [p for p in dataset_profiles() if p.dataset == t]
    if not hit:
        raise SpecplanError(f"{where}: unknown dataset or class '{str(text)[:80]}' (classes: "
                            f"{', '.join(class_names())}; datasets: {', '.join(dataset_names())})")
    return DatasetQuery(text=str(text), dataset=t, dataset_class=hit[0].dataset_class)


def _shape_rank(p: DatasetProfile) -> int:
    return {"chain": 0, "block": 0, "tree": 1}.get(p.shape, 2)


@lru_cache(maxsize=1)
def _dataset_order() -> dict[str, int]:
    """Short dataset name -> its place in mapping.yaml (the class's lead dataset first)."""
    return {n: i for i, n in enumerate(dict.fromkeys(v.name for v in mapping().datasets.values()))}


def _dataset_rank(p: DatasetProfile) -> int:
    return _dataset_order().get(p.dataset, len(_dataset_order()))


def _temp_rank(p: DatasetProfile) -> int:
    return {"0": 0, "not stated": 1}.get(p.temperature, 2)


@record
class Choice:
    """The profile chosen for one mechanism, and what was borrowed to get it."""

    mechanism: str
    profile: DatasetProfile | None
    borrowed: tuple[str, ...]  # phrases: 'model qwen3-4b (same family qwen3)', 'dataset mbpp (class code)', ...
    only_t0: bool  # only T = 0 is published for what was chosen (model, mechanism, dataset)

    def line(self) -> str:
        """One line: the profile, its rule, temperature and what it borrowed."""
        if self.profile is None:
            return f"{self.mechanism}: no published acceptance for this dataset (or its class) — not set by --dataset"
        p = self.profile
        t = ("T = 0 (only T = 0 is published for it; AL at T > 0 is lower)" if self.only_t0
             else "T not stated" if p.temperature == "not stated" else f"T = {p.temperature}")
        what = f"{p.dataset}" + (f" {p.context_tokens // 1024}K" if p.context_tokens else "")
        shape = p.shape + (f" of {p.tree_tokens} tokens" if p.tree_tokens else "")
        borrowed = f"; borrowed {', '.join(self.borrowed)}" if self.borrowed else ""
        al = ", ".join(f"{x:.2f}@{int(d)}" for d, x in sorted(set(zip(p.d, p.al))))
        return (f"{self.mechanism}: {p.id} ({p.target}, {what}, {shape}, {t}; AL {al}; {p.rule()}; "
                f"rows {', '.join(p.rows)}){borrowed}")


def choose(model_id: str, mechanism: str, query: DatasetQuery, family: str | None = None) -> Choice:
    """The profile for (model, mechanism) on the asked dataset or class, by rank: the asked dataset, then its
    class, then the class's proxies; the same model, then its family (any model for n-gram); the class's datasets
    in mapping.yaml's order (MT-Bench first for chat, HumanEval for code, ...); chains and blocks before trees;
    more published D; T = 0 before unstated before T > 0; more rows; then id. Only priced profiles."""
    fam = family if family is not None else _family_of(model_id)
    free = mechanism in mapping().model_free
    classes = [query.dataset_class] + list(mapping().proxies.get(query.dataset_class, ()))
    best, best_key = None, None
    for p in dataset_profiles():
        if p.mechanism != mechanism or not p.priced:
            continue
        m_lvl = 0 if p.target == model_id else 1 if (fam and p.family == fam) else 2 if free else None
        if m_lvl is None:
            continue
        if query.dataset is not None and p.dataset == query.dataset:
            d_lvl = 0
        elif p.dataset_class in classes:
            d_lvl = 1 + classes.index(p.dataset_class)
        else:
            continue
        if query.dataset is None and d_lvl == 1:
            d_lvl = 0  # asked by class: any dataset of it is the answer, not a borrowing
        key = (d_lvl, m_lvl, _dataset_rank(p), _shape_rank(p), -len(p.d_values), _temp_rank(p), -len(p.rows), p.id)
        if best_key is None or key < best_key:
            best, best_key = p, key
    if best is None:
        return Choice(mechanism, None, (), False)
    borrowed = []
    if best_key[1] == 1:
        borrowed.append(f"model {best.target} (same family {best.family}, same head type) for {model_id}")
    elif best_key[1] == 2:
        borrowed.append(f"model {best.target} for {model_id} (n-gram acceptance depends on the data, not a drafter)")
    if best_key[0] > 0:
        asked = query.dataset or query.dataset_class
        borrowed.append(f"dataset {best.dataset} (class {best.dataset_class}) for {asked}")
    same = [p for p in dataset_profiles() if p.mechanism == mechanism and p.target == best.target
            and p.dataset == best.dataset]
    only_t0 = all(p.temperature == "0" for p in same)
    return Choice(mechanism, best, tuple(borrowed), only_t0)


def _family_of(model_id: str) -> str | None:
    """The family of a model id from the table's targets (None when the table does not name it)."""
    fams = {t.model: t.family for t in mapping().targets.values()}
    if model_id in fams:
        return fams[model_id]
    head = re.match(r"([a-z]+-?\d*(?:\.\d+)?)", model_id)
    stem = head.group(1) if head else model_id
    for prefix in (stem + "-", stem.split(".")[0] + "."):
        cands = {f for m, f in fams.items() if m.startswith(prefix)}
        if len(cands) == 1:
            return cands.pop()
    return None


def find(model: str | None = None, dataset: str | None = None, mechanism: str | None = None) -> list[DatasetProfile]:
    """The profiles of a model, a dataset name or class and a mechanism (each optional)."""
    q = parse_dataset(dataset) if dataset else None
    out = []
    for p in dataset_profiles():
        if model and p.target != model:
            continue
        if mechanism and p.mechanism != mechanism:
            continue
        if q is not None and (p.dataset != q.dataset if q.dataset else p.dataset_class != q.dataset_class):
            continue
        out.append(p)
    return out


def loo_errors(min_d: int = 3) -> list[tuple[str, np.ndarray]]:
    """(profile id, leave-one-out errors in %) for every profile with at least `min_d` published D."""
    return [(p.id, leave_one_out(p.d, p.al)) for p in dataset_profiles() if len(p.d_values) >= min_d]


# mechanisms --dataset sets when none is named: those specplan prices whose drafter needs nothing more
AUTO_MECHANISMS = ("eagle3", "mtp", "medusa", "dflash", "dspark", "ngram")


def choices_for(model, dataset: str, mechanisms=None, given=(), draft_model=None) -> tuple[DatasetQuery, list[Choice]]:
    """The asked dataset and a profile choice for each mechanism of a model (a Model): the named mechanisms,
    else AUTO_MECHANISMS (MTP only for a model with an MTP module, `external` with a draft model) that have a
    profile. Mechanisms in `given` (the user's own acceptance) are left out."""
    q = parse_dataset(dataset)
    named = bool(mechanisms)
    mechs = [x for x in (mechanisms or list(AUTO_MECHANISMS) + (["external"] if draft_model else [])) if x != "none"]
    out = []
    for mech in mechs:
        if mech in given or (not named and mech == "mtp" and getattr(model, "mtp", None) is None):
            continue
        c = choose(model.id, mech, q)
        if named or c.profile is not None:
            out.append(c)
    return q, out


def profile_rows(model: str | None = None, dataset: str | None = None, mechanism: str | None = None) -> list[dict]:
    """Summary dicts of the matching dataset profiles (`profiles list --model/--dataset/--mechanism`)."""
    out = []
    for p in find(model, dataset, mechanism):
        pts = sorted(set(zip(p.d, p.al)))
        out.append({"id": p.id, "mechanism": p.mechanism, "model": p.target, "dataset": p.dataset
                    + (f" {p.context_tokens // 1024}K" if p.context_tokens else ""), "class": p.dataset_class,
                    "shape": p.shape + (f" {p.tree_tokens}" if p.tree_tokens else ""), "T": p.temperature,
                    "AL@D": ", ".join(f"{a:.2f}@{int(d)}" for d, a in pts)
                    or "AL " + ", ".join(f"{a:.2f}" for a in p.unplaced_al) + " (D not published)",
                    "fit": "-" if not p.priced else f"α {p.alpha:.3f}" + (f" ±{p.fit_rms_pct:.1f}%" if len(p.d_values) > 1
                                                                          else ""),
                    "n_rows": len(p.rows), "rows": list(p.rows), "source": p.source})
    return out

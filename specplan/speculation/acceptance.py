"""Acceptance: AL(D) from an i.i.d. rate, per-position probabilities, one measured AL, or a shipped profile table.

AL counts the tokens produced per target iteration (accepted drafts plus the bonus token), 1 <= AL <= 1 + D.
- rate α:            AL(D) = (1 − α^(D+1)) / (1 − α), and 1 + D at α = 1
- per position p_i:  AL(D) = 1 + Σ_{i<=D} Π_{j<=i} p_j (each p_i conditional on the previous accepted)
- one AL at one D:   the α that reproduces it, then the closed form
- a table AL vs D:   monotone (PCHIP) interpolation through (0, 1) and the table points
Beyond the known range (`d_max`) per-position lists repeat their last p and tables continue with the closed form
of the α implied by their last point; callers that must not extrapolate check `d_max`.
"""

from __future__ import annotations

from dataclasses import field, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import ClassVar

import numpy as np

from specplan.core.errors import SpecplanError
from specplan.core.records import Record, record

PROFILE_DIR = Path(__file__).resolve().parents[1] / "data" / "acceptance_profiles"


def al_from_rate(alpha, d) -> np.ndarray:
    """Closed form AL(D) = (1 − α^(D+1)) / (1 − α); 1 + D at α = 1."""
    a = np.asarray(alpha, dtype=float)
    d = np.asarray(d, dtype=float)
    one = np.isclose(a, 1.0)
    safe = np.where(one, 0.5, a)
    return np.where(one, 1.0 + d, (1.0 - safe ** (d + 1.0)) / (1.0 - safe))


def al_from_per_position(probs, d) -> np.ndarray:
    """AL(D) = 1 + Σ_{i<=D} Π_{j<=i} p_j; positions past the list repeat its last probability."""
    p = np.asarray(probs, dtype=float)
    d = np.asarray(d, dtype=float)
    n_max = int(max(np.max(d), len(p))) if d.size else len(p)
    full = np.concatenate([p, np.full(max(0, n_max - len(p)), p[-1])])
    cum = np.concatenate([[1.0], 1.0 + np.cumsum(np.cumprod(full))])
    idx = np.clip(np.floor(d).astype(int), 0, n_max)
    frac = d - np.floor(d)
    nxt = np.clip(idx + 1, 0, n_max)
    return cum[idx] + frac * (cum[nxt] - cum[idx])


def rate_from_length(al: float, at_d: float) -> float:
    """The i.i.d. α whose closed-form AL at `at_d` equals `al` (bisection; once per pair: a table's tail asks for
    its last point's α on every lookup)."""
    return _rate_from_length(float(al), float(at_d))


@lru_cache(maxsize=1024)
def _rate_from_length(al: float, at_d: float) -> float:
    """rate_from_length of two numbers, computed."""
    if at_d <= 0:
        return 0.0
    if al >= 1.0 + at_d - 1e-12:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if al_from_rate(mid, at_d) < al:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def check_rate(alpha: float, where: str = "acceptance rate") -> float:
    """α must be a number in [0, 1]."""
    if not (0.0 <= float(alpha) <= 1.0):
        raise SpecplanError(f"{where}: α must be in [0, 1], got {alpha}")
    return float(alpha)


def check_length(al: float, at_d: float, where: str = "acceptance length") -> None:
    """A measured AL must lie in [1, 1 + D]."""
    if at_d < 0:
        raise SpecplanError(f"{where}: draft length must be >= 0, got {at_d}")
    if not (1.0 <= al <= 1.0 + at_d + 1e-9):
        raise SpecplanError(f"{where}: AL must be in [1, 1 + D] = [1, {1 + at_d:g}], got {al}")


def _pchip_end_slope(h0: float, h1: float, m0: float, m1: float) -> float:
    """PCHIP's end-point derivative: the one-sided three-point estimate, set to 0 where its sign differs from the
    end segment's and limited to 3x that segment's slope where the first two slopes differ in sign (Moler,
    Numerical Computing with MATLAB 3.6, pchiptx.m; scipy PchipInterpolator._edge_case)."""
    d = ((2 * h0 + h1) * m0 - h0 * m1) / (h0 + h1)
    if np.sign(d) != np.sign(m0):
        return 0.0
    if np.sign(m0) != np.sign(m1) and abs(d) > 3.0 * abs(m0):
        return 3.0 * m0
    return d


def _pchip(x: np.ndarray, y: np.ndarray, xq: np.ndarray) -> np.ndarray:
    """Monotone piecewise-cubic (PCHIP, Fritsch-Carlson) interpolation of (x, y) at `xq`, NaN outside [x0, xn].
    The same operations in the same order as scipy 1.17's PchipInterpolator(extrapolate=False) (derivatives by
    the weighted harmonic mean of the neighbouring slopes, the Hermite cubic on each interval as a power series in
    xq - x_i summed from its constant term), so its answers are scipy's bit for bit (a test) without scipy's
    import (about 0.4 s, once per process)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    h = np.diff(x)
    m = np.diff(y) / h
    if len(x) == 2:  # two points: linear
        dk = np.array([m[0], m[0]])
    else:
        sm = np.sign(m)
        flat = (sm[1:] != sm[:-1]) | (m[1:] == 0) | (m[:-1] == 0)
        w1 = 2 * h[1:] + h[:-1]
        w2 = h[1:] + 2 * h[:-1]
        with np.errstate(divide="ignore", invalid="ignore"):
            inner = np.where(flat, 0.0, 1.0 / ((w1 / m[:-1] + w2 / m[1:]) / (w1 + w2)))
        dk = np.concatenate(([_pchip_end_slope(h[0], h[1], m[0], m[1])], inner,
                             [_pchip_end_slope(h[-1], h[-2], m[-1], m[-2])]))
    t = (dk[:-1] + dk[1:] - 2 * m) / h
    c3, c2, c1, c0 = t / h, (m - dk[:-1]) / h - t, dk[:-1], y[:-1]
    q = np.asarray(xq, dtype=float)
    i = np.clip(np.searchsorted(x, q, side="right") - 1, 0, len(x) - 2)
    s = q - x[i]
    out = c0[i] + c1[i] * s + c2[i] * (s * s) + c3[i] * (s * s * s)
    return np.where((q >= x[0]) & (q <= x[-1]), out, np.nan)


@record
class Acceptance:
    """How many tokens one target iteration produces, as a function of the draft length D."""

    kind: str  # rate | length | per_position | table
    alpha: float | None = None
    probs: tuple[float, ...] = ()
    table_d: tuple[float, ...] = ()
    table_al: tuple[float, ...] = ()
    d_max: float | None = None  # largest D the input covers (None: the closed form holds everywhere)
    source: str = ""
    name: str = ""
    meta: dict = field(default_factory=dict, compare=False, hash=False)  # the profile it came from (a mapping)
    tree_tokens: int | None = field(default=None, compare=False)  # verified tokens of the tree the AL was measured with
    heads: int | None = field(default=None, compare=False)  # Medusa heads of the drafter it was measured with

    @classmethod
    def from_rate(cls, alpha: float) -> "Acceptance":
        """i.i.d. acceptance rate α in [0, 1]."""
        a = check_rate(alpha)
        return cls(kind="rate", alpha=a, source=f"acceptance rate α = {a:g}", name=f"α={a:g}")

    @classmethod
    def from_length(cls, al: float, at_d: float) -> "Acceptance":
        """A measured AL at one D: the implied i.i.d. α extends it to other D."""
        check_length(float(al), float(at_d))
        a = rate_from_length(float(al), float(at_d))
        return cls(kind="length", alpha=a, table_d=(float(at_d),), table_al=(float(al),),
                   source=f"AL {al:g} at D = {at_d:g} (implied α = {a:.4f})", name=f"AL={al:g}@{at_d:g}")

    @classmethod
    def from_per_position(cls, probs) -> "Acceptance":
        """Per-position acceptance probabilities p_1..p_n, each conditional on the previous accepted."""
        p = tuple(float(x) for x in probs)
        if not p:
            raise SpecplanError("acceptance per position: needs at least one probability")
        for i, x in enumerate(p, 1):
            check_rate(x, where=f"acceptance per position p_{i}")
        return cls(kind="per_position", probs=p, d_max=float(len(p)),
                   source="per-position " + ",".join(f"{x:g}" for x in p), name="per-position")

    @classmethod
    def from_table(cls, d, al, source: str = "", name: str = "table") -> "Acceptance":
        """A table of AL against D (monotone interpolation; (0, 1) is added)."""
        pts = sorted({float(x): float(y) for x, y in zip(d, al)}.items())
        if not pts:
            raise SpecplanError(f"acceptance table {name}: no points")
        for x, y in pts:
            check_length(y, x, where=f"acceptance table {name} at D = {x:g}")
        ys = [y for _, y in pts]
        if any(b < a - 1e-9 for a, b in zip(ys, ys[1:])):
            raise SpecplanError(f"acceptance table {name}: AL must not decrease with D")
        if len(pts) == 1:
            base = cls.from_length(pts[0][1], pts[0][0])
            return cls(kind="length", alpha=base.alpha, table_d=base.table_d, table_al=base.table_al,
                       d_max=pts[0][0], source=source or base.source, name=name)
        if pts[0][0] > 0:
            pts = [(0.0, 1.0)] + pts
        return cls(kind="table", table_d=tuple(x for x, _ in pts), table_al=tuple(y for _, y in pts),
                   d_max=pts[-1][0], source=source, name=name)

    @classmethod
    def from_profile(cls, name: str) -> "Acceptance":
        """A shipped acceptance profile (specplan/data/acceptance_profiles/<name>.yaml), or a dataset profile's id
        (`speculation/datasets.py`, `specplan profiles list --dataset`)."""
        if len(name) <= 200 and "/" not in name and not (PROFILE_DIR / f"{name}.yaml").is_file():
            from specplan.speculation.datasets import dataset_profile

            ds = dataset_profile(name)
            if ds is not None:
                return ds.acceptance()
        prof = load_profile(name)
        d, al = zip(*prof.points)
        acc = cls.from_table(d, al, source=prof.source or "", name=prof.id)
        return replace(acc, meta=prof, tree_tokens=prof.tree_tokens, heads=prof.heads)

    def al(self, d) -> np.ndarray:
        """AL at draft length(s) D (array), clipped to [1, 1 + D]; 1 at D = 0."""
        d = np.asarray(d, dtype=float)
        if d.size and np.min(d) < 0:
            raise SpecplanError(f"draft length: must be >= 0, got {np.min(d):g}")
        if self.kind in ("rate", "length"):
            out = al_from_rate(self.alpha, d)
        elif self.kind == "per_position":
            out = al_from_per_position(self.probs, d)
        else:
            out = self._table_al(d)
        return np.clip(out, 1.0, 1.0 + d)

    def _table_al(self, d: np.ndarray) -> np.ndarray:
        x = np.asarray(self.table_d)
        y = np.asarray(self.table_al)
        inside = _pchip(x, y, np.clip(d, x[0], x[-1]))
        a_tail = rate_from_length(y[-1], x[-1])
        tail = y[-1] + al_from_rate(a_tail, d) - al_from_rate(a_tail, x[-1])
        return np.where(d > x[-1], tail, inside)


def tree_paths(tree) -> tuple[tuple[int, ...], ...]:
    """A draft tree as its nodes, each the path of child ranks from the root (Medusa's "choices" format, e.g.
    (0,), (1,), (0, 0)); a list of ints is the branching of a full tree (branching[i] children per node at
    depth i), expanded to its paths. Every prefix of a node must be a node."""
    items = list(tree)
    if items and all(isinstance(x, (int, np.integer)) for x in items):
        k = [int(x) for x in items]
        if any(x < 1 for x in k):
            raise SpecplanError(f"tree branching: each must be >= 1, got {k}")
        paths, level = [], [()]
        for width in k:
            level = [p + (r,) for p in level for r in range(width)]
            paths += level
        return tuple(paths)
    paths = tuple(sorted({tuple(int(r) for r in p) for p in items}, key=lambda p: (len(p), p)))
    known = set(paths) | {()}
    for p in paths:
        if not p or any(r < 0 for r in p) or p[:-1] not in known:
            raise SpecplanError(f"tree: node {list(p)} needs non-negative ranks and its parent {list(p[:-1])} in the tree")
    return paths


def tree_tokens(tree) -> int:
    """Verified tokens of a draft tree (`tree_paths`): 1 + its nodes (root included). A full tree of branching
    [k1, k2, ...] has 1 + k1 + k1·k2 + ... tokens."""
    return 1 + len(tree_paths(tree))


def tree_depth(tree) -> int:
    """Depth of a draft tree (its longest path): the D it drafts."""
    return max((len(p) for p in tree_paths(tree)), default=0)


def tree_per_position(alpha: float, tree) -> tuple[float, ...]:
    """Per-depth acceptance p_i (conditional on depth i - 1 accepted) of the same tree `tree_tokens` prices.

    Model: at a reached node every child candidate is accepted independently with probability α and the walk
    follows the first accepted child in rank order (P(child j) = (1 − α)^(children before j) · α). For a full
    tree of branching k_i this is 1 − (1 − α)^k_i; a sparse tree (`tree_paths`) gets its exact per-depth values,
    so al_from_per_position(tree_per_position(α, tree), depth) is the tree's expected AL."""
    a = check_rate(alpha)
    paths = tree_paths(tree)
    children: dict[tuple, list] = {}
    for p in paths:
        children.setdefault(p[:-1], []).append(p)
    reach = {(): 1.0}
    depth = max((len(p) for p in paths), default=0)
    at_depth = [1.0] + [0.0] * depth
    for p in paths:  # sorted by depth, then rank: parents come first
        kids = sorted(children.get(p[:-1], []))
        before = kids.index(p)
        reach[p] = reach[p[:-1]] * (1.0 - a) ** before * a
        at_depth[len(p)] += reach[p]
    return tuple(at_depth[i] / at_depth[i - 1] if at_depth[i - 1] > 0 else 0.0 for i in range(1, depth + 1))


def simulate_al(probs, n_iter: int = 100_000, seed: int = 0) -> tuple[float, float]:
    """Monte Carlo of the draft/verify loop with synthetic acceptance: (mean AL, its standard error).

    Each iteration drafts len(probs) tokens; position i is accepted with probability p_i if all before it were;
    the target adds one token (correction or bonus) after the accepted prefix.
    """
    p = np.asarray(probs, dtype=float)
    rng = np.random.default_rng(seed)
    accepted = np.cumprod(rng.random((n_iter, p.size)) < p, axis=1).sum(axis=1) if p.size else np.zeros(n_iter)
    tokens = 1.0 + accepted
    return float(tokens.mean()), float(tokens.std(ddof=1) / np.sqrt(n_iter))


def simulate_generation(probs, n_tokens: int = 10_000, seed: int = 0) -> float:
    """Tokens per iteration when generating `n_tokens` tokens (the last iteration truncated), as a serving loop sees."""
    p = np.asarray(probs, dtype=float)
    rng = np.random.default_rng(seed)
    made, iters = 0, 0
    while made < n_tokens:
        acc = int(np.cumprod(rng.random(p.size) < p).sum()) if p.size else 0
        made += min(acc + 1, n_tokens - made)
        iters += 1
    return made / iters


@record
class AcceptanceProfile(Record):
    """An acceptance profile file (specplan/data/acceptance_profiles/<id>.yaml, or a user's YAML): the fields
    specplan reads, in the files' order; a read-only mapping without the keys a file leaves out."""

    id: str
    mechanism: str
    target: str | None = None
    also_targets: tuple[str, ...] | None = None
    draft_model: str | None = None
    workload: str | None = None
    default: bool | None = None
    tree_tokens: int | None = None  # verified tokens per sequence of the tree the AL was measured with
    heads: int | None = None  # Medusa heads of the measured drafter
    points: tuple[tuple[float, float], ...] = ()  # (D, AL) pairs, AL with the bonus token
    source: str | None = None
    notes: str | None = None

    OPTIONAL: ClassVar[tuple[str, ...]] = ("target", "also_targets", "draft_model", "workload", "default",
                                           "tree_tokens", "heads", "source", "notes")

    def __post_init__(self):
        object.__setattr__(self, "points", tuple(tuple(pt) for pt in self.points))
        if self.also_targets is not None:
            object.__setattr__(self, "also_targets", tuple(self.also_targets))

    @classmethod
    def of(cls, data: dict) -> "AcceptanceProfile":
        """The record of a checked profile file's mapping (keys it does not name are left out)."""
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


@lru_cache(maxsize=64)
def load_profile(name: str) -> AcceptanceProfile:
    """A shipped acceptance profile by id, or a YAML path, parsed once; one-line error listing the known ids."""
    from specplan.core.loader import read_yaml

    if len(name) > 255:
        raise SpecplanError(f"unknown acceptance profile '{name[:60]}...' (known: {', '.join(profile_ids())})")
    p = Path(name)
    path = p if p.suffix in (".yaml", ".yml") else PROFILE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise SpecplanError(f"unknown acceptance profile '{name}' (known: {', '.join(profile_ids())})")
    data = read_yaml(path, "acceptance profile", mapping=False)
    if not isinstance(data, dict) or "points" not in data or "mechanism" not in data:
        raise SpecplanError(f"{path}: an acceptance profile needs 'mechanism' and 'points' ([D, AL] pairs)")
    data.setdefault("id", path.stem)
    _check_points(data["points"], f"{path}: points")
    for k in ("id", "mechanism"):
        if not isinstance(data[k], str):
            raise SpecplanError(f"{path}: {k}: expected text, got {data[k]!r}"[:300])
    return AcceptanceProfile.of(data)


def _check_points(points, where: str) -> None:
    """[D, AL] pairs: D a whole number in [1, 256], AL a number (its range is checked with the table)."""
    if not isinstance(points, list) or not points:
        raise SpecplanError(f"{where}: expected a list of [D, AL] pairs, got {type(points).__name__}")
    for i, pt in enumerate(points):
        ok = isinstance(pt, (list, tuple)) and len(pt) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in pt)
        if not ok:
            raise SpecplanError(f"{where}[{i}]: expected a [D, AL] pair of numbers, got {str(pt)[:80]}")
        if not (1 <= pt[0] <= 256 and float(pt[0]).is_integer()):
            raise SpecplanError(f"{where}[{i}]: D must be a whole number in [1, 256], got {pt[0]}")


def profile_ids() -> list[str]:
    """Ids of the shipped acceptance profiles."""
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


def find_profile(mechanism: str, target: str) -> str | None:
    """Id of the shipped profile for (mechanism, target model), if exactly one default exists; a profile serves its
    `target` and the ids in its `also_targets` (another id of the same checkpoint family, e.g. deepseek-r1)."""
    hits = [i for i in profile_ids()
            if load_profile(i).mechanism == mechanism and (load_profile(i).target == target or
                                                           target in (load_profile(i).also_targets or ()))]
    preferred = [i for i in hits if load_profile(i).default]
    return (preferred or hits or [None])[0]

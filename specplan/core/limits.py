"""Upper bounds on every number a user can give: they keep grids in memory, loops short, integer columns from
overflowing and float results finite. One place, used by the profiles, the API entry points and the CLI.

Each bound is far above any real deployment (a batch of 16 M sequences, 4 G tokens of context, D = 256) and
far below where the arithmetic breaks (int64 columns, float32 measures of the sweep grid)."""

from __future__ import annotations

import math
import numbers

from specplan.core.errors import SpecplanError, brief

MAX_BATCH = 2**24  # concurrent sequences
MAX_CONTEXT = 2**32  # tokens in the KV cache per sequence
MAX_Q_LEN = 2**20  # new tokens per sequence in one step
DRAFT_LEN_LIMIT = 256  # largest draft length D accepted (two 128-row attention tiles at G = 1)
MAX_TREE_TOKENS = 4096  # verified tokens of a draft tree
MAX_TP = 4096  # tensor-parallel degree
MAX_GPUS = 2**16  # GPUs of one deployment (the GPUs-for-a-load search, --max-gpus)
MAX_BATCH_POINTS = 4096  # batch values of a sweep grid
MAX_LOAD_POINTS = 4096  # loads (concurrencies or request rates) of one predict sweep
MAX_GRID_POINTS = 50_000_000  # points of one sweep grid (about 4 GB of columns)
MAX_PROFILE_INT = 2**24  # any integer field of a model profile (layers, heads, dims, vocab, experts)


def check_int(value, name: str, lo: int = 1, hi: int | None = None) -> int:
    """`value` as a Python int within [lo, hi], or a one-line error naming `name` (bools and fractions refused)."""
    if isinstance(value, bool) or value is None:
        raise SpecplanError(f"{name}: expected an integer, got {brief(value)}")
    if not isinstance(value, numbers.Integral):
        if isinstance(value, numbers.Real) and math.isfinite(value) and float(value).is_integer():
            value = int(value)
        else:
            raise SpecplanError(f"{name}: expected an integer, got {brief(value)}")
    v = int(value)
    if v < lo:
        raise SpecplanError(f"{name}: must be >= {lo}, got {brief(v)}")
    if hi is not None and v > hi:
        raise SpecplanError(f"{name}: must be <= {hi:,}, got {brief(v)}")
    return v


def check_ints(values, name: str, lo: int = 1, hi: int | None = None) -> list[int]:
    """Every item of a non-empty list through `check_int`."""
    import numpy as np

    vals = np.atleast_1d(np.asarray(values, dtype=object)).ravel().tolist()
    if not vals:
        raise SpecplanError(f"{name}: give at least one value, got an empty list")
    return [check_int(v, name, lo, hi) for v in vals]


def check_number(value, name: str, lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> float:
    """A finite float within bounds, or a one-line error naming `name`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise SpecplanError(f"{name}: expected a number, got {brief(value)}")
    v = float(value)
    if not math.isfinite(v):
        raise SpecplanError(f"{name}: must be a finite number, got {v}")
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise SpecplanError(f"{name}: must be {'>' if lo_open else '>='} {lo:g}, got {v:g}")
    if hi is not None and v > hi:
        raise SpecplanError(f"{name}: must be <= {hi:g}, got {v:g}")
    return v


def check_array(value, name: str, lo: float, hi: float, integer: bool = True):
    """`value` (a number or array) as a float array, every entry finite, whole (when `integer`) and within
    [lo, hi]; a one-line error naming `name` and the first offending value otherwise. Vectorized."""
    import numpy as np

    try:
        a = np.asarray(value, dtype=float)
    except (OverflowError, TypeError, ValueError):
        vals = np.atleast_1d(np.asarray(value, dtype=object)).ravel().tolist()
        if not vals:
            raise SpecplanError(f"{name}: give at least one value, got an empty list") from None
        for v in vals:
            check_int(v, name, int(lo), int(hi)) if integer else check_number(v, name, lo, hi)
        raise SpecplanError(f"{name}: expected numbers, got {brief(value)}") from None
    if a.size == 0:
        return a
    bad = ~np.isfinite(a) | (a < lo) | (a > hi)
    if integer:
        bad |= np.isfinite(a) & (a != np.round(a))
    if np.any(bad):
        v = a.ravel()[int(np.argmax(bad.ravel()))]
        if not np.isfinite(v):
            raise SpecplanError(f"{name}: must be a finite number, got {v}")
        if integer and v != round(v):
            raise SpecplanError(f"{name}: must be a whole number, got {v:g}")
        raise SpecplanError(f"{name}: must be {'>= ' + format(lo, 'g') if v < lo else '<= ' + format(int(hi), ',')}"
                            f", got {v:g}")
    return a


# ---------------------------------------------------------------- float quantities a user gives
# One rule per quantity, in every command and every file that takes it: (low, high, low excluded). Every float
# option of the CLI is checked against its rule before the command runs (specplan.cli.guard_float_options); an
# option not named here must still be finite and within +-FLOAT_OPTION_LIMIT.

FLOAT_OPTION_LIMIT = 1e15  # any float option: finite and within +-1e15 (products of two stay far below 1e308)
REQUEST_RATE = (1e-9, 1e9, False)  # requests/s: one a 30-year period .. a billion a second
CONCURRENCY = (1.0, float(MAX_BATCH), False)  # requests in flight (closed loop)
TOKENS_PER_S = (0.0, 1e12, True)  # a throughput target (total or per user), tokens/s
TIME_MS = (0.0, 1e9, True)  # an SLA or SLO time (TTFT, TPOT), ms: up to 11.6 days

FLOAT_OPTIONS = {
    "--request-rate": REQUEST_RATE,
    "--concurrency": CONCURRENCY,
    "--target-tps": TOKENS_PER_S,
    "--target-tps-per-user": TOKENS_PER_S,
    "--max-ttft-ms": TIME_MS,
    "--max-tpot-ms": TIME_MS,
    "--slo-tpot-ms": TIME_MS,
}


def float_rule(option: str) -> tuple[float, float, bool]:
    """(low, high, low excluded) of a float option, by its name (FLOAT_OPTIONS, else +-FLOAT_OPTION_LIMIT)."""
    return FLOAT_OPTIONS.get(option, (-FLOAT_OPTION_LIMIT, FLOAT_OPTION_LIMIT, False))


def check_option(value, option: str) -> float:
    """A float option's value under its rule (float_rule), or a one-line error naming the option."""
    lo, hi, lo_open = float_rule(option)
    return check_number(value, option, lo, hi, lo_open)

MAX_PREFILL_STEPS = 4096  # engine steps to prefill one prompt (ISL / chunk budget): 1 M tokens in 256-token chunks


def check_prefill_steps(isl, budget_tokens, budget_name: str) -> None:
    """One line when the longest prompt needs more than MAX_PREFILL_STEPS chunks of `budget_tokens` (the work of
    pricing or simulating them would have no useful end); names the budget option and the smallest that works."""
    isl, budget = float(isl), float(budget_tokens)
    steps = math.ceil(isl / max(budget, 1.0))
    if steps > MAX_PREFILL_STEPS:
        need = math.ceil(isl / MAX_PREFILL_STEPS)
        raise SpecplanError(f"{budget_name}: a prompt of {isl:,.0f} tokens takes {steps:,} prefill steps of "
                            f"{budget:,.0f} tokens, more than {MAX_PREFILL_STEPS:,}; give a budget of at least "
                            f"{need:,} tokens")

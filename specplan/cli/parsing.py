"""Parsing of repeated / comma-separated CLI option values into lists and mechanism maps."""

from __future__ import annotations

from typing import Iterable, Optional

from specplan.core.errors import SpecplanError


def comma_list(values: str | Iterable[str] | None) -> list[str]:
    """Items of a comma list, or of several (repeated options), stripped, empties dropped."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    return [x.strip() for v in values for x in v.split(",") if x.strip()]


def _kilo_int(part: str) -> int:
    """'8k' / '8K' = 8192, else a plain integer; ValueError otherwise."""
    low = part.strip().lower()
    return int(low[:-1]) * 1024 if low.endswith("k") else int(low)


def int_list(values: Optional[Iterable[str]], name: str) -> list[int] | None:
    """Integers of repeated comma lists ('8k' = 8192); None when nothing is given."""
    if not values:
        return None
    out = []
    for part in comma_list([str(v) for v in values]):
        try:
            out.append(_kilo_int(part))
        except ValueError:
            raise SpecplanError(f"{name}: expected integers, got '{part}'") from None
    return out


def number_list(value: Optional[str], name: str) -> list[float] | None:
    """Numbers of one comma list ('1,8,32'), each under the option's bounds (core.limits.check_option, the rule
    every float option has); None when not given; a one-line error for an item that is not such a number."""
    from specplan.core.limits import MAX_LOAD_POINTS, check_option

    if value is None:
        return None
    parts = comma_list(str(value))
    if len(parts) > MAX_LOAD_POINTS:
        raise SpecplanError(f"{name}: at most {MAX_LOAD_POINTS} values, got {len(parts)}")
    out = []
    for part in parts:
        try:
            x = float(part)
        except ValueError:
            raise SpecplanError(f"{name}: expected numbers (a comma list such as 1,8,32), got '{part}'") from None
        out.append(check_option(x, name))
    if not out:
        raise SpecplanError(f"{name}: got no value")
    return out


def one_number(value: Optional[str], name: str) -> float | None:
    """The one number of an option that predict also takes as a comma list; a one-line error for a list."""
    out = number_list(value, name)
    if out is not None and len(out) > 1:
        raise SpecplanError(f"{name}: one value here (predict takes a comma list), got '{value}'")
    return None if out is None else out[0]


def context_tokens(value: str | int, name: str = "--context") -> int:
    """One token count, '32k' = 32768 (the same suffix as `pareto --context`); a one-line error otherwise."""
    try:
        return _kilo_int(str(value))
    except ValueError:
        raise SpecplanError(f"{name}: expected a token count such as 4096 or 32k, got '{value}'") from None


def model_context(model, value: str | int, name: str = "--context") -> int:
    """context_tokens, refused in one line beyond the model's context (max_context_len), as the serving commands
    refuse ISL + OSL beyond it."""
    from specplan.profiles.registry import load_model

    tokens = context_tokens(value, name)
    m = load_model(model)
    cap = getattr(m, "max_context_len", None)
    if cap is not None and tokens > cap:
        raise SpecplanError(f"context ({name}): {tokens} tokens exceeds {m.id}'s context of {cap} tokens "
                            f"(max_context_len)")
    return tokens


def fold_ids(value):
    """Mechanism ids of a CLI option in lower case (EAGLE3 -> eagle3): a typer callback for str or list values."""
    if value is None:
        return None
    return value.lower() if isinstance(value, str) else [v.lower() for v in value]


def mech_values(items: Optional[Iterable[str]], expected: str) -> dict[str, str]:
    """{mechanism: value} from repeated `--acceptance MECH=VALUE` options; `expected` describes the form in errors."""
    out = {}
    for item in items or []:
        if "=" not in item:
            raise SpecplanError(f"--acceptance: expected {expected}, got '{item}'")
        k, v = item.split("=", 1)
        out[k.strip().lower()] = v.strip()
    return out


def cli_layout(tp: int = 1, dp: int = 1, ep: int = 1, pp: int = 1):
    """The Layout of the --tp/--dp/--ep/--pp options (one error line when it does not divide)."""
    from specplan.model.parallel import Layout

    return Layout(tp=tp, dp=dp, ep=ep, pp=pp)


def serving_layouts(tp: int, dp: int, ep: int, pp: int, mode: str | None, prefill_layout: str | None,
                    decode_layout: str | None):
    """(TP, layout kw, prefill layout) of a serving command: {'layout': Layout} when --dp/--ep/--pp or --decode-layout
    go beyond TP (else {}: TP only, priced as before), and the disaggregated prefill pool's own layout or None;
    one-line errors for pool layouts outside --mode disagg or a --decode-layout that contradicts --tp/--dp/--ep."""
    from specplan.model.parallel import parse_layout

    if (prefill_layout or decode_layout) and mode != "disagg":
        flag = "--prefill-layout" if prefill_layout else "--decode-layout"
        raise SpecplanError(f"{flag}: a pool's own layout needs --mode disagg (aggregated: --tp/--dp/--ep)")
    lay = cli_layout(tp, dp, ep, pp)
    if decode_layout:
        dec = parse_layout(decode_layout)
        if (tp, dp, ep, pp) != (1, 1, 1, 1) and dec != lay:
            raise SpecplanError(f"--decode-layout: {dec.name} disagrees with --tp/--dp/--ep/--pp ({lay.name}); give "
                                f"one of them")
        lay = dec
    pre = parse_layout(prefill_layout) if prefill_layout else None
    beyond = (lay.dp, lay.ep, lay.pp) != (1, 1, 1) or pre is not None
    return lay.tp, ({"layout": lay} if beyond else {}), pre


FIGURE_FORMATS = ("png", "svg")  # what --formats takes; png alone by default (svg about doubles the figure time)
# what --figures takes (file stems): the frontier by default; the four explanatory figures on request, since
# each costs a fixed ~0.2-0.5 CPU s of matplotlib whatever the grid size (README speed table)
FIGURES = {"frontier": "frontier", "heatmap": "speedup_heatmap", "tiles": "attention_tiles",
           "acceptance": "acceptance", "breakdown": "breakdown", "energy": "serving_energy_frontier"}
DEFAULT_FIGURES = ("frontier",)


def figure_formats(value: str | None) -> tuple[str, ...]:
    """--formats 'png,svg' as a tuple of formats (default png); anything else is a one-line error."""
    fmts = tuple(dict.fromkeys(x.lower() for x in comma_list(value))) if value is not None else ("png",)
    bad = [f for f in fmts if f not in FIGURE_FORMATS]
    if bad or not fmts:
        raise SpecplanError(f"--formats: {', '.join(bad) or repr(value)} is not a figure format; use a comma list of "
                            f"{', '.join(FIGURE_FORMATS)}")
    return fmts


def figure_names(value: str | None, no_plots: bool = False) -> tuple[str, ...]:
    """--figures 'frontier,heatmap' (or 'all', 'none') as a tuple of FIGURES keys; default the frontier."""
    if value is None:
        return () if no_plots else DEFAULT_FIGURES
    names = [x.lower() for x in comma_list(value)]
    names = list(FIGURES) if names == ["all"] else [] if names == ["none"] else names
    bad = [x for x in names if x not in FIGURES]
    if bad or not comma_list(value):
        raise SpecplanError(f"--figures: {', '.join(bad) or repr(value)} is not a figure; use all, none or a comma "
                            f"list of {', '.join(FIGURES)}")
    return () if no_plots else tuple(x for x in FIGURES if x in names)

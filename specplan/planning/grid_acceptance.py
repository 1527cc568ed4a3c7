"""Which acceptance each mechanism of a swept grid used, in words (the pareto outputs' labels and legends) and the
largest D it covers."""

from __future__ import annotations


def acceptance_d_max(df, model_id: str, given: dict) -> dict:
    """{mechanism of the grid: the largest D its acceptance covers (None: a closed form, valid at every D)}."""
    from specplan.planning.sweep import parse_acceptance
    from specplan.speculation.speedup import resolve_acceptance

    out = {}
    for mech in (str(x) for x in df["mechanism"].unique() if str(x) != "none"):
        acc = resolve_acceptance(mech, model_id, parse_acceptance(given.get(mech)))
        out[mech] = None if acc is None else acc.d_max
    return out


def acceptance_words(value: str) -> str:
    """A user's --acceptance value in words: 'α = 0.8', 'AL 3.2 at D = 4', 'α per position 0.9, 0.8' or
    'profile ID'."""
    v = str(value).strip()
    if "@" in v:
        al, at = v.split("@", 1)
        return f"AL {al} at D = {at}"
    if "," in v:
        return "α per position " + ", ".join(x.strip() for x in v.split(",") if x.strip())
    try:
        return f"α = {float(v):g}"
    except ValueError:
        return f"profile {v}"


def acceptance_legend(df, model_id: str, given: dict) -> dict[str, str]:
    """{mechanism: its acceptance in words} for the acceptance figure: the user's value, else the shipped profile
    with its first-position α1 = AL(1) - 1 read off the grid."""
    from specplan.speculation.acceptance import find_profile

    out = {}
    for mech in [str(x) for x in df["mechanism"].unique() if str(x) != "none"]:
        if mech in given:
            out[mech] = acceptance_words(given[mech])
            continue
        one = df.loc[(df["mechanism"] == mech) & (df["draft_len"] == 1), "acceptance_length"]
        a1 = f"α1 = {float(one.mean()) - 1:.2f}" if len(one) else ""
        src = find_profile(mech, model_id)
        out[mech] = ", ".join(x for x in (f"profile {src}" if src else "mechanism default", a1) if x)
    return out


def acceptance_label(df, model_id: str, given: dict) -> str:
    """Which acceptance each swept mechanism used: the user's value or the shipped profile's id."""
    from specplan.speculation.acceptance import find_profile

    parts = []
    for mech in [str(x) for x in df["mechanism"].unique() if str(x) != "none"]:
        src = given.get(mech) or find_profile(mech, model_id) or "mechanism default"
        parts.append(f"{mech} {src}")
    return "; ".join(parts)

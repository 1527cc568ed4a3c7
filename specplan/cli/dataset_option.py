"""`--dataset NAME|CLASS` of predict, recommend and pareto: the published acceptance profile of the model for
each mechanism (specplan/speculation/datasets.py), printed, as `MECH=PROFILE_ID` acceptance values."""

from __future__ import annotations

import sys


def dataset_acceptance(dataset, model, mechanisms, acceptance, draft_model=None, json_out=False, given=()):
    """`acceptance` (repeated MECH=VALUE) extended with --dataset's profile for every mechanism without a value of
    its own; the choice is printed (to stderr with --json). Unchanged without --dataset."""
    if dataset is None:
        return acceptance
    from specplan.profiles.registry import load_model
    from specplan.speculation.datasets import choices_for

    m = load_model(model)
    own = {x.partition("=")[0].strip().lower() for x in acceptance or [] if "=" in x} | set(given)
    q, choices = choices_for(m, dataset, mechanisms, own, draft_model)
    what = f"dataset {q.dataset} (class {q.dataset_class})" if q.dataset else f"class {q.dataset_class}"
    lines = [f"acceptance for {m.id} on {what} (--dataset {dataset}):"]
    lines += [f"  {c.line()}" for c in choices]
    lines += [f"  {k}: your --acceptance (not --dataset)" for k in sorted(own)]
    if not choices:
        lines.append("  no published profile for any mechanism of this model; acceptance left to --acceptance")
    print("\n".join(lines), file=sys.stderr if json_out else sys.stdout)
    return list(acceptance or []) + [f"{c.mechanism}={c.profile.id}" for c in choices if c.profile is not None]

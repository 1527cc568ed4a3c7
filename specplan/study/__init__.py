"""YAML what-if studies: the schema and runner (spec), the summary (report); figures in specplan.plots.study_plots.

`from specplan.study import load_study, run_study, ...` keeps working: the public names of spec are re-exported."""

from specplan.study.spec import (Grid, Scenario, Variant, Study, did_you_mean, format_error, resolve_profile, example_study_path, load_study, expand, sweep_kwargs, run_study, Ref, PLOTS, GRID_FIELDS)  # noqa: F401

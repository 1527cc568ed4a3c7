"""Regenerate the committed adaptive example (examples/adaptive/, docs/plots/adaptive_example_timeseries.*)."""

from pathlib import Path

from specplan.adaptive.report import make_example

if __name__ == "__main__":
    for p in make_example(Path(__file__).resolve().parents[1]):
        print(p)

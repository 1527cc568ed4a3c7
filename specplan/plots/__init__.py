"""Figures (matplotlib, Agg canvas, no pyplot state): one function per figure, each returning the Figure.

1. `plot_frontier`: tokens/s per GPU against tokens/s per user, with and without speculation, a thinned set
   of frontier points labelled (B, D, TP) with overlapping labels dropped.
2. `plot_speedup_heatmap`: speedup over batch x D for one (device, TP, mechanism, context).
3. `plot_attention_tiles`: attention runtime and normalized throughput against D for several G (128-row tiles).
4. `plot_acceptance`: acceptance length against D per mechanism.
5. `plot_breakdown`: step time by kernel class against D.
6. `plot_serving_frontier`: the serving model's tokens/s per GPU against tokens/s per user, with and without
   speculation, agg and disagg, per device; the TPOT SLA as a line; points labelled (TP, concurrency, D, pools).

Each figure draws numbers computed in `specplan.planning.figures` (frontier curves, attention tiles, the step
breakdown, energy envelopes, a study's figures) or the grid and frontier tables; plots compute nothing, and import
no module of planning/, model/, costs/, speculation/, serving/ or profiles/ (tests/core/test_layering.py).

`save_figure` writes PNG and SVG atomically; SVG is deterministic (fixed hash salt, no date).
Import this module lazily: it imports matplotlib.

One module per figure (`frontier_plot`, `heatmap`, `attention_tiles`, `acceptance_plot`, `breakdown_plot`), the
label placer (`labels`) and the canvas (`canvas`: figures, margins, tick marks, `save_figure`); every name is
importable from `specplan.plots` as before.
"""

from __future__ import annotations

import matplotlib  # noqa: F401  (callers use plots.matplotlib)

from specplan.plots.canvas import (RC, _figure, _lines, fit_margins, plain_log_axes, save_figure,  # noqa: F401
                                   tick_marks)
from specplan.plots.labels import _OFFSETS, _REL, _line_boxes, place_labels  # noqa: F401
from specplan.plots.frontier_plot import _label_candidates, frontier_label, plot_frontier  # noqa: F401
from specplan.plots.heatmap import _pick, colorbar_ticks, plot_speedup_heatmap  # noqa: F401
from specplan.plots.attention_tiles import plot_attention_tiles  # noqa: F401
from specplan.plots.acceptance_plot import plot_acceptance  # noqa: F401
from specplan.plots.breakdown_plot import CLASS_COLORS, plot_breakdown  # noqa: F401
from specplan.plots.serving_frontier import plot_serving_frontier  # noqa: F401

__all__ = ["RC", "CLASS_COLORS", "fit_margins", "tick_marks", "plain_log_axes", "save_figure", "place_labels",
           "frontier_label", "plot_frontier", "colorbar_ticks", "plot_speedup_heatmap", "plot_attention_tiles",
           "plot_acceptance", "plot_breakdown",
           "plot_serving_frontier"]

"""Frontier point labels: a greedy placer that keeps every label inside the axes and off the other labels,
the curves and the legend."""

from __future__ import annotations

import numpy as np

from specplan.plots.canvas import fit_margins

# Label offsets tried in order (points from the anchor; ha, va): right-above first, then around the point.
_OFFSETS = [(5, 5, "left", "bottom"), (5, -5, "left", "top"), (-5, 5, "right", "bottom"),
            (-5, -5, "right", "top"), (0, 9, "center", "bottom"), (0, -9, "center", "top"),
            (14, 14, "left", "bottom"), (14, -14, "left", "top"), (-14, 14, "right", "bottom"),
            (-14, -14, "right", "top"), (0, 22, "center", "bottom"), (0, -22, "center", "top"),
            (26, 4, "left", "center"), (-26, 4, "right", "center"), (24, 30, "left", "bottom"),
            (-24, -30, "right", "top"), (24, -30, "left", "top"), (-24, 30, "right", "bottom"),
            (0, 38, "center", "bottom"), (0, -38, "center", "top")]


# Leader lines start at the label's corner (or edge centre) nearest its point: no clipping against the box.
_REL = {"left": 0.0, "bottom": 0.0, "center": 0.5, "right": 1.0, "top": 1.0}


def place_labels(fig, ax, items, avoid=(), per_group: int = 8, pad_px: float = 2.0) -> list:
    """Greedy label placer: for each (group, x, y, text, color) item, in order, try the `_OFFSETS` around the
    point and keep the first position whose box lies inside the axes and overlaps no placed label, no curve
    of the axes and no `avoid` artist (e.g. the legend); at most `per_group` labels per group. Fixes the
    layout first (fixed margins: `fit_margins` and the axis limits, no draw; a layout engine: one draw, then
    the engine is switched off), so the boxes tested are the boxes drawn. A label's size is measured once;
    candidate boxes are shifted copies, tested against all taken boxes in numpy. Returns the placed texts."""
    if getattr(fig, "_specplan_margins", None) is not None:
        fit_margins(fig)
        ax.get_xlim(), ax.get_ylim()  # autoscale now, as the draw would
    else:
        fig.draw_without_rendering()
        fig.set_layout_engine("none")
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    taken = [a.get_window_extent(renderer) for a in avoid if a is not None]
    boxes = np.vstack([np.array([[b.x0, b.y0, b.x1, b.y1] for b in taken], dtype=float).reshape(-1, 4),
                       _line_boxes(ax)])
    px = fig.dpi / 72.0
    placed, count = [], {}
    for group, x, y, text, color in items:
        if count.get(group, 0) >= per_group:
            continue
        X, Y = ax.transData.transform((x, y))
        probe = ax.text(0, 0, text, fontsize=7, transform=None)
        w, h = probe.get_window_extent(renderer).size
        probe.remove()
        for dx, dy, ha, va in _OFFSETS:
            x0 = X + dx * px - {"left": 0.0, "center": w / 2, "right": w}[ha] - pad_px
            y0 = Y + dy * px - {"bottom": 0.0, "center": h / 2, "top": h}[va] - pad_px
            x1, y1 = x0 + w + 2 * pad_px, y0 + h + 2 * pad_px
            if abs(dx) + abs(dy) > 12:  # a leader line, from the label's corner to the point, is in the box too
                cx, cy = x0 + pad_px + _REL[ha] * w, y0 + pad_px + _REL[va] * h
                x0, x1, y0, y1 = min(x0, X, cx), max(x1, X, cx), min(y0, Y, cy), max(y1, Y, cy)
            if x0 < frame.x0 or x1 > frame.x1 or y0 < frame.y0 or y1 > frame.y1:
                continue
            if boxes.size and np.any((boxes[:, 0] < x1) & (boxes[:, 2] > x0) & (boxes[:, 1] < y1) &
                                     (boxes[:, 3] > y0)):
                continue
            t = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=7,
                            color=color, annotation_clip=True,
                            arrowprops=dict(arrowstyle="-", color=color, lw=0.6, alpha=0.7, shrinkA=0, shrinkB=2,
                                            patchA=None, relpos=(_REL[ha], _REL[va]))
                            if abs(dx) + abs(dy) > 12 else None)
            t.set_in_layout(False)
            bb = t.get_window_extent(renderer).padded(pad_px)  # the real box (checked, then kept)
            if (bb.x0 < frame.x0 or bb.x1 > frame.x1 or bb.y0 < frame.y0 or bb.y1 > frame.y1 or (boxes.size and np.any(
                    (boxes[:, 0] < bb.x1) & (boxes[:, 2] > bb.x0) & (boxes[:, 1] < bb.y1) & (boxes[:, 3] > bb.y0)))):
                t.remove()
                continue
            t.set_gid(f"frontier-label:{group}")
            t.set_bbox(dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.75))
            boxes = np.vstack([boxes, [bb.x0, bb.y0, bb.x1, bb.y1]])
            placed.append(t)
            count[group] = count.get(group, 0) + 1
            break
    return placed


def _line_boxes(ax, step_px: float = 5.0, r_px: float = 2.5) -> np.ndarray:
    """(n, 4) display-space boxes (x0, y0, x1, y1) along every line of `ax`, one per `step_px` of its length,
    so that labels are not placed across the curves."""
    pts = []
    for line in ax.get_lines():
        xy = ax.transData.transform(np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float))
        xy = xy[np.all(np.isfinite(xy), axis=1)]
        if len(xy) == 0:
            continue
        seg = np.hypot(*np.diff(xy, axis=0).T) if len(xy) > 1 else np.zeros(0)
        s = np.r_[0.0, np.cumsum(seg)]  # arc length at each vertex
        at = np.arange(0.0, s[-1] + step_px, step_px) if s[-1] > 0 else np.zeros(1)
        pts.append(np.column_stack([np.interp(at, s, xy[:, 0]), np.interp(at, s, xy[:, 1])]))
    if not pts:
        return np.zeros((0, 4))
    p = np.vstack(pts)
    return np.column_stack([p - r_px, p + r_px])

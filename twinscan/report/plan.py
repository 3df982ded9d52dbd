"""The capture seen from above as inline SVG: sparse points, camera path, floor extent, markers."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from twinscan.report.markup import esc

PATH_COLOUR, FLOOR_COLOUR, MARKER_COLOUR = "#d9480f", "#2b8a3e", "#111827"
GRID_COLOUR, AXIS_TEXT = "#d5dbe3", "#5f6b7a"


@dataclass(frozen=True)
class TopDownPlan:
    """Everything drawn, in the twin's world frame (metres, Z up) or model units when `metric` is false."""

    camera_centres: np.ndarray  # (N, 3) in capture order
    camera_forward: np.ndarray  # (N, 3) unit optical axes
    points: np.ndarray  # (M, 3)
    point_colours: np.ndarray  # (M, 3) uint8
    floor_xy: tuple[tuple[float, float], tuple[float, float]] | None = None  # ((xmin, ymin), (xmax, ymax))
    markers: dict[int, np.ndarray] = field(default_factory=dict)  # id -> (4, 3) corners
    metric: bool = True
    gaps: frozenset[int] = frozenset()  # i: kept frames between cameras i-1 and i could not be posed


def _nice_step(span: float, target_lines: int = 8) -> float:
    raw = span / target_lines
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


def _extent(plan: TopDownPlan) -> tuple[np.ndarray, np.ndarray]:
    """Cameras, floor and markers in full; points only between their 2nd and 98th percentiles."""
    parts = [plan.camera_centres[:, :2]]
    if len(plan.points):
        parts.append(np.percentile(plan.points[:, :2], [2, 98], axis=0))
    if plan.floor_xy is not None:
        parts.append(np.array(plan.floor_xy))
    parts += [corners[:, :2] for corners in plan.markers.values()]
    stacked = np.concatenate(parts)
    low, high = stacked.min(axis=0), stacked.max(axis=0)
    pad = 0.04 * max(high - low) + 1e-6
    return low - pad, high + pad


def plan_svg(plan: TopDownPlan, width_px: int = 720, max_points: int = 4000, seed: int = 0) -> str:
    """An SVG (no external references) `width_px` wide, +x right and +y up, with a metre grid."""
    low, high = _extent(plan)
    margin_left, margin_bottom, margin_top, margin_right = 46, 34, 10, 10
    scale = (width_px - margin_left - margin_right) / (high[0] - low[0])
    height_px = round((high[1] - low[1]) * scale) + margin_top + margin_bottom

    def x_px(x: float) -> float:
        return margin_left + (x - low[0]) * scale

    def y_px(y: float) -> float:
        return margin_top + (high[1] - y) * scale

    out = [f'<svg viewBox="0 0 {width_px} {height_px}" width="{width_px}" height="{height_px}" '
           f'role="img" aria-label="top-down plan" font-family="system-ui,sans-serif" font-size="11">',
           f'<rect x="{margin_left}" y="{margin_top}" width="{(high[0] - low[0]) * scale:.1f}" '
           f'height="{(high[1] - low[1]) * scale:.1f}" fill="#fbfcfd" stroke="{GRID_COLOUR}"/>']
    unit = "m" if plan.metric else "units"
    step = _nice_step(max(high - low))
    for value in np.arange(math.ceil(low[0] / step) * step, high[0], step):
        out.append(f'<line x1="{x_px(value):.1f}" y1="{margin_top}" x2="{x_px(value):.1f}" '
                   f'y2="{y_px(low[1]):.1f}" stroke="{GRID_COLOUR}" stroke-width="0.8"/>'
                   f'<text x="{x_px(value):.1f}" y="{y_px(low[1]) + 14:.1f}" text-anchor="middle" '
                   f'fill="{AXIS_TEXT}">{value:g}</text>')
    for value in np.arange(math.ceil(low[1] / step) * step, high[1], step):
        out.append(f'<line x1="{margin_left}" y1="{y_px(value):.1f}" x2="{x_px(high[0]):.1f}" '
                   f'y2="{y_px(value):.1f}" stroke="{GRID_COLOUR}" stroke-width="0.8"/>'
                   f'<text x="{margin_left - 6}" y="{y_px(value) + 4:.1f}" text-anchor="end" '
                   f'fill="{AXIS_TEXT}">{value:g}</text>')
    out.append(f'<text x="{x_px(high[0]):.1f}" y="{height_px - 4}" text-anchor="end" fill="{AXIS_TEXT}">'
               f'x ({unit}) →</text><text x="12" y="{margin_top + 10}" fill="{AXIS_TEXT}" '
               f'transform="rotate(-90 12 {margin_top + 10})" text-anchor="end">y ({unit}) →</text>')
    if plan.floor_xy is not None:
        (x0, y0), (x1, y1) = plan.floor_xy
        out.append(f'<rect x="{x_px(x0):.1f}" y="{y_px(y1):.1f}" width="{(x1 - x0) * scale:.1f}" '
                   f'height="{(y1 - y0) * scale:.1f}" fill="{FLOOR_COLOUR}" fill-opacity="0.06" '
                   f'stroke="{FLOOR_COLOUR}" stroke-width="1.6" stroke-dasharray="7 4"/>'
                   f'<text x="{x_px(x0) + 5:.1f}" y="{y_px(y1) + 14:.1f}" fill="{FLOOR_COLOUR}">floor</text>')
    points, colours = plan.points, plan.point_colours
    if len(points) > max_points:
        keep = np.random.default_rng(seed).choice(len(points), max_points, replace=False)
        points, colours = points[np.sort(keep)], colours[np.sort(keep)]
    inside = np.all((points[:, :2] >= low) & (points[:, :2] <= high), axis=1)
    out.append('<g fill-opacity="0.85">' + "".join(
        f'<circle cx="{x_px(x):.1f}" cy="{y_px(y):.1f}" r="1.5" fill="#{r:02x}{g:02x}{b:02x}"/>'
        for (x, y, _), (r, g, b) in zip(points[inside], colours[inside])) + "</g>")
    for marker_id, corners in sorted(plan.markers.items()):
        polygon = " ".join(f"{x_px(x):.1f},{y_px(y):.1f}" for x, y in corners[:, :2])
        right, top = corners[:, 0].max(), corners[:, 1].max()
        out.append(f'<polygon points="{polygon}" fill="{MARKER_COLOUR}" stroke="#fff" stroke-width="1.2"/>'
                   f'<text x="{x_px(right) + 6:.1f}" y="{y_px(top) + 4:.1f}" font-weight="600" '
                   f'fill="{MARKER_COLOUR}" paint-order="stroke" stroke="#fff" stroke-width="3">'
                   f'marker {marker_id}</text>')
    centres = plan.camera_centres
    if len(centres):
        tick = 0.035 * max(high - low)
        for i in range(1, len(centres)):
            dash = ' stroke-dasharray="5 4"' if i in plan.gaps else ""
            out.append(f'<line x1="{x_px(centres[i - 1, 0]):.1f}" y1="{y_px(centres[i - 1, 1]):.1f}" '
                       f'x2="{x_px(centres[i, 0]):.1f}" y2="{y_px(centres[i, 1]):.1f}" stroke="{PATH_COLOUR}" '
                       f'stroke-width="1.8" stroke-linecap="round"{dash}/>')
        for centre, forward in zip(centres, plan.camera_forward):
            direction = forward[:2] / (np.linalg.norm(forward[:2]) + 1e-12)
            tip = centre[:2] + tick * direction
            out.append(f'<line x1="{x_px(centre[0]):.1f}" y1="{y_px(centre[1]):.1f}" x2="{x_px(tip[0]):.1f}" '
                       f'y2="{y_px(tip[1]):.1f}" stroke="{PATH_COLOUR}" stroke-width="1" stroke-opacity="0.7"/>'
                       f'<circle cx="{x_px(centre[0]):.1f}" cy="{y_px(centre[1]):.1f}" r="2.6" fill="#fff" '
                       f'stroke="{PATH_COLOUR}" stroke-width="1.3"/>')
        for label, (x, y, _), shape in (("start", centres[0], "circle"), ("end", centres[-1], "rect")):
            mark = (f'<circle cx="{x_px(x):.1f}" cy="{y_px(y):.1f}" r="5.5" fill="{PATH_COLOUR}"/>'
                    if shape == "circle" else
                    f'<rect x="{x_px(x) - 5:.1f}" y="{y_px(y) - 5:.1f}" width="10" height="10" fill="{PATH_COLOUR}"/>')
            out.append(mark + f'<text x="{x_px(x) + 8:.1f}" y="{y_px(y) - 7:.1f}" fill="{PATH_COLOUR}" '
                       f'font-weight="600" paint-order="stroke" stroke="#fff" stroke-width="3">{esc(label)}</text>')
    out.append("</svg>")
    return "".join(out)

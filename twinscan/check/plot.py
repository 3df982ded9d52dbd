"""Top-down figure of the probes at rest over the colliders' height map (OpenCV, no matplotlib)."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from twinscan.atomic import write_bytes
from twinscan.check.report import CheckReport
from twinscan.errors import TwinscanError

OUTCOME_BGR = {"rested": (80, 200, 60), "hovered": (0, 160, 255), "fell_through": (40, 40, 230),
               "unsettled": (200, 60, 200)}
HOLE_BGR = (40, 40, 40)
LEGEND_WIDTH_PX = 800


def plot_probes(report: CheckReport, png_path: str | Path, size_px: int = 800) -> Path:
    """Colliders' top heights (viridis, dark grey where nothing is below) with each probe's footprint
    at rest in its outcome's colour; a probe that fell through is a cross where it was dropped."""
    heights = report.height_map
    if heights is None:
        raise TwinscanError(f"{report.usd_path} has no colliders to draw", "fix the validation errors first")
    rows, cols = heights.heights.shape
    scale = size_px / max(rows, cols)  # pixels per cell
    known = np.isfinite(heights.heights)
    low, high = (np.nanmin(heights.heights), np.nanmax(heights.heights)) if known.any() else (0.0, 1.0)
    normalized = np.where(known, (heights.heights - low) / max(high - low, 1e-9), 0.0)
    image = cv2.applyColorMap((normalized * 255).astype(np.uint8), cv2.COLORMAP_VIRIDIS)
    image[~known] = HOLE_BGR
    image = np.ascontiguousarray(image[::-1])  # map row 0 is the lowest y; pictures have +y up
    image = cv2.resize(image, (round(cols * scale), round(rows * scale)), interpolation=cv2.INTER_NEAREST)

    def pixel(x: float, y: float) -> tuple[int, int]:
        column = (x - heights.origin_xy[0]) / heights.cell * scale
        row = (y - heights.origin_xy[1]) / heights.cell * scale
        return round(column), round(rows * scale - row)  # +y up in the picture

    for probe in report.probes:
        colour = OUTCOME_BGR[probe.outcome]
        if probe.outcome == "fell_through":
            cv2.drawMarker(image, pixel(*probe.xy), colour, cv2.MARKER_TILTED_CROSS, 18, 3)
            continue
        x, y = probe.rest_position[:2]
        side = max(2, round(report.probe_size_m / heights.cell * scale / 2))
        centre = pixel(x, y)
        cv2.rectangle(image, (centre[0] - side, centre[1] - side), (centre[0] + side, centre[1] + side), colour, -1)
        cv2.rectangle(image, (centre[0] - side, centre[1] - side), (centre[0] + side, centre[1] + side), (0, 0, 0), 1)
    if image.shape[1] < LEGEND_WIDTH_PX:  # a tall map: pad so the legend fits
        image = cv2.copyMakeBorder(image, 0, 0, 0, LEGEND_WIDTH_PX - image.shape[1], cv2.BORDER_CONSTANT,
                                   value=(255, 255, 255))
    footer = np.full((56, image.shape[1], 3), 255, np.uint8)
    metre_px = round(scale / heights.cell)
    cv2.line(footer, (10, 14), (10 + metre_px, 14), (0, 0, 0), 3)
    cv2.putText(footer, "1 m", (16 + metre_px, 19), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (0, 0, 0), 1, cv2.LINE_AA)
    cv2.putText(footer, f"height {low:.2f} to {high:.2f} m", (10, 44), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (0, 0, 0), 1,
                cv2.LINE_AA)
    for index, (name, colour) in enumerate(OUTCOME_BGR.items()):
        left = 190 + 150 * index
        cv2.rectangle(footer, (left, 34), (left + 12, 46), colour, -1)
        count = sum(probe.outcome == name for probe in report.probes)
        cv2.putText(footer, f"{name.replace('_', ' ')} {count}", (left + 18, 45), cv2.FONT_HERSHEY_SIMPLEX, 0.45,
                    (0, 0, 0), 1, cv2.LINE_AA)
    ok, encoded = cv2.imencode(".png", np.vstack([image, footer]))
    if not ok:
        raise TwinscanError(f"OpenCV could not encode {png_path}", "check the opencv-python-headless install")
    write_bytes(png_path, encoded.tobytes())
    return Path(png_path)

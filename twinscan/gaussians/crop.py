"""Crop splats to the captured region. What lies far outside what the cameras saw makes "frame all" in
a viewer or Isaac Sim zoom out to tens of metres around a cell of a few; it is mostly the hall behind
the cell (large splats that draw a third of the sample's pixels), so the splats stage keeps it apart as
an optional background rather than dropping it. What lies under the floor is a floater and goes.

Pure functions on arrays, in the twin frame (docs/CONVENTIONS.md: Z up, floor at z = 0 when found).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twinscan.errors import TwinscanError

QUANTILE = 0.01  # the SfM points' robust extent: per axis, from the 1st to the 99th percentile
MARGIN = 0.1  # the region reaches this fraction of its largest side beyond that extent, on every side
FLOOR_MARGIN = 0.02  # with a floor: splats centred lower than this fraction of the largest side under z = 0 go


@dataclass(frozen=True)
class CapturedRegion:
    """An axis-aligned box in the twin frame, and the floor's cut (None without a floor)."""

    lower: np.ndarray  # (3,)
    upper: np.ndarray  # (3,)
    floor_cut_z: float | None  # splats centred below this z are under the floor

    @property
    def size(self) -> np.ndarray:
        return self.upper - self.lower


def captured_region(points: np.ndarray, camera_centres: np.ndarray, floor_found: bool, *,
                    quantile: float = QUANTILE, margin: float = MARGIN,
                    floor_margin: float = FLOOR_MARGIN) -> CapturedRegion:
    """The region a capture saw: the robust extent of the SfM points (per axis, `quantile` to
    1 - `quantile`) joined with every camera centre, grown by `margin` times its largest side on each
    side. Margins are fractions, not metres, because a capture without a scale source has arbitrary units.
    With `floor_found` the floor cut is `floor_margin` times the largest side under z = 0."""
    points = np.asarray(points, np.float64).reshape(-1, 3)
    camera_centres = np.asarray(camera_centres, np.float64).reshape(-1, 3)
    if len(points) + len(camera_centres) == 0:
        raise TwinscanError("no SfM points or cameras to bound the captured region", "run `twinscan sfm` first")
    parts = [camera_centres]
    if len(points):
        parts.append(np.quantile(points, [quantile, 1 - quantile], axis=0))
    known = np.concatenate(parts)
    lower, upper = known.min(axis=0), known.max(axis=0)
    side = float((upper - lower).max())
    side = side if side > 0 else 1.0
    grow = margin * side
    return CapturedRegion(lower - grow, upper + grow, -floor_margin * side if floor_found else None)


def outside_region(means: np.ndarray, region: CapturedRegion) -> np.ndarray:
    """(N,) True where a splat's centre lies outside the region's box: the background."""
    means = np.asarray(means, np.float64).reshape(-1, 3)
    return np.any((means < region.lower) | (means > region.upper), axis=1)


def crop_mask(means: np.ndarray, region: CapturedRegion) -> tuple[np.ndarray, dict[str, int]]:
    """The splats to keep (by their centres), and how many are cropped: `cropped_outside` (outside the
    region's box) and `cropped_below_floor` (inside the box, centred under the floor cut)."""
    means = np.asarray(means, np.float64).reshape(-1, 3)
    outside = outside_region(means, region)
    below = np.zeros(len(means), bool) if region.floor_cut_z is None else means[:, 2] < region.floor_cut_z
    below &= ~outside
    return ~(outside | below), {"cropped_outside": int(outside.sum()), "cropped_below_floor": int(below.sum())}

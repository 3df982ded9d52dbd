"""Which splats the SfM structure supports: the rest are floaters, kept out of the depth renders.

3DGS on a few dozen views grows floaters: splats hanging in free space near the cameras that
explain a handful of training views. They render with consistent depth (they are 3D), so TSDF
carving keeps them and they become metre-sized mesh errors. Real surfaces carry SfM points; on
the bundled sample, 99 % of well-placed mesh area lies within 0.2 m of one, floaters' 25 %.
The floor is exempt near the structure: a plain floor has few features, and the world frame puts
it at z = 0. Only near: past the last SfM point the splats at floor height model the background
(the sample's black surroundings became a 4 m2 sheet out to 3 m beyond the floor's edge).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

NEIGHBOURS = 10  # the point spacing is the median distance to this many neighbours
SPACINGS = 2.5  # supported: within this many point spacings of an SfM point
FLOOR_REACH_SPACINGS = 6.0  # floor splats count as floor within this many spacings (in x, y) of one


def point_spacing(points: np.ndarray, neighbours: int = NEIGHBOURS, tree: cKDTree | None = None) -> float:
    """Median distance from an SfM point to its `neighbours`-th nearest: the structure's sampling."""
    k = min(neighbours, len(points) - 1)
    distances, _ = (tree or cKDTree(points)).query(points, k=[k + 1])
    return float(np.median(distances))


def supported_splats(means: np.ndarray, points: np.ndarray, floor_band: float | None,
                     spacings: float = SPACINGS, floor_reach_spacings: float = FLOOR_REACH_SPACINGS) -> np.ndarray:
    """Mask of splats within `spacings` point spacings of an SfM point, or within `floor_band` of
    z = 0 and `floor_reach_spacings` of an SfM point in x, y (None: no floor was found, nothing is
    exempt)."""
    tree = cKDTree(points)
    spacing = point_spacing(points, tree=tree)
    distance, _ = tree.query(means, distance_upper_bound=spacings * spacing)
    supported = np.isfinite(distance)
    if floor_band is not None:
        on_floor = np.flatnonzero(~supported & (np.abs(means[:, 2]) <= floor_band))
        reach, _ = cKDTree(points[:, :2]).query(means[on_floor, :2], distance_upper_bound=floor_reach_spacings * spacing)
        supported[on_floor[np.isfinite(reach)]] = True
    return supported

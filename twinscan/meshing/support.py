"""Which splats the SfM structure supports: the rest are floaters, kept out of the depth renders.

3DGS on a few dozen views grows floaters: splats hanging in free space near the cameras that
explain a handful of training views. They render with consistent depth (they are 3D), so TSDF
carving keeps them and they become metre-sized mesh errors. Real surfaces carry SfM points; on
the bundled sample, 99 % of well-placed mesh area lies within 0.2 m of one, floaters' 25 %.
One radius serves everywhere: scaling it with each point's own spacing (sparse points reach
farther) kept more of the sample's sparsely seen far wall, but let bulges and bumps back in
(95th-percentile error 6.9 cm against 5.7 cm).
The floor is exempt near the structure: a plain floor has few features, and the world frame puts
it at z = 0. Only near: past the last SfM point the splats at floor height model the background
(the sample's black surroundings became a 4 m2 sheet out to 3 m beyond the floor's edge). And the
floor's points support only the floor: the sample's splats grew bumps 10-30 cm over the open floor,
within reach of floor points, that made most of the mesh's 95th-percentile error.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation

NEIGHBOURS = 10  # the point spacing is the median distance to this many neighbours
SPACINGS = 2.5  # supported: within this many point spacings of an SfM point
FLOOR_REACH_SPACINGS = 6.0  # floor splats count as floor within this many spacings (in x, y) of a point
FLOOR_THICKNESS = 0.04  # metres: the centres of a flat floor's splats lie this close to z = 0
MIN_NEIGHBOURS = 2  # a structure point with fewer others within the radius is a stray: it supports nothing


def point_spacing(points: np.ndarray, neighbours: int = NEIGHBOURS) -> float:
    """Median distance from an SfM point to its `neighbours`-th nearest: the structure's sampling."""
    k = min(neighbours, len(points) - 1)
    distances, _ = cKDTree(points).query(points, k=[k + 1])
    return float(np.median(distances))


def without_strays(points: np.ndarray, radius: float, min_neighbours: int = MIN_NEIGHBOURS) -> np.ndarray:
    """The points with at least `min_neighbours` others within `radius`: a lone mistriangulated
    point past the floor's edge let big splats paint a 0.3 m blob there."""
    if len(points) == 0:
        return points
    counts = cKDTree(points).query_ball_point(points, radius, return_length=True) - 1
    return points[counts >= min_neighbours]


def _near(points: np.ndarray, radius: float, queries: np.ndarray) -> np.ndarray:
    """Mask of queries within `radius` of some point."""
    if len(points) == 0 or len(queries) == 0:
        return np.zeros(len(queries), bool)
    return np.isfinite(cKDTree(points).query(queries, distance_upper_bound=radius)[0])


def vertical_extents(quats: np.ndarray, log_scales: np.ndarray) -> np.ndarray:
    """Each splat's standard deviation along z, metres (quaternions w, x, y, z)."""
    z_rows = Rotation.from_quat(quats, scalar_first=True).as_matrix()[:, 2, :]
    return np.sqrt(((z_rows * np.exp(log_scales)) ** 2).sum(axis=1))


def supported_splats(means: np.ndarray, quats: np.ndarray, log_scales: np.ndarray, points: np.ndarray,
                     floor_found: bool) -> np.ndarray:
    """Mask of the splats the SfM points support.

    Above the floor (or everywhere, without one) a splat needs a point of the structure (not a
    stray, see `without_strays`) within `SPACINGS` point spacings, and may be no larger than that
    radius: support is judged at the centre, and the sample's 90 splats (of 33k) wider than 0.2 m
    painted blobs past what the points support. The floor's points do not count there: the
    sample's splats grew bumps 10-30 cm over the open floor, within reach of floor points but of
    nothing else. A floor splat -- centre and vertical extent (`vertical_extents`) within
    FLOOR_THICKNESS, so flat and level: the sample grew a 1.6 m splat at floor height past the
    floor's edge that painted a 25 cm blob -- needs any point within `FLOOR_REACH_SPACINGS` in x, y.
    """
    radius = SPACINGS * point_spacing(points)
    small = np.exp(log_scales).max(axis=1) <= radius
    if not floor_found:
        return small & _near(without_strays(points, radius), radius, means)
    on_floor = (np.abs(means[:, 2]) <= FLOOR_THICKNESS) & (vertical_extents(quats, log_scales) <= FLOOR_THICKNESS)
    structure = without_strays(points[np.abs(points[:, 2]) > FLOOR_THICKNESS], radius)
    supported = np.zeros(len(means), bool)
    supported[~on_floor] = small[~on_floor] & _near(structure, radius, means[~on_floor])
    supported[on_floor] = _near(points[:, :2], FLOOR_REACH_SPACINGS / SPACINGS * radius, means[on_floor, :2])
    return supported

"""The twin's world frame from a raw SfM model: Z up, floor at z = 0, metres, and -- when a marker
was triangulated -- its origin and x axis at the marker (pure numpy).

Gravity comes from the floor: the largest plane among the sparse points whose normal is close to
the cameras' up vector (a phone is held upright: OpenCV's x camera axis is level, -y points up)
and which lies below the cameras. The camera vote alone is only good to a few degrees; the floor
plane fit is what makes the up axis accurate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Similarity:
    """new = scale * rotation @ old + translation."""

    scale: float
    rotation: np.ndarray  # (3, 3)
    translation: np.ndarray  # (3,)

    def apply(self, points: np.ndarray) -> np.ndarray:
        return self.scale * points @ self.rotation.T + self.translation

    def to_json(self) -> dict[str, object]:
        return {"rotation": self.rotation.tolist(), "translation": self.translation.tolist(),
                "scale": float(self.scale)}


@dataclass(frozen=True)
class FloorPlane:
    """Points x with normal . x + offset = 0; the normal points up (towards the cameras)."""

    normal: np.ndarray
    offset: float
    inliers: np.ndarray  # boolean mask over the points it was fitted to


def camera_up(world_from_cam: np.ndarray, prior_weight: float = 0.05) -> np.ndarray:
    """Up direction from upright OpenCV cameras.

    Without roll a camera's x axis is horizontal whatever its pitch, so up is the direction most
    perpendicular to all x axes. When those are nearly parallel (a straight walk) that leaves a
    circle of candidates, and the mean -y axis (biased by pitch, but never degenerate) picks one.
    """
    right = world_from_cam[:, :3, 0]
    mean_up = -world_from_cam[:, :3, 1].mean(axis=0)
    mean_up /= np.linalg.norm(mean_up)
    cost = right.T @ right / len(right) + prior_weight * (np.eye(3) - np.outer(mean_up, mean_up))
    up = np.linalg.eigh(cost)[1][:, 0]
    return up if up @ mean_up > 0 else -up


def rotation_between(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The smallest rotation R with R @ a = b (unit vectors)."""
    a = a / np.linalg.norm(a)
    b = b / np.linalg.norm(b)
    axis = np.cross(a, b)
    sin, cos = np.linalg.norm(axis), float(a @ b)
    if sin < 1e-12:
        if cos > 0:
            return np.eye(3)
        perpendicular = np.cross(a, np.eye(3)[np.argmin(np.abs(a))])
        perpendicular /= np.linalg.norm(perpendicular)
        return 2 * np.outer(perpendicular, perpendicular) - np.eye(3)
    k = axis / sin
    skew = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + sin * skew + (1 - cos) * skew @ skew


def _plane_through(points: np.ndarray) -> tuple[np.ndarray, float]:
    """Least-squares plane (unit normal, offset) through points."""
    centroid = points.mean(axis=0)
    normal = np.linalg.svd(points - centroid, full_matrices=False)[2][-1]
    return normal, -float(normal @ centroid)


def covers_area(points: np.ndarray, min_fill: float = 0.4, cells: int = 8) -> bool:
    """Whether points on a plane cover an area rather than lines: the fraction of occupied cells of
    a cells x cells grid over their (2-98 percentile) extent along their two principal directions.

    A near-horizontal plane cutting through textured walls collects many inliers along lines;
    a floor's inliers fill a region (a ring around a robot still fills about half the grid).
    8 x 8, not finer: the tiny test capture's 128 patchy floor points filled 0.45 of a 10 x 10 grid,
    so SfM's run-to-run jitter lost the floor about one run in ten; on 8 x 8 they fill 0.56, while
    two crossing lines of as many points fill about 0.3.
    """
    if len(points) < cells:
        return False
    centred = points - points.mean(axis=0)
    in_plane = centred @ np.linalg.svd(centred, full_matrices=False)[2][:2].T
    low, high = np.percentile(in_plane, [2, 98], axis=0)
    index = np.floor((in_plane - low) / np.maximum(high - low, 1e-12) * cells).astype(int)
    inside = ((index >= 0) & (index < cells)).all(axis=1)
    occupied = np.unique(index[inside, 0] * cells + index[inside, 1])
    return len(occupied) >= min_fill * cells * cells


LOW_SHARE = 0.35  # floor planes are drawn from this lowest share of the points along the cameras' up
REFITS = 3  # least-squares refits of a candidate on its inliers


def _level_under_cameras(normal: np.ndarray, offset: float, up: np.ndarray, camera_median: np.ndarray,
                         min_cos: float) -> bool:
    """Whether the plane lies within the tilt of `up` and under the cameras (not a wall, a ceiling or a
    plane above them)."""
    return normal @ up >= min_cos and normal @ camera_median + offset > 0


def _inliers_and_score(height: np.ndarray, threshold: float) -> tuple[np.ndarray, int]:
    """A plane's inliers (points within `threshold` of it, from their signed `height` over it) and its
    score: inliers minus the points under it (a plane slicing through walls or furniture has many points
    under it, the floor has none)."""
    inliers = np.abs(height) < threshold
    return inliers, int(inliers.sum() - (height < -threshold).sum())


def _floor_or_none(points: np.ndarray, inliers: np.ndarray, up: np.ndarray, camera_median: np.ndarray,
                   threshold: float, min_cos: float, min_inliers: int, min_fill: float) -> FloorPlane | None:
    """A RANSAC candidate's inliers refitted REFITS times; None unless the refitted plane is still a
    floor: level and under the cameras, with `min_inliers` covering an area and fewer points under it
    than on it.

    The refit is judged, not only the candidate: on a real phone video (instant-ngp's fox, a head on a
    wall filmed from the front) a candidate of 47 points in a slab through the wall refitted to the wall
    itself, 86 degrees off up, with the cameras under it; taken as the floor, it cut away 40 % of the splats."""
    for _ in range(REFITS):
        normal, offset = _plane_through(points[inliers])
        if normal @ up < 0:
            normal, offset = -normal, -offset
        inliers, score = _inliers_and_score(points @ normal + offset, threshold)
    if (not _level_under_cameras(normal, offset, up, camera_median, min_cos) or inliers.sum() < min_inliers
            or score <= 0 or not covers_area(points[inliers], min_fill)):
        return None
    return FloorPlane(normal=normal, offset=offset, inliers=inliers)


def fit_floor_plane(points: np.ndarray, camera_centers: np.ndarray, up: np.ndarray, threshold: float,
                    max_tilt_deg: float = 15.0, min_inliers: int = 30, min_fill: float = 0.4,
                    iterations: int = 2000, seed: int = 0) -> FloorPlane | None:
    """RANSAC for the floor: a plane within max_tilt_deg of `up`, below the cameras, whose inliers
    cover an area (see `covers_area`), scored by its inliers minus the points below it (a plane
    slicing through walls or furniture has many points under it, the floor has none). A candidate
    that would win is refitted on its inliers, and wins only if the refit is still a floor
    (`_floor_or_none`); the refit is the plane returned.

    Candidate planes are drawn from the lowest LOW_SHARE of the points: the floor lies under the
    structure. Drawn from all points, a capture whose floor holds 7 % of them (one inward loop round a
    busy cell) met an all-floor triple about once in 2000 draws, and the plane came out 12-14 degrees
    off in two seeds of three; from the lowest 35 % the floor is a fifth of the candidates.
    """
    if len(points) < 3:
        return None
    rng = np.random.default_rng(seed)
    min_cos = np.cos(np.radians(max_tilt_deg))
    camera_median = np.median(camera_centers, axis=0)
    heights = points @ up
    low = points[heights <= np.quantile(heights, LOW_SHARE)]
    if len(low) < 3:
        low = points
    best: FloorPlane | None = None
    best_score = -np.inf
    for _ in range(iterations):
        sample = low[rng.choice(len(low), 3, replace=False)]
        normal = np.cross(sample[1] - sample[0], sample[2] - sample[0])
        length = np.linalg.norm(normal)
        if length < 1e-12:
            continue
        normal /= length
        if normal @ up < 0:
            normal = -normal
        offset = -float(normal @ sample[0])
        if not _level_under_cameras(normal, offset, up, camera_median, min_cos):
            continue
        inliers, score = _inliers_and_score(points @ normal + offset, threshold)
        if score > best_score and covers_area(points[inliers], min_fill):
            refitted = _floor_or_none(points, inliers, up, camera_median, threshold, min_cos, min_inliers, min_fill)
            if refitted is not None:
                best, best_score = refitted, score
    return best


def floor_threshold(points: np.ndarray, camera_centers: np.ndarray, fraction: float = 0.01) -> float:
    """Inlier distance for the floor fit: a fraction of the scene's size (raw SfM units are arbitrary)."""
    return fraction * float(np.median(np.linalg.norm(points - camera_centers.mean(axis=0), axis=1)))


def world_from_raw(points: np.ndarray, world_from_cam: np.ndarray, scale: float,
                   seed: int = 0) -> tuple[Similarity, FloorPlane | None]:
    """The similarity to the twin frame: floor normal (or camera up) to +Z, floor at z = 0,
    the cameras' centroid above the origin, lengths times `scale`.

    Without a floor, z = 0 is put at the 2nd percentile of the points' heights.
    """
    centers = world_from_cam[:, :3, 3]
    up = camera_up(world_from_cam)
    floor = fit_floor_plane(points, centers, up, floor_threshold(points, centers), seed=seed)
    normal = floor.normal if floor is not None else up
    rotation = rotation_between(normal, np.array([0.0, 0.0, 1.0]))
    centroid = centers.mean(axis=0)
    if floor is not None:
        height = normal @ centroid + floor.offset
    else:
        height = normal @ centroid - np.percentile(points @ normal, 2)
    origin = centroid - height * normal
    return Similarity(scale, rotation, -scale * rotation @ origin), floor


def marker_origin_and_x(corners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Centre and unit in-plane x direction (xy only) of a square marker's (4, 3) corners in the twin
    frame, in cv2.aruco order (top-left, top-right, bottom-right, bottom-left).

    x averages both horizontal edges and, turned by -90 degrees, both vertical ones, so a corner's
    triangulation error moves it a quarter as much as it would move one edge.
    """
    along_x = (corners[1] - corners[0] + corners[2] - corners[3])[:2]
    along_y = (corners[0] - corners[3] + corners[1] - corners[2])[:2]
    direction = along_x / np.linalg.norm(along_x) + np.array([along_y[1], -along_y[0]]) / np.linalg.norm(along_y)
    return corners.mean(axis=0), direction / np.linalg.norm(direction)


def anchored_at_marker(similarity: Similarity, marker_corners_raw: np.ndarray) -> Similarity:
    """`similarity` turned about Z and shifted in x, y so the marker's centre is above the origin and
    its x axis is +X (z is untouched).

    The marker is the cell's physical anchor: every capture of the cell then shares one frame, and
    twins can be compared with each other or with a CAD layout without any alignment.
    """
    centre, x_axis = marker_origin_and_x(similarity.apply(marker_corners_raw))
    cos, sin = x_axis
    turn = np.array([[cos, sin, 0.0], [-sin, cos, 0.0], [0.0, 0.0, 1.0]])  # x_axis -> +X
    shift = np.array([centre[0], centre[1], 0.0])
    return Similarity(similarity.scale, turn @ similarity.rotation, turn @ (similarity.translation - shift))

"""The floor: found by RANSAC near z = 0, flattened onto z = 0, and given a slab collider."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import trimesh
from scipy import ndimage


@dataclass(frozen=True)
class Floor:
    height: float  # metres: the fitted plane's height at the floor's centre (the twin frame says 0)
    tilt_deg: float  # angle between the fitted plane's normal and +Z
    bounds_xy: np.ndarray  # (2, 2) min and max x, y of the floor the views captured
    area: float  # square metres of mesh faces classified as floor


def _upward(mesh: trimesh.Trimesh, max_tilt_deg: float) -> np.ndarray:
    return mesh.face_normals[:, 2] >= np.cos(np.radians(max_tilt_deg))


def detect_floor(mesh: trimesh.Trimesh, band: float, max_tilt_deg: float, distance: float) -> Floor | None:
    """The dominant upward plane among face centres within `band` of z = 0, or None when there is none.

    The SfM stage has already turned the floor to z = 0, so the plane starts level at the height
    holding the most upward face area and is refit from there (`refine_plane`). It used to start from
    open3d's RANSAC, which runs threaded: its pick changed from run to run, and in one CI run the
    refit settled on floors 7.6 cm apart in two runs of the same input.
    """
    candidates = _upward(mesh, max_tilt_deg) & (np.abs(mesh.triangles_center[:, 2]) <= band)
    if candidates.sum() < 50:
        return None
    points = mesh.triangles_center[candidates]
    level = np.array([0.0, 0.0, 1.0, -_busiest_height(points[:, 2], mesh.area_faces[candidates], distance)])
    normal, centre = refine_plane(points, level, distance)
    tilt = float(np.degrees(np.arccos(np.clip(normal[2], -1, 1))))
    if tilt > max_tilt_deg:
        return None
    height = float(centre[2] - (normal[0] * centre[0] + normal[1] * centre[1]) / normal[2])
    on_floor = floor_faces(mesh, height, distance)
    area = float(mesh.area_faces[on_floor].sum())
    # The floor's extent from every face lying on it (RANSAC's inliers are a noisy subset).
    near_floor = _upward(mesh, max_tilt_deg) & (np.abs(mesh.triangles_center[:, 2] - height) <= band)
    faces = mesh.faces[on_floor | near_floor]
    return Floor(height, tilt, connected_extent(mesh.vertices[faces][..., :2], cell=4 * distance), area)


# The SfM floor stands in for the fused one only on at least this many points on it
MIN_FLOOR_POINTS = 30


def floor_from_points(mesh: trimesh.Trimesh, points: np.ndarray, band: float, distance: float) -> Floor | None:
    """The SfM stage's floor (level at z = 0, as far as the SfM points within `band` of it reach), for a
    surface that shows too little of the floor for `detect_floor`; None with fewer than MIN_FLOOR_POINTS.

    The SfM stage found that floor from points covering an area (recon/sfm/world_frame.py); a floor the
    fusion loses (plain, dark or glossy, or seen by few views: the tests' tiny capture fuses 49-55 level
    faces near z = 0, about its 50-face bar, depending on the last bits of the splats) is still a floor.
    """
    on_floor = _points_on(points, 0.0, band)
    if len(on_floor) < MIN_FLOOR_POINTS:
        return None
    return Floor(0.0, 0.0, _extent(on_floor), float(mesh.area_faces[floor_faces(mesh, 0.0, distance)].sum()))


def _busiest_height(heights: np.ndarray, areas: np.ndarray, distance: float) -> float:
    """The centre of the `distance`-wide height bin holding the most area."""
    edges = np.arange(heights.min(), heights.max() + 2 * distance, distance)
    area_per_bin, _ = np.histogram(heights, edges, weights=areas)
    busiest = int(np.argmax(area_per_bin))
    return float(edges[busiest] + edges[busiest + 1]) / 2


def refine_plane(points: np.ndarray, plane: np.ndarray, distance: float,
                 rounds: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """(upward unit normal, a point on it): `plane` (a, b, c, d) refit by least squares to the points
    within `distance` of it, until the inliers settle."""
    normal, offset = plane[:3] / np.linalg.norm(plane[:3]), plane[3] / np.linalg.norm(plane[:3])
    centre, inliers = -offset * normal, None
    for _ in range(rounds):
        near = np.abs(points @ normal - normal @ centre) <= distance
        if near.sum() < 3 or (inliers is not None and np.array_equal(near, inliers)):
            break
        inliers = near
        centre = points[inliers].mean(axis=0)
        normal = np.linalg.svd(points[inliers] - centre, full_matrices=False)[2][-1]
    return normal * np.sign(normal[2]), centre


def connected_extent(triangles_xy: np.ndarray, cell: float, min_share: float = 0.01) -> np.ndarray:
    """(2, 2) bounds of the floor triangles (T, 3, 2) in patches holding at least `min_share` of the
    floor's squares (8-connected; `cell` wide, or two faces where faces are larger).

    Stray faces off the floor's edge form patches of their own and are left out, while the edge of
    the floor itself is kept to the triangle: a percentile trim would cut a strip off every side.
    """
    edges = np.linalg.norm(triangles_xy - np.roll(triangles_xy, 1, axis=1), axis=-1)
    cell = max(cell, 2 * float(np.median(edges)))  # neighbouring faces' centres fall in neighbouring squares
    centres = triangles_xy.mean(axis=1)
    lowest = centres.min(axis=0)
    squares = np.floor((centres - lowest) / cell).astype(int)
    occupied = np.zeros(squares.max(axis=0) + 1, bool)
    occupied[squares[:, 0], squares[:, 1]] = True
    patches, _ = ndimage.label(occupied, structure=np.ones((3, 3)))
    sizes = np.bincount(patches.ravel())
    sizes[0] = 0
    large = (sizes >= min_share * occupied.sum()) | (sizes == sizes.max())
    kept = triangles_xy[large[patches[squares[:, 0], squares[:, 1]]]].reshape(-1, 2)
    return np.stack([kept.min(axis=0), kept.max(axis=0)])


def with_walkway(floor: Floor, world_from_cam: np.ndarray, margin: float) -> Floor:
    """The floor extended under the camera path (plus `margin`): whoever filmed walked on it there,
    even where the cameras, looking ahead, never saw it."""
    path = world_from_cam[:, :2, 3]
    lower = np.minimum(floor.bounds_xy[0], path.min(axis=0) - margin)
    upper = np.maximum(floor.bounds_xy[1], path.max(axis=0) + margin)
    return replace(floor, bounds_xy=np.stack([lower, upper]))


# The SfM points past which the floor does not reach: this share of them each way may be strays.
STRAY_POINT_SHARE = 0.001


def _points_on(points: np.ndarray, height: float, band: float) -> np.ndarray:
    """The plan positions (N, 2) of the SfM points within `band` of a floor at `height`."""
    return points[np.abs(points[:, 2] - height) <= band, :2]


def _extent(on_floor: np.ndarray) -> np.ndarray:
    """(2, 2) min and max x, y of the points on the floor, STRAY_POINT_SHARE of them each way left out."""
    return np.percentile(on_floor, [100 * STRAY_POINT_SHARE, 100 * (1 - STRAY_POINT_SHARE)], axis=0)


def within_points(floor: Floor, points: np.ndarray, band: float) -> Floor:
    """The floor cut back to where SfM points lie on it (within `band` of its height).

    Splats at the floor's edge reach past it by their own size (and splats explaining what lies beyond
    an edge settle there too), so the fused floor overshoots its edge by a splat or two; the points
    themselves come from features on the floor and stop at its edge.
    """
    on_floor = _points_on(points, floor.height, band)
    if len(on_floor) < 100:
        return floor
    lower, upper = _extent(on_floor)
    bounds = np.stack([np.maximum(floor.bounds_xy[0], lower), np.minimum(floor.bounds_xy[1], upper)])
    return replace(floor, bounds_xy=bounds)


# A wall bounding the capture this near past a side of the floor stands on the floor: the floor runs on to it.
WALL_REACH = 0.5  # metres
ALONG_SIDE = 0.25  # a wall runs along a side when its plan extent across it is at most this share of that along it


def to_walls(floor: Floor, wall_outlines: list[np.ndarray], reach: float = WALL_REACH) -> Floor:
    """The floor extended, side by side, to the nearest point of each wall bounding the capture that
    stands at most `reach` past that side (`wall_outlines`: the plan points (N, 2) of the walls' patches).

    The last metre before a wall seen only from across the cell holds too few SfM points for
    `within_points` to keep it: on hard cells seeds 0, 3, 5 and 7 the slab stopped up to 10 cm short of
    the east wall and 18 cm short of the south wall, a gap that a robot wheel or a dropped box falls
    through (docs/benchmarks.md, session 21). Only the part of a wall
    beside the side counts, and its nearest point, so the floor never passes under a wall at an angle.
    """
    bounds = np.array(floor.bounds_xy, dtype=float)
    for outline in wall_outlines:
        extent = np.ptp(outline, axis=0)
        for axis in (0, 1):
            along = 1 - axis
            if extent[axis] > ALONG_SIDE * extent[along]:
                continue
            beside = outline[(outline[:, along] >= bounds[0, along]) & (outline[:, along] <= bounds[1, along]), axis]
            if not len(beside):
                continue
            if bounds[1, axis] < beside.min() <= bounds[1, axis] + reach:
                bounds[1, axis] = beside.min()
            elif bounds[0, axis] - reach <= beside.max() < bounds[0, axis]:
                bounds[0, axis] = beside.max()
    return replace(floor, bounds_xy=bounds)


def outside_footprint(mesh: trimesh.Trimesh, floor: Floor, margin: float) -> np.ndarray:
    """Mask of faces whose centre lies beyond the floor's extent (plus `margin`) in x or y."""
    centres = mesh.triangles_center[:, :2]
    return ((centres < floor.bounds_xy[0] - margin) | (centres > floor.bounds_xy[1] + margin)).any(axis=1)


def floor_faces(mesh: trimesh.Trimesh, height: float, distance: float) -> np.ndarray:
    """Mask of faces that are floor: every corner within `distance` of the floor's height, facing up.

    Corners, not normals, decide: marching cubes leaves slivers on a flat floor whose normals
    tilt by tens of degrees.
    """
    near = np.abs(mesh.vertices[:, 2] - height) <= distance
    return near[mesh.faces].all(axis=1) & (mesh.face_normals[:, 2] > 0)


def flatten_floor(mesh: trimesh.Trimesh, is_floor: np.ndarray) -> trimesh.Trimesh:
    """A copy with every vertex of a floor face moved onto z = 0."""
    flat = mesh.copy()
    vertices = flat.vertices.copy()
    vertices[np.unique(flat.faces[is_floor]), 2] = 0.0
    flat.vertices = vertices
    return flat


def floor_grid(floor: Floor, max_faces: int) -> trimesh.Trimesh:
    """The floor's visible surface over the slab's extent: square cells at z = 0, facing up.

    The fused floor is patchy past the SfM-supported splats; the visual mesh shows the same floor
    the collider is, and its texture comes from the views that saw each part of it.
    """
    (x0, y0), (x1, y1) = floor.bounds_xy
    cell = max(np.sqrt((x1 - x0) * (y1 - y0) * 2 / max_faces), 1e-3)
    xs = np.linspace(x0, x1, max(1, int(np.ceil((x1 - x0) / cell))) + 1)
    ys = np.linspace(y0, y1, max(1, int(np.ceil((y1 - y0) / cell))) + 1)
    gx, gy = np.meshgrid(xs, ys, indexing="ij")
    vertices = np.column_stack([gx.ravel(), gy.ravel(), np.zeros(gx.size)])
    corner = (np.arange(len(xs) - 1)[:, None] * len(ys) + np.arange(len(ys) - 1)[None]).ravel()
    a, b, c, d = corner, corner + len(ys), corner + len(ys) + 1, corner + 1  # counter-clockwise from +z
    faces = np.concatenate([np.column_stack([a, b, c]), np.column_stack([a, c, d])])
    return trimesh.Trimesh(vertices, faces, process=False)


def floor_slab(floor: Floor, thickness: float) -> trimesh.Trimesh:
    """A box under the captured floor, its top face at z = 0: the floor's collider."""
    (x0, y0), (x1, y1) = floor.bounds_xy
    return trimesh.creation.box(bounds=[[x0, y0, -thickness], [x1, y1, 0.0]])

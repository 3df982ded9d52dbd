"""The fronts of the collider's parts, placed where the photos agree on them.

A glossy cabinet whose face towards the cell is seen only from across it renders that face's
reflections, not the face: fused, their depth carves into the cabinet (hard seed 4: its face cut on a
diagonal up to 35 cm deep over half its width) and leaves a ghost surface inside it. Its photos still
agree on the face. Swept over upright planes about each side of a part's plan rectangle, turned a few
degrees either way (the rectangle turns with the fusion's bloat: 6 degrees on that cabinet), the views
agree on the most cells within 2 cm of the true face on the hard cells' box-like parts (plane-sweep
stereo, as for the walls bounding the capture: meshing/sweep.py). Where they agree FRONT_GAP or more
in front of the part, the collider lacks that surface: those cells, closed, become a patch, and the
collider faces the views saw only through it go as a reflection's ghost (meshing/patches.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import trimesh
from scipy import ndimage

from twinscan.meshing.patches import Frame
from twinscan.meshing.raycast import cast_along, raycasting_scene
from twinscan.meshing.sweep import CELL, MAX_VIEWS, UprightRaster, agreeing, turned
from twinscan.meshing.views import DepthViews, spread

TURNS_DEG = np.arange(-8.0, 8.1, 2.0)  # the planes swept about each side of the plan rectangle turn this far ...
OFFSETS = np.arange(-0.20, 0.201, 0.02)  # metres: ... and lie this far out from it
END_MARGIN = 0.06  # metres of the side left out at either end: the neighbouring side's face crosses there
LOWEST, TOP_MARGIN = 0.10, 0.05  # metres: the heights swept, from over the floor to under the part's top
MIN_PEAK_CELLS = 100  # cells agreed on at the best plane ...
PEAK_CONTRAST = 1.5  # ... this many times as many as on any plane CONTRAST_REACH or more from it (same turn)
CONTRAST_REACH = 0.06  # metres (a face's peak is about 4 cm wide; the best offset at either end is no peak)
FRONT_GAP = 0.05  # metres: cells agreed on this far or further in front of the part are surface it lacks
RAY_START = 0.50  # metres out from the plane whence the part's surface is sought along the side's normal
CLOSING = 5  # cells: the agreed cells (3 to 5 views see each) are closed over gaps this wide into a patch ...
MIN_PATCH_CELLS = 30  # ... whose pieces smaller than this go
MIN_TOP, MAX_EXTENT, MIN_AREA = 0.30, 3.0, 0.30  # a part with fronts: this high, at most this long (m), this much area (m2)
MIN_SIDE = 0.30  # metres: a narrower side is a post's, not a front (and a few correlation windows wide)


@dataclass(frozen=True)
class Front:
    """A patch the photos place in front of a part of the collider."""

    cells: np.ndarray  # (A, Z) raster cells of the patch, CELL wide
    frame: Frame
    agreed: int  # cells the photos agree on at the front's plane, over the part's side


def part_fronts(views: DepthViews, grey: np.ndarray, known_depth: np.ndarray,
                collider: trimesh.Trimesh) -> list[Front]:
    """The fronts of the collider's parts (its connected pieces standing MIN_TOP high, at most MAX_EXTENT
    long) that the photos (`grey`, from `sweep.grey_images`) place FRONT_GAP or more in front of them;
    `known_depth`: the collider's and the patches' depth in every view (what hides a plane from a view)."""
    chosen = spread(len(views), MAX_VIEWS)
    cameras = views.world_from_cam[:, :3, 3]
    fronts = []
    for part in collider.split(only_watertight=False):
        top = float(part.vertices[:, 2].max())
        if top < MIN_TOP or np.ptp(part.vertices[:, :2], axis=0).max() > MAX_EXTENT or part.area < MIN_AREA:
            continue
        heights = np.arange(LOWEST, top - TOP_MARGIN, CELL)
        for normal, middle, length in _rectangle_sides(part.vertices):
            if length < MIN_SIDE:
                continue
            # only views in front of every plane swept see its face; the rest look at it from behind
            facing = chosen[cameras[chosen] @ normal > middle @ normal + OFFSETS[-1]]
            peak = _photo_plane(views, grey, known_depth, facing, normal, middle, length, heights)
            if peak is None:
                continue
            normal, level, agreed = peak
            cells, frame = _in_front(views, grey, known_depth, facing, part, normal, level, heights)
            if cells.any():
                fronts.append(Front(cells, frame, agreed))
    return fronts


def _rectangle_sides(vertices: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """The four sides of the minimum-area plan rectangle about the part's vertices over the floor's band:
    (outward level unit normal (3,), the side's middle at z = 0 (3,), its length)."""
    plan = vertices[vertices[:, 2] > LOWEST / 2, :2].astype(np.float32)
    (cx, cy), (width, height), angle = cv2.minAreaRect(plan)
    turn = np.radians(angle)
    axes = (np.array([np.cos(turn), np.sin(turn), 0.0]), np.array([-np.sin(turn), np.cos(turn), 0.0]))
    halves = (width / 2, height / 2)
    centre = np.array([cx, cy, 0.0])
    sides = []
    for sign in (1.0, -1.0):
        for k in (0, 1):
            normal = sign * axes[k]
            sides.append((normal, centre + halves[k] * normal, 2 * halves[1 - k]))
    return sides


def _photo_plane(views: DepthViews, grey: np.ndarray, known_depth: np.ndarray, chosen: np.ndarray,
                 normal: np.ndarray, middle: np.ndarray, length: float,
                 heights: np.ndarray) -> tuple[np.ndarray, float, int] | None:
    """The plane about one side where the photos agree on the most cells, if it is a clear peak:
    (its normal, level, cells agreed on), or None."""
    counts = np.zeros((len(TURNS_DEG), len(OFFSETS)), np.int64)
    for t, turn in enumerate(TURNS_DEG):
        swung = turned(normal, np.radians(turn))
        raster = UprightRaster(swung, middle @ np.cross([0.0, 0.0, 1.0], swung)
                               + np.arange(-length / 2 + END_MARGIN, length / 2 - END_MARGIN, CELL), heights)
        for o, level in enumerate(middle @ swung + OFFSETS):
            counts[t, o] = agreeing(views, grey, known_depth, chosen, raster.points(float(level))).sum()
    t, o = np.unravel_index(int(np.argmax(counts)), counts.shape)
    elsewhere = np.abs(OFFSETS - OFFSETS[o]) >= CONTRAST_REACH - 1e-9
    if (counts[t, o] < MIN_PEAK_CELLS or o in (0, len(OFFSETS) - 1)
            or counts[t, o] < PEAK_CONTRAST * counts[t, elsewhere].max()):
        return None
    swung = turned(normal, np.radians(TURNS_DEG[t]))
    return swung, float(middle @ swung + OFFSETS[o]), int(counts[t, o])


def _in_front(views: DepthViews, grey: np.ndarray, known_depth: np.ndarray, chosen: np.ndarray,
              part: trimesh.Trimesh, normal: np.ndarray, level: float,
              heights: np.ndarray) -> tuple[np.ndarray, Frame]:
    """The cells of the plane, over the part's whole extent along it, that the photos agree on FRONT_GAP
    or more in front of the part (or with none of it behind), closed and cleared of crumbs."""
    axis = np.cross([0.0, 0.0, 1.0], normal)
    extent = part.vertices @ axis
    along = np.arange(extent.min(), extent.max(), CELL)
    raster = UprightRaster(normal, along, heights).points(level)
    agreed = agreeing(views, grey, known_depth, chosen, raster)
    scene = raycasting_scene(part.vertices, part.faces)
    behind = cast_along(scene, (raster + RAY_START * normal).reshape(-1, 3), -normal)[0].reshape(agreed.shape) - RAY_START
    in_front = behind >= FRONT_GAP  # inf where nothing of the part lies behind
    kernel = np.ones((2 * CLOSING + 1, 2 * CLOSING + 1), bool)
    cells = ndimage.binary_closing(agreed & in_front, kernel, border_value=0) & in_front
    labels, _ = ndimage.label(cells)
    sizes = np.bincount(labels.ravel())
    sizes[0] = 0
    cells = (sizes >= MIN_PATCH_CELLS)[labels]
    origin = level * normal + (along[0] - CELL / 2) * axis + np.array([0.0, 0.0, heights[0] - CELL / 2])
    return cells, Frame(origin, axis, np.array([0.0, 0.0, 1.0]), normal)

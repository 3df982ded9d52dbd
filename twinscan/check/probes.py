"""Where to drop probes: a top-down height map of the colliders (open3d ray casting) and its flat spots."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import cv2
import numpy as np
import trimesh

from twinscan.optional import open3d

Surface = Literal["floor", "object", "hole"]


@dataclass(frozen=True)
class HeightMap:
    """Top surface height of the colliders on a regular XY grid; NaN where a vertical ray hits nothing."""

    heights: np.ndarray  # (rows, cols), row r at y = origin_y + (r + 0.5) * cell, column c likewise in x
    origin_xy: tuple[float, float]
    cell: float

    def xy_of(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        x = self.origin_xy[0] + (cols + 0.5) * self.cell
        return np.stack([x, self.origin_xy[1] + (rows + 0.5) * self.cell], -1)


@dataclass(frozen=True)
class ProbeSite:
    name: str
    xy: tuple[float, float]
    surface: Surface  # "hole": no collider under the site, where the captured floor should be
    surface_z: float  # where the probe's bottom must come to rest


def floor_extent(mesh: trimesh.Trimesh, floor_z: float = 0.0, tolerance: float = 0.03) -> np.ndarray | None:
    """(2, 2) xy bounds of the upward faces lying at floor height: the captured floor area that probes
    cover. Collider fragments beyond it make no claim that there is floor under them."""
    near = np.abs(mesh.vertices[:, 2] - floor_z) <= tolerance
    on_floor = near[mesh.faces].all(axis=1) & (mesh.face_normals[:, 2] > 0.9)
    if not on_floor.any():
        return None
    corners = mesh.vertices[mesh.faces[on_floor]].reshape(-1, 3)[:, :2]
    return np.stack([corners.min(axis=0), corners.max(axis=0)])


def height_map(mesh: trimesh.Trimesh, bounds_xy: np.ndarray, cell: float, max_cells: int = 1_000_000) -> HeightMap:
    """Cast one ray straight down per cell centre, from above the highest collider."""
    span = bounds_xy[1] - bounds_xy[0]
    cell = max(cell, float(np.sqrt(span[0] * span[1] / max_cells)))
    cols, rows = np.maximum(1, np.floor(span / cell).astype(int))  # every cell centre inside the bounds
    o3d = open3d()
    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(np.asarray(mesh.vertices, np.float32), np.asarray(mesh.faces, np.uint32))
    top = float(mesh.bounds[1, 2]) + 1.0
    row, col = np.mgrid[0:rows, 0:cols]
    result = HeightMap(np.empty((rows, cols)), (float(bounds_xy[0, 0]), float(bounds_xy[0, 1])), cell)
    xy = result.xy_of(row.ravel(), col.ravel())
    rays = np.concatenate([xy, np.full((len(xy), 1), top), np.tile([0.0, 0.0, -1.0], (len(xy), 1))], 1)
    distance = scene.cast_rays(rays.astype(np.float32))["t_hit"].numpy().astype(np.float64)
    result.heights[:] = np.where(np.isfinite(distance), top - distance, np.nan).reshape(rows, cols)
    return result


def plan_probe_sites(heights: HeightMap, probe_size: float, spacing: float, max_probes: int,
                     floor_z: float = 0.0, flat_tolerance: float = 0.01, floor_tolerance: float = 0.03
                     ) -> list[ProbeSite]:
    """One probe in each hole and on each flat object top (at its most interior point), then a grid
    over every other flat spot, floor or top, `spacing` apart.

    A spot is flat when every height under the probe's footprint (plus one cell) is within
    `flat_tolerance`: edges and slopes would tip a probe and prove nothing.
    """
    window = int(np.ceil(probe_size / heights.cell)) + 2
    kernel = np.ones((window | 1, window | 1), np.uint8)
    hole = np.isnan(heights.heights)
    filled = np.where(hole, -1e6, heights.heights).astype(np.float32)
    highest = cv2.dilate(filled, kernel, borderType=cv2.BORDER_CONSTANT, borderValue=-1e6)
    lowest = cv2.erode(filled, kernel, borderType=cv2.BORDER_CONSTANT, borderValue=-1e6)  # no support outside
    flat = (highest - lowest <= flat_tolerance) & ~hole
    on_floor = np.abs(filled - floor_z) <= floor_tolerance
    sites: list[ProbeSite] = []
    for mask, surface in ((hole, "hole"), (flat & ~on_floor, "object")):
        count, labels = cv2.connectedComponents(mask.astype(np.uint8), connectivity=4)
        for label in range(1, count):
            inside = np.pad(labels == label, 1).astype(np.uint8)
            depth = cv2.distanceTransform(inside, cv2.DIST_L2, 3)[1:-1, 1:-1]
            row, col = np.unravel_index(np.argmax(depth), depth.shape)
            surface_z = floor_z if surface == "hole" else float(heights.heights[row, col])
            sites.append(ProbeSite("", tuple(heights.xy_of(row, col).tolist()), surface, surface_z))
    step = max(spacing, float(np.sqrt(hole.size * heights.cell ** 2 / max_probes)))
    stride = max(1, int(round(step / heights.cell)))
    rows, cols = heights.heights.shape
    for row in range((rows - 1) % stride // 2, rows, stride):  # centred on the map
        for col in range((cols - 1) % stride // 2, cols, stride):
            xy = heights.xy_of(row, col)
            taken = any(np.hypot(*(xy - site.xy)) < spacing for site in sites)
            if flat[row, col] and not taken:
                surface, surface_z = ("floor", floor_z) if on_floor[row, col] else ("object", heights.heights[row, col])
                sites.append(ProbeSite("", tuple(xy.tolist()), surface, float(surface_z)))
    return [ProbeSite(f"probe_{index:03d}", site.xy, site.surface, site.surface_z)
            for index, site in enumerate(sites[:max_probes])]

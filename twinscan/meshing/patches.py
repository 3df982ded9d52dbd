"""Flat collider patches on a plane's raster: the raster's frame, the cell a point falls in, the patch
through its cells, and the collider faces a patch shows to be ghosts. Shared by the planes found by
their support (meshing/planes.py) and the fronts the photos place (meshing/fronts.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import trimesh

from twinscan.meshing.views import DepthViews


@dataclass(frozen=True)
class Frame:
    """A plane's raster: cell (i, j) has its centre at origin + (i + 0.5) * cell * u + (j + 0.5) * cell * v."""

    origin: np.ndarray
    u: np.ndarray
    v: np.ndarray
    normal: np.ndarray


def raster_index(points: np.ndarray, shape: tuple[int, int], frame: Frame,
                 cell: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The raster cell (i, j) each point falls in, projected along the plane's normal, and whether that
    cell lies inside a raster of `shape`."""
    i = np.floor((points - frame.origin) @ frame.u / cell).astype(np.int64)
    j = np.floor((points - frame.origin) @ frame.v / cell).astype(np.int64)
    return i, j, (i >= 0) & (i < shape[0]) & (j >= 0) & (j < shape[1])


def ghosts_behind(collider: trimesh.Trimesh, cells: np.ndarray, frame: Frame, cell: float, views: DepthViews,
                  depth: np.ndarray, tolerance: float) -> np.ndarray:
    """Mask of collider faces behind the patch that most views rendering them saw through the patch.

    A glossy front renders, in the views that catch a reflection, the reflected room's depth behind
    it; fused, that depth becomes a ghost surface behind the front (the bloat of a glossy cabinet).
    Real structure behind an opaque panel is rendered only by views that pass its edges; a ghost mostly
    by views through it.
    """
    centres = collider.triangles_center
    behind = (centres - frame.origin) @ frame.normal < -tolerance
    rendered = np.zeros(len(centres), np.int64)
    crossing = np.zeros(len(centres), np.int64)
    looked_through = np.zeros(len(centres), bool)
    if not behind.any():
        return behind
    points = centres[behind]
    for n in range(len(views)):
        inside, row, col, z = views.pixels(n, points)
        on = inside & (depth[n, row, col] > 0) & (np.abs(depth[n, row, col] - z) <= tolerance)
        camera = views.world_from_cam[n, :3, 3]
        ray = points - camera
        along = ray @ frame.normal
        t = np.where(np.abs(along) > 1e-9, ((frame.origin - camera) @ frame.normal) / np.where(
            np.abs(along) > 1e-9, along, 1.0), -1.0)
        hit = camera + t[:, None] * ray
        i, j, on_raster = raster_index(hit, cells.shape, frame, cell)
        within = (t > 0) & (t < 1) & on_raster
        through = within.copy()
        through[within] = cells[i[within], j[within]]
        rendered[behind] += on
        crossing[behind] += on & through
        looked_through[behind] |= inside & through
    # never rendered where it lies, yet looked at through the patch: fused from depth no view holds now
    return behind & np.where(rendered > 0, 2 * crossing > rendered, looked_through)


def cells_mesh(cells: np.ndarray, frame: Frame, cell: float) -> trimesh.Trimesh:
    """The patch through the centres of its cells, facing +normal: quads between each 2 x 2 block of
    occupied cells, one per run along u in each row of v. A cell is occupied when any support falls in
    it, so a surface's edge lies somewhere inside its edge cells: their centres, not their outer sides,
    are where the patch ends (on the sample, collider p95 7.00 -> 6.44 cm; snapping the upright patches'
    feet down to the floor as well measured 6.58)."""
    block = cells[:-1, :-1] & cells[1:, :-1] & cells[:-1, 1:] & cells[1:, 1:]
    vertices, faces = [], []
    for j in range(block.shape[1]):
        column = np.concatenate([[False], block[:, j], [False]])
        starts = np.flatnonzero(column[1:] & ~column[:-1])
        ends = np.flatnonzero(~column[1:] & column[:-1])
        for start, end in zip(starts, ends):
            base = len(vertices)
            for a, b in ((start, j), (end, j), (end, j + 1), (start, j + 1)):
                vertices.append(frame.origin + (a + 0.5) * cell * frame.u + (b + 0.5) * cell * frame.v)
            faces += [[base, base + 1, base + 2], [base, base + 2, base + 3]]  # counter-clockwise about u x v
    if not faces:
        return trimesh.Trimesh()
    return trimesh.Trimesh(np.asarray(vertices), np.asarray(faces), process=False)

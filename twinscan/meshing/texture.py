"""Appearance of the visual mesh: vertex colours and a texture atlas baked from the views.

UVs come from xatlas (charts and packing). Colour is projected, not interpolated: every texel
is placed on the surface and takes the visibility-checked, view-angle weighted mean of the views.
"""

from __future__ import annotations

import cv2
import numpy as np
import trimesh
from scipy.spatial import cKDTree

from twinscan.meshing.views import DepthViews


def transfer_vertex_colours(target: trimesh.Trimesh, source: trimesh.Trimesh) -> np.ndarray:
    """(V, 4) uint8 colours of `target`'s vertices: those of the nearest `source` vertex."""
    _, nearest = cKDTree(source.vertices).query(target.vertices)
    return np.asarray(source.visual.vertex_colors)[nearest]


def uv_atlas(mesh: trimesh.Trimesh, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """xatlas parametrisation: (vertex_map into mesh.vertices, faces, uvs in [0, 1]), seams split."""
    import xatlas

    atlas = xatlas.Atlas()
    atlas.add_mesh(np.asarray(mesh.vertices, np.float32), np.asarray(mesh.faces, np.uint32))
    charts = xatlas.ChartOptions()
    charts.max_iterations = 0  # one pass of chart growing: far faster on noisy scans, slightly more charts
    packing = xatlas.PackOptions()
    packing.resolution = size
    packing.padding = 2
    packing.bilinear = True
    atlas.generate(charts, packing)
    vertex_map, faces, uvs = atlas[0]
    return vertex_map.astype(np.int64), faces.astype(np.int64), uvs.astype(np.float64)


def _texel_surface(vertices: np.ndarray, faces: np.ndarray, uvs: np.ndarray, size: int):
    """Which face covers each texel, and where on the surface the texel centre lies."""
    face_id = np.full((size, size), -1, np.int32)
    shift = 4  # sub-texel precision of the rasterised corners
    corners = np.round(uvs[faces] * [size, size] * (1 << shift) - (1 << (shift - 1))).astype(np.int32)
    corners[..., 1] = (size << shift) - corners[..., 1] - (1 << shift)  # texture row 0 is v = 1
    for index, triangle in enumerate(corners):
        cv2.fillConvexPoly(face_id, triangle, index, lineType=cv2.LINE_8, shift=shift)
    rows, cols = np.nonzero(face_id >= 0)
    face = face_id[rows, cols]
    texel_uv = np.stack([(cols + 0.5) / size, 1.0 - (rows + 0.5) / size], axis=1)
    a, b, c = (uvs[faces[face, k]] for k in range(3))
    barycentric = _barycentric(texel_uv, a, b, c)
    points = np.einsum("pk,pkj->pj", barycentric, vertices[faces[face]])
    return rows, cols, face, points


def _barycentric(p: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Barycentric coordinates of 2D points in their triangles, clamped onto the triangle."""
    v0, v1, v2 = b - a, c - a, p - a
    d00, d01, d11 = (v0 * v0).sum(1), (v0 * v1).sum(1), (v1 * v1).sum(1)
    d20, d21 = (v2 * v0).sum(1), (v2 * v1).sum(1)
    denominator = d00 * d11 - d01 * d01
    denominator = np.where(np.abs(denominator) < 1e-20, 1e-20, denominator)
    v = (d11 * d20 - d01 * d21) / denominator
    w = (d00 * d21 - d01 * d20) / denominator
    weights = np.clip(np.stack([1 - v - w, v, w], axis=1), 0, None)
    return weights / np.maximum(weights.sum(1, keepdims=True), 1e-12)


def bake_texture(vertices: np.ndarray, faces: np.ndarray, uvs: np.ndarray, views: DepthViews, size: int,
                 tolerance: float, fallback: np.ndarray) -> np.ndarray:
    """(size, size, 3) uint8 atlas: each texel's colour projected from the views that see it.

    Texels take `project_colours`; texels no view saw take the mean `fallback` colour of their
    face's corners; empty texels are grown from their neighbours so bilinear lookups at chart
    borders do not bleed in black.
    """
    rows, cols, face, points = _texel_surface(vertices, faces, uvs, size)
    corners = vertices[faces]
    face_normals = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    face_normals /= np.maximum(np.linalg.norm(face_normals, axis=1, keepdims=True), 1e-12)
    colour, seen = project_colours(points, face_normals[face], views, tolerance)
    colour[~seen] = fallback[faces[face[~seen]], :3].astype(np.float64).mean(axis=1)
    image = np.zeros((size, size, 3), np.uint8)
    image[rows, cols] = np.clip(colour, 0, 255).astype(np.uint8)
    covered = np.zeros((size, size), bool)
    covered[rows, cols] = True
    return _grow(image, covered, 4)


AGREEMENT = 40.0  # a view's colour counts when no channel is further than this (of 255) from the views' median
CHUNK = 100_000  # points projected at a time: memory is views x chunk colours


def project_colours(points: np.ndarray, normals: np.ndarray, views: DepthViews,
                    tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """(P, 3) colour of surface points from the views that see them, and (P,) whether any did.

    A view sees a point that lies where it rendered its surface (depth within `tolerance`) and
    faces it; views facing the surface and close to it weigh most. Views that disagree with the
    median of the others are left out: where the mesh lacks a thin post, the post still hides the
    floor behind it in the pictures of a few views, and would streak the floor with its colour.
    """
    colour = np.zeros((len(points), 3))
    seen = np.zeros(len(points), bool)
    for start in range(0, len(points), CHUNK):
        part = slice(start, start + CHUNK)
        samples, weights = _view_samples(points[part], normals[part], views, tolerance)
        colour[part], seen[part] = _consensus(samples, weights)
    return colour, seen


def _view_samples(points: np.ndarray, normals: np.ndarray, views: DepthViews,
                  tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """(N, P, 3) colour each view shows at each point, and (N, P) its weight (0: not seen)."""
    samples = np.zeros((len(views), len(points), 3), np.float32)
    weights = np.zeros((len(views), len(points)), np.float32)
    for i in range(len(views)):
        inside, row, col, z = views.pixels(i, points)
        visible = inside & (np.abs(views.depth[i, row, col] - z) <= tolerance + 0.01 * z)
        to_camera = views.world_from_cam[i, :3, 3] - points
        facing = (normals * to_camera).sum(1) / np.maximum(np.linalg.norm(to_camera, axis=1), 1e-9)
        weights[i] = np.where(visible & (facing > 0), facing ** 2 / np.maximum(z, 1e-3) ** 2, 0.0)
        samples[i] = views.colour[i, row, col]
    return samples, weights


def _consensus(samples: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted mean over the views within AGREEMENT of the seeing views' median colour (over all
    the seeing views where none is)."""
    seen = (weights > 0).any(axis=0)
    colour = np.zeros((samples.shape[1], 3))
    if not seen.any():
        return colour, seen
    visible = weights[:, seen] > 0
    median = np.nanmedian(np.where(visible[..., None], samples[:, seen], np.nan), axis=0)
    agree = visible & (np.abs(samples[:, seen] - median).max(axis=2) <= AGREEMENT)
    agree |= visible & ~agree.any(axis=0)  # no view near the median (two that differ): all of them
    weight = np.where(agree, weights[:, seen], 0.0)
    total = (weight[..., None] * samples[:, seen]).sum(axis=0)
    colour[seen] = total / np.maximum(weight.sum(axis=0), 1e-30)[:, None]
    return colour, seen


def _grow(image: np.ndarray, covered: np.ndarray, steps: int) -> np.ndarray:
    """Spread colours into uncovered texels, `steps` texels outwards (the atlas gutter)."""
    image, covered = image.copy(), covered.copy()
    kernel = np.ones((3, 3), np.uint8)
    for _ in range(steps):
        grown = cv2.dilate(image, kernel)
        ring = (cv2.dilate(covered.astype(np.uint8), kernel) > 0) & ~covered
        image[ring] = grown[ring]
        covered |= ring
    return image

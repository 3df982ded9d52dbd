"""TSDF fusion of the views into one surface (open3d VoxelBlockGrid, sparse; marching cubes)."""

from __future__ import annotations

import numpy as np
import trimesh
from scipy import ndimage

from twinscan.errors import TwinscanError
from twinscan.meshing.views import DepthViews
from twinscan.optional import open3d


def clean_depth(views: DepthViews, min_alpha: float, edge_jump: float) -> np.ndarray:
    """Depth maps with 0 where a pixel is empty, too transparent, or on a depth discontinuity.

    Pixels on a silhouette of a splat render sit between foreground and background (flying
    pixels); fused, they become streaks in free space. They stand out by their second difference,
    which is ~0 on any plane however slanted, so grazing floors survive.
    """
    depth = np.where(views.valid(min_alpha), views.depth, 0.0).astype(np.float32)
    padded = np.pad(depth, ((0, 0), (1, 1), (1, 1)), mode="edge")
    centre = padded[:, 1:-1, 1:-1]
    across = np.abs(padded[:, 1:-1, :-2] + padded[:, 1:-1, 2:] - 2 * centre)
    down = np.abs(padded[:, :-2, 1:-1] + padded[:, 2:, 1:-1] - 2 * centre)
    flying = np.maximum(across, down) > edge_jump * depth
    empty_neighbour = ndimage.minimum_filter(depth, size=(1, 3, 3)) == 0
    return np.where(flying | empty_neighbour, 0.0, depth).astype(np.float32)


def consistent_depth(views: DepthViews, depth: np.ndarray, min_agreeing: int, tolerance: float,
                     beyond: float = 0.0, neighbours: int = 8) -> tuple[np.ndarray, float]:
    """Keep a depth pixel further than `beyond` metres only where at least `min_agreeing` other views saw
    the same surface there (nearer pixels are kept as they are).

    As COLMAP's stereo fusion does: each pixel's 3D point is projected into the `neighbours` views
    whose cameras look most alike (nearest centres among those facing the same way); it agrees with a
    view whose own depth at that pixel is within `tolerance` (relative to the depth). A splat render
    that only one view explains (a view-dependent highlight baked into geometry, a fuzzy far wall whose
    median depth jumps from view to view) then stays out of the TSDF. Returns the filtered depth and
    the share of depth pixels kept.
    """
    n = len(views)
    if min_agreeing <= 0 or n < 2:
        return depth, 1.0
    h, w = views.size
    centres = views.world_from_cam[:, :3, 3]
    forward = views.world_from_cam[:, :3, 2]
    distance = np.linalg.norm(centres[:, None] - centres[None], axis=-1)
    facing = forward @ forward.T
    score = np.where(facing > 0.0, distance, np.inf)  # views facing apart see little of the same surface
    np.fill_diagonal(score, np.inf)
    v, u = np.mgrid[0:h, 0:w]
    pixels = np.stack([u + 0.5, v + 0.5, np.ones_like(u)], -1).reshape(-1, 3).astype(np.float64)
    kept = np.zeros_like(depth)
    for i in range(n):
        near = (depth[i] > 0) & (depth[i] <= beyond)
        kept[i][near] = depth[i][near]
        valid = depth[i].reshape(-1) > beyond
        if not valid.any():
            continue
        z = depth[i].reshape(-1)[valid].astype(np.float64)
        cam = (pixels[valid] @ np.linalg.inv(views.K[i]).T) * z[:, None]
        world = cam @ views.world_from_cam[i, :3, :3].T + centres[i]
        agree = np.zeros(len(z), np.int32)
        for j in np.argsort(score[i])[:neighbours]:
            if not np.isfinite(score[i, j]):
                break
            inside, row, col, zj = views.pixels(j, world)
            seen = depth[j, row, col]
            agree += inside & (seen > 0) & (np.abs(seen - zj) <= tolerance * zj)
        kept[i].reshape(-1)[np.flatnonzero(valid)[agree >= min_agreeing]] = z[agree >= min_agreeing]
    total = int((depth > 0).sum())
    return kept, float((kept > 0).sum() / total) if total else 1.0


def captured_extent(views: DepthViews, min_alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Robust bounds (1st..99th percentile per axis) of the back-projected points: the captured region."""
    points, _ = views.points(min_alpha, stride=4)
    if len(points) < 100:
        raise TwinscanError(f"the views hold only {len(points)} surface samples",
                            "check the renders: depth must be positive where the scene was seen")
    return np.percentile(points, 1, axis=0), np.percentile(points, 99, axis=0)


def pixel_footprint(views: DepthViews, depth: np.ndarray) -> float:
    """Median size (metres) of a pixel on the surface it sees: the finest detail the views hold."""
    focal = np.sqrt(views.K[:, 0, 0] * views.K[:, 1, 1])
    sizes = depth / focal[:, None, None]
    return float(np.median(sizes[depth > 0]))


def fuse_tsdf(views: DepthViews, depth: np.ndarray, voxel: float, trunc_voxels: float, max_depth: float,
              min_weight: float) -> trimesh.Trimesh:
    """Integrate the cleaned depth and colour of every view; marching cubes with vertex colours."""
    o3d = open3d()
    o3c = o3d.core
    cpu = o3c.Device("CPU:0")
    grid = o3d.t.geometry.VoxelBlockGrid(
        attr_names=("tsdf", "weight", "color"), attr_dtypes=(o3c.float32, o3c.float32, o3c.float32),
        attr_channels=((1), (1), (3)), voxel_size=voxel, block_resolution=16, block_count=20_000, device=cpu)
    for i in range(len(views)):
        if not (depth[i] > 0).any():  # open3d aborts on a view that touches no block
            continue
        depth_image = o3d.t.geometry.Image(o3c.Tensor(np.ascontiguousarray(depth[i])))
        colour_image = o3d.t.geometry.Image(o3c.Tensor(np.ascontiguousarray(views.colour[i], np.float32) / 255.0))
        intrinsic = o3c.Tensor(views.K[i], o3c.float64)  # open3d, too, puts pixel centres at +0.5
        extrinsic = o3c.Tensor(views.cam_from_world[i], o3c.float64)
        blocks = grid.compute_unique_block_coordinates(depth_image, intrinsic, extrinsic, 1.0, float(max_depth),
                                                       float(trunc_voxels))
        grid.integrate(blocks, depth_image, colour_image, intrinsic, extrinsic, 1.0, float(max_depth),
                       float(trunc_voxels))
    surface = grid.extract_triangle_mesh(weight_threshold=float(min_weight))
    vertices = surface.vertex.positions.numpy().astype(np.float64)
    if len(vertices) == 0:
        return trimesh.Trimesh()
    colours = np.clip(surface.vertex.colors.numpy() * 255.0, 0, 255).astype(np.uint8)
    vertices, faces, colours = _in_canonical_order(vertices, surface.triangle.indices.numpy().astype(np.int64), colours)
    return trimesh.Trimesh(vertices=vertices, faces=faces, vertex_colors=colours, process=True)


def _in_canonical_order(vertices: np.ndarray, faces: np.ndarray,
                        colours: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The mesh with its vertices sorted by position (then colour) and its faces by their vertices,
    each face's winding kept. The voxel block grid is a hash map filled by several threads: the same
    surface comes out in a different order from run to run, and decimation and every threshold after it
    then differ (on a hard-cell capture, one run closed the east wall and the next did not)."""
    order = np.lexsort(np.column_stack([vertices, colours]).T[::-1])
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    faces = rank[faces]
    first = np.argmin(faces, axis=1)  # each face from its smallest vertex: the same cycle, so the same winding
    faces = np.stack([faces[np.arange(len(faces)), (first + k) % 3] for k in range(3)], axis=1)
    return vertices[order], faces[np.lexsort(faces.T[::-1])], colours[order]

"""Views of a known mesh (open3d ray casting): ground truth for tests and benchmarks, and a mesh's own
depth where the texture bake needs to know which views see which part of it; and rays from points along
one direction (what the collider holds over, under or behind a patch's cells)."""

from __future__ import annotations

from typing import Any

import numpy as np
import trimesh

from twinscan.meshing.views import DepthViews
from twinscan.optional import open3d


def raycasting_scene(vertices: np.ndarray, faces: np.ndarray) -> Any:
    """An open3d ray-casting scene of the triangles."""
    scene = open3d().t.geometry.RaycastingScene()
    scene.add_triangles(np.asarray(vertices, np.float32), np.asarray(faces, np.uint32))
    return scene


def cast_along(scene: Any, starts: np.ndarray, direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rays from each of `starts` (N, 3) along one unit `direction`: (distance to the first hit, inf where
    none; the face hit)."""
    rays = np.concatenate([starts, np.broadcast_to(direction, starts.shape)], axis=1).astype(np.float32)
    hits = scene.cast_rays(rays)
    return hits["t_hit"].numpy(), hits["primitive_ids"].numpy()


def _cast(mesh: trimesh.Trimesh, Ks: np.ndarray, world_from_cams: np.ndarray, width: int, height: int):
    """Per view: (depth along the optical axis, inf where the ray hits nothing; hit face ids)."""
    scene = raycasting_scene(mesh.vertices, mesh.faces)
    v, u = np.mgrid[0:height, 0:width]
    pixels = np.stack([u + 0.5, v + 0.5, np.ones_like(u)], -1).reshape(-1, 3).astype(np.float64)
    for K, world_from_cam in zip(Ks, world_from_cams):
        rays_cam = pixels @ np.linalg.inv(K).T  # z = 1, so hit distance along it is the depth
        directions = rays_cam @ world_from_cam[:3, :3].T
        origins = np.broadcast_to(world_from_cam[:3, 3], directions.shape)
        hits = scene.cast_rays(np.concatenate([origins, directions], 1).astype(np.float32))
        yield (hits["t_hit"].numpy().reshape(height, width).astype(np.float32),
               hits["primitive_ids"].numpy().reshape(height, width))


def mesh_depths(mesh: trimesh.Trimesh, Ks: np.ndarray, world_from_cams: np.ndarray, width: int,
                height: int) -> np.ndarray:
    """(N, H, W) depth of `mesh` itself seen by each pinhole camera (inf where nothing is hit)."""
    return np.stack([depth for depth, _ in _cast(mesh, Ks, world_from_cams, width, height)])


def render_mesh_views(mesh: trimesh.Trimesh, K: np.ndarray, world_from_cams: np.ndarray,
                      width: int, height: int) -> DepthViews:
    """Exact depth (z along the optical axis) and face colours of `mesh` seen by each pinhole camera."""
    face_colours = np.asarray(mesh.visual.face_colors)[:, :3]
    n = len(world_from_cams)
    Ks = np.broadcast_to(K, (n, 3, 3)).copy()
    depths, colours = [], []
    for depth, face in _cast(mesh, Ks, world_from_cams, width, height):
        hit = np.isfinite(depth)
        colour = np.zeros((height, width, 3), np.uint8)
        colour[hit] = face_colours[face[hit]]
        depths.append(depth)
        colours.append(colour)
    depth = np.stack(depths)
    return DepthViews(depth=depth, colour=np.stack(colours), alpha=np.isfinite(depth).astype(np.float32),
                      K=Ks, world_from_cam=np.asarray(world_from_cams, np.float64))

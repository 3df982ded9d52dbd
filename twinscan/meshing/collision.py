"""Collision geometry: the scene decimated to a face budget, and optionally convex parts (CoACD)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import trimesh

from twinscan.optional import open3d


def decimate(mesh: trimesh.Trimesh, faces: int) -> trimesh.Trimesh:
    """Quadric decimation (open3d) to at most `faces` faces; vertex colours are not kept.

    open3d's quadrics weigh open boundaries (a scan has many), which keeps shapes where
    fast-simplification lets them collapse (several cm on boxes whose floor was cut away).
    """
    if len(mesh.faces) <= faces:
        return trimesh.Trimesh(mesh.vertices, mesh.faces, process=False)
    o3d = open3d()
    legacy = o3d.geometry.TriangleMesh(o3d.utility.Vector3dVector(np.asarray(mesh.vertices, np.float64)),
                                       o3d.utility.Vector3iVector(np.asarray(mesh.faces, np.int32)))
    simplified = legacy.simplify_quadric_decimation(target_number_of_triangles=faces)
    return trimesh.Trimesh(np.asarray(simplified.vertices), np.asarray(simplified.triangles), process=True)


def make_manifold(mesh: trimesh.Trimesh) -> trimesh.Trimesh:
    """Merge duplicate vertices, drop degenerate and duplicate faces, orient faces consistently."""
    repaired = trimesh.Trimesh(mesh.vertices, mesh.faces, process=True, validate=True)
    trimesh.repair.fix_normals(repaired)
    return repaired


def non_manifold_edges(mesh: trimesh.Trimesh) -> int:
    """Edges shared by more than two faces."""
    _, counts = np.unique(mesh.edges_sorted, axis=0, return_counts=True)
    return int((counts > 2).sum())


@dataclass(frozen=True)
class ConvexParts:
    parts: list[trimesh.Trimesh]
    seconds: float


def convex_decomposition(mesh: trimesh.Trimesh, threshold: float, max_parts: int, seed: int = 0) -> ConvexParts:
    """Approximate convex decomposition by CoACD, for colliders of dynamic bodies."""
    import coacd

    coacd.set_log_level("error")
    started = time.time()
    hulls = coacd.run_coacd(coacd.Mesh(np.asarray(mesh.vertices), np.asarray(mesh.faces)), threshold=threshold,
                            max_convex_hull=max_parts, seed=seed)
    parts = [trimesh.Trimesh(vertices, faces, process=True) for vertices, faces in hulls]
    return ConvexParts(parts, time.time() - started)

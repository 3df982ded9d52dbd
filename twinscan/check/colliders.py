"""The twin's static colliders as world-space triangles, read with pxr: what the probes are planned on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import trimesh
from pxr import Usd, UsdGeom, UsdPhysics

from twinscan.errors import TwinscanError


@dataclass(frozen=True)
class Collider:
    path: str
    kind: str  # the prim's USD type name (Mesh, Cube)
    approximation: str | None  # MeshCollisionAPI physics:approximation if authored, else None
    triangles: trimesh.Trimesh  # world space, stage units


def collider_prims(stage: Usd.Stage) -> list[Usd.Prim]:
    """Every enabled prim with CollisionAPI that is not part of a rigid body (the static environment)."""
    colliders = []
    for prim in stage.Traverse():
        if not prim.HasAPI(UsdPhysics.CollisionAPI) or _in_rigid_body(prim):
            continue
        if UsdPhysics.CollisionAPI(prim).GetCollisionEnabledAttr().Get() is False:
            continue
        colliders.append(prim)
    return colliders


def read_collider(prim: Usd.Prim) -> Collider | None:
    """The prim's triangles in world space; None for shapes other than Mesh and Cube."""
    world_from_local = np.asarray(UsdGeom.Xformable(prim).ComputeLocalToWorldTransform(Usd.TimeCode.Default())).T
    if prim.IsA(UsdGeom.Mesh):
        triangles = _mesh_triangles(UsdGeom.Mesh(prim))
    elif prim.IsA(UsdGeom.Cube):
        size = UsdGeom.Cube(prim).GetSizeAttr().Get()
        triangles = trimesh.creation.box(extents=(size, size, size))
    else:
        return None
    triangles.apply_transform(world_from_local)
    approximation = None
    if prim.HasAPI(UsdPhysics.MeshCollisionAPI):
        attribute = UsdPhysics.MeshCollisionAPI(prim).GetApproximationAttr()
        approximation = str(attribute.Get()) if attribute.HasAuthoredValue() else None
    return Collider(str(prim.GetPath()), str(prim.GetTypeName()), approximation, triangles)


def _mesh_triangles(mesh: UsdGeom.Mesh) -> trimesh.Trimesh:
    """Fan-triangulated faces (USD polygons are convex in practice; scanned meshes are triangles)."""
    points = np.asarray(mesh.GetPointsAttr().Get() or [], dtype=np.float64).reshape(-1, 3)
    counts = np.asarray(mesh.GetFaceVertexCountsAttr().Get() or [], dtype=np.int64)
    indices = np.asarray(mesh.GetFaceVertexIndicesAttr().Get() or [], dtype=np.int64)
    if counts.sum() != len(indices) or np.any(counts < 3) or np.any((indices < 0) | (indices >= len(points))):
        raise TwinscanError(f"{mesh.GetPath()} has malformed faces (counts, indices and points disagree)",
                            "re-export the twin with `twinscan usd`")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    fans = [np.stack([starts[counts > k] + 0, starts[counts > k] + k - 1, starts[counts > k] + k], 1)
            for k in range(2, int(counts.max(initial=0)))]
    corners = np.concatenate(fans) if fans else np.zeros((0, 3), np.int64)
    return trimesh.Trimesh(points, indices[corners].reshape(-1, 3), process=False)


def _in_rigid_body(prim: Usd.Prim) -> bool:
    while prim and not prim.IsPseudoRoot():
        if prim.HasAPI(UsdPhysics.RigidBodyAPI):
            return True
        prim = prim.GetParent()
    return False


def collider_surface(stage: Usd.Stage) -> trimesh.Trimesh:
    """Every static collider's surface in world space, as a simulator builds it: triangle meshes as
    authored, convex-hull approximations as their hulls, the floor slab as its box. (A convex
    decomposition is left as its mesh: the engine's pieces follow it closely.)"""
    parts = []
    for prim in collider_prims(stage):
        collider = read_collider(prim)
        if collider is None or not len(collider.triangles.faces):
            continue
        hull = collider.approximation == UsdPhysics.Tokens.convexHull
        parts.append(collider.triangles.convex_hull if hull else collider.triangles)
    if not parts:
        raise TwinscanError(f"{stage.GetRootLayer().identifier} has no static collider",
                            "export the twin with `twinscan usd` after the mesh stage")
    return trimesh.util.concatenate(parts)

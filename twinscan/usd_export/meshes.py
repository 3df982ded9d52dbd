"""trimesh triangles as a UsdGeom.Mesh (polygonal, not subdivided)."""

from __future__ import annotations

import numpy as np
import trimesh
from pxr import Usd, UsdGeom, Vt

from twinscan.errors import TwinscanError


def author_mesh(stage: Usd.Stage, path: str, mesh: trimesh.Trimesh) -> UsdGeom.Mesh:
    if len(mesh.faces) == 0 or not np.isfinite(mesh.vertices).all():
        raise TwinscanError(f"the mesh for {path} is empty or holds NaN vertices",
                            "rebuild the mesh (twinscan mesh OUT) or pass a valid OBJ/PLY")
    prim = UsdGeom.Mesh.Define(stage, path)
    points = Vt.Vec3fArray.FromNumpy(np.asarray(mesh.vertices, dtype=np.float32))
    prim.CreatePointsAttr(points)
    prim.CreateFaceVertexCountsAttr(Vt.IntArray.FromNumpy(np.full(len(mesh.faces), 3, dtype=np.int32)))
    prim.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(np.asarray(mesh.faces, dtype=np.int32).ravel()))
    prim.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
    prim.CreateExtentAttr(UsdGeom.PointBased.ComputeExtent(points))
    return prim

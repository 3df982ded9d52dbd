"""trimesh triangles as a UsdGeom.Mesh (polygonal, not subdivided): manifold, consistently wound, with normals."""

from __future__ import annotations

import numpy as np
import trimesh
from pxr import Sdf, Usd, UsdGeom, Vt

from twinscan.errors import TwinscanError
from twinscan.usd_export.topology import Surface, manifold_surface, vertex_normals


def author_mesh(stage: Usd.Stage, path: str, mesh: trimesh.Trimesh) -> tuple[UsdGeom.Mesh, Surface]:
    """Define the mesh at `path` from `mesh` repaired by `manifold_surface`; the Surface maps its vertices
    back to `mesh`'s (for UVs and colours). Normals are per vertex, as NVIDIA's validator asks of
    non-subdivided meshes (NormalsExistChecker)."""
    if len(mesh.faces) == 0 or not np.isfinite(mesh.vertices).all():
        raise TwinscanError(f"the mesh for {path} is empty or holds NaN vertices",
                            "rebuild the mesh (twinscan mesh OUT) or pass a valid OBJ/PLY")
    surface = manifold_surface(mesh.vertices, mesh.faces)
    if len(surface.faces) == 0:
        raise TwinscanError(f"the mesh for {path} has no triangle with an area",
                            "rebuild the mesh (twinscan mesh OUT) or pass a valid OBJ/PLY")
    prim = UsdGeom.Mesh.Define(stage, path)
    points = Vt.Vec3fArray.FromNumpy(surface.points)
    prim.CreatePointsAttr(points)
    prim.CreateFaceVertexCountsAttr(Vt.IntArray.FromNumpy(np.full(len(surface.faces), 3, dtype=np.int32)))
    prim.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(surface.faces.ravel()))
    prim.CreateNormalsAttr(Vt.Vec3fArray.FromNumpy(vertex_normals(surface.points, surface.faces)))
    prim.SetNormalsInterpolation(UsdGeom.Tokens.vertex)
    prim.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
    prim.CreateExtentAttr(UsdGeom.PointBased.ComputeExtent(points))
    return prim, surface


def author_indexed_primvar(mesh: UsdGeom.Mesh, name: str, type_name: Sdf.ValueTypeName, values: np.ndarray,
                           interpolation: str = UsdGeom.Tokens.vertex) -> UsdGeom.Primvar:
    """A primvar stored as its distinct values and an index per element (IndexedPrimvarChecker, VG.009)."""
    distinct, indices = np.unique(np.asarray(values), axis=0, return_inverse=True)
    primvar = UsdGeom.PrimvarsAPI(mesh).CreatePrimvar(name, type_name, interpolation)
    primvar.Set(type_name.type.pythonClass.FromNumpy(np.ascontiguousarray(distinct)))
    primvar.SetIndices(Vt.IntArray.FromNumpy(indices.ravel().astype(np.int32)))
    return primvar

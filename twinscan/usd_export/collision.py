"""Static colliders for physics: the scene mesh as triangles, optional convex parts, and a floor slab."""

from __future__ import annotations

import trimesh
from pxr import Gf, Usd, UsdGeom, UsdPhysics

from twinscan.errors import TwinscanError
from twinscan.usd_export.content import FloorArea
from twinscan.usd_export.meshes import author_mesh


def author_collision(stage: Usd.Stage, root: str, mesh: trimesh.Trimesh | None,
                     convex_parts: tuple[trimesh.Trimesh, ...], floor: FloorArea | None) -> None:
    """Colliders under `root`, all purpose "guide" (seen by physics, not by renderers).

    No RigidBodyAPI: the environment is static, which PhysX simulates exactly with triangle meshes
    (approximation "none"); convex parts are for engines or dynamic uses that need them.
    """
    UsdGeom.Scope.Define(stage, root)
    if mesh is not None:
        _collider(author_mesh(stage, f"{root}/Mesh", mesh).GetPrim(), UsdPhysics.Tokens.none)
    if convex_parts:
        UsdGeom.Scope.Define(stage, f"{root}/Convex")
    for index, part in enumerate(convex_parts):
        _collider(author_mesh(stage, f"{root}/Convex/Part_{index:03d}", part).GetPrim(), UsdPhysics.Tokens.convexHull)
    if floor is not None:
        _author_floor(stage, f"{root}/Floor", floor)


def author_physics_scene(stage: Usd.Stage, path: str) -> None:
    """Gravity along -Z at 9.81 m/s^2, matching the twin frame."""
    scene = UsdPhysics.Scene.Define(stage, path)
    scene.CreateGravityDirectionAttr(Gf.Vec3f(0.0, 0.0, -1.0))
    scene.CreateGravityMagnitudeAttr(9.81)


def _collider(prim: Usd.Prim, approximation: str) -> None:
    UsdGeom.Imageable(prim).CreatePurposeAttr(UsdGeom.Tokens.guide)
    UsdPhysics.CollisionAPI.Apply(prim)
    UsdPhysics.MeshCollisionAPI.Apply(prim).CreateApproximationAttr(approximation)


def _author_floor(stage: Usd.Stage, path: str, floor: FloorArea) -> None:
    """A box whose top face is the z = 0 floor: a slab, not a plane, so nothing tunnels through."""
    (x0, y0), (x1, y1) = floor.xy_min, floor.xy_max
    if not (x1 > x0 and y1 > y0 and floor.thickness > 0):
        raise TwinscanError(f"the floor area {floor} is empty", "give xy_min below xy_max and a positive thickness")
    cube = UsdGeom.Cube.Define(stage, path)
    cube.CreateSizeAttr(1.0)
    cube.CreatePurposeAttr(UsdGeom.Tokens.guide)
    cube.CreateExtentAttr([(-0.5, -0.5, -0.5), (0.5, 0.5, 0.5)])
    cube.AddTranslateOp().Set(Gf.Vec3d((x0 + x1) / 2, (y0 + y1) / 2, -floor.thickness / 2))
    cube.AddScaleOp().Set(Gf.Vec3f(x1 - x0, y1 - y0, floor.thickness))
    UsdPhysics.CollisionAPI.Apply(cube.GetPrim())

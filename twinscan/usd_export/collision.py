"""Static colliders for physics: the scene mesh as triangles, optional convex parts, and a floor slab."""

from __future__ import annotations

import trimesh
from pxr import Gf, Usd, UsdGeom, UsdPhysics, UsdShade

from twinscan.errors import TwinscanError
from twinscan.usd_export.content import FloorArea, PhysicsMaterial
from twinscan.usd_export.meshes import author_mesh

PHYSICS_MATERIAL = "PhysicsMaterials/Surface"  # under the collision root
PLANAR_COMPLETION = "twinscan:planarCompletion"  # customData key on the planar patches' prim


def author_collision(stage: Usd.Stage, root: str, mesh: trimesh.Trimesh | None,
                     convex_parts: tuple[trimesh.Trimesh, ...], floor: FloorArea | None,
                     material: PhysicsMaterial = PhysicsMaterial(), planes: trimesh.Trimesh | None = None) -> None:
    """Colliders under `root`, all purpose "guide" (seen by physics, not by renderers), all bound to one
    UsdPhysics material (friction, restitution) that a sim team edits in one place.

    `planes` (flat patches closed over planar structure that fusion left in fragments) go in a prim of
    their own, marked `twinscan:planarCompletion` in its customData: inferred, not fused, so a sim team
    can tell them apart and switch them off.

    No RigidBodyAPI: the environment is static, which PhysX simulates exactly with triangle meshes
    (approximation "none"); convex parts are for engines or dynamic uses that need them.
    """
    if problems := material.problems():
        raise TwinscanError(f"the physics material is not usable: {problems[0]}",
                            "pass --static-friction >= --dynamic-friction >= 0 and --restitution in 0..1")
    UsdGeom.Scope.Define(stage, root)
    colliders = []
    if mesh is not None:
        colliders.append(_collider(author_mesh(stage, f"{root}/Mesh", mesh)[0].GetPrim(), UsdPhysics.Tokens.none))
    if planes is not None:
        prim = _collider(author_mesh(stage, f"{root}/Planes", planes)[0].GetPrim(), UsdPhysics.Tokens.none)
        prim.SetCustomDataByKey(PLANAR_COMPLETION, True)
        colliders.append(prim)
    if convex_parts:
        UsdGeom.Scope.Define(stage, f"{root}/Convex")
    for index, part in enumerate(convex_parts):
        colliders.append(_collider(author_mesh(stage, f"{root}/Convex/Part_{index:03d}", part)[0].GetPrim(),
                                   UsdPhysics.Tokens.convexHull))
    if floor is not None:
        colliders.append(_author_floor(stage, f"{root}/Floor", floor))
    physics_material = author_physics_material(stage, f"{root}/{PHYSICS_MATERIAL}", material)
    for prim in colliders:
        UsdShade.MaterialBindingAPI.Apply(prim).Bind(physics_material, UsdShade.Tokens.weakerThanDescendants,
                                                     "physics")  # the material purpose physics engines read


def author_physics_material(stage: Usd.Stage, path: str, material: PhysicsMaterial) -> UsdShade.Material:
    """A UsdShade.Material with UsdPhysics.MaterialAPI: what PhysX and Newton read for contacts."""
    UsdGeom.Scope.Define(stage, path.rsplit("/", 1)[0])
    shade = UsdShade.Material.Define(stage, path)
    api = UsdPhysics.MaterialAPI.Apply(shade.GetPrim())
    api.CreateStaticFrictionAttr(float(material.static_friction))
    api.CreateDynamicFrictionAttr(float(material.dynamic_friction))
    api.CreateRestitutionAttr(float(material.restitution))
    api.CreateDensityAttr(0.0)  # 0: unspecified; the environment is static and has no mass
    return shade


def author_physics_scene(stage: Usd.Stage, path: str) -> None:
    """Gravity along -Z at 9.81 m/s^2, matching the twin frame."""
    scene = UsdPhysics.Scene.Define(stage, path)
    scene.CreateGravityDirectionAttr(Gf.Vec3f(0.0, 0.0, -1.0))
    scene.CreateGravityMagnitudeAttr(9.81)


def _collider(prim: Usd.Prim, approximation: str) -> Usd.Prim:
    UsdGeom.Imageable(prim).CreatePurposeAttr(UsdGeom.Tokens.guide)
    UsdPhysics.CollisionAPI.Apply(prim)
    UsdPhysics.MeshCollisionAPI.Apply(prim).CreateApproximationAttr(approximation)
    return prim


def _author_floor(stage: Usd.Stage, path: str, floor: FloorArea) -> Usd.Prim:
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
    return cube.GetPrim()

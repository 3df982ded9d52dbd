"""Static checks of a twin stage: USD's validators, units, colliders, counts and extents."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import trimesh
from pxr import Usd, UsdGeom, UsdPhysics, UsdVol

from twinscan.check.colliders import Collider, collider_prims, read_collider
from twinscan.errors import TwinscanError
from twinscan.usd_export import validation_errors

# The largest horizontal extent of a workcell's colliders, in metres: a phone walkthrough captures
# somewhere between a tabletop cell and a factory bay. Outside this range the units are wrong.
WORKCELL_SPAN_M = (0.5, 200.0)
UNIT_NAMES = {1.0: "metres", 0.1: "decimetres", 0.01: "centimetres", 0.001: "millimetres", 0.0254: "inches",
              0.3048: "feet"}


@dataclass(frozen=True)
class UnitsFacts:
    meters_per_unit: float
    up_axis: str
    kilograms_per_unit: float
    default_prim: str | None
    collider_span_units: tuple[float, float, float]  # size of the colliders' world box in stage units
    collider_span_m: tuple[float, float, float]  # the same in metres, as the stage's metersPerUnit says


@dataclass
class StageValidation:
    errors: list[str]
    units: UnitsFacts
    counts: dict[str, int]
    collider_bounds: np.ndarray | None  # (2, 3) world min/max of the colliders, stage units
    colliders: list[Collider] = field(default_factory=list)

    def collision_mesh(self) -> trimesh.Trimesh | None:
        """All colliders' triangles as one world-space mesh."""
        meshes = [collider.triangles for collider in self.colliders]
        return trimesh.util.concatenate(meshes) if meshes else None


def validate_stage(stage: Usd.Stage, usd_path: str | Path) -> StageValidation:
    errors = [f"USD validation: {message}" for message in validation_errors(usd_path)]
    colliders: list[Collider] = []
    for prim in collider_prims(stage):
        try:
            collider = read_collider(prim)
        except TwinscanError as error:
            errors.append(error.one_line())
            continue
        if collider is not None:
            colliders.append(collider)
        errors += collider_errors(prim, collider)
    if not colliders:
        errors.append("the stage has no static colliders (no Mesh or Cube prim with UsdPhysics.CollisionAPI) -- "
                      "re-run `twinscan usd` with a collision mesh")
    bounds = _bounds(colliders)
    span = tuple(float(v) for v in (bounds[1] - bounds[0])) if bounds is not None else (0.0, 0.0, 0.0)
    meters_per_unit = float(UsdGeom.GetStageMetersPerUnit(stage))
    default_prim = stage.GetDefaultPrim()
    units = UnitsFacts(
        meters_per_unit=meters_per_unit, up_axis=str(UsdGeom.GetStageUpAxis(stage)),
        kilograms_per_unit=float(UsdPhysics.GetStageKilogramsPerUnit(stage)),
        default_prim=str(default_prim.GetPath()) if default_prim else None,
        collider_span_units=span, collider_span_m=tuple(v * meters_per_unit for v in span))
    errors += units_errors(units) + extent_errors(stage)
    return StageValidation(errors, units, _counts(stage, colliders), bounds, colliders)


def units_errors(units: UnitsFacts) -> list[str]:
    """What is wrong with the stage's units and frame, each with how to fix it."""
    errors = []
    low, high = WORKCELL_SPAN_M
    span_units = max(units.collider_span_units[:2], default=0.0)
    span_m = span_units * units.meters_per_unit
    if units.meters_per_unit != 1.0:
        unit = UNIT_NAMES.get(units.meters_per_unit, f"{units.meters_per_unit:g} m")
        message = f"the stage says metersPerUnit = {units.meters_per_unit:g} ({unit}), twins are in metres"
        if span_units and not low <= span_m <= high and low <= span_units <= high:
            message += (f"; read that way its colliders span {span_m:.3g} m, implausibly "
                        f"{'small' if span_m < low else 'large'} for a workcell, while their coordinates span "
                        f"{span_units:.3g} units: the data are in metres and only the metadata is wrong")
        errors.append(message + " -- set metersPerUnit = 1 on the root layer "
                      "(UsdGeom.SetStageMetersPerUnit(stage, 1.0)) or re-export with `twinscan usd`")
    elif span_units and not low <= span_m <= high:
        errors.append(f"the colliders span {span_m:.3g} m horizontally, implausible for a workcell "
                      f"(expected {low:g} to {high:g} m) -- the data are not in metres: set the scale "
                      "(a marker of known size or --scale) and re-run `twinscan usd`")
    if units.up_axis != "Z":
        errors.append(f"the stage's upAxis is {units.up_axis}, twins are Z up -- re-export with `twinscan usd` "
                      "(UsdGeom.SetStageUpAxis(stage, 'Z') only if the data are Z up)")
    if units.kilograms_per_unit != 1.0:
        errors.append(f"the stage says kilogramsPerUnit = {units.kilograms_per_unit:g}, twins are in kilograms -- "
                      "set kilogramsPerUnit = 1 (UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0))")
    if units.default_prim is None:
        errors.append("the stage has no defaultPrim, so references to it load nothing -- "
                      "set defaultPrim = /World (stage.SetDefaultPrim)")
    return errors


def collider_errors(prim: Usd.Prim, collider: Collider | None) -> list[str]:
    path = prim.GetPath()
    if collider is None:
        return []  # implicit shapes other than Cube: physics engines take them as they are
    if collider.kind == "Mesh" and not prim.HasAPI(UsdPhysics.MeshCollisionAPI):
        return [f"{path} is a mesh collider without UsdPhysics.MeshCollisionAPI -- apply it with "
                "physics:approximation 'none' (static triangle mesh) or 'convexHull'"]
    if collider.kind == "Mesh" and collider.approximation is None:
        return [f"{path} has MeshCollisionAPI but no authored physics:approximation -- author 'none' for the "
                "static environment ('convexHull' for convex parts)"]
    if len(collider.triangles.faces) == 0:
        return [f"{path} is a collider without triangles -- rebuild the collision mesh (`twinscan mesh`)"]
    return []


def extent_errors(stage: Usd.Stage) -> list[str]:
    """Boundables whose authored extent does not contain their geometry (renderers and physics cull by it)."""
    errors = []
    for prim in stage.Traverse():
        if not prim.IsA(UsdGeom.Boundable):
            continue
        authored = UsdGeom.Boundable(prim).GetExtentAttr().Get()
        computed = UsdGeom.Boundable.ComputeExtentFromPlugins(UsdGeom.Boundable(prim), Usd.TimeCode.Default())
        if authored is None or computed is None or len(computed) != 2:
            continue
        authored, computed = np.asarray(authored, np.float64), np.asarray(computed, np.float64)
        slack = 1e-5 * max(1.0, float(np.abs(computed).max()))
        if np.any(computed[0] < authored[0] - slack) or np.any(computed[1] > authored[1] + slack):
            errors.append(f"{prim.GetPath()}'s extent {authored.tolist()} does not contain its geometry "
                          f"{computed.tolist()} -- recompute it (UsdGeom.Boundable.ComputeExtentFromPlugins)")
    return errors


def _bounds(colliders: list[Collider]) -> np.ndarray | None:
    boxes = [collider.triangles.bounds for collider in colliders if len(collider.triangles.faces)]
    if not boxes:
        return None
    boxes = np.stack(boxes)
    return np.stack([boxes[:, 0].min(0), boxes[:, 1].max(0)])


def _counts(stage: Usd.Stage, colliders: list[Collider]) -> dict[str, int]:
    prims = list(stage.Traverse())
    splats = sum(len(UsdVol.ParticleField3DGaussianSplat(prim).GetPositionsAttr().Get() or [])
                 for prim in prims if prim.IsA(UsdVol.ParticleField3DGaussianSplat))
    return {"prims": len(prims), "colliders": len(colliders),
            "collider_triangles": sum(len(collider.triangles.faces) for collider in colliders),
            "meshes": sum(prim.IsA(UsdGeom.Mesh) for prim in prims),
            "cameras": sum(prim.IsA(UsdGeom.Camera) for prim in prims), "splats": splats}

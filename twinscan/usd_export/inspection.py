"""Check and describe a written twin: USD's registered validators, and a summary for `twinscan info`."""

from __future__ import annotations

from pathlib import Path

from pxr import Tf, Usd, UsdGeom, UsdPhysics, UsdShade, UsdValidation, UsdVol

from twinscan.errors import TwinscanError
from twinscan.usd_export.twin import APPEARANCE, BACKGROUND


def existing_twin(usd_path: str | Path) -> Path:
    """`usd_path` as a Path; a TwinscanError naming it where no such file is."""
    usd_path = Path(usd_path)
    if not usd_path.is_file():
        raise TwinscanError(f"{usd_path} does not exist", "pass the twin.usda written by `twinscan usd`")
    return usd_path


def open_stage(usd_path: str | Path) -> Usd.Stage:
    usd_path = existing_twin(usd_path)
    try:
        return Usd.Stage.Open(str(usd_path))
    except Tf.ErrorException as error:
        raise TwinscanError(f"{usd_path} is not a readable USD file", "re-run `twinscan usd`") from error


def validation_errors(usd_path: str | Path) -> list[str]:
    """Messages of every error (not warning) that the registered UsdValidation validators report."""
    stage = open_stage(usd_path)
    validators = UsdValidation.ValidationRegistry().GetOrLoadAllValidators()
    errors = UsdValidation.ValidationContext(validators).Validate(stage)
    return [f"{error.GetName()}: {error.GetMessage()}" for error in errors
            if error.GetType() == UsdValidation.ValidationErrorType.Error]


def summarize(usd_path: str | Path) -> dict:
    """Prims, counts, units, scale source and quality figures of a twin stage."""
    stage = open_stage(usd_path)
    summary: dict = {
        "path": str(usd_path),
        "default_prim": str(stage.GetDefaultPrim().GetPath()) if stage.GetDefaultPrim() else None,
        "up_axis": str(UsdGeom.GetStageUpAxis(stage)),
        "meters_per_unit": UsdGeom.GetStageMetersPerUnit(stage),
        "kilograms_per_unit": UsdPhysics.GetStageKilogramsPerUnit(stage),
        "prims": {str(prim.GetPath()): str(prim.GetTypeName()) for prim in stage.Traverse()},
        "splats": 0, "background_splats": 0, "sh_degree": None,
        "collision_triangles": 0, "colliders": 0,
        "visual_triangles": 0, "textured": False,
        "camera_samples": 0,
    }
    for prim in stage.Traverse():
        if prim.IsA(UsdVol.ParticleField3DGaussianSplat):
            splats = UsdVol.ParticleField3DGaussianSplat(prim)
            background = prim.GetName() == BACKGROUND
            summary["background_splats" if background else "splats"] += len(splats.GetPositionsAttr().Get() or [])
            summary["sh_degree"] = splats.GetRadianceSphericalHarmonicsDegreeAttr().Get()
        if prim.HasAPI(UsdPhysics.CollisionAPI):
            summary["colliders"] += 1
        if prim.IsA(UsdGeom.Mesh):
            triangles = len(UsdGeom.Mesh(prim).GetFaceVertexCountsAttr().Get() or [])
            if prim.HasAPI(UsdPhysics.CollisionAPI):
                summary["collision_triangles"] += triangles
            else:
                summary["visual_triangles"] += triangles
        if prim.IsA(UsdShade.Shader) and UsdShade.Shader(prim).GetIdAttr().Get() == "UsdUVTexture":
            summary["textured"] = True
        if prim.IsA(UsdGeom.Camera):
            op = UsdGeom.Camera(prim).GetOrderedXformOps()
            summary["camera_samples"] += max((len(o.GetTimeSamples()) for o in op), default=0)
    world = stage.GetDefaultPrim()
    has_variants = bool(world) and world.GetVariantSets().HasVariantSet(APPEARANCE)
    summary["appearance"] = world.GetVariantSets().GetVariantSelection(APPEARANCE) if has_variants else None
    provenance = dict(stage.GetRootLayer().customLayerData.get("twinscan", {}))
    summary["scale_source"] = provenance.pop("scale_source", None)
    summary["figures"] = dict(provenance.pop("figures", {}))
    summary["provenance"] = provenance
    return summary

"""Assemble the twin stage: a small .usda root over one .usdc layer per heavy part.

/World (Xform, variant set "appearance": splats | mesh)
    Splats     ParticleField3DGaussianSplat   <- {stem}_splats.usdc
    Background ParticleField3DGaussianSplat   <- {stem}_background.usdc (invisible until turned on)
    Collision  guide-purpose colliders       <- {stem}_collision.usdc
    Visual     textured mesh + material      <- {stem}_visual.usdc
    Cameras    the capture trajectory        <- {stem}_cameras.usdc
    PhysicsScene
Heavy layers are written first, the root last, so a twin.usda on disk always has its layers.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

from pxr import Sdf, Usd, UsdGeom, UsdUtils

from twinscan import __version__
from twinscan.errors import TwinscanError
from twinscan.gaussians import Gaussians
from twinscan.usd_export.cameras import author_cameras, set_playback_range
from twinscan.usd_export.collision import author_collision, author_physics_scene
from twinscan.usd_export.content import ExportOptions, TwinContent, TwinMetadata
from twinscan.usd_export.layers import new_stage, staged_usd_path
from twinscan.usd_export.splats import author_splats
from twinscan.usd_export.visual import author_visual, copy_texture

APPEARANCE = "appearance"
BACKGROUND = "Background"  # the prim of the splats outside the captured region


@dataclass(frozen=True)
class _Part:
    name: str  # prim name under /World, and the root prim of its layer
    layer: Path


def write_twin(out_path: str | Path, content: TwinContent, options: ExportOptions = ExportOptions()) -> Path:
    """Write the twin stage at `out_path` (a .usda) with its layers beside it; return the .usda path
    (or the .usdz when options.usdz)."""
    out_path = Path(out_path)
    if out_path.suffix != ".usda":
        raise TwinscanError(f"the twin root layer must be a .usda file, not {out_path.name}", "name it twin.usda")
    if options.appearance not in ("splats", "mesh"):
        raise TwinscanError(f"unknown appearance {options.appearance!r}", "choose splats or mesh")
    folder, stem = out_path.parent, out_path.stem
    parts = [_write_splats(folder / f"{stem}_splats.usdc", "Splats", content.gaussians, options)]
    if content.background is not None:
        parts.append(_write_splats(folder / f"{stem}_background.usdc", BACKGROUND, content.background, options))
    if content.collision_mesh is not None or content.convex_parts or content.floor is not None:
        with new_stage(layer := folder / f"{stem}_collision.usdc", "Collision") as stage:
            author_collision(stage, "/Collision", content.collision_mesh, content.convex_parts, content.floor,
                             content.physics_material, content.planar_patches)
        parts.append(_Part("Collision", layer))
    if content.visual_mesh is not None:
        parts.append(_write_visual(folder, stem, content))
    if content.cameras is not None:
        with new_stage(layer := folder / f"{stem}_cameras.usdc", "Cameras") as stage:
            author_cameras(stage, "/Cameras", content.cameras, options.time_codes_per_second)
        parts.append(_Part("Cameras", layer))

    with new_stage(out_path, "World") as stage:
        world = UsdGeom.Xform.Define(stage, "/World").GetPrim()
        for part in parts:
            stage.DefinePrim(f"/World/{part.name}").GetReferences().AddReference(f"./{part.layer.name}")
        if content.background is not None:  # off by default, so "frame all" frames the cell
            UsdGeom.Imageable(stage.GetPrimAtPath(f"/World/{BACKGROUND}")).CreateVisibilityAttr(UsdGeom.Tokens.invisible)
        author_physics_scene(stage, "/World/PhysicsScene")
        if content.visual_mesh is not None:  # without one, a "mesh" appearance would show nothing
            _author_appearance_variants(stage, world, selection=options.appearance)
        elif options.appearance == "mesh":
            raise TwinscanError("appearance 'mesh' needs a visual mesh and this twin has none",
                                "run `twinscan mesh` first, or keep the splats appearance")
        if content.cameras is not None:
            set_playback_range(stage, content.cameras, options.time_codes_per_second)
        stage.GetRootLayer().customLayerData = {"twinscan": _provenance(content.metadata)}
        stage.GetRootLayer().documentation = "Digital twin made by twinscan: Z up, metres, floor at z = 0."
    if options.usdz:
        return package_usdz(out_path, out_path.with_suffix(".usdz"))
    return out_path


def package_usdz(usda_path: Path, usdz_path: Path) -> Path:
    """One file holding the root layer and everything it refers to (layers, textures)."""
    with staged_usd_path(usdz_path) as staged:
        if not UsdUtils.CreateNewUsdzPackage(Sdf.AssetPath(str(usda_path)), str(staged)):
            raise TwinscanError(f"could not package {usda_path} as {usdz_path.name}",
                                "run `twinscan info` on the .usda to find the unresolved asset")
    return usdz_path


def _write_splats(layer: Path, name: str, gaussians: Gaussians, options: ExportOptions) -> _Part:
    with new_stage(layer, name) as stage:
        author_splats(stage, f"/{name}", gaussians, options.half_precision)
    return _Part(name, layer)


def _write_visual(folder: Path, stem: str, content: TwinContent) -> _Part:
    texture_asset = None
    if content.visual_texture is not None:
        texture_name = f"{stem}_diffuse{Path(content.visual_texture).suffix.lower()}"
        copy_texture(Path(content.visual_texture), folder / texture_name)
        texture_asset = f"./{texture_name}"
    with new_stage(layer := folder / f"{stem}_visual.usdc", "Visual") as stage:
        author_visual(stage, "/Visual", content.visual_mesh, texture_asset)
    return _Part("Visual", layer)


def _author_appearance_variants(stage: Usd.Stage, world: Usd.Prim, selection: str) -> None:
    """Variant "splats" hides the visual mesh, variant "mesh" hides the splats (colliders stay)."""
    variants = world.GetVariantSets().AddVariantSet(APPEARANCE)
    hidden = {"splats": "Visual", "mesh": "Splats"}
    for variant, prim_name in hidden.items():
        variants.AddVariant(variant)
        variants.SetVariantSelection(variant)
        with variants.GetVariantEditContext():
            UsdGeom.Imageable(stage.OverridePrim(f"/World/{prim_name}")).CreateVisibilityAttr(
                UsdGeom.Tokens.invisible)
    variants.SetVariantSelection(selection)


def _provenance(metadata: TwinMetadata) -> dict:
    created = metadata.created_utc or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return {
        "version": __version__,
        "source_sha256": metadata.source_sha256,
        "created_utc": created,
        "scale_source": metadata.scale_source,
        **({"origin": metadata.origin} if metadata.origin else {}),
        "figures": {name: float(value) for name, value in metadata.figures.items()},
    }

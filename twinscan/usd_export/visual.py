"""The visual mesh: vertex colours and/or UVs with a texture, bound to a UsdPreviewSurface."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import trimesh
from pxr import Sdf, Usd, UsdGeom, UsdShade

from twinscan.atomic import atomic_path
from twinscan.errors import TwinscanError
from twinscan.usd_export.meshes import author_indexed_primvar, author_mesh


def author_visual(stage: Usd.Stage, root: str, mesh: trimesh.Trimesh, texture_asset: str | None) -> UsdShade.Material:
    """Define `root`/Mesh and its material `root`/Looks/Surface.

    `texture_asset` is the path (relative to the layer) of the image the mesh's UVs index, after
    `copy_texture` has put it there; without one the material shows the vertex colours, if any.
    """
    UsdGeom.Xform.Define(stage, root)
    usd_mesh, repaired = author_mesh(stage, f"{root}/Mesh", mesh)
    colours = _vertex_colours(mesh)
    if colours is not None:
        author_indexed_primvar(usd_mesh, "displayColor", Sdf.ValueTypeNames.Color3fArray, colours[repaired.source])

    UsdGeom.Scope.Define(stage, f"{root}/Looks")
    material = UsdShade.Material.Define(stage, f"{root}/Looks/Surface")
    surface = UsdShade.Shader.Define(stage, f"{root}/Looks/Surface/PreviewSurface")
    surface.CreateIdAttr("UsdPreviewSurface")
    surface.CreateInput("roughness", Sdf.ValueTypeNames.Float).Set(0.8)
    material.CreateSurfaceOutput().ConnectToSource(surface.ConnectableAPI(), "surface")
    diffuse = surface.CreateInput("diffuseColor", Sdf.ValueTypeNames.Color3f)
    if texture_asset is not None:
        uv = getattr(mesh.visual, "uv", None)
        if uv is None or len(uv) != len(mesh.vertices):
            raise TwinscanError("the visual mesh has a texture but no per-vertex UVs",
                                "export the textured mesh with its UVs (OBJ with vt, or PLY with texcoords)")
        author_indexed_primvar(usd_mesh, "st", Sdf.ValueTypeNames.TexCoord2fArray,
                               np.asarray(uv, dtype=np.float32)[repaired.source])
        reader = UsdShade.Shader.Define(stage, f"{root}/Looks/Surface/StReader")
        reader.CreateIdAttr("UsdPrimvarReader_float2")
        reader.CreateInput("varname", Sdf.ValueTypeNames.String).Set("st")
        image = UsdShade.Shader.Define(stage, f"{root}/Looks/Surface/Diffuse")
        image.CreateIdAttr("UsdUVTexture")
        image.CreateInput("file", Sdf.ValueTypeNames.Asset).Set(texture_asset)
        image.CreateInput("sourceColorSpace", Sdf.ValueTypeNames.Token).Set("sRGB")
        image.CreateInput("st", Sdf.ValueTypeNames.Float2).ConnectToSource(
            reader.CreateOutput("result", Sdf.ValueTypeNames.Float2))
        # UsdUVTexture's outputs:rgb is float3 in its shader definition (MaterialUsdPreviewSurfaceChecker);
        # connecting float3 to the color3f diffuseColor is allowed, the outputs must keep their own type.
        diffuse.ConnectToSource(image.CreateOutput("rgb", Sdf.ValueTypeNames.Float3))
    elif colours is not None:
        # A preview surface cannot read displayColor without a primvar reader; give it one.
        reader = UsdShade.Shader.Define(stage, f"{root}/Looks/Surface/ColorReader")
        reader.CreateIdAttr("UsdPrimvarReader_float3")
        reader.CreateInput("varname", Sdf.ValueTypeNames.String).Set("displayColor")
        diffuse.ConnectToSource(reader.CreateOutput("result", Sdf.ValueTypeNames.Float3))
    else:
        diffuse.Set((0.6, 0.6, 0.6))
    UsdShade.MaterialBindingAPI.Apply(usd_mesh.GetPrim()).Bind(material)
    return material


def copy_texture(texture: Path, target: Path) -> None:
    """Put the texture beside the layers (the stage refers to it by a relative path)."""
    if not texture.is_file():
        raise TwinscanError(f"texture {texture} does not exist", "pass the image the mesh's UVs refer to")
    with atomic_path(target) as tmp:
        shutil.copyfile(texture, tmp)


def _vertex_colours(mesh: trimesh.Trimesh) -> np.ndarray | None:
    """Linear RGB per vertex (USD colours are linear; trimesh's are 8-bit sRGB), or None."""
    if mesh.visual.kind != "vertex":
        return None
    srgb = np.asarray(mesh.visual.vertex_colors)[:, :3] / 255.0
    linear = np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)
    return linear.astype(np.float32)

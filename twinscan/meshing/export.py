"""OUT/mesh/: the meshes as files (trimesh writers), all inside one atomically replaced folder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import trimesh

from twinscan.atomic import atomic_dir
from twinscan.meshing.build import MeshResult

VISUAL_GLB = "visual.glb"  # textured when an atlas was baked, else vertex colours
VISUAL_OBJ = "visual.obj"  # + visual.mtl and the atlas PNG
VISUAL_COLOURS = "visual_colours.ply"  # vertex colours (glTF would multiply them into the texture)
COLLISION = "collision.obj"  # the structure, floor excluded
COLLISION_CONFIDENCE = "collision_confidence.npy"  # (F,) float32 per face of collision.obj, in its order
FLOOR = "floor.obj"  # box collider, top face at z = 0
CONVEX = "convex"  # convex/part_000.obj ... (CoACD)
SUMMARY = "mesh.json"


def write_meshes(result: MeshResult, folder: Path) -> list[str]:
    """Write every mesh of `result` into `folder` (replaced as a whole); return the file names."""
    with atomic_dir(folder) as tmp:
        visual = result.textured if result.textured is not None else result.visual
        visual.export(tmp / VISUAL_GLB)
        text, extras = trimesh.exchange.obj.export_obj(visual, include_texture=True, return_texture=True,
                                                        mtl_name="visual.mtl")
        (tmp / VISUAL_OBJ).write_text(text)
        for name, data in extras.items():
            (tmp / name).write_bytes(data)
        result.visual.export(tmp / VISUAL_COLOURS)
        result.collision.export(tmp / COLLISION)
        names = [VISUAL_GLB, VISUAL_OBJ, *extras, VISUAL_COLOURS, COLLISION]
        if result.collision_confidence is not None:
            np.save(tmp / COLLISION_CONFIDENCE, result.collision_confidence)
            names.append(COLLISION_CONFIDENCE)
        if result.floor_slab is not None:
            result.floor_slab.export(tmp / FLOOR)
            names.append(FLOOR)
        if result.convex_parts:
            (tmp / CONVEX).mkdir()
            for i, part in enumerate(result.convex_parts):
                part.export(tmp / CONVEX / f"part_{i:03d}.obj")
            names.append(CONVEX)
        floor = None if result.floor is None else {
            "height_m": result.floor.height, "tilt_deg": result.floor.tilt_deg,
            "bounds_xy": result.floor.bounds_xy.tolist(), "area_m2": result.floor.area}
        summary = {"files": sorted(names), "floor": floor, "figures": result.figures, "warnings": result.warnings}
        (tmp / SUMMARY).write_text(json.dumps(summary, indent=2) + "\n")
    return sorted([*names, SUMMARY])

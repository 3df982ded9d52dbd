"""OUT/mesh/: the meshes as files (trimesh writers) and the stage's record (mesh.json, meshing/record.py),
all inside one atomically replaced folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import trimesh

from twinscan.atomic import atomic_dir, write_json
from twinscan.layout import (COLLISION, COLLISION_CONFIDENCE, CONVEX_DIR, CONVEX_PART, FLOOR, MESH_DIR, MESH_SUMMARY,
                             PLANES, VISUAL_COLOURS, VISUAL_GLB, VISUAL_MTL, VISUAL_OBJ, inside)
from twinscan.meshing.build import MeshResult
from twinscan.meshing.record import FloorRecord, MeshRecord


def write_meshes(result: MeshResult, folder: Path) -> list[str]:
    """Write every mesh of `result` into `folder` (OUT/mesh/, replaced as a whole); return their paths
    relative to OUT/ (twinscan.layout's)."""
    with atomic_dir(folder) as tmp:
        def at(path: str) -> Path:
            return tmp / inside(MESH_DIR, path)

        visual = result.textured if result.textured is not None else result.visual
        visual.export(at(VISUAL_GLB))
        text, extras = trimesh.exchange.obj.export_obj(visual, include_texture=True, return_texture=True,
                                                        mtl_name=inside(MESH_DIR, VISUAL_MTL))
        at(VISUAL_OBJ).write_text(text)
        for name, data in extras.items():
            (tmp / name).write_bytes(data)
        result.visual.export(at(VISUAL_COLOURS))
        result.collision.export(at(COLLISION))
        names = [VISUAL_GLB, VISUAL_OBJ, *(f"{MESH_DIR}/{name}" for name in extras), VISUAL_COLOURS, COLLISION]
        if result.collision_confidence is not None:
            np.save(at(COLLISION_CONFIDENCE), result.collision_confidence)
            names.append(COLLISION_CONFIDENCE)
        if result.planes is not None:
            result.planes.export(at(PLANES))
            names.append(PLANES)
        if result.floor_slab is not None:
            result.floor_slab.export(at(FLOOR))
            names.append(FLOOR)
        if result.convex_parts:
            at(CONVEX_DIR).mkdir()
            for i, part in enumerate(result.convex_parts):
                part.export(at(CONVEX_DIR) / CONVEX_PART.format(i))
            names.append(CONVEX_DIR)
        floor = None if result.floor is None else FloorRecord(
            float(result.floor.height), float(result.floor.tilt_deg),
            tuple(tuple(float(v) for v in corner) for corner in result.floor.bounds_xy), float(result.floor.area))
        record = MeshRecord(tuple(sorted(inside(MESH_DIR, name) for name in names)), floor, result.figures,
                            tuple(result.warnings))
        write_json(at(MESH_SUMMARY), record.to_json())
    return sorted([*names, MESH_SUMMARY])

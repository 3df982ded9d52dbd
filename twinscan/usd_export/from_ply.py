"""`twinscan usd OUT --from-ply splats.ply [--mesh collision.obj]`: package splats trained elsewhere."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import trimesh

from twinscan.errors import TwinscanError
from twinscan.gaussians import read_ply, split_similarity, transform
from twinscan.usd_export.content import ExportOptions, FloorArea, ScaleSource, TwinContent, TwinMetadata
from twinscan.usd_export.twin import write_twin
from twinscan.workspace import fingerprint

FLOOR_MARGIN = 0.5  # metres of floor beyond the scene's footprint


def package_from_ply(ply_path: str | Path, out_path: str | Path, mesh_path: str | Path | None = None,
                     world_from_colmap: np.ndarray | None = None, options: ExportOptions = ExportOptions(),
                     scale_source: ScaleSource = "arbitrary", floor: bool = True) -> Path:
    """Write a twin from a 3DGS PLY (gsplat, nerfstudio, 3DGRUT exports) and an optional collision mesh.

    Both inputs are in the same frame; `world_from_colmap` (a 4x4 similarity) moves them into the twin
    frame (Z up, metres). `floor` adds a z = 0 floor collider under the scene's footprint.
    """
    ply_path = Path(ply_path)
    gaussians = read_ply(ply_path)
    mesh = _load_mesh(Path(mesh_path)) if mesh_path is not None else None
    if world_from_colmap is not None:
        gaussians = transform(gaussians, *split_similarity(world_from_colmap))
        if mesh is not None:
            mesh.apply_transform(np.asarray(world_from_colmap, dtype=np.float64))
    if mesh is not None:
        lower, upper = mesh.bounds[:, :2]
    else:
        lower, upper = np.percentile(gaussians.means[:, :2], [1, 99], axis=0)  # ignore stray far splats
    content = TwinContent(
        gaussians=gaussians,
        collision_mesh=mesh,
        floor=FloorArea(tuple(lower - FLOOR_MARGIN), tuple(upper + FLOOR_MARGIN)) if floor else None,
        metadata=TwinMetadata(source_sha256=fingerprint(ply_path), scale_source=scale_source,
                              figures={"splats": gaussians.count}),
    )
    return write_twin(out_path, content, options)


def _load_mesh(path: Path) -> trimesh.Trimesh:
    if not path.is_file():
        raise TwinscanError(f"mesh {path} does not exist", "pass an OBJ, PLY, STL or GLB collision mesh")
    try:
        mesh = trimesh.load(path, force="mesh", process=False)
    except Exception as error:  # trimesh raises many types for unreadable files
        raise TwinscanError(f"mesh {path} cannot be read ({error})", "export it as OBJ or PLY") from error
    if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0:
        raise TwinscanError(f"mesh {path} has no triangles", "pass a triangle mesh, not a point cloud")
    return mesh

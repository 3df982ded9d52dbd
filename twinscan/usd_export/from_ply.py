"""`twinscan usd OUT --from-ply splats.ply [--mesh collision.obj]`: package splats trained elsewhere."""

from __future__ import annotations

import shutil
from dataclasses import asdict
from pathlib import Path

import numpy as np
import trimesh

from twinscan.errors import TwinscanError
from twinscan.gaussians import read_ply, split_similarity, transform
from twinscan.layout import TWIN
from twinscan.usd_export.content import (ExportOptions, FloorArea, PhysicsMaterial, ScaleSource, TwinContent,
                                         TwinMetadata)
from twinscan.usd_export.inspection import summarize, validation_errors
from twinscan.usd_export.twin import write_twin
from twinscan.workspace import Workspace, fingerprint, tool_versions

FLOOR_MARGIN = 0.5  # metres of floor beyond the scene's footprint


def package_from_ply(ply_path: str | Path, out_path: str | Path, mesh_path: str | Path | None = None,
                     world_from_colmap: np.ndarray | None = None, options: ExportOptions = ExportOptions(),
                     scale_source: ScaleSource = "arbitrary", floor: bool = True,
                     physics_material: PhysicsMaterial = PhysicsMaterial()) -> Path:
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
        physics_material=physics_material,
    )
    return write_twin(out_path, content, options)


def from_ply_warnings(mesh_path: str | Path | None, scale_source: ScaleSource) -> list[str]:
    """What a twin packaged from a PLY lacks, said up front."""
    warnings = []
    if mesh_path is None:
        warnings.append("no collision mesh (--mesh): the twin's only collider is a z = 0 floor slab under the "
                        "splats' footprint, so robots and parts pass through everything standing on it")
    if scale_source == "arbitrary":
        warnings.append("the scale is arbitrary: the PLY's units are taken as metres as they are, with no marker "
                        "or known length behind them; check a known distance in the twin before simulating")
    return warnings


def package_from_ply_workspace(workdir: str | Path, ply_path: str | Path, mesh_path: str | Path | None = None,
                               options: ExportOptions = ExportOptions(),
                               physics_material: PhysicsMaterial = PhysicsMaterial()) -> tuple[Path, list[str]]:
    """`twinscan usd OUT --from-ply`: the twin in OUT, recorded as OUT's usd stage so `twinscan info` reads it.

    Returns the written file and the warnings (also in the manifest). When it fails, a folder it created
    is removed again; an existing folder keeps what it held, with the failure in its manifest.
    """
    ws = Workspace(workdir)
    ply_path = Path(ply_path)
    if not ply_path.is_file():
        raise TwinscanError(f"{ply_path} does not exist", "pass the 3DGS .ply (gsplat, nerfstudio, 3DGRUT export)")
    if mesh_path is not None and not Path(mesh_path).is_file():
        raise TwinscanError(f"mesh {mesh_path} does not exist", "pass an OBJ, PLY, STL or GLB collision mesh")
    if problems := physics_material.problems():
        raise TwinscanError(f"the physics material is not usable: {problems[0]}",
                            "pass --static-friction >= --dynamic-friction >= 0 and --restitution in 0..1")
    created = not ws.root.exists()
    inputs = {"from_ply": fingerprint(ply_path), **({"mesh": fingerprint(mesh_path)} if mesh_path else {})}
    params = {"from_ply": str(ply_path), "mesh": str(mesh_path) if mesh_path else None,
              "half_precision": options.half_precision, "usdz": options.usdz, **asdict(physics_material)}
    try:
        with ws.run_stage("usd", params, inputs, tool_versions("usd-core", "trimesh")) as run:
            run.warnings.extend(from_ply_warnings(mesh_path, "arbitrary"))
            written = package_from_ply(ply_path, ws.path(TWIN), mesh_path=mesh_path, options=options,
                                       physics_material=physics_material)
            errors = validation_errors(ws.path(TWIN))
            if errors:
                raise TwinscanError(f"the written twin does not validate: {errors[0]}",
                                    "check the PLY's attributes (a 3DGS export) and the mesh")
            summary = summarize(ws.path(TWIN))
            run.outputs = [TWIN, *([written.name] if written.suffix == ".usdz" else [])]
            run.figures.update({key: summary[key] for key in (
                "splats", "sh_degree", "collision_triangles", "colliders", "meters_per_unit", "up_axis")}
                | {"validation_errors": 0, "scale_source": "arbitrary", **asdict(physics_material)})
            warnings = list(run.warnings)
    except BaseException:
        if created:
            shutil.rmtree(ws.root, ignore_errors=True)
        raise
    return written, warnings


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

"""The `mesh` stage: OUT/splats/splats.ply (and the training cameras) in; OUT/mesh/ out."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from twinscan.errors import TwinscanError
from twinscan.gaussians import read_ply
from twinscan.gaussians.backend import select_render_backend
from twinscan.layout import MESH_DIR, MESH_SUMMARY, SPLATS_PLY, UNDISTORTED, UNDISTORTED_CAMERAS
from twinscan.meshing.build import build_meshes, progress_steps
from twinscan.meshing.config import MeshConfig
from twinscan.meshing.export import write_meshes
from twinscan.meshing.render import render_depth_views
from twinscan.meshing.support import supported_splats
from twinscan.meshing.views import DepthViews
from twinscan.progress import progress_bar
from twinscan.recon.sfm.record import read_sfm_record
from twinscan.options import CaptureOptions
from twinscan.presets import resolve_preset
from twinscan.stages import execute
from twinscan.workspace import StageRun, Workspace, fingerprint

VERSIONS = ("open3d", "trimesh", "xatlas", "coacd", "numpy")


@dataclass(frozen=True)
class MeshStage:
    """Render the splats at the training cameras, fuse and clean, write visual and collision meshes."""

    name: str = "mesh"
    versions: tuple[str, ...] = VERSIONS
    required: tuple[str, ...] = (MESH_SUMMARY,)  # the stage's record (meshing/record.py)

    def config(self, options: CaptureOptions) -> MeshConfig:
        return MeshConfig.from_preset(resolve_preset(options.quality, options.device), convex=options.convex, device=options.device)

    def inputs(self, ws: Workspace) -> dict[str, str]:
        splats = ws.path(SPLATS_PLY)
        inputs = {SPLATS_PLY: fingerprint(splats)} if splats.exists() else {}
        if ws.path(UNDISTORTED).exists():
            inputs[UNDISTORTED] = fingerprint(ws.path(UNDISTORTED_CAMERAS))
        return inputs

    def run(self, ws: Workspace, config: MeshConfig, run: StageRun, force: bool) -> None:
        views, unsupported, sfm_points, sfm_floor = stage_views(ws, config)
        with progress_bar("mesh", total=progress_steps(config)) as advance:
            result = build_meshes(views, config, advance, sfm_points, sfm_floor)
        run.outputs = write_meshes(result, ws.path(MESH_DIR))
        height, width = views.size
        run.figures.update(result.figures, render_resolution=[width, height], floater_splats_removed=unsupported)
        run.warnings.extend(result.warnings)


def run_mesh(ws: Workspace, cfg: MeshConfig, force: bool = False) -> dict[str, Any]:
    """The mesh stage (skipped when done before with the same config and splats); its figures."""
    return execute(MeshStage(), ws, cfg, force).figures


def stage_views(ws: Workspace, cfg: MeshConfig) -> tuple[DepthViews, int, np.ndarray, bool]:
    """What the stage fuses: depth of the splats the SfM points support, rendered at the training
    cameras, with the training pictures' colours; how many splats were left out as unsupported; the
    SfM points (twin frame); and whether the SfM stage found the floor (at z = 0)."""
    from twinscan.recon.splats.views import load_training_views

    splats = ws.path(SPLATS_PLY)
    if not splats.exists():
        raise TwinscanError(f"{splats} is missing", f"run `twinscan splats {ws.root}` first")
    cameras = load_training_views(ws, cfg.render_max_side)
    gaussians = read_ply(splats)
    floor_found = read_sfm_record(ws).world.floor_found
    supported = supported_splats(gaussians.means, gaussians.quats, gaussians.log_scales, cameras.points,
                                 floor_found)
    height, width = cameras.images[0].shape[:2]
    with progress_bar("mesh: render", total=len(cameras)) as advance:
        views = render_depth_views(gaussians.subset(supported), cameras.Ks.numpy(), cameras.cam_from_world.numpy(),
                                   width, height, select_render_backend(cfg.device), advance)
    # colour from the pictures themselves: the splats left out (floor past the SfM points) render none
    pictures = np.stack([(image.numpy() * 255 + 0.5).astype(np.uint8) for image in cameras.images])
    return replace(views, colour=pictures), int((~supported).sum()), cameras.points, floor_found

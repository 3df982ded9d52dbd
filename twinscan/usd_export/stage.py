"""The `usd` stage: OUT's splats, meshes and cameras in; OUT/twin.usda (+ .usdc layers) out.

Everything the earlier stages wrote is already in the twin frame (the sfm stage aligned the model
before training), so no transform happens here: this stage gathers and packages.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import trimesh

from twinscan.camera import world_from_cam_matrix
from twinscan.errors import TwinscanError
from twinscan.frames.record import read_frames
from twinscan.gaussians import read_ply
from twinscan.layout import (BACKGROUND_PLY, COLLISION, CONVEX_DIR, MESH_DIR, PLANES, SPLATS_PLY, TWIN,
                             UNDISTORTED_CAMERAS, VISUAL_COLOURS, VISUAL_OBJ)
from twinscan.meshing.record import FloorRecord, read_mesh_record
from twinscan.recon.sfm.record import ScaleSource as RecordedScale
from twinscan.recon.sfm.record import read_sfm_record
from twinscan.usd_export.content import (CameraTrack, ExportOptions, FloorArea, PhysicsMaterial, ScaleSource,
                                         TwinContent, TwinMetadata)
from twinscan.usd_export.inspection import summarize, validation_errors
from twinscan.usd_export.twin import write_twin
from twinscan.options import CaptureOptions
from twinscan.stages import execute
from twinscan.workspace import StageRun, Workspace, fingerprint

FIGURES_FROM = {"frames": ("kept", "decoded"), "splats": ("psnr", "ssim", "num_gaussians"),
                "mesh": ("collision_faces", "visual_faces")}  # the sfm stage's come from its record
SFM_FIGURES = ("registered", "mean_reprojection_error_px")  # fields of SfmRecord
TWIN_SCALE_SOURCE: dict[RecordedScale, ScaleSource] = {RecordedScale.MARKER: "marker", RecordedScale.MANUAL: "manual",
                                                      RecordedScale.IMPORTED: "arbitrary", RecordedScale.NONE: "arbitrary"}


@dataclass(frozen=True)
class UsdConfig:
    half_precision: bool = False
    usdz: bool = False
    appearance: str = "splats"  # default of the "appearance" variant set: splats | mesh
    # the colliders' UsdPhysics material (defaults: a sealed concrete plant floor, see PhysicsMaterial)
    static_friction: float = PhysicsMaterial.static_friction
    dynamic_friction: float = PhysicsMaterial.dynamic_friction
    restitution: float = PhysicsMaterial.restitution

    def __post_init__(self) -> None:
        if problems := self.physics_material.problems():
            raise TwinscanError(f"the physics material is not usable: {problems[0]}",
                                "pass --static-friction >= --dynamic-friction >= 0 and --restitution in 0..1")

    @property
    def physics_material(self) -> PhysicsMaterial:
        return PhysicsMaterial(self.static_friction, self.dynamic_friction, self.restitution)


@dataclass(frozen=True)
class UsdStage:
    """Write OUT/twin.usda from the workspace, and check that it validates."""

    name: str = "usd"
    versions: tuple[str, ...] = ("usd-core", "trimesh")
    required: tuple[str, ...] = ()

    def config(self, options: CaptureOptions) -> UsdConfig:
        return UsdConfig(half_precision=options.half, usdz=options.usdz, static_friction=options.static_friction,
                         dynamic_friction=options.dynamic_friction, restitution=options.restitution)

    def inputs(self, ws: Workspace) -> dict[str, str]:
        splats = ws.path(SPLATS_PLY)
        if not splats.exists():
            raise TwinscanError(f"{splats} is missing", f"run `twinscan splats {ws.root}` first")
        inputs = {SPLATS_PLY: fingerprint(splats)}
        for optional in (BACKGROUND_PLY, MESH_DIR, UNDISTORTED_CAMERAS):
            if ws.path(optional).exists():
                inputs[optional] = fingerprint(ws.path(optional))
        return inputs

    def run(self, ws: Workspace, config: UsdConfig, run: StageRun, force: bool) -> None:
        _write_and_validate(ws, config, run)


def run_usd(ws: Workspace, cfg: UsdConfig, force: bool = False) -> dict[str, Any]:
    """The usd stage (skipped when its inputs and config are unchanged); its figures."""
    return execute(UsdStage(), ws, cfg, force).figures


def _write_and_validate(ws: Workspace, cfg: UsdConfig, run: StageRun) -> None:
    content = dataclasses.replace(workspace_content(ws), physics_material=cfg.physics_material)
    if content.collision_mesh is None:
        run.warnings.append("no collision mesh (run `twinscan mesh`): the twin has only a floor collider")
    written = write_twin(ws.path(TWIN), content, ExportOptions(
        half_precision=cfg.half_precision, usdz=cfg.usdz, appearance=cfg.appearance))
    errors = validation_errors(ws.path(TWIN))
    if errors:
        ws.path(TWIN).unlink()  # an invalid root layer must not look like a finished twin
        raise TwinscanError(f"the written twin does not validate: {errors[0]}",
                            "report this as a twinscan bug with OUT/manifest.json")
    summary = summarize(ws.path(TWIN))
    run.outputs = [TWIN, *([written.name] if written.suffix == ".usdz" else [])]
    run.figures.update({key: summary[key] for key in (
        "splats", "background_splats", "sh_degree", "collision_triangles", "colliders", "visual_triangles", "textured",
        "camera_samples", "meters_per_unit", "up_axis")} | {"validation_errors": 0,
                                                             "scale_source": content.metadata.scale_source,
                                                             "static_friction": cfg.static_friction,
                                                             "dynamic_friction": cfg.dynamic_friction,
                                                             "restitution": cfg.restitution})


def workspace_content(ws: Workspace) -> TwinContent:
    """Gather splats, meshes, cameras and provenance from the workspace."""
    gaussians = read_ply(ws.path(SPLATS_PLY))
    background = read_ply(ws.path(BACKGROUND_PLY)) if ws.path(BACKGROUND_PLY).exists() else None
    floor = read_mesh_record(ws).floor if ws.path(MESH_DIR).exists() else None  # no mesh stage: no floor found
    collision = _load_mesh(ws.path(COLLISION))
    planes = _load_mesh(ws.path(PLANES))
    visual, texture = _load_visual(ws)
    convex = tuple(_load_mesh(p) for p in sorted(ws.path(CONVEX_DIR).glob("*.obj")))
    return TwinContent(
        gaussians=gaussians, background=background, collision_mesh=collision, planar_patches=planes,
        convex_parts=convex, visual_mesh=visual,
        visual_texture=texture, cameras=_camera_track(ws), floor=_floor_area(floor, gaussians.means),
        metadata=_metadata(ws))


def _load_mesh(path: Path) -> trimesh.Trimesh | None:
    if not path.exists():
        return None
    return trimesh.load(path, force="mesh", process=False)


def _load_visual(ws: Workspace) -> tuple[trimesh.Trimesh | None, Path | None]:
    """The textured OBJ with its atlas when one was baked, else the vertex-coloured PLY."""
    obj = ws.path(VISUAL_OBJ)
    if obj.exists():
        mesh = trimesh.load(obj, force="mesh", process=False)
        material = getattr(mesh.visual, "material", None)
        textures = sorted(p for p in ws.path(MESH_DIR).glob("*") if p.suffix.lower() in (".png", ".jpg", ".jpeg"))
        if getattr(mesh.visual, "uv", None) is not None and textures and material is not None:
            return mesh, textures[0]
    return _load_mesh(ws.path(VISUAL_COLOURS)), None


def _floor_area(floor: FloorRecord | None, means: np.ndarray) -> FloorArea:
    """The floor the mesh stage found, else the splats' footprint (1st-99th percentile)."""
    if floor is not None:
        return FloorArea(*floor.bounds_xy)
    lower, upper = np.percentile(means[:, :2], [1, 99], axis=0)
    return FloorArea(tuple(lower), tuple(upper))


def _camera_track(ws: Workspace) -> CameraTrack | None:
    """The registered frames' cameras in capture order, with their video times."""
    if not ws.path(UNDISTORTED_CAMERAS).exists():
        return None
    import pycolmap

    model = pycolmap.Reconstruction(str(ws.path(UNDISTORTED_CAMERAS)))
    times = {entry.name: entry.time_s for entry in read_frames(ws)}
    images = sorted(model.images.values(), key=lambda image: (times.get(image.name) or 0.0, image.name))
    if not images:
        return None
    camera = model.cameras[images[0].camera_id]
    world_from_cam = np.stack([world_from_cam_matrix(image) for image in images])
    frame_times = np.array([times.get(image.name) or float(i) for i, image in enumerate(images)])
    return CameraTrack(K=camera.calibration_matrix(), width=camera.width, height=camera.height,
                       world_from_cam=world_from_cam, times=frame_times)


def _metadata(ws: Workspace) -> TwinMetadata:
    """Provenance: the sfm stage's record (frame, scale, accuracy) and the other stages' figures."""
    stages = ws.manifest().get("stages", {})
    source = (stages.get("frames", {}).get("inputs") or {}).get("video", "")
    sfm = read_sfm_record(ws)
    figures = {f"{stage}_{key}": stages[stage]["figures"][key] for stage, keys in FIGURES_FROM.items()
               for key in keys if isinstance(stages.get(stage, {}).get("figures", {}).get(key), (int, float))}
    figures |= {f"sfm_{key}": getattr(sfm, key) for key in SFM_FIGURES}
    return TwinMetadata(source_sha256=source, scale_source=TWIN_SCALE_SOURCE[sfm.world.scale_source],
                        origin=sfm.world.origin, figures=figures)

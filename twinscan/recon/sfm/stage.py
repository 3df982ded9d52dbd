"""The `sfm` stage: OUT/frames.json + OUT/frames/ in; OUT/sfm/ (aligned model), OUT/transforms.json out.

OUT/sfm/ holds the aligned COLMAP model (binary) and OUT/sfm/undistorted/ the undistorted images
(`images/`) with their PINHOLE model (`sparse/`), both in the twin's world frame, for training.
A run that registers too few frames leaves its partial model in OUT/sfm.incomplete/ instead.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from twinscan.atomic import atomic_dir, require_free_space, write_json
from twinscan.camera import world_from_cam_matrix
from twinscan.errors import TwinscanError
from twinscan.frames.record import read_frames
from twinscan.layout import (FRAMES_DIR, FRAMES_JSON, SFM_DIR, SFM_PARTIAL, SFM_RECORD, SFM_WORK_PREFIX, TRANSFORMS,
                             UNDISTORTED, inside)
from twinscan.options import CaptureOptions
from twinscan.presets import resolve_preset
from twinscan.progress import progress_bar
from twinscan.recon.sfm.config import SfmConfig
from twinscan.recon.sfm.continuity import off_path_frames
from twinscan.recon.sfm.device import sfm_device
from twinscan.recon.sfm.markers import detect_markers, metres_per_unit, side_lengths, triangulate_markers
from twinscan.recon.sfm.nerfstudio import write_transforms
from twinscan.recon.sfm.reconstruct import disk_needed, longest_side, model_figures, reconstruct
from twinscan.recon.sfm.record import ScaleSource, SfmRecord, WorldFrame
from twinscan.recon.sfm.world_frame import anchored_at_marker, camera_up, world_from_raw
from twinscan.stages import execute
from twinscan.workspace import StageRun, Workspace, fingerprint

VERSIONS = ("pycolmap", "pycolmap-cuda12", "opencv-python-headless", "numpy")


def frame_names(ws: Workspace) -> list[str]:
    """Image names (relative to OUT/frames/) listed in OUT/frames.json, checked to exist."""
    names = [entry.name for entry in read_frames(ws)]
    missing = [name for name in names if not ws.path(FRAMES_DIR).joinpath(name).exists()]
    if missing:
        raise TwinscanError(f"{len(missing)} frames listed in frames.json are missing (e.g. {missing[0]})",
                            "run `twinscan frames` again with --force")
    if len(names) < 3:
        raise TwinscanError(f"only {len(names)} frames to reconstruct from", "extract more frames (--max-frames)")
    return names


def posed_cameras(model) -> np.ndarray:
    """(N, 4, 4) world_from_cam of the registered images, in name order."""
    images = sorted((image for image in model.images.values() if image.has_pose), key=lambda im: im.name)
    return np.array([world_from_cam_matrix(image) for image in images])


def metric_scale(model, image_dir: Path, cfg: SfmConfig
                 ) -> tuple[float | None, ScaleSource, str, dict[int, np.ndarray], dict[str, Any]]:
    """(metres per model unit or None, scale source, the source in words, triangulated markers
    {id: (4, 3) corners in the model's frame}, figures) from --scale or the markers."""
    if cfg.scale is not None:
        return cfg.scale, ScaleSource.MANUAL, "user scale", {}, {}
    if cfg.marker_size is None:
        return None, ScaleSource.NONE, "none", {}, {}
    names = [image.name for image in model.images.values() if image.has_pose]
    detections = detect_markers(((name, image_dir / name) for name in names), cfg.marker_dict)
    markers = triangulate_markers(detections, model)
    figures: dict[str, Any] = {"marker_frames": len(detections), "markers_triangulated": len(markers)}
    if not markers:
        return None, ScaleSource.NONE, "none", markers, figures
    scale = metres_per_unit(detections, markers, model, cfg.marker_size)
    sides = np.concatenate([side_lengths(corners) for corners in markers.values()]) * scale
    figures["marker_side_spread_m"] = round(float(sides.std()), 5)
    return scale, ScaleSource.MARKER, f"markers {cfg.marker_dict} ({len(markers)} triangulated)", markers, figures


def align_to_world(model, image_dir: Path, cfg: SfmConfig) -> tuple[WorldFrame, dict[str, Any], list[str]]:
    """Apply the twin-frame similarity to `model` in place; return the frame it gave, figures and warnings.

    With markers, the origin and x axis are those of the lowest marker id; without, the origin is
    under the cameras' centroid and the yaw is arbitrary.
    """
    import pycolmap

    scale, source, source_words, markers, figures = metric_scale(model, image_dir, cfg)
    warnings = []
    if scale is None:
        warnings.append("no scale source (give --marker-size with a marker in view, or --scale): "
                        "the twin's scale is arbitrary" + (", no marker was found" if cfg.marker_size else ""))
    world_from_cam = posed_cameras(model)
    points = np.array([point.xyz for point in model.points3D.values()])
    similarity, floor = world_from_raw(points, world_from_cam, scale or 1.0, seed=cfg.seed)
    if floor is None:
        warnings.append("no floor plane found among the sparse points: up is the cameras' mean up, "
                        "z = 0 is at the lowest points; film more of the floor")
    origin = "camera centroid (yaw arbitrary)"
    if markers:
        anchor = min(markers)
        similarity = anchored_at_marker(similarity, markers[anchor])
        origin = f"marker {anchor}"
        figures["marker_centre_z_m"] = round(float(similarity.apply(markers[anchor]).mean(axis=0)[2]), 4)
    model.transform(pycolmap.Sim3d(similarity.scale, pycolmap.Rotation3d(similarity.rotation),
                                   similarity.translation))
    up_gap = np.degrees(np.arccos(np.clip(similarity.rotation @ camera_up(world_from_cam) @ [0, 0, 1], -1, 1)))
    figures.update({"scale": "metric" if scale is not None else "arbitrary", "scale_source": source_words,
                    "origin": origin, "floor_found": floor is not None,
                    "floor_points": int(floor.inliers.sum()) if floor is not None else 0,
                    "camera_up_vs_floor_deg": round(float(up_gap), 2),
                    "world_from_colmap": similarity.to_json()})
    world = WorldFrame(scale_source=source, metric=scale is not None, origin=origin,
                       marker_id=min(markers) if markers else None, marker_size_m=cfg.marker_size,
                       marker_dict=cfg.marker_dict if cfg.marker_size is not None else None,
                       marker_centre_z_m=figures.get("marker_centre_z_m"), floor_found=floor is not None,
                       world_from_colmap=similarity.to_json())
    return world, figures, warnings


def drop_off_path_frames(model, times_s: dict[str, float | None]) -> list[str]:
    """Deregister (in place) the frames SfM placed off the walk (see continuity.py); their names, sorted.

    Frames without a time (a folder of images) are not judged.
    """
    images = [image for image in model.images.values() if image.has_pose and times_s.get(image.name) is not None]
    if len(images) < 3:
        return []
    off = off_path_frames(np.array([times_s[image.name] for image in images]),
                          np.array([image.projection_center() for image in images]))
    for image, is_off in zip(images, off):
        if is_off:
            model.deregister_frame(image.frame_id)
    return sorted(image.name for image, is_off in zip(images, off) if is_off)


def write_outputs(ws: Workspace, model, image_dir: Path, world: WorldFrame, figures: dict[str, Any]) -> list[str]:
    """OUT/sfm/ (model, its record, undistorted images) and OUT/transforms.json, each complete or absent.

    `figures`: the model's (reconstruct.model_figures), for the record."""
    import pycolmap

    record = SfmRecord(world, registered=figures["registered"], total=figures["total"],
                       mean_reprojection_error_px=figures["mean_reprojection_error_px"])
    with atomic_dir(ws.path(SFM_DIR)) as tmp:
        model.write(tmp)
        write_json(tmp / inside(SFM_DIR, SFM_RECORD), record.to_json())
        pycolmap.logging.minloglevel = pycolmap.logging.ERROR
        pycolmap.undistort_images(tmp / inside(SFM_DIR, UNDISTORTED), tmp, image_dir)
    write_transforms(model, ws.path(TRANSFORMS), image_prefix=f"{FRAMES_DIR}/")
    return [SFM_DIR, SFM_RECORD, TRANSFORMS]


@dataclass(frozen=True)
class SfmStage:
    """Reconstruct, check registration, align to the twin frame, write the outputs."""

    name: str = "sfm"
    versions: tuple[str, ...] = VERSIONS
    required: tuple[str, ...] = (SFM_RECORD,)  # absent from workspaces of twinscan before the record

    def config(self, options: CaptureOptions) -> SfmConfig:
        return SfmConfig.from_preset(
            resolve_preset(options.quality, options.device), mapper=options.mapper, marker_size=options.marker_size,
            marker_dict=options.marker_dict, scale=options.scale, min_registered=options.min_registered,
            device=sfm_device(options.device))

    def inputs(self, ws: Workspace) -> dict[str, str]:
        frame_names(ws)  # listed and present
        return {FRAMES_JSON: fingerprint(ws.path(FRAMES_JSON)), FRAMES_DIR: fingerprint(ws.path(FRAMES_DIR))}

    def run(self, ws: Workspace, config: SfmConfig, run: StageRun, force: bool) -> None:
        names, image_dir = frame_names(ws), ws.path(FRAMES_DIR)
        config = config.for_frames(longest_side(image_dir, names))
        run.figures["sift_features"] = config.max_features
        frame_bytes = sum(f.stat().st_size for f in image_dir.iterdir())
        require_free_space(ws.root, disk_needed(len(names), frame_bytes, config), f"sfm on {len(names)} frames")
        _reconstruct_and_write(ws, config, names, image_dir, run)


def run_sfm(ws: Workspace, cfg: SfmConfig, force: bool = False) -> dict[str, Any]:
    """The sfm stage (skipped when done before with the same config and frames); its figures."""
    return execute(SfmStage(), ws, cfg, force).figures


def _reconstruct_and_write(ws: Workspace, cfg: SfmConfig, names: list[str], image_dir: Path, run: StageRun) -> None:
    with progress_bar("sfm", total=5) as advance, \
            tempfile.TemporaryDirectory(dir=ws.root, prefix=SFM_WORK_PREFIX) as work:
        model = reconstruct(image_dir, names, Path(work), cfg, advance)
        if model is None:
            raise TwinscanError(f"no reconstruction from {len(names)} frames: too few features matched",
                                "walk slower, avoid blank walls, add light, or film more texture")
        off_path = drop_off_path_frames(model, {entry.name: entry.time_s for entry in read_frames(ws)})
        if off_path:
            run.warnings.append(
                f"{len(off_path)} frames ({off_path[0]}-{off_path[-1]}) were placed by SfM far off the walk, most "
                "likely on a repeating floor or wall pattern, and were left out: keep something distinctive in view")
        run.figures.update(model_figures(model, len(names)) | {"mapper": cfg.mapper, "matching": cfg.matching,
                                                               "off_path_frames": len(off_path),
                                                               "sift_device": cfg.device.name,
                                                               "sift_device_reason": cfg.device.reason})
        if model.num_reg_images() < cfg.min_registered * len(names):
            with atomic_dir(ws.path(SFM_PARTIAL)) as tmp:
                model.write(tmp)
            raise TwinscanError(
                f"only {model.num_reg_images()}/{len(names)} frames registered "
                f"(below {cfg.min_registered:.0%}); partial model kept in {ws.path(SFM_PARTIAL)}",
                "walk slower, avoid blank walls, add light, keep textured things in view")
        world, world_figures, warnings = align_to_world(model, image_dir, cfg)
        advance(1, status="aligned to the world frame")
        run.figures.update(world_figures)
        run.warnings.extend(warnings)
        run.outputs.extend(write_outputs(ws, model, image_dir, world, run.figures))
        shutil.rmtree(ws.path(SFM_PARTIAL), ignore_errors=True)  # a failed earlier try's leftovers
        advance(1, status="written")

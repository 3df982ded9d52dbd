"""Poses made elsewhere instead of reconstructing: a COLMAP model, or a nerfstudio transforms.json
(nerfstudio, Polycam, Record3D exports; metric when they come from ARKit).

Both are the `sfm` stage (`SfmImport`, run by `stages.execute` like every stage, so a re-run with the
same source and config is skipped): they write what `run_sfm` writes (OUT/sfm/ with its record,
OUT/transforms.json) and copy the images into OUT/frames/ (with a frames.json) when the workspace has
none. Poses that come without 3D points (always for transforms.json) get them triangulated with the
poses held fixed, since the splats stage starts from the sparse points.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from twinscan.errors import TwinscanError
from twinscan.frames.record import FrameEntry, write_frames
from twinscan.recon.sfm.nerfstudio import read_transforms
from twinscan.recon.sfm.reconstruct import model_figures, triangulate_known_poses
from twinscan.layout import FRAMES_DIR, FRAMES_JSON, SFM_RECORD, SFM_WORK_PREFIX
from twinscan.options import CaptureOptions
from twinscan.recon.sfm.record import ScaleSource, WorldFrame
from twinscan.recon.sfm.stage import VERSIONS, SfmStage, align_to_world, write_outputs
from twinscan.recon.sfm.config import SfmConfig
from twinscan.stages import execute
from twinscan.workspace import StageRun, Workspace, fingerprint


def _model_dir(directory: Path) -> Path:
    for candidate in (directory, directory / "sparse" / "0", directory / "sparse", directory / "0"):
        if (candidate / "cameras.bin").exists() or (candidate / "cameras.txt").exists():
            return candidate
    raise TwinscanError(f"no COLMAP model (cameras.bin or cameras.txt) in {directory}",
                        "give the folder holding cameras/images/points3D, e.g. DIR/sparse/0")


def _check_images(sources: dict[str, Path]) -> None:
    missing = [name for name, source in sources.items() if not source.exists()]
    if missing:
        raise TwinscanError(f"{len(missing)} images of the imported poses are missing (e.g. {missing[0]})",
                            "put the images next to the model (DIR/images/) or in OUT/frames/")


def _adopt_images(ws: Workspace, sources: dict[str, Path]) -> None:
    """Copy {name: source file} into OUT/frames/ and list them in frames.json, unless already there."""
    for name, source in sources.items():
        target = ws.path(FRAMES_DIR) / name
        if target.resolve() != source.resolve():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    if not ws.path(FRAMES_JSON).exists():
        write_frames(ws, [FrameEntry(f"{FRAMES_DIR}/{name}", source_index=index, time_s=None, sharpness=None,
                                     motion=None) for index, name in enumerate(sorted(sources))])


def _colmap_model(directory: Path):
    import pycolmap

    return pycolmap.Reconstruction(_model_dir(directory))


def _colmap_images(ws: Workspace, directory: Path, model) -> dict[str, Path]:
    """{name: file} of a COLMAP model's images: in OUT/frames/ already, or beside the model."""
    names = [image.name for image in model.images.values()]
    image_dirs = [ws.path(FRAMES_DIR), directory / "images", directory.parent / "images",
                  directory.parent.parent / "images", directory.parent / FRAMES_DIR]  # the last: a twinscan OUT/sfm
    image_dir = next((d for d in image_dirs if all((d / name).exists() for name in names)), directory / "images")
    return {name: image_dir / name for name in names}


def _transforms_model(file: Path) -> tuple[Any, dict[str, Path]]:
    """A nerfstudio transforms.json as a pycolmap model without points, and {name: image file}."""
    import pycolmap

    camera_values, frames = read_transforms(file)
    camera = pycolmap.Camera(model="OPENCV", width=int(camera_values["w"]), height=int(camera_values["h"]),
                             params=[camera_values[k] for k in ("fl_x", "fl_y", "cx", "cy", "k1", "k2", "p1", "p2")],
                             camera_id=1)
    model = pycolmap.Reconstruction()
    model.add_camera_with_trivial_rig(camera)
    sources = {}
    for image_id, (file_path, world_from_cam) in enumerate(frames, start=1):
        name = Path(file_path).name
        sources[name] = (file.parent / file_path)
        cam_from_world = np.linalg.inv(world_from_cam)[:3]
        model.add_image_with_trivial_frame(pycolmap.Image(name=name, camera_id=1, image_id=image_id),
                                           pycolmap.Rigid3d(cam_from_world))
    return model, sources


@dataclass(frozen=True)
class ImportConfig:
    """What an import is recorded with (the sfm stage's params)."""

    imported_from: str  # the COLMAP model folder or transforms.json, resolved
    triangulated: bool  # the poses came without points, so they were triangulated
    sfm: SfmConfig  # features and matching for triangulating; the scale source when aligning (COLMAP)


@dataclass(frozen=True)
class SfmImport:
    """The sfm stage from poses made elsewhere: a COLMAP model folder (aligned to Z up with the floor at
    z = 0, as `run_sfm` aligns its own) or a nerfstudio transforms.json (its frame and scale kept)."""

    source: Path
    kind: Literal["colmap", "transforms"]
    name: str = "sfm"
    versions: tuple[str, ...] = VERSIONS
    required: tuple[str, ...] = (SFM_RECORD,)

    def config(self, options: CaptureOptions) -> ImportConfig:
        return self.import_config(SfmStage().config(options))

    def import_config(self, cfg: SfmConfig) -> ImportConfig:
        """Raises TwinscanError when the source holds no model."""
        model = _colmap_model(self.source) if self.kind == "colmap" else _transforms_model(self.source)[0]
        return ImportConfig(str(self.source.resolve()), model.num_points3D() == 0, cfg)

    def inputs(self, ws: Workspace) -> dict[str, str]:
        _check_images(self._load(ws)[1])
        return {"source": fingerprint(self.source)}

    def run(self, ws: Workspace, config: ImportConfig, run: StageRun, force: bool) -> None:
        """Adopt the images, triangulate points when there are none, align (COLMAP imports only: their
        frame is arbitrary), write the outputs."""
        model, sources = self._load(ws)
        _adopt_images(ws, sources)
        if config.triangulated:
            with tempfile.TemporaryDirectory(dir=ws.root, prefix=SFM_WORK_PREFIX) as work:
                model = triangulate_known_poses(model, ws.path(FRAMES_DIR), Path(work), config.sfm)
        run.figures.update(model_figures(model, model.num_images()))
        if self.kind == "colmap":
            world, world_figures, warnings = align_to_world(model, ws.path(FRAMES_DIR), config.sfm)
            run.figures.update(world_figures)
            run.warnings.extend(warnings)
        else:
            run.figures.update({"scale": "as imported", "scale_source": f"imported {self.source.name}"})
            world = WorldFrame(scale_source=ScaleSource.IMPORTED, metric=False, origin="as imported", marker_id=None,
                               marker_size_m=None, marker_dict=None, marker_centre_z_m=None, floor_found=False,
                               world_from_colmap=None)
        run.outputs.extend(write_outputs(ws, model, ws.path(FRAMES_DIR), world, run.figures))

    def _load(self, ws: Workspace) -> tuple[Any, dict[str, Path]]:
        """The imported model and {image name: its file}."""
        if self.kind == "transforms":
            return _transforms_model(self.source)
        model = _colmap_model(self.source)
        return model, _colmap_images(ws, self.source, model)


def import_colmap(ws: Workspace, directory: str | Path, cfg: SfmConfig | None = None,
                  force: bool = False) -> dict[str, Any]:
    """Adopt a COLMAP model (one shared OPENCV camera), aligned to Z up with the floor at z = 0; its figures.

    `cfg` sets the features and matching used when the model has no points, and the scale source.
    """
    stage = SfmImport(Path(directory), "colmap")
    return execute(stage, ws, stage.import_config(cfg or SfmConfig()), force).figures


def import_transforms(ws: Workspace, file: str | Path, cfg: SfmConfig | None = None,
                      force: bool = False) -> dict[str, Any]:
    """Adopt a nerfstudio transforms.json (one shared camera), keeping its poses' frame and scale,
    and triangulate its points (features and matching as `cfg` says); its figures."""
    stage = SfmImport(Path(file), "transforms")
    return execute(stage, ws, stage.import_config(cfg or SfmConfig()), force).figures

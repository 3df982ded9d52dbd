"""Poses made elsewhere instead of reconstructing: a COLMAP model, or a nerfstudio transforms.json
(nerfstudio, Polycam, Record3D exports; metric when they come from ARKit).

Both write what `run_sfm` writes (OUT/sfm/, OUT/transforms.json) and record the `sfm` stage, and
copy the images into OUT/frames/ (with a frames.json) when the workspace has none. Poses that come
without 3D points (always for transforms.json) get them triangulated with the poses held fixed,
since the splats stage starts from the sparse points.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from twinscan.errors import TwinscanError
from twinscan.frames.record import FrameEntry, write_frames
from twinscan.recon.sfm.nerfstudio import read_transforms
from twinscan.recon.sfm.reconstruct import model_figures, triangulate_known_poses
from twinscan.layout import FRAMES_DIR, FRAMES_JSON, SFM_WORK_PREFIX
from twinscan.recon.sfm.record import ScaleSource, WorldFrame
from twinscan.recon.sfm.stage import VERSIONS, align_to_world, write_outputs
from twinscan.recon.sfm.config import SfmConfig
from twinscan.workspace import Workspace, fingerprint, tool_versions


def _model_dir(directory: Path) -> Path:
    for candidate in (directory, directory / "sparse" / "0", directory / "sparse", directory / "0"):
        if (candidate / "cameras.bin").exists() or (candidate / "cameras.txt").exists():
            return candidate
    raise TwinscanError(f"no COLMAP model (cameras.bin or cameras.txt) in {directory}",
                        "give the folder holding cameras/images/points3D, e.g. DIR/sparse/0")


def _adopt_images(ws: Workspace, sources: dict[str, Path]) -> None:
    """Copy {name: source file} into OUT/frames/ and list them in frames.json, unless already there."""
    missing = [name for name, source in sources.items() if not source.exists()]
    if missing:
        raise TwinscanError(f"{len(missing)} images of the imported poses are missing (e.g. {missing[0]})",
                            "put the images next to the model (DIR/images/) or in OUT/frames/")
    for name, source in sources.items():
        target = ws.path(FRAMES_DIR) / name
        if target.resolve() != source.resolve():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    if not ws.path(FRAMES_JSON).exists():
        write_frames(ws, [FrameEntry(f"{FRAMES_DIR}/{name}", source_index=index, time_s=None, sharpness=None,
                                     motion=None) for index, name in enumerate(sorted(sources))])


def _record(ws: Workspace, source: Path, model, align: bool, cfg: SfmConfig) -> dict[str, Any]:
    """Triangulate points when there are none, align (COLMAP imports only: their frame is arbitrary),
    write the outputs, record the stage."""
    triangulate = model.num_points3D() == 0
    params = {"imported_from": str(source.resolve()), "triangulated": triangulate,
              **({"triangulation": cfg} if triangulate else {})}
    with ws.run_stage("sfm", params, {"source": fingerprint(source)}, tool_versions(*VERSIONS)) as run:
        if triangulate:
            with tempfile.TemporaryDirectory(dir=ws.root, prefix=SFM_WORK_PREFIX) as work:
                model = triangulate_known_poses(model, ws.path(FRAMES_DIR), Path(work), cfg)
        run.figures.update(model_figures(model, model.num_images()))
        if align:
            world, world_figures, warnings = align_to_world(model, ws.path(FRAMES_DIR), cfg)
            run.figures.update(world_figures)
            run.warnings.extend(warnings)
        else:
            run.figures.update({"scale": "as imported", "scale_source": f"imported {source.name}"})
            world = WorldFrame(scale_source=ScaleSource.IMPORTED, metric=False, origin="as imported", marker_id=None,
                               marker_size_m=None, marker_dict=None, marker_centre_z_m=None, floor_found=False,
                               world_from_colmap=None)
        run.outputs.extend(write_outputs(ws, model, ws.path(FRAMES_DIR), world, run.figures))
    return run.figures


def import_colmap(ws: Workspace, directory: str | Path, cfg: SfmConfig | None = None) -> dict[str, Any]:
    """Adopt a COLMAP model (one shared OPENCV camera), aligned to Z up with the floor at z = 0.

    `cfg` sets the features and matching used when the model has no points, and the scale source.
    """
    import pycolmap

    directory = Path(directory)
    model = pycolmap.Reconstruction(_model_dir(directory))
    names = [image.name for image in model.images.values()]
    image_dirs = [ws.path(FRAMES_DIR), directory / "images", directory.parent / "images",
                  directory.parent.parent / "images", directory.parent / FRAMES_DIR]  # the last: a twinscan OUT/sfm
    image_dir = next((d for d in image_dirs if all((d / name).exists() for name in names)), directory / "images")
    _adopt_images(ws, {name: image_dir / name for name in names})
    return _record(ws, directory, model, align=True, cfg=cfg or SfmConfig())


def import_transforms(ws: Workspace, file: str | Path, cfg: SfmConfig | None = None) -> dict[str, Any]:
    """Adopt a nerfstudio transforms.json (one shared camera), keeping its poses' frame and scale,
    and triangulate its points (features and matching as `cfg` says)."""
    import pycolmap

    file = Path(file)
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
    _adopt_images(ws, sources)
    return _record(ws, file, model, align=False, cfg=cfg or SfmConfig())

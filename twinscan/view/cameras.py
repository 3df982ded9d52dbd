"""The capture cameras as the viewer draws them: pose (OpenCV axes, twin frame), field of view and a
thumbnail of the kept frame."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from twinscan.layout import TRANSFORMS

THUMBNAIL_WIDTH = 96
MAX_CAMERAS = 60  # more frustums than this only clutter the view; every k-th is drawn


@dataclass(frozen=True)
class CaptureCamera:
    name: str
    world_from_cam: np.ndarray  # (4, 4), OpenCV axes (+Z forward, +Y down), as viser's frustums
    fov_y: float  # radians
    aspect: float  # width / height
    thumbnail: np.ndarray | None  # (h, w, 3) uint8


def _thumbnail(path: Path, width: int) -> np.ndarray | None:
    from PIL import Image

    if not path.is_file():
        return None
    with Image.open(path) as image:
        image = image.convert("RGB")
        height = max(1, round(image.height * width / image.width))
        return np.asarray(image.resize((width, height), Image.Resampling.BILINEAR))


def load_cameras(root: Path, max_cameras: int = MAX_CAMERAS, thumbnail_width: int = THUMBNAIL_WIDTH
                 ) -> list[CaptureCamera]:
    """The posed frames of OUT/transforms.json (none when SfM has not run), thinned to `max_cameras`."""
    from twinscan.recon.sfm.nerfstudio import read_transforms

    if not (root / TRANSFORMS).is_file():
        return []
    camera, frames = read_transforms(root / TRANSFORMS)
    fov_y = 2.0 * math.atan(camera["h"] / (2.0 * camera["fl_y"]))
    step = max(1, math.ceil(len(frames) / max_cameras))
    return [CaptureCamera(Path(file).stem, world_from_cam, fov_y, camera["w"] / camera["h"],
                          _thumbnail(root / file, thumbnail_width))
            for file, world_from_cam in frames[::step]]

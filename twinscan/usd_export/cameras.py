"""The capture trajectory as a time-sampled UsdGeom.Camera with the real pinhole intrinsics."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pxr import Gf, Usd, UsdGeom

from twinscan.errors import TwinscanError
from twinscan.usd_export.content import CameraTrack

# USD measures lens and filmback in tenths of a scene unit (here 1 = 10 cm). Only ratios matter for
# the projection; a 36 mm wide filmback makes focalLength read as the 35 mm-equivalent focal length.
FILMBACK_WIDTH = 0.36
# USD camera axes (x right, y up, looking down -z) to OpenCV's (x right, y down, z forward); self-inverse.
CV_CAM_FROM_USD_CAM = np.diag([1.0, -1.0, -1.0, 1.0])


@dataclass(frozen=True)
class UsdLens:
    focal_length: float
    horizontal_aperture: float
    vertical_aperture: float
    horizontal_aperture_offset: float
    vertical_aperture_offset: float


def usd_lens_from_intrinsics(K: np.ndarray, width: int, height: int) -> UsdLens:
    """USD's square-pixel filmback reproducing fx, fy, cx, cy of the OpenCV matrix K."""
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    if not (fx > 0 and fy > 0 and width > 0 and height > 0):
        raise TwinscanError("camera intrinsics are not a valid pinhole matrix", "check the SfM model's cameras")
    pitch = FILMBACK_WIDTH / width  # filmback units per pixel along x
    focal_length = fx * pitch
    pitch_y = focal_length / fy  # vertical units per pixel that keep fy (USD has no pixel aspect)
    return UsdLens(focal_length=focal_length, horizontal_aperture=FILMBACK_WIDTH, vertical_aperture=height * pitch_y,
                   # The offset moves the window centre off the optical axis; image y runs down, USD y up.
                   horizontal_aperture_offset=(width / 2 - cx) * pitch,
                   vertical_aperture_offset=(cy - height / 2) * pitch_y)


def author_cameras(stage: Usd.Stage, root: str, track: CameraTrack, time_codes_per_second: float) -> UsdGeom.Camera:
    """Define `root`/Capture, animated at time code = seconds * time_codes_per_second."""
    if len(track.world_from_cam) != len(track.times) or len(track.times) == 0:
        raise TwinscanError("the camera track needs one pose per time", "pass matching world_from_cam and times")
    UsdGeom.Scope.Define(stage, root)
    camera = UsdGeom.Camera.Define(stage, f"{root}/Capture")
    lens = usd_lens_from_intrinsics(np.asarray(track.K, dtype=np.float64), track.width, track.height)
    camera.CreateFocalLengthAttr(lens.focal_length)
    camera.CreateHorizontalApertureAttr(lens.horizontal_aperture)
    camera.CreateVerticalApertureAttr(lens.vertical_aperture)
    camera.CreateHorizontalApertureOffsetAttr(lens.horizontal_aperture_offset)
    camera.CreateVerticalApertureOffsetAttr(lens.vertical_aperture_offset)
    camera.CreateClippingRangeAttr(Gf.Vec2f(0.01, 1000.0))
    transform = camera.AddTransformOp()
    for time, world_from_cam in zip(track.times, track.world_from_cam, strict=True):
        world_from_usd_cam = np.asarray(world_from_cam, dtype=np.float64) @ CV_CAM_FROM_USD_CAM
        # Gf matrices act on row vectors: store the transpose of the column-vector matrix.
        transform.Set(Gf.Matrix4d(world_from_usd_cam.T.tolist()), Usd.TimeCode(float(time) * time_codes_per_second))
    set_playback_range(stage, track, time_codes_per_second)
    return camera


def set_playback_range(stage: Usd.Stage, track: CameraTrack, time_codes_per_second: float) -> None:
    """Playback metadata; the root layer needs it as well as the camera layer (rates must agree)."""
    stage.SetTimeCodesPerSecond(time_codes_per_second)
    stage.SetStartTimeCode(float(np.min(track.times)) * time_codes_per_second)
    stage.SetEndTimeCode(float(np.max(track.times)) * time_codes_per_second)

"""Camera poses as 4x4 matrices (OpenCV axes: x right, y down, z forward; CONVENTIONS.md): the one place
they are built, from a pycolmap image or from where a camera stands and what it looks at; and the one
rule for a camera's intrinsics at another image size."""

from __future__ import annotations

import numpy as np


def cam_from_world_matrix(image) -> np.ndarray:
    """4x4 cam_from_world of a posed pycolmap image (gsplat's `viewmats`)."""
    return np.vstack([image.cam_from_world().matrix(), [0, 0, 0, 1]])


def world_from_cam_matrix(image) -> np.ndarray:
    """4x4 world_from_cam of a posed pycolmap image."""
    world_from_cam = np.eye(4)
    world_from_cam[:3] = image.cam_from_world().inverse().matrix()
    return world_from_cam


def look_at_rotations(eye: np.ndarray, target: np.ndarray, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """(..., 3, 3) world_from_cam rotations of cameras at `eye` (..., 3) looking at `target`, no roll:
    image up along `up`."""
    forward = np.asarray(target, dtype=np.float64) - eye
    forward /= np.linalg.norm(forward, axis=-1, keepdims=True)
    right = np.cross(forward, np.asarray(up, dtype=np.float64))
    right /= np.linalg.norm(right, axis=-1, keepdims=True)
    down = np.cross(forward, right)
    return np.stack([right, down, forward], axis=-1)


def look_at(eye, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """4x4 world_from_cam of one camera at `eye` looking at `target`, image up along `up`."""
    eye = np.asarray(eye, dtype=np.float64)
    world_from_cam = np.eye(4)
    world_from_cam[:3, :3] = look_at_rotations(eye, target, up)
    world_from_cam[:3, 3] = eye
    return world_from_cam


def scaled_K(K: np.ndarray, from_size: tuple[int, int], to_size: tuple[int, int]) -> np.ndarray:
    """Intrinsics for the same camera at another image size (width, height); pixel centres at +0.5, as
    COLMAP and gsplat, so scaling is exact."""
    out = np.asarray(K, np.float64).copy()
    out[0] *= to_size[0] / from_size[0]
    out[1] *= to_size[1] / from_size[1]
    return out

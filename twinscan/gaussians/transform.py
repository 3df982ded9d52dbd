"""Move a splat set by a similarity (scale s, rotation R, translation t): x -> s R x + t."""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation

from twinscan.errors import TwinscanError
from twinscan.gaussians.model import Gaussians
from twinscan.gaussians.sh_rotation import rotate_sh


def transform(gaussians: Gaussians, rotation: np.ndarray, translation: np.ndarray, scale: float) -> Gaussians:
    """The splats as seen in the target frame: means, orientations, sizes and view-dependent colour."""
    rotation = _checked_rotation(rotation)
    translation = np.asarray(translation, dtype=np.float64).reshape(3)
    if not (np.isfinite(scale) and scale > 0):
        raise TwinscanError(f"similarity scale {scale} is not a positive number", "fix the frame alignment")
    dtype = gaussians.means.dtype
    means = scale * (gaussians.means.astype(np.float64) @ rotation.T) + translation
    rotation_wxyz = np.roll(Rotation.from_matrix(rotation).as_quat(), 1)  # scipy gives (x, y, z, w)
    quats = _quat_multiply(rotation_wxyz, gaussians.quats)
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    return Gaussians(
        means=means.astype(dtype),
        log_scales=(gaussians.log_scales + np.log(scale)).astype(gaussians.log_scales.dtype),
        quats=quats.astype(gaussians.quats.dtype),
        opacity_logits=gaussians.opacity_logits.copy(),
        sh=rotate_sh(gaussians.sh, rotation),
    )


def split_similarity(target_from_source: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(R, t, s) of a 4x4 similarity [[s R, t], [0, 1]]."""
    matrix = np.asarray(target_from_source, dtype=np.float64)
    if matrix.shape != (4, 4) or not np.allclose(matrix[3], [0, 0, 0, 1]):
        raise TwinscanError("the frame transform is not a 4x4 similarity matrix", "pass [[s R, t], [0, 0, 0, 1]]")
    scale = float(np.cbrt(np.linalg.det(matrix[:3, :3])))
    if not scale > 0:
        raise TwinscanError("the frame transform mirrors or collapses space", "pass a proper similarity")
    return _checked_rotation(matrix[:3, :3] / scale), matrix[:3, 3].copy(), scale


def _checked_rotation(rotation: np.ndarray) -> np.ndarray:
    rotation = np.asarray(rotation, dtype=np.float64)
    if (rotation.shape != (3, 3) or not np.allclose(rotation @ rotation.T, np.eye(3), atol=1e-5)
            or np.linalg.det(rotation) <= 0):
        raise TwinscanError("the frame rotation is not a proper rotation matrix",
                            "pass an orthonormal 3x3 matrix with determinant +1")
    return rotation


def _quat_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a * b of (w, x, y, z) quaternions (a broadcast over the rows of b)."""
    aw, ax, ay, az = np.moveaxis(np.broadcast_to(a, b.shape).astype(np.float64), -1, 0)
    bw, bx, by, bz = np.moveaxis(b.astype(np.float64), -1, 0)
    return np.stack([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw], axis=-1)

"""Pose error against ground truth, for tests and benchmarks (numpy; the alignment is pycolmap's)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PoseError:
    position_rmse: float  # in ground-truth units, after alignment
    trajectory_extent: float  # diagonal of the ground-truth camera centres' bounding box
    rotation_mean_deg: float
    rotation_max_deg: float
    scale: float  # ground-truth units per estimated unit of the alignment (1 when not aligned)

    @property
    def relative_rmse(self) -> float:
        return self.position_rmse / self.trajectory_extent


def rotation_angle_deg(rotations: np.ndarray) -> np.ndarray:
    """Angle of each (N, 3, 3) rotation matrix, degrees."""
    cos = (np.trace(rotations, axis1=1, axis2=2) - 1) / 2
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def pose_error(estimated_world_from_cam: np.ndarray, true_world_from_cam: np.ndarray,
               align: bool = True) -> PoseError:
    """Errors of matched (N, 4, 4) camera poses, after the best similarity (Umeyama) when `align`."""
    import pycolmap

    estimated = estimated_world_from_cam.copy()
    scale = 1.0
    if align:
        gt_from_estimated = pycolmap.estimate_sim3d(estimated[:, :3, 3], true_world_from_cam[:, :3, 3])
        rotation, scale = gt_from_estimated.rotation.matrix(), float(gt_from_estimated.scale)
        estimated[:, :3, 3] = estimated[:, :3, 3] @ (scale * rotation).T + gt_from_estimated.translation
        estimated[:, :3, :3] = rotation @ estimated[:, :3, :3]
    residual = estimated[:, :3, 3] - true_world_from_cam[:, :3, 3]
    centers = true_world_from_cam[:, :3, 3]
    angles = rotation_angle_deg(np.transpose(true_world_from_cam[:, :3, :3], (0, 2, 1)) @ estimated[:, :3, :3])
    return PoseError(position_rmse=float(np.sqrt((residual ** 2).sum(axis=1).mean())),
                     trajectory_extent=float(np.linalg.norm(centers.max(axis=0) - centers.min(axis=0))),
                     rotation_mean_deg=float(angles.mean()), rotation_max_deg=float(angles.max()), scale=scale)

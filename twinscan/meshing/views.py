"""Rendered views the mesher fuses: per view a depth map, colour, alpha and an OpenCV camera.

The mesher never reads files: the stage renders these from the splats, tests ray-cast them from
a known mesh. All views share one image size; depth is metres along the camera z axis.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from twinscan.errors import TwinscanError


@dataclass(frozen=True)
class DepthViews:
    depth: np.ndarray  # (N, H, W) float32, metres; 0 or inf where nothing was rendered
    colour: np.ndarray  # (N, H, W, 3) uint8
    alpha: np.ndarray  # (N, H, W) float32 in [0, 1]: rendered opacity (1 for ground-truth renders)
    K: np.ndarray  # (N, 3, 3) pinhole intrinsics, pixel centres at +0.5 (COLMAP, gsplat)
    world_from_cam: np.ndarray  # (N, 4, 4) OpenCV camera (x right, y down, z forward) to twin world

    def __post_init__(self) -> None:
        n = len(self.depth)
        if self.depth.ndim != 3 or n == 0:
            raise TwinscanError(f"depth must be (N, H, W) with N >= 1 (got shape {self.depth.shape})",
                                "render at least one view before meshing")
        shape = self.depth.shape
        expected = {"colour": (*shape, 3), "alpha": shape, "K": (n, 3, 3), "world_from_cam": (n, 4, 4)}
        for name, want in expected.items():
            got = getattr(self, name).shape
            if got != want:
                raise TwinscanError(f"DepthViews.{name} has shape {got}, expected {want}",
                                    "pass one depth, colour, alpha, K and world_from_cam per view")

    def __len__(self) -> int:
        return len(self.depth)

    @property
    def size(self) -> tuple[int, int]:
        """(height, width) of every view."""
        return self.depth.shape[1], self.depth.shape[2]

    @functools.cached_property
    def cam_from_world(self) -> np.ndarray:
        return np.linalg.inv(self.world_from_cam)

    def valid(self, min_alpha: float) -> np.ndarray:
        """(N, H, W) mask of pixels with a finite positive depth and enough opacity."""
        return np.isfinite(self.depth) & (self.depth > 0) & (self.alpha >= min_alpha)

    def points(self, min_alpha: float = 0.5, stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """World points and their colours back-projected from every valid pixel (every `stride`-th)."""
        h, w = self.size
        v, u = np.mgrid[0:h:stride, 0:w:stride]
        pixels = np.stack([u + 0.5, v + 0.5, np.ones_like(u)], -1).reshape(-1, 3).astype(np.float64)
        valid = self.valid(min_alpha)[:, ::stride, ::stride].reshape(len(self), -1)
        depth = self.depth[:, ::stride, ::stride].reshape(len(self), -1)
        colour = self.colour[:, ::stride, ::stride].reshape(len(self), -1, 3)
        points, colours = [], []
        for i in range(len(self)):
            rays = pixels[valid[i]] @ np.linalg.inv(self.K[i]).T
            cam = rays * depth[i, valid[i], None]
            points.append(cam @ self.world_from_cam[i, :3, :3].T + self.world_from_cam[i, :3, 3])
            colours.append(colour[i, valid[i]])
        return np.concatenate(points), np.concatenate(colours)

    def project(self, i: int, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """World points in view i: (u, v) image coordinates (pixel centres at +0.5; meaningless where the
        point is not in front) and the camera depth z."""
        cam = points @ self.cam_from_world[i, :3, :3].T + self.cam_from_world[i, :3, 3]
        z = cam[:, 2]
        safe = np.where(z > 1e-9, z, 1e-9)
        u = self.K[i, 0, 0] * cam[:, 0] / safe + self.K[i, 0, 1] * cam[:, 1] / safe + self.K[i, 0, 2]
        v = self.K[i, 1, 1] * cam[:, 1] / safe + self.K[i, 1, 2]
        return u, v, z

    def pixels(self, i: int, points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Where world points fall in view i: (inside the image and in front, row, col, camera depth)."""
        u, v, z = self.project(i, points)
        h, w = self.size
        inside = (z > 1e-9) & (u >= 0) & (u < w) & (v >= 0) & (v < h)
        return inside, np.clip(v, 0, h - 1).astype(np.int64), np.clip(u, 0, w - 1).astype(np.int64), z

    def seen_by(self, points: np.ndarray, tolerance: float, min_alpha: float = 0.5) -> np.ndarray:
        """(N, P) mask: point p is the surface view n rendered at its pixel (depth within `tolerance`)."""
        valid = self.valid(min_alpha)
        seen = np.zeros((len(self), len(points)), bool)
        for i in range(len(self)):
            inside, row, col, z = self.pixels(i, points)
            seen[i] = inside & valid[i, row, col] & (np.abs(self.depth[i, row, col] - z) <= tolerance)
        return seen


def spread(count: int, most: int) -> np.ndarray:
    """Indices of at most `most` of `count` views, evenly spread over the walk: photo checks that look at
    every view add time, not evidence, past a few dozen."""
    return np.unique(np.linspace(0, count - 1, min(count, most)).round().astype(np.int64))

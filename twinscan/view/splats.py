"""Splats as the browser draws them: centres, covariances, RGB (degree-0 SH) and opacity, subsampled."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twinscan.gaussians import Gaussians
from twinscan.gaussians.model import SH_C0

DEFAULT_MAX_SPLATS = 400_000  # a software-rendered browser stays interactive; a GPU browser takes more


@dataclass(frozen=True)
class SplatLayer:
    centers: np.ndarray  # (N, 3) float32, twin frame (metres, Z up)
    covariances: np.ndarray  # (N, 3, 3) float32
    rgbs: np.ndarray  # (N, 3) float32 in [0, 1]
    opacities: np.ndarray  # (N, 1) float32 in [0, 1]
    total: int  # splats in the PLY; len(centers) of them are shown

    @property
    def shown(self) -> int:
        return len(self.centers)

    @property
    def subsampled(self) -> bool:
        return self.shown < self.total

    def prefix(self, count: int) -> SplatLayer:
        """The `count` most opaque of the shown splats (they are stored most opaque first)."""
        return SplatLayer(self.centers[:count], self.covariances[:count], self.rgbs[:count], self.opacities[:count],
                          self.total)

    def notice(self) -> str | None:
        if not self.subsampled:
            return None
        return (f"showing the {self.shown:,} most opaque of {self.total:,} splats "
                "(--max-splats raises it; the twin itself keeps all)")


def most_opaque(opacity_logits: np.ndarray, limit: int) -> np.ndarray:
    """Indices of the `limit` most opaque splats, most opaque first: the ones a subsample misses least,
    so that any prefix is itself the best subsample of its size."""
    order = np.argsort(-opacity_logits, kind="stable")
    return order if limit <= 0 else order[:limit]


def splat_layer(gaussians: Gaussians, max_splats: int = DEFAULT_MAX_SPLATS) -> SplatLayer:
    """Activate the stored parameters (exp scales, sigmoid opacity, DC colour) for the `max_splats`
    most opaque splats, most opaque first. View-dependent colour (higher SH) is dropped: viser draws one RGB per splat."""
    keep = most_opaque(gaussians.opacity_logits, max_splats)
    chosen = gaussians.subset(keep)
    w, x, y, z = chosen.quats.astype(np.float64).T
    rotation = np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
    ], 1)  # (N, 3, 3): rows are matrix rows
    scaled = rotation * chosen.scales.astype(np.float64)[:, None, :]
    covariances = scaled @ scaled.transpose(0, 2, 1)
    rgbs = np.clip(0.5 + SH_C0 * chosen.sh[:, 0, :], 0.0, 1.0)
    return SplatLayer(chosen.means.astype(np.float32), covariances.astype(np.float32), rgbs.astype(np.float32),
                      chosen.opacities.astype(np.float32)[:, None], gaussians.count)

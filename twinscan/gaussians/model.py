"""The Gaussian splat set as plain numpy arrays, in the stored (un-activated) parameterisation."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from twinscan.errors import TwinscanError

MAX_SH_DEGREE = 4  # the highest degree gsplat evaluates
SH_C0 = 0.28209479177387814  # the degree-0 basis function: colour = SH_C0 * sh_dc + 0.5


@dataclass(frozen=True)
class Gaussians:
    """N splats as trained (see docs/CONVENTIONS.md): activations are applied by the consumer.

    means (N,3); log_scales (N,3); quats (N,4) unit, (w, x, y, z); opacity_logits (N,);
    sh (N,K,3) with the DC coefficient first and K = (degree + 1)^2.
    """

    means: np.ndarray
    log_scales: np.ndarray
    quats: np.ndarray
    opacity_logits: np.ndarray
    sh: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.means)
        expected = {"means": (n, 3), "log_scales": (n, 3), "quats": (n, 4), "opacity_logits": (n,)}
        for name, shape in expected.items():
            if getattr(self, name).shape != shape:
                raise TwinscanError(f"Gaussians.{name} has shape {getattr(self, name).shape}, expected {shape}",
                                    "build the arrays with one row per splat")
        if self.sh.ndim != 3 or self.sh.shape[0] != n or self.sh.shape[2] != 3 or sh_degree(self.sh.shape[1]) < 0:
            raise TwinscanError(f"Gaussians.sh has shape {self.sh.shape}, expected (N, (degree+1)^2, 3)",
                                f"use degree 0..{MAX_SH_DEGREE} spherical harmonics, DC first")

    @property
    def count(self) -> int:
        return len(self.means)

    @property
    def sh_degree(self) -> int:
        return sh_degree(self.sh.shape[1])

    @property
    def scales(self) -> np.ndarray:
        """Standard deviations along the splat's axes (metres in the twin frame)."""
        return np.exp(self.log_scales)

    @property
    def opacities(self) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-self.opacity_logits))

    def subset(self, keep: np.ndarray) -> Gaussians:
        """The splats selected by `keep` (a mask or indices)."""
        return Gaussians(self.means[keep], self.log_scales[keep], self.quats[keep], self.opacity_logits[keep],
                         self.sh[keep])


def sh_degree(coefficient_count: int) -> int:
    """The degree whose (degree+1)^2 equals `coefficient_count`, or -1 if there is none."""
    degree = math.isqrt(coefficient_count) - 1
    if degree < 0 or (degree + 1) ** 2 != coefficient_count or degree > MAX_SH_DEGREE:
        return -1
    return degree

"""The splat prim: a UsdVol.ParticleField3DGaussianSplat with activated parameters (CONVENTIONS.md)."""

from __future__ import annotations

import numpy as np
from pxr import Usd, UsdVol, Vt

from twinscan.gaussians import Gaussians

# A splat is drawn out to about three standard deviations; the extent must hold all of it.
EXTENT_SIGMAS = 3.0


def author_splats(stage: Usd.Stage, path: str, gaussians: Gaussians,
                  half_precision: bool) -> UsdVol.ParticleField3DGaussianSplat:
    """Define the splat prim at `path`. Positions stay float32 even in half precision: half
    resolves only ~1/1000 of a coordinate (5 mm at 10 m), far too coarse for a scene."""
    splats = UsdVol.ParticleField3DGaussianSplat.Define(stage, path)
    n = gaussians.count
    scales = gaussians.scales
    orientations = np.roll(gaussians.quats, -1, axis=1)  # Gf quaternions are (x, y, z, w) in memory
    coefficients = gaussians.sh.reshape(n * gaussians.sh.shape[1], 3)  # vec3-major, splat by splat
    splats.CreatePositionsAttr(Vt.Vec3fArray.FromNumpy(gaussians.means.astype(np.float32)))
    if half_precision:
        splats.CreateOrientationshAttr(Vt.QuathArray.FromNumpy(orientations.astype(np.float16)))
        splats.CreateScaleshAttr(Vt.Vec3hArray.FromNumpy(scales.astype(np.float16)))
        splats.CreateOpacitieshAttr(Vt.HalfArray.FromNumpy(gaussians.opacities.astype(np.float16)))
        sh = splats.CreateRadianceSphericalHarmonicsCoefficientshAttr(
            Vt.Vec3hArray.FromNumpy(coefficients.astype(np.float16)))
    else:
        splats.CreateOrientationsAttr(Vt.QuatfArray.FromNumpy(orientations.astype(np.float32)))
        splats.CreateScalesAttr(Vt.Vec3fArray.FromNumpy(scales.astype(np.float32)))
        splats.CreateOpacitiesAttr(Vt.FloatArray.FromNumpy(gaussians.opacities.astype(np.float32)))
        sh = splats.CreateRadianceSphericalHarmonicsCoefficientsAttr(
            Vt.Vec3fArray.FromNumpy(coefficients.astype(np.float32)))
    sh.SetMetadata("elementSize", gaussians.sh.shape[1])
    splats.CreateRadianceSphericalHarmonicsDegreeAttr(gaussians.sh_degree)
    splats.CreateExtentAttr(Vt.Vec3fArray.FromNumpy(splat_extent(gaussians)))
    return splats


def splat_extent(gaussians: Gaussians) -> np.ndarray:
    """(2,3) box holding every splat out to EXTENT_SIGMAS of its largest axis."""
    reach = EXTENT_SIGMAS * gaussians.scales.max(axis=1, keepdims=True)
    lower = (gaussians.means - reach).min(axis=0)
    upper = (gaussians.means + reach).max(axis=0)
    # Round outwards so the float32 extent still holds every float32 point.
    return np.stack([np.nextafter(lower.astype(np.float32), -np.inf), np.nextafter(upper.astype(np.float32), np.inf)])

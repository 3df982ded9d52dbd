"""CPU rasterizer for 3D Gaussian Splatting computing gsplat's function (see `api` for what is matched).

Backends: "numba" (projection, SH and blending as numba kernels with hand-written backward), "torch"
(gsplat's torch projection and SH, tiled blending, autograd) and "reference" (brute-force blending,
autograd; tests only).
"""

from twinscan.gaussians.raster.api import BACKENDS, RENDER_MODES, cuda_available, rasterize

__all__ = ["BACKENDS", "RENDER_MODES", "cuda_available", "rasterize"]

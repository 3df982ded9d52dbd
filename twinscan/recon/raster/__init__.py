"""CPU rasterizer for 3D Gaussian Splatting computing gsplat's function (see `api` for what is matched).

Backends: "numba" (fast, hand-written backward), "torch" (tiled, autograd) and "reference"
(brute force, autograd; tests only).
"""

from twinscan.recon.raster.api import BACKENDS, RENDER_MODES, cuda_available, rasterize

__all__ = ["BACKENDS", "RENDER_MODES", "cuda_available", "rasterize"]

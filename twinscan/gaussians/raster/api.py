"""`rasterize`: gsplat.rasterization's signature and function, on the CPU.

Matched gsplat 1.5.3 semantics (`rasterization(..., packed=False, camera_model="pinhole")`):
- projection: gsplat's EWA projection (eps2d blur, near/far culling, screen-bound clamp of
  the Jacobian, optional antialiased compensation) with the CUDA kernel's opacity-aware radii
  and `radius_clip`;
- colours: post-activation [N, D] / [C, N, D], or SH [N, K, 3] with `sh_degree`, evaluated from
  the camera centre and mapped to max(SH + 0.5, 0);
- backends: "numba" projects and evaluates SH with numba kernels too (`project_fast`); "torch"
  and "reference" use gsplat's torch reference for both;
- tiles: 16x16, tile ranges from the radii, per-tile sort by float32 depth (isect_tiles);
- blending: see `composite` (alpha clamp 0.999, skip < 1/255, stop before T <= 1e-4, background);
- render modes "RGB", "D", "ED", "RGB+D", "RGB+ED": depth is one more channel with a zero
  background, and "ED" divides it by alpha.clamp(min=1e-10).
Added: `meta["median_depths"]` [C, H, W, 1], gsplat 2DGS's median depth (no gradient).
Not supported: packed output, absgrad, distributed, other camera models, distortion, rolling shutter.

On the CPU the numba kernel is the parallel part; torch.set_num_threads(1) in the caller keeps
torch's spin-waiting OpenMP pool from competing with it on small machines (about 1.5x faster on 2 cores).
"""

from __future__ import annotations

import functools
from typing import Literal

import torch
from torch import Tensor

from twinscan.errors import TwinscanError
from twinscan.gaussians.raster.fast import rasterize_fast
from twinscan.gaussians.raster.project import colors_from_sh, project
from twinscan.gaussians.raster.reference import rasterize_reference
from twinscan.gaussians.raster.tiled import rasterize_tiled
from twinscan.gaussians.raster import kernels
from twinscan.gaussians.raster.tiles import bin_gaussians, bin_gaussians_fast

RenderMode = Literal["RGB", "D", "ED", "RGB+D", "RGB+ED"]
Backend = Literal["numba", "torch", "reference"]
RENDER_MODES = ("RGB", "D", "ED", "RGB+D", "RGB+ED")
BACKENDS = ("numba", "torch", "reference")


@functools.cache
def cuda_available() -> bool:
    """True where torch sees a GPU and gsplat's CUDA extension loads (it may JIT-compile here)."""
    if not torch.cuda.is_available():
        return False
    try:
        from gsplat.cuda._backend import _C
    except Exception:  # noqa: BLE001 -- any build or load failure means: use the CPU path
        return False
    return _C is not None


def rasterize(means: Tensor, quats: Tensor, scales: Tensor, opacities: Tensor, colors: Tensor,
              viewmats: Tensor, Ks: Tensor, width: int, height: int, *, sh_degree: int | None = None,
              backgrounds: Tensor | None = None, near_plane: float = 0.01, far_plane: float = 1e10,
              radius_clip: float = 0.0, eps2d: float = 0.3, tile_size: int = 16,
              render_mode: RenderMode = "RGB", rasterize_mode: Literal["classic", "antialiased"] = "classic",
              backend: Backend = "numba") -> tuple[Tensor, Tensor, dict]:
    """Render N Gaussians into C cameras on the CPU, as `gsplat.rasterization` does on CUDA.

    means [N, 3], quats [N, 4] (wxyz, any norm), scales [N, 3] and opacities [N] (activated),
    colors [N, D] or [C, N, D] (or SH [N, K, 3] with `sh_degree`), viewmats [C, 4, 4]
    (cam_from_world, OpenCV axes), Ks [C, 3, 3]; backgrounds [C, D].
    Returns render_colors [C, H, W, D(+1 depth)], render_alphas [C, H, W, 1] and meta (gsplat's
    keys: radii, means2d, depths, conics, opacities, ..., plus median_depths [C, H, W, 1]).
    """
    if render_mode not in RENDER_MODES:
        raise TwinscanError(f"unknown render_mode {render_mode!r}", f"use one of {', '.join(RENDER_MODES)}")
    if backend not in BACKENDS:
        raise TwinscanError(f"unknown rasterizer backend {backend!r}", f"use one of {', '.join(BACKENDS)}")
    _check_shapes(means, quats, scales, opacities, viewmats, Ks)
    n_cams = len(viewmats)
    projection = "numba" if backend == "numba" else "torch"
    screen = project(means, quats, scales, opacities, viewmats, Ks, width, height, near_plane=near_plane,
                     far_plane=far_plane, eps2d=eps2d, radius_clip=radius_clip,
                     antialiased=rasterize_mode == "antialiased", backend=projection)
    if sh_degree is not None:
        colors = colors_from_sh(means, colors, viewmats, sh_degree, backend=projection)
    elif colors.dim() == 2:
        colors = colors[None].expand(n_cams, -1, -1)
    depth_channel = screen.depths[..., None]
    if render_mode in ("D", "ED"):
        colors = depth_channel
        backgrounds = None if backgrounds is None else backgrounds.new_zeros(n_cams, 1)
    elif render_mode in ("RGB+D", "RGB+ED"):
        colors = torch.cat([colors, depth_channel], dim=-1)
        if backgrounds is not None:
            backgrounds = torch.cat([backgrounds, backgrounds.new_zeros(n_cams, 1)], dim=-1)

    if backend == "numba":
        if tile_size != kernels.TILE:
            raise TwinscanError(f"the numba rasterizer works on {kernels.TILE}x{kernels.TILE} tiles",
                                f"use tile_size={kernels.TILE}, or backend='torch' for other sizes")
        bins = bin_gaussians_fast(screen.means2d, screen.radii, screen.depths, width, height)
        render_colors, render_alphas, median = rasterize_fast(screen, colors, width, height, bins, backgrounds)
    else:
        bins = bin_gaussians(screen.means2d, screen.radii, screen.depths, width, height, tile_size)
        if backend == "torch":
            render_colors, render_alphas, median = rasterize_tiled(screen, colors, width, height, bins, backgrounds)
        else:
            render_colors, render_alphas, median = rasterize_reference(screen, colors, width, height, backgrounds)
    if render_mode in ("ED", "RGB+ED"):
        expected = render_colors[..., -1:] / render_alphas.clamp(min=1e-10)
        render_colors = torch.cat([render_colors[..., :-1], expected], dim=-1)

    meta = {
        "camera_ids": None, "gaussian_ids": None, "radii": screen.radii, "means2d": screen.means2d,
        "depths": screen.depths, "conics": screen.conics, "opacities": screen.opacities,
        "tile_width": bins.tiles_x, "tile_height": bins.tiles_y, "tile_size": tile_size,
        "isect_offsets": bins.offsets[:-1].reshape(n_cams, bins.tiles_y, bins.tiles_x),
        "flatten_ids": bins.flatten_ids, "width": width, "height": height,
        "n_cameras": n_cams, "median_depths": median,
    }
    return render_colors, render_alphas, meta


def _check_shapes(means: Tensor, quats: Tensor, scales: Tensor, opacities: Tensor, viewmats: Tensor,
                  Ks: Tensor) -> None:
    n = len(means)
    expected = {"means": (means, (n, 3)), "quats": (quats, (n, 4)), "scales": (scales, (n, 3)),
                "opacities": (opacities, (n,)), "viewmats": (viewmats, (len(viewmats), 4, 4)),
                "Ks": (Ks, (len(viewmats), 3, 3))}
    for name, (tensor, shape) in expected.items():
        if tuple(tensor.shape) != shape:
            raise TwinscanError(f"rasterize: {name} has shape {tuple(tensor.shape)}, expected {shape}",
                                "pass N Gaussians as means [N,3], quats [N,4], scales [N,3], opacities [N] "
                                "and C cameras as viewmats [C,4,4], Ks [C,3,3]")

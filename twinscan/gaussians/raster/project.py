"""Gaussians to screen space, as `gsplat.rasterization` does before rasterizing.

The differentiable part (world -> camera, EWA covariance, conics, depths; SH colours) is gsplat's
own torch reference (`gsplat.cuda._torch_impl`), or with backend "numba" (float32 CPU tensors) the
same functions as numba kernels with a hand-written backward (`project_fast`), which replace
hundreds of small torch ops per training step. Only the screen radii are recomputed here, because
gsplat's CUDA projection bounds them tighter than its torch reference: opacity-aware extent
(min(3.33, sqrt(2 ln(255 o)))), Gaussians with o < 1/255 culled, and `radius_clip`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from gsplat.cuda._torch_impl import _fully_fused_projection, _quat_scale_to_covar_preci, _spherical_harmonics
from torch import Tensor

from twinscan.gaussians.raster.project_fast import fully_fused_projection_fast, spherical_harmonics_fast

ProjectionBackend = Literal["numba", "torch"]
ALPHA_THRESHOLD = 1.0 / 255.0  # gsplat's ALPHA_THRESHOLD: weaker splats are skipped
EXTEND_MAX = 3.33  # gsplat's bound on a splat's screen radius, in standard deviations


@dataclass
class ScreenGaussians:
    """Per-camera screen-space Gaussians, [C, N, ...]; those with radii == 0 are not drawn."""

    means2d: Tensor  # [C, N, 2] pixels, pixel centres at +0.5
    conics: Tensor  # [C, N, 3] upper triangle (a, b, c) of the inverse 2D covariance
    depths: Tensor  # [C, N] camera z
    opacities: Tensor  # [C, N] (times the antialiasing compensation when enabled)
    radii: Tensor  # [C, N, 2] int32 pixel half-extents of the bounding box

    @property
    def visible(self) -> Tensor:
        return (self.radii > 0).all(dim=-1)


def project(means: Tensor, quats: Tensor, scales: Tensor, opacities: Tensor, viewmats: Tensor, Ks: Tensor,
            width: int, height: int, near_plane: float = 0.01, far_plane: float = 1e10, eps2d: float = 0.3,
            radius_clip: float = 0.0, antialiased: bool = False,
            backend: ProjectionBackend = "numba") -> ScreenGaussians:
    """Project N Gaussians (activated scales/opacities, wxyz quats) into C pinhole cameras.

    backend "numba" runs the numba kernels where they apply (float32 CPU tensors, Ks without
    gradient), else gsplat's torch reference, as "torch" always does.
    """
    if backend == "numba" and _fast_path_applies(means, quats, scales, viewmats, Ks) and not Ks.requires_grad:
        radii_loose, means2d, depths, conics, compensations = fully_fused_projection_fast(
            means, quats, scales, viewmats, Ks, width, height, eps2d, near_plane, far_plane)
    else:
        covars, _ = _quat_scale_to_covar_preci(quats, scales, compute_covar=True, compute_preci=False)
        radii_loose, means2d, depths, conics, compensations = _fully_fused_projection(
            means, covars, viewmats, Ks, width, height, eps2d=eps2d, near_plane=near_plane,
            far_plane=far_plane, calc_compensations=antialiased)
    view_opacities = opacities[None, :].expand(len(viewmats), -1)
    if antialiased:
        view_opacities = view_opacities * compensations
    radii = _tight_radii(means2d.detach(), conics.detach(), view_opacities.detach(), radii_loose,
                         width, height, radius_clip)
    return ScreenGaussians(means2d, conics, depths, view_opacities, radii)


@torch.no_grad()
def _tight_radii(means2d: Tensor, conics: Tensor, opacities: Tensor, radii_loose: Tensor, width: int,
                 height: int, radius_clip: float) -> Tensor:
    """gsplat CUDA's bounding box: opacity-aware extent, culled when clipped, tiny or off-screen."""
    a, b, c = conics.unbind(-1)
    det = (a * c - b * b).clamp(min=1e-30)
    covar_diag = torch.stack([c / det, a / det], dim=-1)  # the blurred 2D covariance's diagonal
    extend = torch.sqrt(2.0 * torch.log(opacities.clamp(min=ALPHA_THRESHOLD) / ALPHA_THRESHOLD))
    extend = extend.clamp(max=EXTEND_MAX)
    radius = torch.ceil(extend[..., None] * covar_diag.sqrt())
    keep = (radii_loose > 0).all(dim=-1) & (opacities >= ALPHA_THRESHOLD)
    keep &= (radius > radius_clip).any(dim=-1)
    keep &= (means2d[..., 0] + radius[..., 0] > 0) & (means2d[..., 0] - radius[..., 0] < width)
    keep &= (means2d[..., 1] + radius[..., 1] > 0) & (means2d[..., 1] - radius[..., 1] < height)
    return torch.where(keep[..., None], radius, 0.0).int()


def colors_from_sh(means: Tensor, sh_coeffs: Tensor, viewmats: Tensor, sh_degree: int,
                   backend: ProjectionBackend = "numba") -> Tensor:
    """View-dependent RGB [C, N, 3] from SH [N, K, 3], as gsplat: max(SH(dir) + 0.5, 0).

    backend "numba" evaluates degrees 0-3 of float32 CPU tensors with the numba kernels.
    """
    if (sh_degree + 1) ** 2 > sh_coeffs.shape[-2]:
        raise ValueError(f"sh_degree {sh_degree} needs {(sh_degree + 1) ** 2} coefficients, "
                         f"got {sh_coeffs.shape[-2]}")
    campos = torch.inverse(viewmats)[:, :3, 3]  # [C, 3]
    dirs = means[None, :, :] - campos[:, None, :]  # [C, N, 3]
    if backend == "numba" and sh_degree <= 3 and _fast_path_applies(dirs, sh_coeffs):
        return spherical_harmonics_fast(sh_degree, dirs, sh_coeffs)
    coeffs = sh_coeffs[None].expand(len(viewmats), *sh_coeffs.shape)
    return torch.clamp_min(_spherical_harmonics(sh_degree, dirs, coeffs) + 0.5, 0.0)


def _fast_path_applies(*tensors: Tensor) -> bool:
    """The numba kernels take float32 CPU tensors (others, e.g. float64 for gradcheck, use torch)."""
    return all(t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors)


def tile_grid(width: int, height: int, tile_size: int) -> tuple[int, int]:
    """Tiles across and down (partial tiles at the right and bottom edges count)."""
    return math.ceil(width / tile_size), math.ceil(height / tile_size)

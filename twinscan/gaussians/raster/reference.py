"""Brute force: every pixel blends every visible splat of its camera, sorted by depth.

No tiles and no bounding boxes, so it checks the binning of the fast backends as well as their
blending; autograd gives its gradients. Memory is pixels x splats: for tests only.
"""

from __future__ import annotations

import torch
from torch import Tensor

from twinscan.gaussians.raster.composite import blend
from twinscan.gaussians.raster.project import ScreenGaussians


def pixel_centres(xs: Tensor, ys: Tensor, dtype: torch.dtype) -> Tensor:
    """Pixel centres [len(ys) * len(xs), 2], row-major, at integer + 0.5 as gsplat samples them."""
    grid_y, grid_x = torch.meshgrid(ys.to(dtype), xs.to(dtype), indexing="ij")
    return torch.stack([grid_x.flatten(), grid_y.flatten()], dim=-1) + 0.5


def rasterize_reference(screen: ScreenGaussians, colors: Tensor, width: int, height: int,
                        backgrounds: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Render [C, H, W, D] colours, [C, H, W, 1] alphas and [C, H, W, 1] median depths."""
    pixels = pixel_centres(torch.arange(width), torch.arange(height), screen.means2d.dtype)
    images = []
    for cam in range(len(colors)):
        ids = torch.nonzero(screen.visible[cam]).squeeze(1)
        ids = ids[torch.sort(screen.depths[cam, ids].detach().float(), stable=True).indices]
        images.append(blend(pixels, screen.means2d[cam, ids], screen.conics[cam, ids],
                            screen.opacities[cam, ids], colors[cam, ids], screen.depths[cam, ids],
                            None if backgrounds is None else backgrounds[cam]))
    return tuple(torch.stack([image[k] for image in images]).unflatten(1, (height, width)) for k in range(3))

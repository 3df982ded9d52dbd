"""The tiled rasterizer in plain torch: gsplat's algorithm, one 16x16 tile at a time.

Each tile blends only its own depth-sorted splat list (`TileBins`), with the same per-pixel rules
as the reference (`composite.blend`); autograd gives the gradients. Readable rather than fast:
it is the yardstick for the numba kernel.
"""

from __future__ import annotations

import torch
from torch import Tensor

from twinscan.gaussians.raster.composite import blend
from twinscan.gaussians.raster.project import ScreenGaussians
from twinscan.gaussians.raster.reference import pixel_centres
from twinscan.gaussians.raster.tiles import TileBins


def rasterize_tiled(screen: ScreenGaussians, colors: Tensor, width: int, height: int, bins: TileBins,
                    backgrounds: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Render [C, H, W, D] colours, [C, H, W, 1] alphas and [C, H, W, 1] median depths."""
    n_cams = len(screen.depths)
    flat = [screen.means2d.flatten(0, 1), screen.conics.flatten(0, 1), screen.opacities.flatten(),
            colors.flatten(0, 1), screen.depths.flatten()]
    size = bins.tile_size
    tiles, pixel_ids = [], []
    for cam in range(n_cams):
        for ty in range(bins.tiles_y):
            for tx in range(bins.tiles_x):
                xs = torch.arange(tx * size, min((tx + 1) * size, width))
                ys = torch.arange(ty * size, min((ty + 1) * size, height))
                start, end = bins.tile_range((cam * bins.tiles_y + ty) * bins.tiles_x + tx)
                ids = bins.flatten_ids[start:end]
                background = None if backgrounds is None else backgrounds[cam]
                tiles.append(blend(pixel_centres(xs, ys, screen.means2d.dtype), *(x[ids] for x in flat),
                                   background))
                pixel_ids.append(((cam * height + ys[:, None]) * width + xs[None, :]).flatten())
    order = torch.argsort(torch.cat(pixel_ids))
    return tuple(torch.cat([tile[k] for tile in tiles])[order].unflatten(0, (n_cams, height, width))
                 for k in range(3))

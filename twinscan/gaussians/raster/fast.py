"""The numba kernels as a torch autograd Function (the CPU stand-in for gsplat's rasterize_to_pixels)."""

from __future__ import annotations

import contextlib

import numba
import numpy as np
import torch
from torch import Tensor

from twinscan.gaussians.raster import kernels
from twinscan.gaussians.raster.project import ScreenGaussians
from twinscan.gaussians.raster.tiles import TileBins

TILES_PER_CHUNK = 4


def rasterize_fast(screen: ScreenGaussians, colors: Tensor, width: int, height: int, bins: TileBins,
                   backgrounds: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Render [C, H, W, D] colours, [C, H, W, 1] alphas and [C, H, W, 1] median depths (no gradient)."""
    assert bins.tile_size == kernels.TILE, "the numba kernel works on 16x16 tiles"
    if backgrounds is None:
        backgrounds = colors.new_zeros(len(colors), colors.shape[-1])
    return _Rasterize.apply(screen.means2d, screen.conics, colors, screen.opacities, backgrounds,
                            screen.depths, bins, width, height)


@contextlib.contextmanager
def _dynamic_tile_schedule():
    """Hand tiles to threads a few at a time: tile costs differ by orders of magnitude, and a
    static split leaves one core idle (or waiting on a descheduled thread on a shared machine)."""
    previous = numba.set_parallel_chunksize(TILES_PER_CHUNK)
    try:
        yield
    finally:
        numba.set_parallel_chunksize(previous)


def _as_numpy(tensor: Tensor, dtype=np.float32) -> np.ndarray:
    return np.ascontiguousarray(tensor.detach().cpu().numpy(), dtype=dtype)


class _Rasterize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, means2d, conics, colors, opacities, backgrounds, depths, bins: TileBins, width, height):
        n_cams, n_gauss, n_ch = colors.shape
        flat = [_as_numpy(x) for x in (means2d.reshape(-1, 2), conics.reshape(-1, 3), colors.reshape(-1, n_ch),
                                       opacities.reshape(-1), backgrounds)]
        grid = (_as_numpy(bins.offsets, np.int64), _as_numpy(bins.flatten_ids, np.int64), width, height,
                bins.tiles_x, bins.tiles_y)
        out_colors = np.zeros((n_cams, height, width, n_ch), np.float32)
        out_alphas = np.zeros((n_cams, height, width), np.float32)
        out_last = np.zeros((n_cams, height, width), np.int32)
        out_median = np.zeros((n_cams, height, width), np.float32)
        with _dynamic_tile_schedule():
            kernels.forward(*flat[:4], _as_numpy(depths.reshape(-1)), flat[4], *grid,
                            out_colors, out_alphas, out_last, out_median)
        ctx.flat, ctx.grid = flat, grid
        ctx.out_alphas, ctx.out_last = out_alphas, out_last
        ctx.shapes = (n_cams, n_gauss, n_ch, means2d.dtype)
        render_alphas = torch.from_numpy(out_alphas[..., None]).to(means2d.dtype)
        ctx.save_for_backward(render_alphas)
        median = torch.from_numpy(out_median[..., None]).to(means2d.dtype)
        ctx.mark_non_differentiable(median)
        return torch.from_numpy(out_colors).to(means2d.dtype), render_alphas, median

    @staticmethod
    def backward(ctx, v_render_colors, v_render_alphas, _v_median):
        n_cams, n_gauss, n_ch, dtype = ctx.shapes
        (render_alphas,) = ctx.saved_tensors
        flatten_ids = ctx.grid[1]
        slots = np.zeros((len(flatten_ids), kernels.SLOT_COLORS + n_ch), np.float32)
        with _dynamic_tile_schedule():
            kernels.backward(*ctx.flat, *ctx.grid, ctx.out_alphas, ctx.out_last, _as_numpy(v_render_colors),
                             _as_numpy(v_render_alphas[..., 0]), slots)
        totals = np.zeros((n_cams * n_gauss, slots.shape[1]), np.float32)
        kernels.scatter_slots(flatten_ids, slots, totals)
        totals = torch.from_numpy(totals).to(dtype).reshape(n_cams, n_gauss, -1)
        v_means2d, v_conics, v_opacities, v_colors = totals.split([2, 3, 1, n_ch], dim=-1)
        v_backgrounds = None
        if ctx.needs_input_grad[4]:
            v_backgrounds = (v_render_colors * (1.0 - render_alphas)).sum(dim=(1, 2))
        return v_means2d, v_conics, v_colors, v_opacities[..., 0], v_backgrounds, None, None, None, None

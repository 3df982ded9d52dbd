"""Median depth and colour of the trained splats at the training cameras (the CPU rasterizer)."""

from __future__ import annotations

import numpy as np
import torch

from twinscan.gaussians import Gaussians
from twinscan.meshing.views import DepthViews


@torch.no_grad()
def render_depth_views(gaussians: Gaussians, Ks: np.ndarray, cam_from_world: np.ndarray, width: int,
                       height: int, advance=lambda n=1, status=None: None) -> DepthViews:
    """One view at a time (memory stays bounded): colour, opacity and gsplat-2DGS median depth."""
    from twinscan.gaussians.raster import rasterize

    def tensor(array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))

    means, quats, scales = tensor(gaussians.means), tensor(gaussians.quats), tensor(gaussians.scales)
    opacities, sh = tensor(gaussians.opacities), tensor(gaussians.sh)
    depth, colour, alpha = [], [], []
    for K, view in zip(Ks, cam_from_world):
        colours, alphas, meta = rasterize(means, quats, scales, opacities, sh, tensor(view)[None], tensor(K)[None],
                                          width, height, sh_degree=gaussians.sh_degree, render_mode="RGB")
        colour.append((colours[0].clamp(0, 1).numpy() * 255 + 0.5).astype(np.uint8))
        alpha.append(alphas[0, ..., 0].numpy())
        depth.append(meta["median_depths"][0, ..., 0].numpy().astype(np.float32))
        advance(1)
    world_from_cam = np.linalg.inv(np.asarray(cam_from_world, np.float64))
    return DepthViews(depth=np.stack(depth), colour=np.stack(colour), alpha=np.stack(alpha),
                      K=np.asarray(Ks, np.float64), world_from_cam=world_from_cam)

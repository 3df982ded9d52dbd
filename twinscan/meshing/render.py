"""Depth and colour of the trained splats at the training cameras, on the run's render backend."""

from __future__ import annotations

import numpy as np

from twinscan.gaussians import Gaussians
from twinscan.gaussians.backend import RenderBackend, render_splats
from twinscan.meshing.views import DepthViews


def render_depth_views(gaussians: Gaussians, Ks: np.ndarray, cam_from_world: np.ndarray, width: int, height: int,
                       backend: RenderBackend, advance=lambda n=1, status=None: None) -> DepthViews:
    """One view at a time (memory stays bounded): colour, opacity and depth (the median depth on the CPU,
    gsplat's expected depth on CUDA: see `render_splats`)."""
    depth, colour, alpha = [], [], []
    for render in render_splats(gaussians, Ks, cam_from_world, width, height, backend):
        colour.append((render.colour * 255 + 0.5).astype(np.uint8))
        alpha.append(render.alpha)
        depth.append(render.depth)
        advance(1)
    world_from_cam = np.linalg.inv(np.asarray(cam_from_world, np.float64))
    return DepthViews(depth=np.stack(depth), colour=np.stack(colour), alpha=np.stack(alpha),
                      K=np.asarray(Ks, np.float64), world_from_cam=world_from_cam)

"""Geometric priors for splat training: flat Gaussians whose normals agree with the depth they render.

Photometric loss alone leaves Gaussians thick and placed wherever a colour is explained, so plain or
glossy surfaces render depth that wanders (the mesh stage then fuses bloat or nothing). As 2DGS and
PGSR do, each Gaussian is pushed flat (its smallest scale down) and its normal (the axis of that scale)
towards the normal of the depth the splats render around it: on any surface the two agree only when
the splats lie in it. Both terms are differentiable on either rasterizer (the normals render as three
colour channels, the depth as gsplat's expected depth, "RGB+ED").

The SfM points a view observed are the one depth a capture measures; `sparse_depth_loss` pins the
splats' rendered depth to them (gsplat simple_trainer's depth loss).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from gsplat.utils import normalized_quat_to_rotmat
from torch import Tensor

MIN_ALPHA = 0.5  # pixels rendered less opaque than this carry no reliable depth


def splat_normals(quats: Tensor, log_scales: Tensor) -> Tensor:
    """[N, 3] world-frame unit normal of each Gaussian: the rotation's axis along its smallest scale."""
    rotation = normalized_quat_to_rotmat(F.normalize(quats, dim=-1))  # [N, 3, 3], columns: the Gaussian's axes
    smallest = log_scales.argmin(dim=-1)
    return torch.gather(rotation, 2, smallest[:, None, None].expand(-1, 3, 1))[..., 0]


def depth_normals(depth: Tensor, K: Tensor) -> Tensor:
    """[H-2, W-2, 3] camera-frame unit normals of a depth map [H, W] (z along the optical axis), from the
    back-projected points' central differences, facing the camera (interior pixels only)."""
    height, width = depth.shape
    v, u = torch.meshgrid(torch.arange(height, dtype=depth.dtype, device=depth.device) + 0.5,
                          torch.arange(width, dtype=depth.dtype, device=depth.device) + 0.5, indexing="ij")
    rays = torch.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], torch.ones_like(u)], -1)
    points = rays * depth[..., None]
    across = points[1:-1, 2:] - points[1:-1, :-2]
    down = points[2:, 1:-1] - points[:-2, 1:-1]
    normals = F.normalize(torch.cross(across, down, dim=-1), dim=-1)
    facing_away = (normals * points[1:-1, 1:-1]).sum(-1, keepdim=True) > 0
    return torch.where(facing_away, -normals, normals)


def normal_consistency(means: Tensor, quats: Tensor, log_scales: Tensor, opacities: Tensor,
                       cam_from_world: Tensor, K: Tensor, width: int, height: int,
                       rasterize: Callable) -> Tensor:
    """2DGS's normal consistency for one camera: sum_i w_i (1 - n_i . N) averaged over the opaque pixels,
    where w_i are the blending weights, n_i the Gaussians' normals (facing the camera) and N the normal
    of the rendered expected depth. 0 where the splats lie flat in the surface they render."""
    rotation, translation = cam_from_world[0, :3, :3], cam_from_world[0, :3, 3]
    normals = splat_normals(quats, log_scales) @ rotation.T
    centres = means @ rotation.T + translation
    normals = torch.where((normals * centres).sum(-1, keepdim=True) > 0, -normals, normals)
    rendered, alphas, _ = rasterize(means, quats, torch.exp(log_scales), opacities, normals,
                                    cam_from_world, K[None], width, height, render_mode="RGB+ED")
    blended, depth, alpha = rendered[0, ..., :3], rendered[0, ..., 3], alphas[0, ..., 0]
    from_depth = depth_normals(depth, K)
    inner = (slice(1, -1), slice(1, -1))
    opaque = (alpha[inner] > MIN_ALPHA).float()
    disagreement = alpha[inner] - (blended[inner] * from_depth).sum(-1)
    return (disagreement * opaque).sum() / opaque.sum().clamp(min=1.0)


def flatness(log_scales: Tensor) -> Tensor:
    """Mean ratio of each Gaussian's smallest scale to its largest: 0 for discs (surfels)."""
    scales = torch.exp(log_scales)
    return (scales.min(dim=-1).values / scales.max(dim=-1).values).mean()


def sparse_depth_loss(depth: Tensor, observed: Tensor, scene_extent: float) -> Tensor:
    """gsplat simple_trainer's depth loss: L1 between the disparities (1 / depth) of the rendered expected
    depth [H, W] at the observed points' pixels and of the points [P, 3] (u, v, depth), times the scene
    extent (so the weight does not depend on the capture's size). Bilinear at the points' sub-pixel
    positions; pixels that render no depth count as disparity 0."""
    height, width = depth.shape
    grid = torch.stack([2 * observed[:, 0] / width - 1, 2 * observed[:, 1] / height - 1], -1)  # centres at +0.5
    sampled = F.grid_sample(depth[None, None], grid[None, :, None], align_corners=False)[0, 0, :, 0]
    disparity = torch.where(sampled > 0, 1 / sampled.clamp(min=1e-6), torch.zeros_like(sampled))
    return F.l1_loss(disparity, 1 / observed[:, 2]) * scene_extent

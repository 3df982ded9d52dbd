"""Image losses and metrics for images as [B, H, W, 3] tensors in [0, 1]."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import Tensor


@functools.cache
def _gaussian_window(size: int = 11, sigma: float = 1.5) -> Tensor:
    x = torch.arange(size, dtype=torch.float32) - (size - 1) / 2
    window = torch.exp(-x * x / (2 * sigma * sigma))
    return window / window.sum()


def ssim(a: Tensor, b: Tensor) -> Tensor:
    """Mean SSIM (Wang et al. 2004: 11x11 Gaussian window, sigma 1.5, valid region), as 3DGS uses.

    The five local moments are blurred in one separable, grouped convolution (the CPU's costliest
    part of the loss after rasterization)."""
    a, b = a.permute(0, 3, 1, 2), b.permute(0, 3, 1, 2)
    channels = a.shape[1]
    moments = torch.cat([a, b, a * a, b * b, a * b], dim=1)
    groups = moments.shape[1]
    window = _gaussian_window().to(a)
    rows = window.view(1, 1, -1, 1).expand(groups, 1, -1, 1)
    cols = window.view(1, 1, 1, -1).expand(groups, 1, 1, -1)
    blurred = F.conv2d(F.conv2d(moments, rows, groups=groups), cols, groups=groups)
    mu_a, mu_b, aa, bb, ab = blurred.split(channels, dim=1)
    var_a, var_b, cov = aa - mu_a * mu_a, bb - mu_b * mu_b, ab - mu_a * mu_b
    c1, c2 = 0.01**2, 0.03**2
    ssim_map = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2))
    return ssim_map.mean()


def psnr(a: Tensor, b: Tensor) -> float:
    mse = F.mse_loss(a.clamp(0, 1), b).item()
    return float("inf") if mse == 0 else -10.0 * torch.log10(torch.tensor(mse)).item()


def photometric_loss(render: Tensor, target: Tensor, ssim_lambda: float) -> Tensor:
    """3DGS's loss: (1 - lambda) L1 + lambda (1 - SSIM)."""
    return (1 - ssim_lambda) * F.l1_loss(render, target) + ssim_lambda * (1 - ssim(render, target))

"""Front-to-back alpha blending of depth-sorted splats, in torch (autograd does the backward).

The one place the torch backends (brute-force reference and tiled) spell out gsplat's per-pixel
rules (RasterizeToPixels3DGSFwd.cu):
- sigma = 0.5 (a dx^2 + c dy^2) + b dx dy, with (dx, dy) = mean - pixel centre;
- alpha = min(0.999, o exp(-sigma)); a splat is skipped when sigma < 0 or alpha < 1/255;
- a pixel stops before the splat that would take its transmittance to <= 1e-4 (that splat and
  all behind it are left out);
- colour = sum_i c_i alpha_i T_i + T_final * background, alpha = 1 - T_final.
Median depth follows gsplat's 2DGS kernel: the depth of the last contributing splat in front of
which the transmittance was still > 0.5 (0 where nothing contributes); it carries no gradient.
"""

from __future__ import annotations

import torch
from torch import Tensor

from twinscan.gaussians.raster.project import ALPHA_THRESHOLD

MAX_ALPHA = 0.999
T_EPSILON = 1e-4
MEDIAN_TRANSMITTANCE = 0.5


def blend(pixels: Tensor, means2d: Tensor, conics: Tensor, opacities: Tensor, colors: Tensor,
          depths: Tensor, background: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """Blend K splats, sorted front to back, over P pixel centres [P, 2].

    Returns colours [P, D], alphas [P, 1] and median depths [P, 1].
    """
    if len(opacities) == 0:
        nothing = pixels.new_zeros(len(pixels), 1)
        rendered = pixels.new_zeros(len(pixels), colors.shape[-1])
        return (rendered if background is None else rendered + background), nothing, nothing
    delta = means2d[None, :, :] - pixels[:, None, :]  # [P, K, 2]
    dx, dy = delta.unbind(-1)
    a, b, c = conics.unbind(-1)
    sigma = 0.5 * (a * dx * dx + c * dy * dy) + b * dx * dy  # [P, K]
    alpha = torch.clamp_max(opacities * torch.exp(-sigma), MAX_ALPHA)
    with torch.no_grad():
        kept = (sigma >= 0) & (alpha >= ALPHA_THRESHOLD)
        t_after = torch.cumprod(1.0 - torch.where(kept, alpha, 0.0), dim=1)
        contributes = kept & (t_after > T_EPSILON)
    alpha = torch.where(contributes, alpha, 0.0)
    one_minus = 1.0 - alpha
    t_before = torch.cumprod(torch.cat([torch.ones_like(one_minus[:, :1]), one_minus[:, :-1]], dim=1), dim=1)
    t_final = t_before[:, -1:] * one_minus[:, -1:]
    rendered = (alpha * t_before) @ colors
    if background is not None:
        rendered = rendered + t_final * background
    return rendered, 1.0 - t_final, _median_depth(contributes, t_before.detach(), depths.detach())


def _median_depth(contributes: Tensor, t_before: Tensor, depths: Tensor) -> Tensor:
    in_front = contributes & (t_before > MEDIAN_TRANSMITTANCE)
    position = torch.arange(in_front.shape[1]).expand_as(in_front)
    last = torch.where(in_front, position, -1).amax(dim=1)
    median = torch.where(last >= 0, depths[last.clamp(min=0)], 0.0)
    return median[:, None].to(t_before.dtype)

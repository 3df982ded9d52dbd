"""Per-image corrections learned alongside the splats, so that they do not bake into the scene.

Phones auto-expose and white-balance per frame: a 3x3 colour matrix + bias per training image absorbs
that. SfM poses are slightly off: a small per-image pose delta (gsplat's CameraOptModule
parameterisation: translation + 6D rotation) absorbs that. Neither is applied to held-out views.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class ExposureCompensation(nn.Module):
    """colour' = A_i colour + b_i per training image i, starting at the identity."""

    def __init__(self, num_images: int) -> None:
        super().__init__()
        self.matrices = nn.Parameter(torch.eye(3).repeat(num_images, 1, 1))
        self.biases = nn.Parameter(torch.zeros(num_images, 3))

    def forward(self, colors: Tensor, image_ids: Tensor) -> Tensor:
        """colors [B, H, W, 3] rendered for training images `image_ids` [B]."""
        matrices = self.matrices[image_ids][:, None]  # [B, 1, 3, 3]: one matmul over all pixels of a row
        return colors @ matrices.transpose(-1, -2) + self.biases[image_ids, None, None]

    def gains(self) -> Tensor:
        """Each image's mean brightness gain (the mean of its matrix's diagonal), for reports."""
        return self.matrices.detach().diagonal(dim1=-2, dim2=-1).mean(-1)


def rotation_6d_to_matrix(d6: Tensor) -> Tensor:
    """Zhou et al.'s continuous 6D rotation representation -> rotation matrices [..., 3, 3]."""
    a1, a2 = d6[..., :3], d6[..., 3:]
    b1 = F.normalize(a1, dim=-1)
    b2 = F.normalize(a2 - (b1 * a2).sum(-1, keepdim=True) * b1, dim=-1)
    return torch.stack((b1, b2, torch.cross(b1, b2, dim=-1)), dim=-2)


class PoseRefinement(nn.Module):
    """A learned rigid correction per training image, applied in the camera frame, starting at zero."""

    _IDENTITY_6D = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)

    def __init__(self, num_images: int) -> None:
        super().__init__()
        self.deltas = nn.Parameter(torch.zeros(num_images, 9))  # translation (3) + 6D rotation delta

    def forward(self, cam_from_world: Tensor, image_ids: Tensor) -> Tensor:
        delta = self.deltas[image_ids]
        correction = torch.eye(4, dtype=cam_from_world.dtype).repeat(len(image_ids), 1, 1)
        correction[:, :3, :3] = rotation_6d_to_matrix(delta[:, 3:] + delta.new_tensor(self._IDENTITY_6D))
        correction[:, :3, 3] = delta[:, :3]
        return correction @ cam_from_world

    def regularisation(self) -> Tensor:
        return self.deltas.square().mean()

"""Trainable splat parameters in the stored layout (docs/CONVENTIONS.md), as gsplat's trainer keeps them.

A `torch.nn.ParameterDict` with means, scales (log), quats (wxyz, unnormalised), opacities (logits),
sh0 [N,1,3] and shN [N,K-1,3]: the names and shapes `gsplat.strategy` operates on.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.spatial import cKDTree

from twinscan.gaussians import Gaussians
from twinscan.gaussians.model import SH_C0



def rgb_to_sh(rgb: np.ndarray) -> np.ndarray:
    return (rgb - 0.5) / SH_C0


def init_params(points: np.ndarray, colors: np.ndarray, sh_degree: int, init_opacity: float,
                init_scale: float, seed: int = 0) -> torch.nn.ParameterDict:
    """Splats at the SfM points: isotropic, sized by the distance to their 3 nearest neighbours."""
    points = np.asarray(points, dtype=np.float64)
    k = min(4, len(points))
    distances, _ = cKDTree(points).query(points, k=k)
    neighbour_distance = np.sqrt((np.atleast_2d(distances)[:, 1:] ** 2).mean(axis=1)) if k > 1 \
        else np.ones(len(points))
    neighbour_distance = np.maximum(neighbour_distance, 1e-7)
    n = len(points)
    generator = torch.Generator().manual_seed(seed)
    sh = np.zeros((n, (sh_degree + 1) ** 2, 3))
    sh[:, 0] = rgb_to_sh(np.asarray(colors, dtype=np.float64))
    logit = float(np.log(init_opacity / (1 - init_opacity)))
    tensors = {
        "means": torch.from_numpy(points),
        "scales": torch.from_numpy(np.log(neighbour_distance * init_scale))[:, None].repeat(1, 3),
        "quats": torch.rand((n, 4), generator=generator),
        "opacities": torch.full((n,), logit),
        "sh0": torch.from_numpy(sh[:, :1]),
        "shN": torch.from_numpy(sh[:, 1:]),
    }
    return torch.nn.ParameterDict({name: torch.nn.Parameter(t.float()) for name, t in tensors.items()})


def gaussians_from_params(params: torch.nn.ParameterDict) -> Gaussians:
    """The trained splats as numpy, quaternions normalised (the PLY stores unit quaternions)."""
    def array(name: str) -> np.ndarray:
        return params[name].detach().cpu().numpy().astype(np.float32)

    quats = array("quats")
    quats = quats / np.maximum(np.linalg.norm(quats, axis=1, keepdims=True), 1e-12)
    return Gaussians(means=array("means"), log_scales=array("scales"), quats=quats,
                     opacity_logits=array("opacities"),
                     sh=np.concatenate([array("sh0"), array("shN")], axis=1))

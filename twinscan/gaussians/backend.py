"""The splat rasterizer, chosen once from `--device`: gsplat's CUDA kernels, or twinscan's CPU rasterizer
(`twinscan.gaussians.raster`, gsplat's `rasterization` signature and semantics). The splats stage
trains with it, the mesh stage renders depth with it, and `render_splats` renders any splat set.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from twinscan.errors import TwinscanError
from twinscan.gaussians.model import Gaussians
from twinscan.progress import say

DEVICES = ("auto", "cpu", "cuda")  # --device; "auto": CUDA where torch sees a GPU and gsplat loads


@dataclass(frozen=True)
class RenderBackend:
    device: str  # "cuda" or "cpu"
    rasterize: Callable  # gsplat.rasterization's signature


def select_render_backend(device: str = "auto", notice: str | None = None) -> RenderBackend:
    """CUDA where it works, else the CPU path; `notice` (e.g. "training splats") is said when "auto"
    fell back to the CPU."""
    from twinscan.gaussians.raster import cuda_available

    if device == "cuda" and not cuda_available():
        raise TwinscanError("--device cuda was asked for, but no usable CUDA GPU was found (or gsplat's "
                            "CUDA extension did not build)", "use --device cpu or --device auto")
    if device == "cuda" or (device == "auto" and cuda_available()):
        from gsplat import rasterization

        return RenderBackend("cuda", functools.partial(rasterization, packed=False))
    if device == "auto" and notice:
        say(("notice:", "yellow"), f" no usable CUDA GPU; {notice} on the CPU rasterizer")
    from twinscan.gaussians.raster import rasterize  # its kernels module makes numba's workers sleep, not spin

    return RenderBackend("cpu", functools.partial(rasterize, backend="numba"))


@dataclass(frozen=True)
class SplatRender:
    """One camera's render; `depth` is 0 where nothing was drawn."""

    colour: np.ndarray  # (H, W, 3) float32 in [0, 1]
    alpha: np.ndarray  # (H, W) float32, accumulated opacity
    depth: np.ndarray  # (H, W) float32 metres along the camera's z: see `render_splats`


def render_splats(gaussians: Gaussians, Ks: np.ndarray, cam_from_world: np.ndarray, width: int, height: int,
                  backend: RenderBackend) -> Iterator[SplatRender]:
    """Render `gaussians` at each camera (Ks (C, 3, 3) pinhole, cam_from_world (C, 4, 4), OpenCV axes), one
    at a time so memory stays bounded. Depth: on the CPU the median depth (gsplat 2DGS's: where the
    accumulated opacity crosses 0.5, the surface a depth fusion wants); on CUDA gsplat's expected depth
    ("RGB+ED": opacity-weighted mean depth over alpha), as gsplat's 3DGS kernels have no median."""
    import torch

    device = torch.device(backend.device)

    def tensor(array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)).to(device)

    means, quats, scales = tensor(gaussians.means), tensor(gaussians.quats), tensor(gaussians.scales)
    opacities, sh = tensor(gaussians.opacities), tensor(gaussians.sh)
    mode = "RGB" if backend.device == "cpu" else "RGB+ED"
    with torch.no_grad():
        for K, view in zip(Ks, cam_from_world):
            colours, alphas, meta = backend.rasterize(means, quats, scales, opacities, sh, tensor(view)[None],
                                                      tensor(K)[None], width, height, sh_degree=gaussians.sh_degree,
                                                      render_mode=mode)
            depth = meta["median_depths"][0, ..., 0] if mode == "RGB" else colours[0, ..., 3]
            yield SplatRender(colour=colours[0, ..., :3].clamp(0, 1).cpu().numpy(),
                              alpha=alphas[0, ..., 0].cpu().numpy(), depth=depth.cpu().numpy().astype(np.float32))

"""twinscan's CPU rasterizer against `gsplat.rasterization` itself on CUDA: the same splats and cameras give
the same colours, alpha, depth and gradients. Needs a CUDA GPU with gsplat's CUDA extension; skipped elsewhere.

The bounds are gsplat's own float32 differences between its CUDA kernels and its torch reference in
gsplat's test suite (colours and alpha to 1e-3 or better); they have not yet been measured on a GPU in
this project (no GPU was lent when this was written): benchmarks/gpu_check.sh runs this file first.
"""

from __future__ import annotations

import pytest
import torch

from twinscan.gaussians.raster import cuda_available, rasterize

pytestmark = pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU and gsplat's CUDA extension")

WIDTH, HEIGHT = 160, 96
PARAMS = ("means", "quats", "scales", "opacities", "colors")


def scene(seed: int, sh_degree: int | None) -> dict:
    """A few thousand overlapping splats 1.5-6 m in front of three cameras."""
    gen = torch.Generator().manual_seed(seed)
    n = 3000
    means = (torch.rand(n, 3, generator=gen) - 0.5) * torch.tensor([4.0, 3.0, 4.5]) + torch.tensor([0.0, 0.0, 3.75])
    viewmats = torch.eye(4).repeat(3, 1, 1)
    for i, angle in enumerate((-0.15, 0.0, 0.2)):
        c, s = torch.cos(torch.tensor(angle)), torch.sin(torch.tensor(angle))
        viewmats[i, :3, :3] = torch.tensor([[c, 0, s], [0, 1, 0], [-s, 0, c]])
        viewmats[i, 0, 3] = 0.3 * i
    Ks = torch.tensor([[120.0, 0, WIDTH / 2], [0, 120.0, HEIGHT / 2], [0, 0, 1]]).repeat(3, 1, 1)
    colors = (torch.randn(n, (sh_degree + 1) ** 2, 3, generator=gen) * 0.3 if sh_degree is not None
              else torch.rand(n, 3, generator=gen))
    return {"means": means, "quats": torch.randn(n, 4, generator=gen),
            "scales": 0.01 + 0.12 * torch.rand(n, 3, generator=gen),
            "opacities": 0.05 + 0.9 * torch.rand(n, generator=gen), "colors": colors,
            "viewmats": viewmats, "Ks": Ks, "backgrounds": torch.rand(3, 3, generator=gen)}


def render(inputs: dict, device: str, sh_degree: int | None) -> tuple[list[torch.Tensor], dict[str, torch.Tensor]]:
    """Outputs and gradients of a fixed random weighting of them, on `device` ("cuda": gsplat's kernels)."""
    leaves = {name: inputs[name].to(device).clone().requires_grad_() for name in PARAMS}
    args = (leaves["means"], leaves["quats"], leaves["scales"], leaves["opacities"], leaves["colors"],
            inputs["viewmats"].to(device), inputs["Ks"].to(device), WIDTH, HEIGHT)
    options = dict(sh_degree=sh_degree, backgrounds=inputs["backgrounds"].to(device), render_mode="RGB+ED")
    if device == "cuda":
        from gsplat import rasterization

        colours, alphas, _ = rasterization(*args, packed=False, **options)
    else:
        colours, alphas, _ = rasterize(*args, backend="numba", **options)
    gen = torch.Generator().manual_seed(11)
    weights = torch.rand(colours.shape, generator=gen).to(device)
    ((colours * weights).sum() + alphas.sum()).backward()
    return [colours.detach().cpu(), alphas.detach().cpu()], {n: leaves[n].grad.cpu() for n in PARAMS}


@pytest.mark.parametrize("sh_degree", [None, 3])
def test_cpu_rasterizer_matches_gsplat_cuda(sh_degree):
    inputs = scene(0, sh_degree)
    (cpu_colours, cpu_alphas), cpu_grads = render(inputs, "cpu", sh_degree)
    (gpu_colours, gpu_alphas), gpu_grads = render(inputs, "cuda", sh_degree)
    assert gpu_alphas.max() > 0.99 and gpu_alphas.min() < 0.5  # opaque and sparse pixels both
    assert (cpu_colours[..., :3] - gpu_colours[..., :3]).abs().max() < 2e-3
    assert (cpu_alphas - gpu_alphas).abs().max() < 2e-3
    solid = gpu_alphas[..., 0] > 0.5
    depth_error = (cpu_colours[..., 3] - gpu_colours[..., 3]).abs()[solid] / gpu_colours[..., 3][solid]
    assert float(depth_error.max()) < 1e-3  # expected depth, relative
    for name in PARAMS:
        truth = gpu_grads[name]
        assert truth.abs().max() > 0, name
        assert float((cpu_grads[name] - truth).norm() / truth.norm()) < 1e-2, name


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_render_splats_puts_a_splatted_wall_at_its_depth(device):
    """`render_splats`, as the mesh stage renders on each backend (the median depth on the CPU, gsplat's
    expected depth on CUDA): a wall of flat opaque splats 3 m ahead comes out at 3 m, in its colour."""
    import numpy as np

    from twinscan.gaussians import Gaussians
    from twinscan.gaussians.backend import render_splats, select_render_backend

    grid = np.stack(np.meshgrid(np.linspace(-2, 2, 80), np.linspace(-1.5, 1.5, 60)), -1).reshape(-1, 2)
    n = len(grid)
    wall = Gaussians(means=np.column_stack([grid, np.full(n, 3.0)]),
                     log_scales=np.log(np.tile([0.04, 0.04, 0.002], (n, 1))), quats=np.tile([1.0, 0, 0, 0], (n, 1)),
                     opacity_logits=np.full(n, 4.0), sh=np.full((n, 1, 3), 0.5))
    K = np.array([[120.0, 0, WIDTH / 2], [0, 120.0, HEIGHT / 2], [0, 0, 1]])
    (render,) = render_splats(wall, K[None], np.eye(4)[None], WIDTH, HEIGHT, select_render_backend(device))
    solid = render.alpha > 0.99
    assert solid.mean() > 0.9  # the wall fills the view
    assert np.abs(render.depth[solid] - 3.0).max() < 0.01
    truth = (0.5 * 0.28209479 + 0.5) * render.alpha[solid, None]  # SH DC 0.5 over a black background
    assert np.abs(render.colour[solid] - truth).max() < 1e-3

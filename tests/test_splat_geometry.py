"""The splats' geometric priors (recon/splats/geometry.py) against exact geometry: Gaussian normals against
scipy's rotations, depth normals against an analytic plane, and normal consistency through the real CPU
rasterizer for splats lying in a plane and tilted out of it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.spatial.transform import Rotation

from twinscan.errors import TwinscanError
from twinscan.gaussians.backend import select_render_backend
from twinscan.gaussians.raster import cuda_available
from twinscan.recon.splats import SplatsConfig
from twinscan.recon.splats.geometry import depth_normals, flatness, normal_consistency, splat_normals

K = torch.tensor([[100.0, 0.0, 64.0], [0.0, 100.0, 48.0], [0.0, 0.0, 1.0]])
WIDTH, HEIGHT = 128, 96


def test_splat_normals_are_the_axis_of_the_smallest_scale() -> None:
    rotations = Rotation.random(200, random_state=0)
    log_scales = np.log(np.random.default_rng(0).uniform(0.01, 1.0, (200, 3)))
    normals = splat_normals(torch.tensor(rotations.as_quat(scalar_first=True)), torch.tensor(log_scales)).numpy()
    expected = rotations.as_matrix()[np.arange(200), :, log_scales.argmin(axis=1)]
    np.testing.assert_allclose(np.abs(np.sum(normals * expected, axis=1)), 1.0, atol=1e-9)


def test_depth_normals_of_a_slanted_plane() -> None:
    normal = np.array([0.3, -0.2, -1.0]) / np.linalg.norm([0.3, -0.2, -1.0])  # facing the camera
    v, u = np.mgrid[0:HEIGHT, 0:WIDTH] + 0.5
    rays = np.stack([(u - 64) / 100, (v - 48) / 100, np.ones_like(u)], -1)
    depth = -2.0 / (rays @ normal)  # the plane normal . x = -2
    found = depth_normals(torch.tensor(depth), K.double()).numpy()
    assert found.shape == (HEIGHT - 2, WIDTH - 2, 3)
    assert np.degrees(np.arccos(np.clip(found @ normal, -1, 1))).max() < 1e-3


def _plane_of_splats(tilt_deg: float) -> tuple[torch.Tensor, ...]:
    """Thin discs on the plane z = 2 in front of the camera, turned `tilt_deg` about the x axis."""
    xs, ys = np.meshgrid(np.linspace(-1.2, 1.2, 60), np.linspace(-1.0, 1.0, 50))
    means = torch.tensor(np.stack([xs.ravel(), ys.ravel(), np.full(xs.size, 2.0)], 1), dtype=torch.float32)
    quat = Rotation.from_euler("x", tilt_deg, degrees=True).as_quat(scalar_first=True)
    quats = torch.tensor(quat, dtype=torch.float32).repeat(len(means), 1).requires_grad_(True)
    log_scales = torch.log(torch.tensor([[0.04, 0.04, 0.002]])).repeat(len(means), 1)
    return means, quats, log_scales, torch.full((len(means),), 0.9)


@pytest.mark.parametrize(("tilt_deg", "low", "high"), [(0.0, 0.0, 1e-3), (30.0, 0.09, 0.18), (60.0, 0.4, 0.6)])
def test_normal_consistency_is_one_minus_the_cosine_of_the_tilt(tilt_deg: float, low: float, high: float) -> None:
    """Discs in their plane agree with the depth they render (0); turned by t they disagree by about
    1 - cos t (0.13 at 30 degrees, 0.5 at 60), and the gradient turns them back."""
    means, quats, log_scales, opacities = _plane_of_splats(tilt_deg)
    loss = normal_consistency(means, quats, log_scales, opacities, torch.eye(4)[None], K, WIDTH, HEIGHT,
                              select_render_backend("cpu").rasterize)
    assert low <= loss.item() <= high
    if tilt_deg:
        loss.backward()
        step = quats.detach() - 0.1 * quats.grad / quats.grad.norm(dim=1, keepdim=True).clamp(min=1e-12)
        after = normal_consistency(means, step, log_scales, opacities, torch.eye(4)[None], K, WIDTH, HEIGHT,
                                   select_render_backend("cpu").rasterize)
        assert after.item() < loss.item()


def test_flatness_is_the_smallest_over_the_largest_scale() -> None:
    assert float(flatness(torch.log(torch.tensor([[0.04, 0.02, 0.002], [1.0, 1.0, 1.0]])))) == pytest.approx(0.525)


def test_priors_start_where_the_config_says() -> None:
    cfg = SplatsConfig(steps=100, normal_weight=0.05, flat_weight=0.1, geometry_from=0.3, geometry_every=3)
    assert cfg.geometry_at(29) == (False, False)
    assert cfg.geometry_at(30) == (True, True) and cfg.geometry_at(31) == (True, False)
    assert SplatsConfig(steps=100).geometry_at(60) == (False, False), "off by default"
    with pytest.raises(TwinscanError):
        SplatsConfig(geometry_every=0)


@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU and gsplat's CUDA extension")
def test_normal_consistency_on_gsplat_matches_the_cpu_rasterizer() -> None:
    """The same prior through `gsplat.rasterization` (the CUDA trainer's rasterizer): loss and gradient."""
    results = []
    for device in ("cpu", "cuda"):
        means, quats, log_scales, opacities = (t.detach().to(device) for t in _plane_of_splats(30.0))
        quats.requires_grad_(True)
        loss = normal_consistency(means, quats, log_scales, opacities, torch.eye(4, device=device)[None],
                                  K.to(device), WIDTH, HEIGHT, select_render_backend(device).rasterize)
        loss.backward()
        results.append((loss.item(), quats.grad.cpu()))
    assert results[0][0] == pytest.approx(results[1][0], abs=1e-3)
    torch.testing.assert_close(results[0][1], results[1][1], atol=1e-4, rtol=1e-2)

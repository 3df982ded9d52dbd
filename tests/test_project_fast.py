"""The numba projection and SH kernels against gsplat's torch reference, evaluated in float64 (the
exact function the float32 kernels approximate): forward values and gradients, edge cases included."""

from __future__ import annotations

import math

import pytest
import torch

from twinscan.gaussians.raster.project import colors_from_sh, project

WIDTH, HEIGHT = 64, 48
NEAR, FAR = 0.05, 40.0
GAUSSIAN_PARAMS = ("means", "quats", "scales", "opacities")
SCREEN_OUTPUTS = ("means2d", "conics", "depths", "opacities")
OFF_VIEW = slice(25, 55)  # random_scene's splats beside and above the view (the Jacobian's clamp)


def rotation_y(angle: float) -> torch.Tensor:
    c, s = math.cos(angle), math.sin(angle)
    return torch.tensor([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def random_scene(seed: int, n: int = 400, n_cams: int = 3) -> dict[str, torch.Tensor]:
    """Gaussians in front of three cameras, with every edge case of the projection in some of them:
    behind the camera, between it and the near plane, beyond the far plane, far off screen (the
    Jacobian clamp), scales from 0.1 mm to 5 m, quaternions of norm 0.05 to 20, faint opacities."""
    gen = torch.Generator().manual_seed(seed)
    depth = 1.0 + 8.0 * torch.rand(n, generator=gen)
    means = torch.cat([(torch.rand(n, 2, generator=gen) - 0.5) * depth[:, None] * 1.6, depth[:, None]], dim=-1)
    means[0:10, 2] = -means[0:10, 2]  # behind the camera
    means[10:20, 2] = 0.02  # in front of the camera, before the near plane
    means[20:25, 2] = FAR + 10.0
    far_right = means[OFF_VIEW.start:45]
    far_right[:, 0] = far_right[:, 2] * (3.0 + 20.0 * torch.rand(len(far_right), generator=gen))  # off the view
    means[45:OFF_VIEW.stop, 1] = -means[45:OFF_VIEW.stop, 2] * 2.0  # above the view (y/z clamped)
    log_scale = math.log(1e-4) + (math.log(5.0) - math.log(1e-4)) * torch.rand(n, 1, generator=gen)
    scales = torch.exp(log_scale + torch.rand(n, 3, generator=gen))  # anisotropy up to e
    quats = torch.randn(n, 4, generator=gen) * torch.exp(torch.empty(n, 1).uniform_(-3.0, 3.0, generator=gen))
    opacities = torch.rand(n, generator=gen)
    viewmats = torch.eye(4).repeat(n_cams, 1, 1)
    Ks = torch.zeros(n_cams, 3, 3)
    for cam in range(n_cams):
        viewmats[cam, :3, :3] = rotation_y(0.15 * cam)
        viewmats[cam, :3, 3] = torch.tensor([0.3 * cam, -0.1 * cam, 0.2 * cam])
        focal = 40.0 + 10.0 * cam
        Ks[cam] = torch.tensor([[focal, 0.0, WIDTH / 2 + 3 * cam], [0.0, focal * 1.1, HEIGHT / 2 - 2 * cam],
                                [0.0, 0.0, 1.0]])
    return {"means": means, "quats": quats, "scales": scales, "opacities": opacities, "viewmats": viewmats,
            "Ks": Ks}


def project_with_grads(scene: dict, backend: str, dtype: torch.dtype, antialiased: bool,
                       outputs: tuple[str, ...] = SCREEN_OUTPUTS):
    """Project, back-propagate a random weighting of `outputs` of the splats that are drawn
    (radii > 0, as the rasterizer's gradients are), return the projection and the input gradients."""
    leaves = {name: scene[name].to(dtype).clone().requires_grad_() for name in (*GAUSSIAN_PARAMS, "viewmats")}
    screen = project(*(leaves[name] for name in (*GAUSSIAN_PARAMS, "viewmats")), scene["Ks"].to(dtype), WIDTH,
                     HEIGHT, near_plane=NEAR, far_plane=FAR, antialiased=antialiased, backend=backend)
    drawn = screen.visible
    gen = torch.Generator().manual_seed(1)
    loss = 0.0
    for name in outputs:
        output = getattr(screen, name)
        weights = torch.randn(output.shape, generator=gen, dtype=torch.float64).to(dtype)
        mask = drawn if output.dim() == 2 else drawn[..., None]
        loss = loss + (output * weights * mask).sum()
    loss.backward()
    return screen, {name: leaf.grad for name, leaf in leaves.items()}


def relative_error(value: torch.Tensor, truth: torch.Tensor) -> float:
    return float((value.double() - truth).norm() / truth.norm().clamp(min=1e-30))


@pytest.mark.parametrize("seed, antialiased", [(0, False), (1, True), (2, True)])
def test_projection_matches_torch_reference(seed, antialiased):
    scene = random_scene(seed)
    truth, _ = project_with_grads(scene, "torch", torch.float64, antialiased)
    reference32, _ = project_with_grads(scene, "torch", torch.float32, antialiased)
    fast, _ = project_with_grads(scene, "numba", torch.float32, antialiased)

    drawn = truth.visible
    assert 0.3 * drawn.numel() < drawn.sum() < 0.9 * drawn.numel()  # the scene has culled splats
    assert torch.equal(fast.radii, reference32.radii)
    assert not fast.visible[0, :25].any()  # behind camera 0 (the identity), before its near plane, beyond its far one
    for name in SCREEN_OUTPUTS:
        value, true_value = getattr(fast, name).double(), getattr(truth, name)
        assert torch.isfinite(value[drawn]).all(), name
        error = (value - true_value).abs() / true_value.abs().clamp(min=1.0)  # relative where values are large
        assert error[drawn].max() < 1e-4, name

    # each output on its own, so that none hides another's gradient (a conic's is small beside a mean's)
    for output in SCREEN_OUTPUTS:
        _, true_grads = project_with_grads(scene, "torch", torch.float64, antialiased, (output,))
        _, grads = project_with_grads(scene, "numba", torch.float32, antialiased, (output,))
        _, reference32_grads = project_with_grads(scene, "torch", torch.float32, antialiased, (output,))
        for name, true_grad in true_grads.items():
            if true_grad is None or not true_grad.any():  # e.g. depths do not depend on the scales
                assert grads[name] is None or not grads[name].any(), (output, name)
                continue
            assert relative_error(grads[name], true_grad) < 1e-3, (output, name)
            if name != "viewmats":
                # the splats off the view on their own (they weigh little in the whole norm): as exact
                # as torch's own float32 evaluation, whose huge splats' compensation loses digits
                # (2e-3: one x86 machine gave 1.19e-3 where another gave under 1e-3, float32 either way)
                float32_error = relative_error(reference32_grads[name][OFF_VIEW], true_grad[OFF_VIEW])
                error = relative_error(grads[name][OFF_VIEW], true_grad[OFF_VIEW])
                assert error < max(2e-3, 3 * float32_error), (output, name)


def test_culled_splats_get_zero_gradients_even_at_depth_zero():
    scene = random_scene(3, n=40, n_cams=1)
    scene["means"][:20, 2] = 0.0  # x / 0: the torch reference's gradient would be 0 * inf = NaN
    _, grads = project_with_grads(scene, "numba", torch.float32, antialiased=True)
    for name, grad in grads.items():
        assert torch.isfinite(grad).all(), name
        if name != "viewmats":
            assert not grad[:20].any(), name


def test_projection_of_no_splats():
    scene = random_scene(4, n=0)
    screen = project(*(scene[name] for name in (*GAUSSIAN_PARAMS, "viewmats", "Ks")), WIDTH, HEIGHT)
    assert screen.means2d.shape == (3, 0, 2) and screen.radii.shape == (3, 0, 2)


def test_non_float32_inputs_take_the_torch_reference():
    scene = {name: value.double() for name, value in random_scene(5, n=50).items()}
    args = [scene[name] for name in (*GAUSSIAN_PARAMS, "viewmats", "Ks")]
    fast, reference = project(*args, WIDTH, HEIGHT, backend="numba"), project(*args, WIDTH, HEIGHT, backend="torch")
    assert torch.equal(fast.conics, reference.conics) and fast.conics.dtype == torch.float64


def sh_with_grads(scene: dict, coeffs: torch.Tensor, degree: int, backend: str, dtype: torch.dtype):
    leaves = {"means": scene["means"].to(dtype).clone().requires_grad_(),
              "coeffs": coeffs.to(dtype).clone().requires_grad_(),
              "viewmats": scene["viewmats"].to(dtype).clone().requires_grad_()}
    colors = colors_from_sh(leaves["means"], leaves["coeffs"], leaves["viewmats"], degree, backend=backend)
    weights = torch.randn(colors.shape, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    (colors * weights.to(dtype)).sum().backward()
    return colors, {name: leaf.grad for name, leaf in leaves.items()}


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_sh_colors_match_torch_reference(degree):
    scene = random_scene(6 + degree, n=300)
    coeffs = torch.randn(300, 16, 3, generator=torch.Generator().manual_seed(degree))  # many clamped at 0
    truth, true_grads = sh_with_grads(scene, coeffs, degree, "torch", torch.float64)
    colors, grads = sh_with_grads(scene, coeffs, degree, "numba", torch.float32)
    assert (truth == 0).any() and (truth > 0.5).any()
    assert (colors.double() - truth).abs().max() < 1e-4
    assert not grads["coeffs"][:, (degree + 1) ** 2:].any()
    for name, true_grad in true_grads.items():
        if degree == 0 and name != "coeffs":
            assert not grads[name].any(), name  # the DC term does not depend on the direction
            continue
        assert relative_error(grads[name], true_grad) < 1e-3, name

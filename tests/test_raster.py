"""The CPU rasterizer against a brute-force reference, analytic depths and gsplat's blending rules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from twinscan.errors import TwinscanError
from twinscan.gaussians.raster import cuda_available, rasterize
from twinscan.gaussians.raster.composite import blend
from twinscan.gaussians.raster.project import project
from twinscan.gaussians.raster.tiled import rasterize_tiled
from twinscan.gaussians.raster.tiles import bin_gaussians, bin_gaussians_fast

WIDTH, HEIGHT = 43, 29  # partial tiles on both edges
PARAMS = ("means", "quats", "scales", "opacities", "colors")


def random_scene(seed: int, n: int = 120, n_cams: int = 2, channels: int = 3) -> dict:
    """Overlapping splats 1.5-5 m in front of two cameras, a few behind them, some fully opaque."""
    gen = torch.Generator().manual_seed(seed)
    means = (torch.rand(n, 3, generator=gen) - 0.5) * torch.tensor([3.0, 2.0, 3.5]) + torch.tensor([0.0, 0.0, 3.25])
    means[:5, 2] = -1.0  # behind the camera: culled
    opacities = 0.05 + 0.95 * torch.rand(n, generator=gen)
    opacities[5:10] = 1.0  # alpha clamped to 0.999
    viewmats = torch.eye(4).repeat(2, 1, 1)
    viewmats[1, :3, :3] = torch.tensor([[0.995, 0.0, 0.0998], [0.0, 1.0, 0.0], [-0.0998, 0.0, 0.995]])
    viewmats[1, 0, 3] = 0.2
    focal = 30.0
    Ks = torch.tensor([[focal, 0.0, WIDTH / 2], [0.0, focal, HEIGHT / 2], [0.0, 0.0, 1.0]]).repeat(n_cams, 1, 1)
    viewmats = viewmats[:n_cams]
    return {"means": means, "quats": torch.randn(n, 4, generator=gen),
            "scales": 0.03 + 0.25 * torch.rand(n, 3, generator=gen), "opacities": opacities,
            "colors": torch.rand(n, channels, generator=gen), "viewmats": viewmats, "Ks": Ks,
            "backgrounds": torch.rand(n_cams, channels, generator=gen)}


def render_with_grads(scene: dict, backend: str, render_mode: str = "RGB+ED", seed: int = 7, **options):
    """Render, back-propagate a random weighting of every output, return outputs and gradients."""
    leaves = {name: scene[name].clone().requires_grad_() for name in PARAMS}
    colors, alphas, meta = rasterize(leaves["means"], leaves["quats"], leaves["scales"], leaves["opacities"],
                                     leaves["colors"], scene["viewmats"], scene["Ks"], WIDTH, HEIGHT,
                                     backgrounds=scene["backgrounds"], render_mode=render_mode, backend=backend,
                                     **options)
    gen = torch.Generator().manual_seed(seed)
    loss = (colors * torch.rand(colors.shape, generator=gen)).sum()
    loss = loss + (alphas * torch.rand(alphas.shape, generator=gen)).sum()
    loss.backward()
    return (colors.detach(), alphas.detach(), meta["median_depths"]), {n: leaves[n].grad for n in PARAMS}


def relative_error(value: torch.Tensor, truth: torch.Tensor) -> float:
    return float((value - truth).norm() / truth.norm().clamp(min=1e-12))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_numba_matches_brute_force_reference(seed):
    scene = random_scene(seed)
    (ref_colors, ref_alphas, ref_median), ref_grads = render_with_grads(scene, "reference")
    (colors, alphas, median), grads = render_with_grads(scene, "numba")
    assert ref_alphas.max() > 0.99 and ref_alphas.min() < 0.5  # the scene has opaque and sparse pixels
    assert (colors - ref_colors).abs().max() < 1e-4
    assert (alphas - ref_alphas).abs().max() < 1e-4
    # The median is a knife edge: where transmittance crosses 0.5 within a rounding error (seen: T =
    # 0.49999991), one ulp of projection picks the next splat. Allow such pixels, at most 1 in 1000.
    assert ((median - ref_median).abs() < 1e-4).float().mean() > 0.999
    for name in PARAMS:
        assert ref_grads[name].abs().max() > 0, name
        assert relative_error(grads[name], ref_grads[name]) < 1e-3, name


def test_tiled_torch_matches_brute_force_reference():
    scene = random_scene(3)
    ref_outputs, ref_grads = render_with_grads(scene, "reference")
    outputs, grads = render_with_grads(scene, "torch")
    for output, ref_output in zip(outputs, ref_outputs):
        assert (output - ref_output).abs().max() < 1e-5
    for name in PARAMS:
        assert relative_error(grads[name], ref_grads[name]) < 1e-5, name


def test_numba_matches_reference_with_many_channels_antialiased():
    scene = random_scene(4, channels=7)
    options = {"render_mode": "RGB", "rasterize_mode": "antialiased"}
    (ref_colors, _, _), ref_grads = render_with_grads(scene, "reference", **options)
    (colors, _, _), grads = render_with_grads(scene, "numba", **options)
    assert colors.shape[-1] == 7
    assert (colors - ref_colors).abs().max() < 1e-4
    for name in PARAMS:
        assert relative_error(grads[name], ref_grads[name]) < 1e-3, name


def test_numba_binning_equals_torch_binning():
    scene = random_scene(5, n=400)
    screen = project(scene["means"], scene["quats"], scene["scales"], scene["opacities"], scene["viewmats"],
                     scene["Ks"], WIDTH, HEIGHT)
    slow = bin_gaussians(screen.means2d, screen.radii, screen.depths, WIDTH, HEIGHT)
    fast = bin_gaussians_fast(screen.means2d, screen.radii, screen.depths, WIDTH, HEIGHT)
    assert len(slow.flatten_ids) > 400
    assert torch.equal(slow.offsets, fast.offsets)
    assert torch.equal(slow.flatten_ids, fast.flatten_ids)


def test_tiled_blending_gradcheck_float64():
    scene = random_scene(6, n=12, n_cams=1)
    screen = project(*(scene[name].double() for name in ("means", "quats", "scales", "opacities", "viewmats", "Ks")),
                     20, 18)
    bins = bin_gaussians(screen.means2d, screen.radii, screen.depths, 20, 18)
    assert len(bins.flatten_ids) > 12

    def render(means2d, conics, colors, opacities):
        screen.means2d, screen.conics, screen.opacities = means2d, conics, opacities
        colors_out, alphas, _ = rasterize_tiled(screen, colors, 20, 18, bins)
        return colors_out, alphas

    inputs = [screen.means2d.detach().clone(), screen.conics.detach().clone(),
              scene["colors"].double()[None], screen.opacities.detach().clamp(max=0.9).clone()]
    assert torch.autograd.gradcheck(render, [x.requires_grad_() for x in inputs], eps=1e-6, atol=1e-5, fast_mode=True)


def plane(depth: float, opacity: float, color: list[float]) -> dict:
    """A Gaussian flattened into a wide plane facing the camera: alpha = opacity near the centre."""
    return {"means": torch.tensor([[0.0, 0.0, depth]]), "quats": torch.tensor([[1.0, 0.0, 0.0, 0.0]]),
            "scales": torch.tensor([[100.0, 100.0, 1e-3]]), "opacities": torch.tensor([opacity]),
            "colors": torch.tensor([color])}


def render_planes(planes: list[dict], backend: str, render_mode: str, backgrounds=None):
    scene = {name: torch.cat([p[name] for p in planes]) for name in planes[0]}
    Ks = torch.tensor([[[20.0, 0.0, 16.0], [0.0, 20.0, 12.0], [0.0, 0.0, 1.0]]])
    colors, alphas, meta = rasterize(scene["means"], scene["quats"], scene["scales"], scene["opacities"],
                                     scene["colors"], torch.eye(4)[None], Ks, 32, 24, render_mode=render_mode,
                                     backgrounds=backgrounds, backend=backend)
    return colors[0, 8:16, 12:20], alphas[0, 8:16, 12:20], meta["median_depths"][0, 8:16, 12:20]


@pytest.mark.parametrize("backend", ["numba", "torch", "reference"])
def test_expected_and_median_depth_of_two_planes(backend):
    near, far = plane(2.0, 0.3, [1.0, 0.0, 0.0]), plane(5.0, 0.9, [0.0, 0.0, 1.0])
    colors, alphas, median = render_planes([far, near], backend, "RGB+ED")
    weight_near, weight_far = 0.3, 0.7 * 0.9
    assert alphas == pytest.approx(torch.full_like(alphas, weight_near + weight_far), abs=1e-4)
    expected = (weight_near * 2.0 + weight_far * 5.0) / (weight_near + weight_far)
    assert colors[..., 3] == pytest.approx(torch.full_like(alphas[..., 0], expected), abs=1e-3)
    assert colors[..., :3] == pytest.approx(torch.tensor([weight_near, 0.0, weight_far]).expand_as(colors[..., :3]),
                                            abs=1e-4)
    assert median == pytest.approx(torch.full_like(median, 5.0), abs=1e-5)  # T = 0.7 > 0.5 in front of it
    accumulated, _, _ = render_planes([far, near], backend, "D")
    assert accumulated[..., 0] == pytest.approx(alphas[..., 0] * expected, abs=1e-3)


@pytest.mark.parametrize("backend", ["numba", "torch", "reference"])
def test_median_depth_is_where_transmittance_crosses_half(backend):
    near, far = plane(2.0, 0.6, [1.0, 0.0, 0.0]), plane(5.0, 0.9, [0.0, 0.0, 1.0])
    _, _, median = render_planes([near, far], backend, "RGB")
    assert median == pytest.approx(torch.full_like(median, 2.0), abs=1e-5)  # T = 0.4 behind the near plane


@pytest.mark.parametrize("backend", ["numba", "torch", "reference"])
def test_pixel_stops_before_transmittance_reaches_1e_minus_4(backend):
    background = torch.tensor([[0.2, 0.4, 0.6]])
    planes = [plane(2.0, 0.995, [1.0, 0.0, 0.0]), plane(3.0, 0.995, [0.0, 1.0, 0.0]),
              plane(4.0, 0.995, [0.0, 0.0, 1.0])]
    colors, alphas, _ = render_planes(planes, backend, "RGB", backgrounds=background)
    # the second plane would leave T = 0.005^2 < 1e-4: gsplat leaves it (and all behind) out
    assert alphas == pytest.approx(torch.full_like(alphas, 0.995), abs=5e-5)  # exp(-sigma) ~ 1 - 1e-5
    expected = torch.tensor([0.995, 0.0, 0.0]) + 0.005 * background[0]
    assert colors == pytest.approx(expected.expand_as(colors), abs=5e-5)


def test_nothing_visible_renders_the_background():
    scene = random_scene(11, n=20)
    scene["means"][:, 2] = -2.0  # all behind the cameras
    (colors, alphas, median), grads = render_with_grads(scene, "numba")
    assert torch.equal(alphas, torch.zeros_like(alphas)) and torch.equal(median, torch.zeros_like(median))
    assert torch.allclose(colors[..., :3], scene["backgrounds"][:, None, None, :].expand_as(colors[..., :3]))
    assert all(not grads[name].any() for name in PARAMS)


def test_blend_skips_faint_splats_and_clamps_alpha():
    pixels = torch.tensor([[0.5, 0.5]])
    conics = torch.tensor([[1.0, 0.0, 1.0]] * 2)
    means2d = torch.tensor([[0.5, 0.5], [0.5, 0.5]])
    colors = torch.tensor([[1.0], [1.0]])
    faint = torch.tensor([0.9 / 255.0, 1.0])  # first below 1/255: skipped, not blended
    rendered, alphas, _ = blend(pixels, means2d, conics, faint, colors, torch.tensor([1.0, 2.0]), None)
    assert alphas.item() == pytest.approx(0.999)
    assert rendered.item() == pytest.approx(0.999)


def test_sh_degree_zero_equals_its_rgb():
    scene = random_scene(8, n_cams=1)
    sh0 = 0.28209479177387814
    dc = (scene["colors"] - 0.5) / sh0
    args = (scene["means"], scene["quats"], scene["scales"], scene["opacities"])
    via_sh, _, _ = rasterize(*args, dc[:, None, :], scene["viewmats"], scene["Ks"], WIDTH, HEIGHT, sh_degree=0)
    via_rgb, _, _ = rasterize(*args, scene["colors"], scene["viewmats"], scene["Ks"], WIDTH, HEIGHT)
    assert (via_sh - via_rgb).abs().max() < 1e-5


def test_numba_is_deterministic():
    scene = random_scene(9)
    first = render_with_grads(scene, "numba")
    second = render_with_grads(scene, "numba")
    assert all(torch.equal(a, b) for a, b in zip(first[0], second[0]))
    assert all(torch.equal(first[1][name], second[1][name]) for name in PARAMS)


_DIGEST = """
import hashlib, sys
sys.path.insert(0, sys.argv[1])
from twinscan.runtime import init_runtime
init_runtime()
from test_raster import PARAMS, random_scene, render_with_grads
outputs, grads = render_with_grads(random_scene(11, n=3000), "numba")
digest = hashlib.sha1()
for tensor in [*outputs, *(grads[name] for name in PARAMS)]:
    digest.update(tensor.numpy().tobytes())
print(digest.hexdigest())
"""


def test_numba_gives_the_same_bits_compiled_or_loaded_from_its_cache(tmp_path):
    """The first process compiles the kernels into an empty numba cache, the second loads them. With
    fastmath's `reassoc` the two summed each splat's gradient in different orders (other splats from
    the same frames after an install); the kernels now add in one order however they were built."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    digests = [subprocess.run([sys.executable, "-c", _DIGEST, str(Path(__file__).parent)], env=env, check=True,
                              capture_output=True, text=True, timeout=600).stdout.split()[-1] for _ in range(2)]
    assert list((tmp_path / "numba").rglob("*.nbi"))  # the second process had a cache to load
    assert digests[0] == digests[1]


def test_bad_inputs_are_reported():
    scene = random_scene(10)
    args = (scene["means"], scene["quats"], scene["scales"], scene["opacities"], scene["colors"],
            scene["viewmats"], scene["Ks"], WIDTH, HEIGHT)
    with pytest.raises(TwinscanError, match="render_mode"):
        rasterize(*args, render_mode="normals")
    with pytest.raises(TwinscanError, match="tile"):
        rasterize(*args, tile_size=8)
    with pytest.raises(TwinscanError, match="quats"):
        rasterize(scene["means"], scene["quats"][:, :3], *args[2:])


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without a GPU")
def test_cuda_is_not_claimed_without_a_gpu():
    assert cuda_available() is False

"""Splat training against ground truth: a known set of Gaussians, rendered by the brute-force
reference rasterizer, is re-learned from noisy SfM-like points; held-out views measure it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from scipy.ndimage import gaussian_filter

from twinscan.errors import TwinscanError
from twinscan.gaussians import read_ply
from twinscan.gaussians.raster import cuda_available, rasterize
from twinscan.layout import SFM_RECORD
from twinscan.presets import get_preset
from twinscan.recon.sfm.record import ScaleSource, SfmRecord, WorldFrame
from twinscan.recon.splats import (SplatsConfig, TrainingViews, evaluate, render, run_splats, select_backend,
                                   train_splats)
from twinscan.recon.splats.geometry import flatness, sparse_depth_loss
from twinscan.recon.splats.metrics import ssim
from twinscan.recon.splats.params import gaussians_from_params, init_params
from twinscan.recon.splats.views import observed_depths
from twinscan.workspace import Workspace

WIDTH, HEIGHT, FOCAL = 64, 48, 56.0
NUM_VIEWS = 16  # 14 train, 2 held out


def _cam_from_world(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    forward = (target - eye) / np.linalg.norm(target - eye)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    rotation = np.stack([right, down, forward])  # OpenCV axes: x right, y down, z forward
    matrix = np.eye(4)
    matrix[:3, :3], matrix[:3, 3] = rotation, -rotation @ eye
    return matrix


def _f32(x: np.ndarray) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float32)


def _known_scene(seed: int = 0) -> tuple[TrainingViews, np.ndarray, torch.Tensor]:
    """250 opaque-ish Gaussians in a 2 x 2 x 1 m box, seen from a ring of cameras 3 m away; the
    'SfM points' are the true centres with 5 cm noise and the colours with 0.1 noise. Training views
    are brightened or darkened by a per-view gain (auto-exposure); held-out views (0, 8) are not.
    Also the true expected depth of every view."""
    rng = np.random.default_rng(seed)
    n = 250
    means = rng.uniform(-1, 1, (n, 3)) * [1.0, 1.0, 0.5]
    quats = rng.normal(size=(n, 4))
    scales = np.exp(rng.uniform(np.log(0.05), np.log(0.2), (n, 3)))
    opacities = rng.uniform(0.6, 0.95, n)
    colors = rng.uniform(0.05, 0.95, (n, 3))
    cam_from_world = np.array([
        _cam_from_world(np.array([3 * math.cos(a), 3 * math.sin(a), 1.0 + 0.4 * math.sin(3 * a)]), np.zeros(3))
        for a in np.linspace(0, 2 * math.pi, NUM_VIEWS, endpoint=False)])
    K = torch.tensor([[FOCAL, 0, WIDTH / 2], [0, FOCAL, HEIGHT / 2], [0, 0, 1]])
    Ks = K[None].repeat(NUM_VIEWS, 1, 1)
    viewmats = torch.tensor(cam_from_world, dtype=torch.float32)

    with torch.no_grad():
        rendered, _, _ = rasterize(_f32(means), _f32(quats), _f32(scales), _f32(opacities), _f32(colors), viewmats, Ks,
                                   WIDTH, HEIGHT, backend="reference", render_mode="RGB+ED")
    images, true_depth = rendered[..., :3], rendered[..., 3]
    gains = rng.uniform(0.85, 1.15, NUM_VIEWS)
    gains[[0, 8]] = 1.0
    images = (images * torch.tensor(gains, dtype=torch.float32)[:, None, None, None]).clamp(0, 1)
    points = means + rng.normal(scale=0.05, size=means.shape)
    point_colors = np.clip(colors + rng.normal(scale=0.1, size=colors.shape), 0, 1)
    views = TrainingViews([f"{i:06d}.png" for i in range(NUM_VIEWS)], list(images), Ks, viewmats,
                          points, point_colors, [_observed(points, cam_from_world[i], K.numpy(), true_depth[i])
                                                 for i in range(NUM_VIEWS)])
    return views, gains, true_depth


def _observed(points: np.ndarray, cam_from_world: np.ndarray, K: np.ndarray, true_depth: torch.Tensor) -> torch.Tensor:
    """What SfM says a view observed: the points in its image that lie on the surface it shows (within
    15 cm of the true expected depth at their pixel; the others are hidden behind nearer splats), at the
    depth of that surface (a feature lies on what the image shows)."""
    projected = observed_depths(points, cam_from_world, K, WIDTH, HEIGHT)
    shown = true_depth[projected[:, 1].long(), projected[:, 0].long()]
    visible = (projected[:, 2] - shown).abs() < 0.15
    projected[:, 2] = shown
    return projected[visible]


def _config(**overrides) -> SplatsConfig:
    base = dict(steps=450, max_side=WIDTH, device="cpu", sh_degree=1, sh_degree_interval=150,
                refine_start=50, refine_stop=250, refine_every=50, eval_every=100, checkpoint_every=100,
                exposure_lr=1e-2)
    return SplatsConfig(**(base | overrides))


@pytest.fixture(scope="module")
def known() -> tuple[TrainingViews, np.ndarray, torch.Tensor]:
    return _known_scene()


@pytest.fixture(scope="module")
def scene(known) -> TrainingViews:
    return known[0]


@pytest.fixture(scope="module")
def trained(scene, tmp_path_factory):
    checkpoint = tmp_path_factory.mktemp("train") / "checkpoint.pt"
    return train_splats(scene, _config(), select_backend("cpu"), checkpoint=checkpoint), checkpoint


def test_training_raises_heldout_psnr_far_above_the_initialisation(scene, trained) -> None:
    result, _ = trained
    _, heldout = scene.split(8)
    initial = evaluate(init_params(scene.points, scene.point_colors, 1, 0.1, 1.0), scene, heldout, 0,
                       select_backend("cpu").rasterize)
    # The noisy SfM-like start renders 19.4 dB (SSIM 0.40) on the held-out views; 450 steps on 14
    # views of 64x48 reach 25.2 dB (SSIM 0.81). 23.5 dB and +4.5 dB leave >1 dB for platform noise,
    # yet fail when the loss, the gradients, the optimiser wiring or the held-out split is wrong.
    assert result.evaluation.psnr > 23.5, result.history
    assert result.evaluation.psnr > initial.psnr + 4.5, (initial.psnr, result.history)
    assert result.evaluation.ssim > initial.ssim + 0.3
    assert sorted(result.evaluation.renders) == ["000000.png", "000008.png"]  # every 8th view by name
    assert result.num_gaussians > len(scene.points)  # DefaultStrategy densified
    assert result.steps == 450 and result.device == "cpu" and result.strategy == "default"


@pytest.fixture(scope="module")
def photometric(scene):
    """Colour alone: the exposure's own figure. 450 steps leave the gains noisy, and the sparse depth loss
    moves that noise around (correlation with the truth over the scene's seeds 0-2: 0.80-0.93 without it,
    0.78-0.91 with it; seed 0: 0.90 and 0.78), so the gains are judged without it."""
    return train_splats(scene, _config(depth_weight=0.0), select_backend("cpu"))


def test_exposure_compensation_learns_each_training_views_gain(known, photometric) -> None:
    _, true_gains, _ = known
    result = photometric
    learned = result.exposure.gains().numpy()
    truth = true_gains[result.train_ids]
    # the scene's brightness and the gains trade off freely, so compare gains relative to their mean;
    # without compensation every learned gain stays 1 and the true ones stray up to 0.14 from 1.
    # The CPU rasterizer sums gradients in an order set by the machine's threads: one view's gain came out
    # 0.094 off on one machine (under 0.08 on another), hence 0.1 and the correlation.
    np.testing.assert_allclose(learned / learned.mean(), truth / truth.mean(), atol=0.1)
    assert np.corrcoef(learned, truth)[0, 1] > 0.8


def test_ply_written_and_read_back_equals_the_trained_parameters(trained, tmp_path: Path) -> None:
    from twinscan.gaussians import write_ply

    params = trained[0].params
    write_ply(tmp_path / "splats.ply", gaussians_from_params(params))
    back = read_ply(tmp_path / "splats.ply")
    quats = params["quats"].detach().numpy()
    np.testing.assert_array_equal(back.means, params["means"].detach().numpy())
    np.testing.assert_array_equal(back.log_scales, params["scales"].detach().numpy())
    np.testing.assert_array_equal(back.opacity_logits, params["opacities"].detach().numpy())
    np.testing.assert_allclose(back.quats, quats / np.linalg.norm(quats, axis=1, keepdims=True), atol=1e-7)
    sh = torch.cat([params["sh0"], params["shN"]], 1).detach().numpy()
    np.testing.assert_array_equal(back.sh, sh)


def test_resume_continues_at_the_saved_step_and_ends_where_an_uninterrupted_run_ends(scene, trained) -> None:
    uninterrupted, checkpoint = trained
    assert torch.load(checkpoint, weights_only=False)["step"] == 400  # the last one saved before 450
    resumed = train_splats(scene, _config(), select_backend("cpu"), checkpoint=checkpoint)
    assert resumed.resumed_from == 400 and resumed.steps == 450
    for name, value in uninterrupted.params.items():
        torch.testing.assert_close(resumed.params[name], value, rtol=1e-5, atol=1e-6)
    assert resumed.evaluation.psnr == pytest.approx(uninterrupted.evaluation.psnr, abs=1e-3)


def test_a_checkpoint_of_another_config_is_not_resumed(scene, trained) -> None:
    _, checkpoint = trained
    other = train_splats(scene, _config(steps=20, checkpoint_every=1000), select_backend("cpu"),
                         checkpoint=checkpoint)
    assert other.resumed_from == 0 and other.steps == 20


def test_ssim_matches_a_direct_evaluation_of_its_definition() -> None:
    rng = np.random.default_rng(1)
    a = rng.uniform(0, 1, (40, 50, 3))
    b = np.clip(a + rng.normal(scale=0.1, size=a.shape), 0, 1)

    def blur(x: np.ndarray) -> np.ndarray:  # 11-tap Gaussian, sigma 1.5, valid region only
        return gaussian_filter(x, sigma=(1.5, 1.5, 0), truncate=5 / 1.5)[5:-5, 5:-5]

    mu_a, mu_b = blur(a), blur(b)
    var_a, var_b, cov = blur(a * a) - mu_a**2, blur(b * b) - mu_b**2, blur(a * b) - mu_a * mu_b
    c1, c2 = 0.01**2, 0.03**2
    expected = np.mean((2 * mu_a * mu_b + c1) * (2 * cov + c2) / ((mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2)))
    ta, tb = torch.tensor(a, dtype=torch.float32)[None], torch.tensor(b, dtype=torch.float32)[None]
    assert ssim(ta, tb).item() == pytest.approx(expected, abs=1e-5)
    assert ssim(ta, ta).item() == pytest.approx(1.0, abs=1e-6)


def test_backend_choice_refuses_what_the_machine_cannot_do() -> None:
    if not cuda_available():
        with pytest.raises(TwinscanError, match="CUDA"):
            select_backend("cuda")
        assert select_backend("auto").device == "cpu"
    with pytest.raises(TwinscanError, match="MCMC"):
        select_backend("cpu", "mcmc")
    assert select_backend("cpu").strategy == "default"


def test_preview_preset_trains_small_and_short() -> None:
    cfg = SplatsConfig.from_preset(get_preset("preview"))
    assert cfg.max_side <= 640 and cfg.steps <= 3000 and cfg.max_gaussians == get_preset("preview").max_gaussians
    with pytest.raises(TwinscanError):
        SplatsConfig(device="tpu")


def _write_undistorted_model(root: Path, views: TrainingViews) -> None:
    """The sfm stage's OUT/sfm/undistorted/ layout: PINHOLE model (COLMAP text) + images."""
    (root / "sparse").mkdir(parents=True)
    (root / "images").mkdir()
    fx = views.Ks[0, 0, 0].item()
    (root / "sparse" / "cameras.txt").write_text(f"1 PINHOLE {WIDTH} {HEIGHT} {fx} {fx} {WIDTH / 2} {HEIGHT / 2}\n")
    lines = []
    for i, name in enumerate(views.names):
        cam_from_world = views.cam_from_world[i].double().numpy()
        qx, qy, qz, qw = _rotation_to_xyzw(cam_from_world[:3, :3])
        tx, ty, tz = cam_from_world[:3, 3]
        lines += [f"{i + 1} {qw} {qx} {qy} {qz} {tx} {ty} {tz} 1 {name}", ""]
        rgb = (views.images[i].numpy() * 255 + 0.5).astype(np.uint8)
        cv2.imwrite(str(root / "images" / name), cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    (root / "sparse" / "images.txt").write_text("\n".join(lines) + "\n")
    colors = np.round(views.point_colors * 255).astype(int)
    (root / "sparse" / "points3D.txt").write_text("".join(
        f"{i + 1} {x} {y} {z} {r} {g} {b} 0\n" for i, ((x, y, z), (r, g, b)) in enumerate(zip(views.points, colors))))
    world = WorldFrame(ScaleSource.NONE, metric=False, origin="camera centroid (yaw arbitrary)", marker_id=None,
                       marker_size_m=None, marker_dict=None, marker_centre_z_m=None, floor_found=False,
                       world_from_colmap=None)  # and its record, as the sfm stage writes beside it
    record = SfmRecord(world, registered=len(views), total=len(views), mean_reprojection_error_px=0.0)
    (root.parent.parent / SFM_RECORD).write_text(json.dumps(record.to_json()))


def _rotation_to_xyzw(rotation: np.ndarray) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    return Rotation.from_matrix(rotation).as_quat()


def test_stage_writes_ply_heldout_renders_and_manifest_figures(scene, tmp_path: Path) -> None:
    _write_undistorted_model(tmp_path / "sfm" / "undistorted", scene)
    ws = Workspace(tmp_path)
    cfg = _config(steps=40, refine_start=10, refine_stop=30, refine_every=10, eval_every=20, checkpoint_every=20)
    figures = run_splats(ws, cfg)
    assert figures["steps"] == 40 and figures["device"] == "cpu" and figures["heldout_views"] == 2
    assert 10 < figures["psnr"] < 60 and 0 < figures["ssim"] <= 1
    splats = read_ply(tmp_path / "splats" / "splats.ply")
    assert splats.count == figures["num_gaussians"] and splats.sh_degree == 1
    side_by_side = cv2.imread(str(tmp_path / "splats" / "heldout" / "000008.png"))
    assert side_by_side.shape == (HEIGHT, 2 * WIDTH, 3)
    truth = cv2.cvtColor((scene.images[8].numpy() * 255 + 0.5).astype(np.uint8), cv2.COLOR_RGB2BGR)
    assert np.abs(side_by_side[:, WIDTH:].astype(int) - truth).max() <= 1  # ground truth on the right
    record = json.loads((tmp_path / "manifest.json").read_text())["stages"]["splats"]
    assert record["status"] == "done" and record["figures"]["num_gaussians"] == splats.count
    assert not (tmp_path / ".splats-checkpoint.pt").exists()
    assert run_splats(ws, cfg) == figures  # done before with the same inputs: skipped


def test_stage_without_sfm_output_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(TwinscanError, match="sfm"):
        run_splats(Workspace(tmp_path), _config())


@pytest.mark.skipif(not cuda_available(), reason="needs a CUDA GPU with gsplat's kernels")
def test_cuda_mcmc_training_learns_the_known_scene(scene) -> None:
    result = train_splats(scene, _config(device="cuda", max_gaussians=2000), select_backend("cuda"))
    assert result.device == "cuda" and result.strategy == "mcmc"
    assert result.num_gaussians <= 2000 and result.evaluation.psnr > 23.0, result.history


def test_geometric_priors_train_flat_splats_without_losing_the_picture(scene, trained) -> None:
    """With the priors on (recon/splats/geometry.py: flatness and normal consistency from 30 % of the steps),
    the splats end as discs (smallest over largest scale 0.084-0.086 over seeds 0-1, against 0.58 without)
    and the held-out views stay as sharp (24.8 dB against 24.6-25.1 without)."""
    plain, _ = trained
    flat = train_splats(scene, _config(normal_weight=0.05, flat_weight=0.1), select_backend("cpu"))
    assert flatness(plain.params["scales"].detach()).item() > 0.4
    assert flatness(flat.params["scales"].detach()).item() < 0.2
    assert flat.evaluation.psnr > 23.5, flat.history


def test_sparse_depth_loss_is_the_disparity_l1_at_the_points_pixels() -> None:
    """gsplat's depth loss: |1 / rendered - 1 / observed| averaged over the points, times the scene extent;
    a point at a pixel's centre reads that pixel (no blur from its neighbours), one between two reads both."""
    depth = torch.arange(1.0, 7.0).repeat(4, 1).requires_grad_()  # [4, 6]: 1 m in column 0 .. 6 m in column 5
    at_centres = torch.tensor([[0.5, 1.5, 1.0], [3.5, 2.5, 4.0]])  # on their pixels' depth: no loss
    assert sparse_depth_loss(depth, at_centres, 2.0).item() == pytest.approx(0.0, abs=1e-6)
    off = torch.tensor([[2.5, 0.5, 2.0], [4.0, 1.5, 5.0]])  # 3 m against 2; between 4 and 5 m (4.5) against 5
    expected = 2.0 * (abs(1 / 3 - 1 / 2) + abs(1 / 4.5 - 1 / 5)) / 2
    loss = sparse_depth_loss(depth, off, 2.0)
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    loss.backward()
    assert depth.grad[0, 2] > 0 and depth.grad[1, 3] < 0 and depth.grad[1, 4] < 0  # nearer / further: pushed back / in
    assert depth.grad[:, [0, 1, 5]].abs().sum() == 0 and depth.grad[[0, 2, 3]][:, [3, 4]].abs().sum() == 0


def _blank_wall(seed: int = 0) -> tuple[TrainingViews, torch.Tensor]:
    """A plain 4 x 3 m wall 4 m away (300 flat splats of one grey), filmed from a 2 x 0.8 m ellipse of 16
    cameras. Colour alone cannot place a blank wall: the splats start 30 cm off it in depth (random), as
    splats split off SfM points drift during training; the views observe SfM points on it within 2 cm.
    Also the true expected depth of every view."""
    rng = np.random.default_rng(seed)
    n = 300
    means = np.column_stack([rng.uniform([-2, -1.5], [2, 1.5], (n, 2)), np.full(n, 4.0)])
    quats = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    scales = np.tile([0.25, 0.25, 0.005], (n, 1))
    colors = np.array([0.55, 0.5, 0.45]) + rng.uniform(-0.02, 0.02, (n, 3))
    cam_from_world = np.tile(np.eye(4), (NUM_VIEWS, 1, 1))
    angles = np.linspace(0, 2 * math.pi, NUM_VIEWS, endpoint=False)
    cam_from_world[:, 0, 3], cam_from_world[:, 1, 3] = -np.cos(angles), -0.4 * np.sin(angles)
    K = torch.tensor([[FOCAL, 0, WIDTH / 2], [0, FOCAL, HEIGHT / 2], [0, 0, 1]])
    viewmats = _f32(cam_from_world)

    with torch.no_grad():
        rendered, _, _ = rasterize(_f32(means), _f32(quats), _f32(scales), _f32(np.full(n, 0.95)), _f32(colors),
                                   viewmats, K[None].repeat(NUM_VIEWS, 1, 1), WIDTH, HEIGHT, backend="reference",
                                   render_mode="RGB+ED")
    on_wall = means[::3]
    start = on_wall + np.column_stack([np.zeros((len(on_wall), 2)), rng.normal(scale=0.3, size=len(on_wall))])
    observed = [observed_depths(on_wall + rng.normal(scale=0.02, size=on_wall.shape), cam_from_world[i], K.numpy(),
                                WIDTH, HEIGHT) for i in range(NUM_VIEWS)]
    views = TrainingViews([f"{i:06d}.png" for i in range(NUM_VIEWS)], list(rendered[..., :3]),
                          K[None].repeat(NUM_VIEWS, 1, 1), viewmats, start, colors[::3], observed)
    return views, rendered[..., 3]


def test_sparse_depth_places_a_blank_wall_that_colour_alone_cannot() -> None:
    """Against the true depth of the held-out views: with the sparse depth loss at its default weight the
    rendered depth lies on the wall; with colour alone it stays where the splats started."""
    views, true_depth = _blank_wall()
    _, heldout = views.split(8)

    def depth_error(result) -> float:
        errors = []
        for i in heldout:
            with torch.no_grad():
                rendered, _ = render(result.params, views.cam_from_world[i:i + 1], views.Ks[i:i + 1], WIDTH, HEIGHT,
                                     1, select_backend("cpu").rasterize, render_mode="RGB+ED")
            errors.append((rendered[0, ..., 3] - true_depth[i]).abs().flatten())
        return torch.cat(errors).median().item()

    pinned = train_splats(views, _config(), select_backend("cpu"))
    colour_only = train_splats(views, _config(depth_weight=0.0), select_backend("cpu"))
    assert SplatsConfig().depth_weight > 0  # on by default
    # Seeds 0-2 (median absolute depth error): colour alone 0.55-0.64 m, with the loss 0.09-0.16 m (0.14-0.25
    # of it); held-out PSNR 35.2-37.9 dB with it, 35.6-36.0 without (a blank wall: any depth looks right)
    pinned_error, colour_error = depth_error(pinned), depth_error(colour_only)
    assert colour_error > 0.4, colour_error
    assert pinned_error < 0.25 and pinned_error < 0.4 * colour_error, (pinned_error, colour_error)
    assert pinned.evaluation.psnr > 33.0, pinned.history

"""Splats far outside the captured region are kept apart as the background, those under the floor
are cropped (twinscan.gaussians.crop)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from twinscan.gaussians.crop import FLOOR_MARGIN, MARGIN, captured_region, crop_mask


def _cell(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """SfM points of a 9 x 9 m cell (floor z = 0, machines up to 2 m) with 1 % far outliers, and a camera loop."""
    points = np.column_stack([rng.uniform(-4.5, 4.5, 2000), rng.uniform(-4.5, 4.5, 2000), rng.uniform(0, 2, 2000)])
    points[:20] = rng.uniform(-40, 40, (20, 3))  # mis-triangulated points: the robust extent ignores them
    angles = np.linspace(0, 2 * np.pi, 60, endpoint=False)
    cameras = np.column_stack([3.7 * np.cos(angles), 3.7 * np.sin(angles), np.full(60, 1.5)])
    return points, cameras


def test_the_captured_region_is_the_robust_extent_of_points_and_cameras_plus_a_margin() -> None:
    points, cameras = _cell(np.random.default_rng(0))
    region = captured_region(points, cameras, floor_found=True)
    side = 9.0  # the points' largest robust side (x and y), within sampling noise
    assert region.lower == pytest.approx([-4.5 - MARGIN * side, -4.5 - MARGIN * side, -MARGIN * side], abs=0.1)
    assert region.upper == pytest.approx([4.5 + MARGIN * side, 4.5 + MARGIN * side, 2 + MARGIN * side], abs=0.1)
    assert region.floor_cut_z == pytest.approx(-FLOOR_MARGIN * side, abs=0.01)
    assert captured_region(points, cameras, floor_found=False).floor_cut_z is None
    # a camera outside the points' extent (the operator stepped back) widens the region
    wider = captured_region(points, np.vstack([cameras, [[8.0, 0.0, 1.5]]]), floor_found=True)
    assert wider.upper[0] == pytest.approx(8.0 + MARGIN * (8.0 + 4.5), abs=0.1)


def test_splats_outside_the_region_or_under_the_floor_are_cropped_and_counted() -> None:
    rng = np.random.default_rng(1)
    points, cameras = _cell(rng)
    region = captured_region(points, cameras, floor_found=True)
    cell = np.column_stack([rng.uniform(-4.5, 4.5, 1000), rng.uniform(-4.5, 4.5, 1000), rng.uniform(0, 2, 1000)])
    far = np.array([[-10.1, -15.3, -12.2], [12.7, 19.1, 7.1], [0.0, 0.0, 30.0]])  # the sample's worst floaters
    under = np.array([[1.0, 1.0, -0.5], [-2.0, 0.5, -0.3]])  # in the box, but half a metre under the floor
    means = np.vstack([cell, far, under])
    keep, counts = crop_mask(means, region)
    assert counts == {"cropped_outside": 3, "cropped_below_floor": 2}
    assert keep[:1000].all() and not keep[1000:].any()
    # without a floor, only the box crops
    keep, counts = crop_mask(means, captured_region(points, cameras, floor_found=False))
    assert counts == {"cropped_outside": 3, "cropped_below_floor": 0} and keep[-2:].all()


def test_the_splats_stage_writes_only_splats_inside_the_captured_region(smoke_capture: Path) -> None:
    from twinscan.gaussians import read_ply
    from twinscan.recon.splats.views import load_training_views
    from twinscan.workspace import Workspace

    ws = Workspace(smoke_capture)
    figures = ws.stage_record("splats")["figures"]
    splats = read_ply(smoke_capture / "splats" / "splats.ply")
    assert splats.count == figures["num_gaussians"]
    assert figures["cropped_outside"] >= 0 and figures["cropped_below_floor"] >= 0
    # the region again, from the workspace's own SfM points and cameras
    views = load_training_views(ws, 64)
    import torch

    centres = torch.linalg.inv(views.cam_from_world)[:, :3, 3].numpy()
    floor_found = ws.stage_record("sfm")["figures"]["floor_found"]
    region = captured_region(views.points, centres, floor_found)
    assert np.allclose(figures["captured_region_m"], [region.lower, region.upper], atol=1e-3)
    assert (splats.means >= region.lower - 1e-4).all() and (splats.means <= region.upper + 1e-4).all()
    if floor_found:
        assert splats.means[:, 2].min() >= region.floor_cut_z - 1e-4
    # the splats outside the region are kept apart, as the twin's optional background
    background_ply = smoke_capture / "splats" / "background.ply"
    assert background_ply.exists() == (figures["cropped_outside"] > 0)
    if background_ply.exists():
        background = read_ply(background_ply)
        assert background.count == figures["cropped_outside"]
        assert ((background.means < region.lower) | (background.means > region.upper)).any(axis=1).all()
    assert set(figures) >= {"psnr_cell_only", "ssim_cell_only"}
    json.dumps(figures)  # the manifest holds plain JSON

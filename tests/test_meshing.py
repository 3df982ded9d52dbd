"""The mesher against ground truth: depth ray-cast from a known scene (floor, table, crate, column),
with floaters injected the way splat renders show them; acceptance figures as in issue 6."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import trimesh
from scipy.spatial.transform import Rotation

from twinscan.camera import look_at
from twinscan.errors import TwinscanError
from twinscan.meshing import DepthViews, MeshConfig, build_meshes, metrics, write_meshes
from twinscan.meshing.cleanup import drop_below, drop_floating, fill_small_holes
from twinscan.meshing.collision import convex_decomposition
from twinscan.meshing.floor import (Floor, detect_floor, flatten_floor, floor_faces, floor_from_points,
                                    outside_footprint, to_walls, within_points)
from twinscan.meshing.fusion import _in_canonical_order, clean_depth
from twinscan.meshing.raycast import render_mesh_views
from twinscan.meshing.support import point_spacing, supported_splats, vertical_extents
from twinscan.optional import available
from twinscan.presets import get_preset

WIDTH, HEIGHT = 160, 120
K = np.array([[140.0, 0, WIDTH / 2], [0, 140.0, HEIGHT / 2], [0, 0, 1]])


def cell() -> trimesh.Trimesh:
    """A 6.4 m floor slab (top at z = 0) with a table, a crate on it and a column; random face colours.

    The floor reaches past the camera rings (2.4 m out, plus the slab's 0.5 m walkway margin): whoever
    films walks on the floor, and the twin's floor spans the walkway."""
    def box(extents, centre):
        part = trimesh.creation.box(extents=extents)
        part.apply_translation(centre)
        return part

    column = trimesh.creation.cylinder(radius=0.15, height=1.2, sections=32)
    column.apply_translation((-0.8, -0.5, 0.6))
    parts = [box((6.4, 6.4, 0.1), (0, 0, -0.05)), box((1.0, 0.6, 0.75), (0.5, 0.3, 0.375)),
             box((0.3, 0.3, 0.3), (0.5, 0.3, 0.9)), column]
    rng = np.random.default_rng(0)
    for part in parts:
        part.visual.face_colors = np.column_stack([rng.integers(40, 255, (len(part.faces), 3)),
                                                   np.full(len(part.faces), 255)])
    return trimesh.util.concatenate(parts)


def orbit(count: int) -> np.ndarray:
    """Two rings of cameras looking at the cell: a walk at eye height and a lower one."""
    return np.array([look_at((radius * np.cos(a), radius * np.sin(a), height), (0, 0, 0.4))
                     for radius, height in [(2.4, 1.5), (1.7, 0.9)]
                     for a in np.linspace(0, 2 * np.pi, count // 2, endpoint=False)])


def with_floaters(views: DepthViews, seed: int = 0) -> DepthViews:
    """Each view gets a blob of wrong, nearer depth (as splat floaters render): seen by that view only."""
    rng = np.random.default_rng(seed)
    depth = views.depth.copy()
    for view in depth:
        row, col = rng.integers(10, HEIGHT - 20), rng.integers(10, WIDTH - 20)
        patch = view[row:row + 8, col:col + 8]
        patch[np.isfinite(patch)] *= rng.uniform(0.4, 0.7)
    return DepthViews(depth=depth, colour=views.colour, alpha=views.alpha, K=views.K,
                      world_from_cam=views.world_from_cam)


@pytest.fixture(scope="module")
def scene():
    truth = cell()
    views = render_mesh_views(truth, K, orbit(24), WIDTH, HEIGHT)
    cfg = MeshConfig(resolution=192, collision_faces=4000, visual_faces=6000, texture_size=256)
    return truth, views, build_meshes(with_floaters(views), cfg)


def test_meshes_meet_the_acceptance_figures_against_ground_truth(scene) -> None:
    truth, views, result = scene
    seen = metrics.seen_surface_points(truth, views, samples=40_000)
    for mesh, with_floor in [(result.visual, result.visual),
                             (result.collision, trimesh.util.concatenate([result.collision, result.floor_slab]))]:
        accuracy = metrics.accuracy(mesh, truth, samples=40_000)
        assert accuracy["median"] <= 0.02 and accuracy["p95"] <= 0.06, accuracy
        assert metrics.completeness(with_floor, seen, threshold=0.05) >= 0.90
        assert metrics.floating_components(mesh) == 0
    flatness = metrics.floor_flatness(result.visual)
    (x0, y0), (x1, y1) = result.floor.bounds_xy
    assert flatness["rms"] <= 0.01 and flatness["area"] > 25.0  # most of the 41 m2 floor was seen
    assert flatness["area"] >= 0.97 * (x1 - x0) * (y1 - y0), "the visual floor spans the collider's floor"
    assert abs(result.floor.height) < 0.005 and result.floor.tilt_deg < 1.0
    assert result.floor_slab.bounds[1, 2] == 0.0 and result.floor_slab.bounds[0, 2] < 0
    assert np.all(result.floor.bounds_xy[0] < -1.5) and np.all(result.floor.bounds_xy[1] > 1.5)


def test_budgets_and_figures_are_kept(scene) -> None:
    _, views, result = scene
    assert len(result.collision.faces) <= 4000 and len(result.visual.faces) <= 6000
    assert not (result.collision.face_normals[:, 2] > 0.99)[result.collision.triangles_center[:, 2] < 0.01].any(), \
        "the floor belongs to the slab, not to the collision mesh"
    figures = result.figures
    assert figures["views"] == len(views) and figures["collision_faces"] == len(result.collision.faces)
    assert figures["voxel_size_m"] == pytest.approx(5.0 / 192, rel=0.2)  # the floor's 1..99 % extent / voxels
    assert figures["seconds"]["total"] > 0


@pytest.mark.skipif(not available("xatlas"), reason="xatlas is not installed")
def test_baked_texture_reproduces_the_surface_colours(scene) -> None:
    truth, _, result = scene
    textured = result.textured
    assert textured.visual.material.baseColorTexture.size == (256, 256)
    points, faces = trimesh.sample.sample_surface(textured, 4000, seed=1)
    colours = textured.visual.material.to_color(_uv_at(textured, points, faces))[:, :3].astype(float)
    from twinscan.optional import open3d

    o3d = open3d()
    ray_scene = o3d.t.geometry.RaycastingScene()
    ray_scene.add_triangles(np.asarray(truth.vertices, np.float32), np.asarray(truth.faces, np.uint32))
    nearest = ray_scene.compute_closest_points(points.astype(np.float32))["primitive_ids"].numpy()
    expected = truth.visual.face_colors[nearest, :3].astype(float)
    error = np.abs(colours - expected).mean(axis=1)
    assert np.median(error) < 12  # out of 255; the faces are random colours 40..255 apart
    assert np.mean(error < 30) > 0.75


def _uv_at(mesh: trimesh.Trimesh, points: np.ndarray, faces: np.ndarray) -> np.ndarray:
    barycentric = trimesh.triangles.points_to_barycentric(mesh.triangles[faces], points)
    return np.einsum("pk,pkj->pj", barycentric, mesh.visual.uv[mesh.faces[faces]])


def test_written_files_load_back(scene, tmp_path: Path) -> None:
    _, _, result = scene
    names = write_meshes(result, tmp_path / "mesh")
    folder = tmp_path / "mesh"
    assert sorted(f"mesh/{p.name}" for p in folder.iterdir()) == names  # paths relative to OUT/
    glb = trimesh.load(folder / "visual.glb", force="mesh")
    assert len(glb.faces) == len(result.visual.faces)
    obj = trimesh.load(folder / "visual.obj", force="mesh")
    assert obj.area == pytest.approx(result.visual.area, rel=1e-3)
    floor = trimesh.load(folder / "floor.obj", force="mesh")
    assert floor.bounds[1, 2] == pytest.approx(0.0, abs=1e-6)
    summary = json.loads((folder / "mesh.json").read_text())
    assert summary["floor"]["height_m"] == pytest.approx(result.floor.height)
    assert not list(tmp_path.glob(".*tmp-*"))


def test_clean_depth_drops_silhouettes_but_keeps_slanted_planes() -> None:
    rows, cols = np.mgrid[0:40, 0:60].astype(np.float32)
    slanted = 2.0 + 0.05 * cols  # a floor seen at a grazing angle: steep but planar
    depth = np.where(cols < 30, slanted, 1.0)[None]  # a near object on the right half
    depth[0, 5, 40] = 0.0  # an empty pixel
    views = DepthViews(depth=depth, colour=np.zeros((1, 40, 60, 3), np.uint8), alpha=np.ones_like(depth),
                       K=np.eye(3)[None], world_from_cam=np.eye(4)[None])
    cleaned = clean_depth(views, min_alpha=0.5, edge_jump=0.02)[0]
    assert np.all(cleaned[1:-1, 1:28] > 0)  # the slanted plane survives
    assert np.all(cleaned[:, 29:31] == 0)  # both sides of the step are dropped
    assert np.all(cleaned[4:7, 39:42] == 0)  # so is the ring around the empty pixel


def test_the_fused_surface_comes_out_in_one_order_whatever_order_fusion_left_it_in() -> None:
    """open3d's voxel block grid is filled by several threads: the same surface in another order each run."""
    mesh = trimesh.creation.icosphere(subdivisions=3)
    colours = np.random.default_rng(0).integers(0, 256, (len(mesh.vertices), 3), dtype=np.uint8)
    canonical = _in_canonical_order(np.asarray(mesh.vertices), np.asarray(mesh.faces), colours)
    rng = np.random.default_rng(1)
    for _ in range(3):
        order = rng.permutation(len(mesh.vertices))  # new index i holds old vertex order[i]
        new_index = np.argsort(order)
        faces = np.roll(new_index[mesh.faces], rng.integers(0, 3), axis=1)[rng.permutation(len(mesh.faces))]
        again = _in_canonical_order(np.asarray(mesh.vertices)[order], faces, colours[order])
        for got, want in zip(again, canonical):
            assert np.array_equal(got, want)
    vertices, faces, _ = canonical
    same = trimesh.Trimesh(vertices, faces, process=False)
    assert np.isclose(same.volume, mesh.volume) and same.is_winding_consistent, "the same triangles, facing out"


def test_floor_is_found_off_zero_and_flattened() -> None:
    floor = trimesh.creation.box(bounds=[[-1, -1, -0.1], [1, 1, 0.02]]).subdivide().subdivide().subdivide()
    crate = trimesh.creation.box(bounds=[[0, 0, 0.02], [0.4, 0.4, 0.4]])
    mesh = trimesh.util.concatenate([floor, crate])
    found = detect_floor(mesh, band=0.1, max_tilt_deg=10, distance=0.01)
    assert found.height == pytest.approx(0.02, abs=1e-6) and found.tilt_deg < 0.1
    assert found.area == pytest.approx(4.0, rel=1e-6)
    is_floor = floor_faces(mesh, found.height, 0.01)
    flat = flatten_floor(mesh, is_floor)
    assert np.all(flat.triangles_center[is_floor, 2] == 0)
    assert flat.bounds[1, 2] == pytest.approx(0.4)
    raised = crate.copy()
    raised.apply_translation((0, 0, 1.0))
    assert detect_floor(raised, band=0.1, max_tilt_deg=10, distance=0.01) is None


def test_floor_extent_reaches_the_edge_and_ignores_stray_faces() -> None:
    """The slab's extent is the floor's to within a face, whatever lies off its edge: a stray sheet at floor
    height 50 cm past the edge is left out; a 1 % percentile trim would cut 6 cm off each side here."""
    floor = trimesh.creation.box(bounds=[[-3, -2, -0.1], [3, 2, 0.0]])
    for _ in range(6):
        floor = floor.subdivide()
    stray = trimesh.creation.box(bounds=[[3.5, 0.0, -0.02], [3.6, 0.1, 0.0]])
    found = detect_floor(trimesh.util.concatenate([floor, stray]), band=0.1, max_tilt_deg=10, distance=0.01)
    np.testing.assert_allclose(found.bounds_xy, [[-3, -2], [3, 2]], atol=0.01)


def test_floor_stops_where_the_sfm_points_on_it_stop_and_what_lies_beyond_goes() -> None:
    """The fused floor overshoots its edge by a splat; the SfM points on it do not (a few strays aside)."""
    fused = Floor(height=0.0, tilt_deg=0.0, bounds_xy=np.array([[-3.2, -2.2], [3.25, 2.2]]), area=24.0)
    rng = np.random.default_rng(0)
    on_floor = np.column_stack([rng.uniform([-3, -2], [3, 2], (20_000, 2)), rng.normal(0, 0.005, 20_000)])
    strays = np.column_stack([rng.uniform(3.3, 3.6, (10, 1)), rng.uniform(-2, 2, (10, 1)), np.zeros((10, 1))])
    above = np.column_stack([rng.uniform(-5, 5, (500, 2)), rng.uniform(0.5, 2.0, 500)])  # not floor: ignored
    cut = within_points(fused, np.concatenate([on_floor, strays, above]), band=0.1)
    np.testing.assert_allclose(cut.bounds_xy, [[-3, -2], [3, 2]], atol=0.01)
    assert within_points(fused, on_floor[:50], band=0.1) is fused  # too few points to say
    wall_past_edge = trimesh.creation.box(bounds=[[-1, 1.8, 0], [1, 2.3, 1]]).subdivide().subdivide()
    beyond = outside_footprint(wall_past_edge, cut, margin=0.05)
    assert beyond.any() and not beyond.all()  # the part up to 2.05 m stays
    np.testing.assert_array_equal(beyond, wall_past_edge.triangles_center[:, 1] > 2.05)


def test_a_floor_the_fusion_lost_is_the_sfm_points_floor() -> None:
    """A floor the SfM stage found but the fusion barely shows (a plain or glossy floor, or a tiny capture):
    fewer than 50 level faces near z = 0 find no plane, and the SfM points on z = 0 stand in, level at 0
    and as far as they reach; too few points on it say nothing."""
    rng = np.random.default_rng(1)
    scraps = [trimesh.creation.box(bounds=[[x, 0.0, -0.01], [x + 0.1, 0.1, 0.0]]) for x in np.linspace(-2, 1.5, 4)]
    machine = trimesh.creation.box(bounds=[[-1.0, -1.0, 0.0], [1.0, 1.0, 1.5]]).subdivide().subdivide()
    surface = trimesh.util.concatenate([*scraps, machine])
    assert detect_floor(surface, band=0.1, max_tilt_deg=10, distance=0.02) is None
    on_floor = np.column_stack([rng.uniform([-2.5, -1.5], [2.0, 3.0], (400, 2)), rng.normal(0, 0.01, 400)])
    above = np.column_stack([rng.uniform(-1, 1, (300, 2)), rng.uniform(0.3, 1.5, 300)])
    floor = floor_from_points(surface, np.concatenate([on_floor, above]), band=0.1, distance=0.02)
    assert floor.height == 0.0 and floor.tilt_deg == 0.0
    np.testing.assert_allclose(floor.bounds_xy, [[-2.5, -1.5], [2.0, 3.0]], atol=0.02)
    np.testing.assert_allclose(floor.area, 4 * 0.01, rtol=1e-6)  # the scraps' tops lie on it
    assert floor_from_points(surface, np.concatenate([on_floor[:29], above]), band=0.1, distance=0.02) is None


def _wall_outline(start, end, height: float = 2.0) -> np.ndarray:
    """Plan points of an upright wall patch from `start` to `end` (a grid of cells, as planes.py makes)."""
    along = np.linspace(0.0, 1.0, 26)[:, None]
    line = np.asarray(start, float) + along * (np.asarray(end, float) - np.asarray(start, float))
    return np.repeat(line, int(height / 0.1), axis=0)


def test_the_floor_runs_on_to_the_walls_bounding_the_capture_and_never_under_them() -> None:
    """A wall seen from across the cell stands past the floor's last SfM points: the slab reaches its foot
    (here 17 cm on, about as on the hard cells' south walls), only where the wall stands beside the floor, only
    up to its nearest point (a wall at 10 degrees), never to a wall further than WALL_REACH, nor across a
    wall running the other way."""
    floor = Floor(height=0.0, tilt_deg=0.0, bounds_xy=np.array([[-3.0, -3.5], [4.6, 4.0]]), area=50.0)
    south = _wall_outline((-5.0, -3.67), (5.0, -3.67))
    east_turned = _wall_outline((4.75, -3.0), (4.75 + 7.0 * np.tan(np.radians(10)), 4.0))
    far_west = _wall_outline((-3.8, -3.0), (-3.8, 3.0))  # 80 cm past the edge: no floor is known there
    across = _wall_outline((0.0, 4.1), (0.0, 5.0))  # runs north, away from the floor's north side
    extended = to_walls(floor, [south, east_turned, far_west, across])
    np.testing.assert_allclose(extended.bounds_xy, [[-3.0, -3.67], [4.75, 4.0]], atol=1e-9)
    assert to_walls(floor, []).bounds_xy.tolist() == floor.bounds_xy.tolist()
    inside = _wall_outline((-5.0, 3.8), (5.0, 3.8))  # the floor already reaches past it: nothing changes
    assert to_walls(floor, [inside]).bounds_xy.tolist() == floor.bounds_xy.tolist()


def test_small_holes_are_closed_and_large_ones_left_open() -> None:
    sphere = trimesh.creation.icosphere(subdivisions=3)
    sphere.visual.vertex_colors = [200, 100, 50, 255]
    centres = sphere.triangles_center
    small = sphere.copy()
    small.update_faces(np.linalg.norm(centres - [0, 0, 1], axis=1) > 0.1)  # a hole around the north pole
    filled, added = fill_small_holes(small, max_perimeter=1.0)
    assert added > 0 and filled.is_watertight and filled.is_winding_consistent
    assert filled.volume == pytest.approx(sphere.volume, rel=0.01)
    large = sphere.copy()
    large.update_faces(centres[:, 2] < 0.5)  # a cap of ~0.9 m radius removed: perimeter ~5.4 m
    assert fill_small_holes(large, max_perimeter=1.0)[1] == 0


def test_floating_components_are_counted() -> None:
    def box(lower, upper):
        return trimesh.creation.box(bounds=[lower, upper])

    stacked = [box((0, 0, 0), (1, 1, 1)), box((0, 0, 1.01), (0.5, 0.5, 1.5))]  # crate on a crate: supported
    assert metrics.floating_components(trimesh.util.concatenate(stacked)) == 0
    hovering = box((3, 3, 0.5), (4, 4, 1))
    assert metrics.floating_components(trimesh.util.concatenate([*stacked, hovering])) == 1


def test_a_floating_table_top_that_sfm_points_pin_is_kept_and_a_floater_is_not() -> None:
    """A table top whose legs did not fuse floats like a splat floater; SfM triangulated features on it."""
    def box(size, centre):
        return trimesh.creation.box(size, trimesh.transformations.translation_matrix(centre))

    cabinet, top, blob = box((1, 1, 1), (-2, 0, 0.5)), box((1.2, 0.6, 0.05), (1, 0, 0.9)), box((0.2,) * 3, (0, 2, 1.2))
    mesh = trimesh.util.concatenate([cabinet, top, blob])
    points = np.vstack([cabinet.sample(2000, seed=1), top.sample(200, seed=2), blob.sample(3, seed=3)])
    unpinned, dropped = drop_floating(mesh, tolerance=0.05, max_area=2.0)
    assert dropped == 2 and unpinned.area == pytest.approx(cabinet.area)  # top and blob both float
    kept, dropped = drop_floating(mesh, tolerance=0.05, max_area=2.0, sfm_points=points)
    assert dropped == 1 and kept.area == pytest.approx(cabinet.area + top.area)  # 3 points pin no floater
    sparse_top = np.vstack([cabinet.sample(2000, seed=1), top.sample(10, seed=2)])  # 6/m2 against 680/m2
    assert drop_floating(mesh, tolerance=0.05, max_area=2.0, sfm_points=sparse_top)[1] == 2


@pytest.mark.skipif(not available("coacd"), reason="coacd is not installed")
def test_convex_decomposition_splits_a_non_convex_shape_into_convex_parts() -> None:
    shape = trimesh.util.concatenate([trimesh.creation.box(bounds=[[0, 0, 0], [1, 0.5, 0.5]]),
                                      trimesh.creation.box(bounds=[[1.5, 0, 0], [2, 2, 0.5]])])
    assert not shape.is_convex
    convex = convex_decomposition(shape, threshold=0.05, max_parts=8)
    assert 2 <= len(convex.parts) <= 8 and convex.seconds > 0
    assert all(part.is_convex for part in convex.parts)
    assert sum(part.volume for part in convex.parts) == pytest.approx(shape.volume, rel=0.05)


def test_config_follows_the_preset_and_rejects_nonsense() -> None:
    cfg = MeshConfig.from_preset(get_preset("standard"), convex=True)
    assert cfg.collision_faces == get_preset("standard").mesh_faces and cfg.convex
    assert cfg.voxel_size(5.0) == pytest.approx(5.0 / cfg.resolution)
    assert cfg.voxel_size(1000.0) == cfg.max_voxel and cfg.voxel_size(0.1) == cfg.min_voxel
    with pytest.raises(TwinscanError):
        MeshConfig(min_voxel=0.1, max_voxel=0.01)
    with pytest.raises(TwinscanError):
        DepthViews(depth=np.ones((2, 4, 4), np.float32), colour=np.zeros((2, 4, 4, 3), np.uint8),
                   alpha=np.ones((2, 4, 4), np.float32), K=np.eye(3)[None], world_from_cam=np.eye(4)[None])


def test_stage_without_splats_fails_with_a_fix_and_records_it(tmp_path: Path) -> None:
    from twinscan.meshing import run_mesh
    from twinscan.workspace import Workspace

    ws = Workspace(tmp_path)
    with pytest.raises(TwinscanError, match="splats.ply is missing"):
        run_mesh(ws, MeshConfig.from_preset(get_preset("preview")))
    assert ws.stage_record("mesh")["status"] == "failed"


def test_splat_renders_become_depth_views_on_the_splatted_surface() -> None:
    from twinscan.gaussians import Gaussians
    from twinscan.gaussians.backend import select_render_backend
    from twinscan.meshing.render import render_depth_views

    grid = np.stack(np.meshgrid(np.linspace(-1, 1, 60), np.linspace(-1, 1, 60)), -1).reshape(-1, 2)
    n = len(grid)
    floor = Gaussians(means=np.column_stack([grid, np.zeros(n)]),
                      log_scales=np.log(np.tile([0.03, 0.03, 0.002], (n, 1))), quats=np.tile([1.0, 0, 0, 0], (n, 1)),
                      opacity_logits=np.full(n, 4.0), sh=np.full((n, 1, 3), 0.5))
    cam_from_world = np.linalg.inv(look_at((0.1, 0.2, 2.0), (0, 0, 0), up=(0, 1, 0)))
    views = render_depth_views(floor, K[None], cam_from_world[None], WIDTH, HEIGHT, select_render_backend("cpu"))
    points, _ = views.points(min_alpha=0.5)
    assert len(points) > 0.6 * WIDTH * HEIGHT  # the 2 m square fills most of the view
    assert np.all(np.abs(points[:, 2]) < 0.01)  # median depth lands on the splats, not between them
    _, colours = views.points(min_alpha=0.99)  # away from the square's edge, no background blends in
    assert np.all(np.abs(colours.astype(int) - round((0.5 * 0.28209479 + 0.5) * 255)) <= 1)  # SH DC 0.5


def test_splats_need_sfm_support_and_the_floor_supports_only_the_floor() -> None:
    rng = np.random.default_rng(0)
    wall = np.column_stack([rng.uniform(-2, 2, 4000), np.full(4000, 3.0), rng.uniform(0.05, 2, 4000)])
    floor = np.column_stack([rng.uniform(-2, 2, 600), rng.uniform(-1, 1, 600), rng.normal(0, 0.003, 600)])
    stray = np.array([[0.0, -2.5, 1.0]])  # one mistriangulated point in free space
    points = np.concatenate([wall, floor, stray])
    spacing = point_spacing(points)
    groups = {
        "at a lone point": (stray + rng.normal(0, spacing / 3, (50, 3)), False),
        "on the wall": (wall[:500] + rng.normal(0, spacing / 3, (500, 3)), True),
        "in free space": (np.column_stack([rng.uniform(-2, 2, 200), rng.uniform(1.5, 2.5, 200),
                                           rng.uniform(0.5, 2, 200)]), False),
        "floor among floor points": (np.column_stack([rng.uniform(-2, 2, 300), rng.uniform(-1, 1, 300),
                                                      rng.uniform(-0.01, 0.01, 300)]), True),
        "bump over the floor": (np.column_stack([rng.uniform(-1.5, 1.5, 300), rng.uniform(-0.8, 0.8, 300),
                                                 rng.uniform(0.08, 0.3, 300)]), False),
        "floor past every point": (np.column_stack([rng.uniform(-2, 2, 300), rng.uniform(5.5, 7, 300),
                                                    rng.uniform(-0.01, 0.01, 300)]), False),
        "tall splat at floor height": (np.column_stack([rng.uniform(-2, 2, 100), rng.uniform(-1, 1, 100),
                                                        rng.uniform(-0.01, 0.01, 100)]), False),
        "huge splat on the wall": (wall[500:600], False),
    }
    means = np.concatenate([group for group, _ in groups.values()])
    level = np.zeros((len(means), 4))
    level[:, 0] = 1.0  # identity rotations
    log_scales = np.tile(np.log([0.05, 0.05, 0.005]), (len(means), 1))  # level discs 5 mm thick
    log_scales[-200:-100] = np.log([0.05, 0.05, 0.3])  # the tall ones stand 30 cm
    log_scales[-100:] = np.log([0.6, 0.05, 0.6])  # far wider than the support radius
    extent = vertical_extents(level, log_scales)
    assert np.allclose(extent[:-200], 0.005) and np.allclose(extent[-200:-100], 0.3)
    tilted = Rotation.from_euler("x", 90, degrees=True).as_quat(scalar_first=True)
    assert np.isclose(vertical_extents(tilted[None], np.log([[0.05, 0.2, 0.005]]))[0], 0.2)  # y turned onto z
    keep = supported_splats(means, level, log_scales, points, floor_found=True)
    start = 0
    for name, (group, expected) in groups.items():
        kept = keep[start:start + len(group)].mean()
        assert kept == (1.0 if expected else 0.0) or (expected and kept > 0.97), (name, kept)
        start += len(group)
    # without a floor nothing is floor: splats on it need points within reach in 3D
    far_floor = groups["floor past every point"][0]
    assert not supported_splats(far_floor, level[:300], log_scales[:300], points, floor_found=False).any()


def test_nothing_under_the_found_floor_survives() -> None:
    above = trimesh.creation.box(bounds=[[0, 0, 0.0], [1, 1, 1]])
    under = trimesh.creation.box(bounds=[[2, 0, -0.6], [3, 1, -0.3]])
    kept, dropped = drop_below(trimesh.util.concatenate([above, under]), -0.1)
    assert dropped == len(under.faces)
    assert np.allclose(kept.bounds, above.bounds)



def test_the_floor_collider_is_the_slab_alone(scene) -> None:
    """No floor-height sheet in the collision structure: a probe dropped on one past the slab falls through."""
    from twinscan.check.probes import floor_extent

    _, _, result = scene
    assert floor_extent(result.collision) is None
    assert floor_extent(result.floor_slab) is not None
    # nothing collides in or under the slab, and no crumb smaller than the cleanup's minimum is left
    voxel = result.figures["voxel_size_m"]
    assert not (result.collision.vertices[result.collision.faces][:, :, 2] < voxel).all(axis=1).any()
    labels = trimesh.graph.connected_component_labels(result.collision.face_adjacency,
                                                      node_count=len(result.collision.faces))
    assert np.bincount(labels, weights=result.collision.area_faces).min() >= 100 * voxel ** 2 * 0.99


def test_projected_colour_ignores_views_the_mesh_cannot_explain() -> None:
    """A thin post missing from the mesh still hides the floor in the pictures of the nearest view:
    that view's colour, far from what the other views agree on, must not paint the floor."""
    from twinscan.meshing.raycast import mesh_depths
    from twinscan.meshing.texture import project_colours

    floor = trimesh.creation.box(bounds=[[-2, -2, -0.1], [2, 2, 0.0]])
    cameras = np.array([look_at((r * np.cos(a), r * np.sin(a), 1.5), (0, 0, 0))
                        for r, a in [(0.8, 0.0), (2.0, 1.0), (2.0, 2.5), (2.2, 4.0), (2.5, 5.5)]])
    Ks = np.repeat(K[None], len(cameras), axis=0)
    depth = mesh_depths(floor, Ks, cameras, WIDTH, HEIGHT)
    colour = np.full((len(cameras), HEIGHT, WIDTH, 3), 120, np.uint8)
    colour[0] = (200, 30, 30)  # the nearest view, weighing most, sees the post's red
    views = DepthViews(depth=depth, colour=colour, alpha=np.ones_like(depth), K=Ks, world_from_cam=cameras)
    points = np.array([[0.1, 0.0, 0.0], [-0.2, 0.3, 0.0]])
    projected, seen = project_colours(points, np.tile([0.0, 0.0, 1.0], (2, 1)), views, tolerance=0.01)
    assert seen.all()
    assert np.abs(projected - 120).max() < 1.0, projected


def test_floor_plane_is_found_among_clutter_and_tilted() -> None:
    """A slightly tilted floor among clutter in the band: the plane starts level at the busiest height
    and the least-squares refit finds the tilt."""
    rng = np.random.default_rng(1)
    xy = rng.uniform(-2, 2, (4000, 2))
    floor = np.column_stack([xy, 0.01 + 0.004 * xy[:, 0] + rng.normal(0, 0.004, len(xy))])  # 0.23 degrees tilt
    clutter = np.column_stack([rng.uniform(-2, 2, (1500, 2)), rng.uniform(-0.1, 0.1, 1500)])
    points = np.concatenate([floor, clutter])
    corners = np.repeat(points, 3, axis=0) + np.tile([[0, 0, 0], [1e-3, 0, 0], [0, 1e-3, 0]], (len(points), 1))
    mesh = trimesh.Trimesh(corners, np.arange(len(corners)).reshape(-1, 3), process=False)  # a tiny face a point
    found = detect_floor(mesh, band=0.1, max_tilt_deg=10, distance=0.01)
    assert found.height == pytest.approx(0.01, abs=1e-3) and found.tilt_deg == pytest.approx(0.23, abs=0.05)


def box_seen_from_an_arc():
    """A 2 x 2 x 1 m box rendered by seven views on an arc 4 m away: the views, and their depth (0: none)."""
    scene = trimesh.creation.box(extents=(2.0, 2.0, 1.0))
    scene.apply_translation((0, 0, 0.5))
    cameras = np.array([look_at((4.0 * np.cos(a), 4.0 * np.sin(a), 1.5), (0, 0, 0.5))
                        for a in np.linspace(-0.6, 0.6, 7)])
    views = render_mesh_views(scene, K, cameras, WIDTH, HEIGHT)
    depth = views.depth.copy()
    depth[~np.isfinite(depth)] = 0
    return views, depth


def test_depth_that_no_other_view_confirms_stays_out_of_the_fusion():
    """A blob that one view alone renders in front of the scene is dropped; the surface every view sees
    is kept, and so the fused mesh has no blob where only that view put one."""
    from twinscan.meshing.fusion import consistent_depth

    views, depth = box_seen_from_an_arc()
    depth[3, 40:60, 50:70] *= 0.8  # view 3 alone sees a blob 20 % nearer than the wall
    kept, share = consistent_depth(views, depth, min_agreeing=2, tolerance=0.02)
    assert (kept[3, 40:60, 50:70] == 0).all()
    others = np.ones_like(depth, bool)
    others[3, 40:60, 50:70] = False
    middle = others & (depth > 0) & (np.arange(len(depth)) >= 2)[:, None, None] & \
        (np.arange(len(depth)) <= 4)[:, None, None]
    assert (kept[middle] > 0).mean() > 0.99  # what the middle views' neighbours all see stays
    # the outermost views keep what two others also saw: 75 % here (their outer side faces, seen by fewer, go)
    assert 0.7 < (kept[0] > 0).sum() / (depth[0] > 0).sum() < 0.8
    assert share < 1.0
    kept_all, _ = consistent_depth(views, depth, min_agreeing=0, tolerance=0.02)
    assert kept_all is depth


def test_only_depth_beyond_the_agreement_distance_needs_other_views():
    """Depth nearer than `beyond` enters as rendered (the walk's close views pin the splats best); further
    off, a pixel no other view confirms stays out. One view renders two unconfirmed blobs, one nearer and
    one further than the distance: only the further goes."""
    from twinscan.meshing.fusion import consistent_depth

    views, depth = box_seen_from_an_arc()
    depth[3, 60:80, 40:60] *= 0.7  # nearer than the wall
    depth[3, 60:80, 90:110] *= 0.9
    near, far = depth[3, 60:80, 40:60], depth[3, 60:80, 90:110]
    assert (near > 0).all() and (far > 0).all() and near.max() < far.min()
    beyond = (near.max() + far.min()) / 2
    kept, _ = consistent_depth(views, depth, min_agreeing=2, tolerance=0.02, beyond=beyond)
    assert (kept[3, 60:80, 40:60] == near).all()
    assert (kept[3, 60:80, 90:110] == 0).all()
    confirmed, _ = consistent_depth(views, depth, min_agreeing=2, tolerance=0.02)
    assert (confirmed[3, 60:80, 40:60] == 0).all()  # without the distance, the near blob goes too


def test_the_mesh_progress_counts_only_steps_that_run():
    """Without --convex the bar has five steps and every one of them is reported (with it, six: the
    convex parts; CoACD is too slow to run here for a progress count)."""
    from twinscan.meshing.build import progress_steps

    views = render_mesh_views(trimesh.creation.box(extents=(1.0, 1.0, 1.0)), K, orbit(12), WIDTH, HEIGHT)
    cfg = MeshConfig(resolution=64, collision_faces=500, visual_faces=1000, texture_size=0)
    steps = []
    build_meshes(views, cfg, lambda n=1, status=None: steps.append(n))
    assert sum(steps) == progress_steps(cfg) == 5
    assert progress_steps(MeshConfig(convex=True)) == 6

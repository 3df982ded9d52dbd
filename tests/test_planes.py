"""Planar completion against ground truth: a textureless wall whose renders carry depth only in
fragments, and a glossy panel whose depth jumps behind it as reflections move with the view."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh

from twinscan.meshing import DepthViews, MeshConfig, build_meshes, metrics
from twinscan.meshing.planes import PlaneConfig
from twinscan.camera import look_at
from twinscan.meshing.raycast import render_mesh_views

WIDTH, HEIGHT = 160, 120
K = np.array([[140.0, 0, WIDTH / 2], [0, 140.0, HEIGHT / 2], [0, 0, 1]])
WALL_Y = 2.45  # the wall's face, facing -y: 3 m wide, 2 m high
PANEL_Y = 0.875  # the glossy panel's face, facing -y: 1.2 m wide, 1 m high, standing on the floor (a guard)
FRAGMENT_RADIUS = 0.12  # metres: where the textureless wall's renders carry depth at all


def box(extents, centre) -> trimesh.Trimesh:
    part = trimesh.creation.box(extents=extents)
    part.apply_translation(centre)
    return part


def scene() -> trimesh.Trimesh:
    """A floor slab, a textured crate, a 3 x 2 m textureless wall and a 1.2 x 1 m glossy panel."""
    parts = [box((8, 8, 0.1), (0, 0, -0.05)), box((0.6, 0.5, 0.6), (1.2, 0.4, 0.3)),
             box((3.0, 0.1, 2.0), (0, WALL_Y + 0.05, 1.0)), box((1.2, 0.05, 1.0), (-1.0, PANEL_Y + 0.025, 0.5))]
    return trimesh.util.concatenate(parts)


def walk(count: int) -> np.ndarray:
    """A walk across the room in front of the wall, looking at it and at the panel."""
    xs = np.linspace(-2.0, 2.0, count)
    return np.array([look_at((x, -1.8 + 0.3 * np.sin(3 * x), 1.4 + 0.2 * np.cos(2 * x)), (0.6 * x, 1.8, 0.8))
                     for x in xs])


def hard_renders(views: DepthViews, seed: int = 0) -> DepthViews:
    """What splat renders of these surfaces give the mesher. The textureless wall has depth only in
    fragments where something pinned its splats: its edges and corners (the only features a blank
    wall has: where it meets the floor and ends against the room) and a few spots on its face, a
    fifth of its area in all; elsewhere no depth. The glossy panel, in a band that moves with the
    view (the reflection sweeping across it), renders the reflected room's depth: 0.3 to 1 m behind
    its face."""
    rng = np.random.default_rng(seed)
    edges = [(x, z) for x in np.arange(-1.35, 1.4, 0.45) for z in (0.1, 1.9)] + \
        [(x, z) for x in (-1.4, 1.4) for z in np.arange(0.5, 1.6, 0.45)]
    fragments = np.concatenate([edges, np.column_stack([rng.uniform(-1.2, 1.2, 5), rng.uniform(0.4, 1.6, 5)])])
    depth, alpha = views.depth.copy(), views.alpha.copy()
    h, w = views.size
    v, u = np.mgrid[0:h, 0:w]
    pixels = np.stack([u + 0.5, v + 0.5, np.ones_like(u)], -1).reshape(-1, 3)
    for i in range(len(views)):
        z = depth[i].reshape(-1)
        finite = np.isfinite(z)
        world = (pixels @ np.linalg.inv(views.K[i]).T * np.where(finite, z, 0.0)[:, None]) \
            @ views.world_from_cam[i, :3, :3].T + views.world_from_cam[i, :3, 3]
        on_wall = finite & (np.abs(world[:, 1] - WALL_Y) < 1e-3)
        near_fragment = np.linalg.norm(world[:, None, [0, 2]] - fragments[None], axis=-1).min(axis=1) <= FRAGMENT_RADIUS
        blank = on_wall & ~near_fragment
        band = 0.1 + 0.8 * i / max(len(views) - 1, 1)  # the reflection's height on the panel, 0.1 .. 0.9 m
        mirrored = finite & (np.abs(world[:, 1] - PANEL_Y) < 1e-3) & (np.abs(world[:, 2] - band) < 0.15)
        z = np.where(mirrored, z + rng.uniform(0.3, 1.0), z)
        z[blank] = np.inf
        depth[i] = z.reshape(h, w)
        alpha[i] = np.where(blank.reshape(h, w), 0.0, alpha[i])
    return DepthViews(depth=depth, colour=views.colour, alpha=alpha, K=views.K, world_from_cam=views.world_from_cam)


@pytest.fixture(scope="module")
def built():
    truth = scene()
    views = render_mesh_views(truth, K, walk(24), WIDTH, HEIGHT)
    hard = hard_renders(views)
    cfg = MeshConfig(resolution=192, collision_faces=4000, visual_faces=6000, texture_size=0)
    with_planes = build_meshes(hard, cfg)
    without = build_meshes(hard, MeshConfig(resolution=192, collision_faces=4000, visual_faces=6000, texture_size=0,
                                            planes=PlaneConfig(enabled=False)))
    return truth, views, with_planes, without


def colliders(result) -> trimesh.Trimesh:
    return trimesh.util.concatenate([part for part in (result.collision, result.planes) if part is not None])


def face_points(views: DepthViews, y: float, x_range, z_range) -> np.ndarray:
    """True points of a face at `y` (facing -y) that at least two views saw."""
    xs, zs = np.meshgrid(np.arange(*x_range, 0.02), np.arange(*z_range, 0.02))
    points = np.column_stack([xs.ravel(), np.full(xs.size, y), zs.ravel()])
    return points[views.seen_by(points, 0.01).sum(axis=0) >= 2]


def test_a_textureless_wall_seen_by_many_views_is_closed_by_the_collider(built) -> None:
    _, views, with_planes, without = built
    wall = face_points(views, WALL_Y, (-1.49, 1.5), (0.03, 1.99))
    assert len(wall) > 5000
    covered = (metrics.surface_distance(colliders(with_planes), wall) <= 0.03).mean()
    assert covered >= 0.90, covered
    assert (metrics.surface_distance(colliders(without), wall) <= 0.03).mean() < 0.5, "the fragments alone close it"
    assert with_planes.figures["planar_patches"] >= 1 and with_planes.figures["planar_area_m2"] > 3.0
    patches = with_planes.planes.vertices
    assert len(np.unique(patches, axis=0)) == len(patches), "co-located points (NVIDIA's WeldChecker warns)"


def near_panel_p95(truth: trimesh.Trimesh, surface: trimesh.Trimesh) -> float:
    """95th percentile distance to the truth of the collider around the panel (in front and behind it)."""
    near = np.all((surface.triangles_center > [-1.8, 0.2, 0.05]) & (surface.triangles_center < [-0.2, 2.0, 1.3]),
                  axis=1)
    samples = metrics.sample_surface(surface.submesh([np.flatnonzero(near)], append=True), 20_000)
    return float(np.percentile(metrics.surface_distance(truth, samples), 95))


def test_a_glossy_panel_is_not_bloated(built) -> None:
    truth, views, with_planes, without = built
    assert near_panel_p95(truth, colliders(with_planes)) <= 0.05
    assert near_panel_p95(truth, colliders(without)) > 0.20, "the reflections did not bloat the fused panel"
    assert with_planes.figures["ghost_faces_removed"] > 0
    panel = face_points(views, PANEL_Y, (-1.59, -0.4), (0.03, 0.99))
    assert (metrics.surface_distance(colliders(with_planes), panel) <= 0.03).mean() >= 0.90


def test_patches_are_written_and_become_a_collider_marked_as_inferred(built, tmp_path) -> None:
    import json

    from pxr import Usd, UsdPhysics

    from twinscan.check.colliders import collider_surface
    from twinscan.layout import PLANES
    from twinscan.meshing import write_meshes
    from twinscan.usd_export.collision import PLANAR_COMPLETION, author_collision

    _, _, with_planes, _ = built
    assert PLANES in write_meshes(with_planes, tmp_path / "mesh")
    assert json.loads((tmp_path / "mesh" / "mesh.json").read_text())["figures"]["planar_patches"] >= 1
    stage = Usd.Stage.CreateInMemory()
    author_collision(stage, "/Collision", with_planes.collision, (), None, planes=with_planes.planes)
    planes = stage.GetPrimAtPath("/Collision/Planes")
    assert planes.HasAPI(UsdPhysics.CollisionAPI) and planes.GetCustomDataByKey(PLANAR_COMPLETION) is True
    assert stage.GetPrimAtPath("/Collision/Mesh").GetCustomDataByKey(PLANAR_COMPLETION) is None
    expected = with_planes.collision.area + with_planes.planes.area
    assert collider_surface(stage).area == pytest.approx(expected, rel=0.02)

"""Geometry is judged where it matters: the floor and the structure above it apart, and the colliders as a
simulator loads them from the USD. Checked against surfaces whose errors are known in closed form."""

from __future__ import annotations

import numpy as np
import pytest
import trimesh
from pxr import Usd, UsdGeom, UsdPhysics

from twinscan.check.colliders import collider_surface
from twinscan.meshing import metrics


def floor_square(half: float = 2.0) -> trimesh.Trimesh:
    return trimesh.Trimesh([[-half, -half, 0], [half, -half, 0], [half, half, 0], [-half, half, 0]],
                           [[0, 1, 2], [0, 2, 3]], process=False)


def open_box(height: float) -> trimesh.Trimesh:
    """A 1 x 1 m box standing on z = 0 at the origin, without its bottom (the floor hides it)."""
    box = trimesh.creation.box(extents=(1.0, 1.0, height))
    box.apply_translation((0, 0, height / 2))
    keep = ~((box.face_normals[:, 2] < -0.99))
    return box.submesh([np.flatnonzero(keep)], append=True)


@pytest.fixture(scope="module")
def truth():
    scene = trimesh.util.concatenate([floor_square(), open_box(1.0)])
    return scene, metrics.sample_surface(scene, 200_000, seed=1)


def test_a_perfect_reconstruction_scores_perfectly_in_both_regions(truth):
    scene, seen = truth
    scores = metrics.region_scores(scene, scene, seen)
    for region in ("floor", "structure"):
        score = scores[region]
        assert score.median < 1e-4 and score.p95 < 1e-4
        assert score.f_score(0.02) > 0.999 and score.f_score(0.05) > 0.999
    # box: 5 m2 of 21 m2 (the floor under the box is still part of the floor square)
    assert scores["structure"].true_points / len(seen) == pytest.approx(5 / 21, abs=0.01)


def test_a_missing_box_fails_the_structure_and_not_the_floor(truth):
    """Floor alone: a headline completeness over the whole scene would still say 76 %."""
    scene, seen = truth
    scores = metrics.region_scores(floor_square(), scene, seen)
    assert scores["floor"].f_score(0.05) > 0.999
    structure = scores["structure"]
    assert structure.samples == 0
    # only the box's sides between 2 and 5 cm are within 5 cm of the floor: 4 x 0.03 of 5 m2
    assert structure.completeness[0.05] == pytest.approx(0.12 / 5, abs=0.006)
    assert structure.f_score(0.05) == 0.0


def test_a_box_ten_centimetres_too_tall_is_scored_as_computed_by_hand(truth):
    scene, seen = truth
    tall = trimesh.util.concatenate([floor_square(), open_box(1.1)])
    structure = metrics.region_scores(tall, scene, seen)["structure"]
    # the tall box's top (1 m2) lies 10 cm off, its sides above 1.05 m (0.2 m2) more than 5 cm off: of 5.4 m2
    assert structure.precision[0.05] == pytest.approx(1 - 1.2 / 5.4, abs=0.01)
    # the true top is within 5 cm of the tall sides only along its rim: 1 - 0.9^2 of it; the true sides lie on them
    assert structure.completeness[0.05] == pytest.approx((4 + 0.19) / 5, abs=0.01)
    assert structure.p95 == pytest.approx(0.1, abs=0.005)


def test_the_colliders_are_read_as_a_simulator_builds_them(tmp_path):
    """A triangle-mesh collider as authored, a convex-hull part as its hull, the slab as its box, a guide
    mesh with no CollisionAPI and a disabled collider left out."""
    stage = Usd.Stage.CreateNew(str(tmp_path / "twin.usda"))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)

    def mesh_prim(path, mesh, approximation=None, collide=True, enabled=True):
        prim = UsdGeom.Mesh.Define(stage, path)
        prim.CreatePointsAttr([tuple(v) for v in mesh.vertices])
        prim.CreateFaceVertexCountsAttr([3] * len(mesh.faces))
        prim.CreateFaceVertexIndicesAttr(mesh.faces.ravel().tolist())
        if collide:
            api = UsdPhysics.CollisionAPI.Apply(prim.GetPrim())
            api.CreateCollisionEnabledAttr(enabled)
            if approximation:
                UsdPhysics.MeshCollisionAPI.Apply(prim.GetPrim()).CreateApproximationAttr(approximation)

    mesh_prim("/World/Box", open_box(1.0), UsdPhysics.Tokens.none)
    # an L-shaped (non-convex) part: its hull is a different, larger surface
    ell = trimesh.util.concatenate([trimesh.creation.box(extents=(2, 0.2, 0.2)),
                                    trimesh.creation.box(extents=(0.2, 2, 0.2))])
    ell.apply_translation((5, 5, 0.1))
    mesh_prim("/World/Part", ell, UsdPhysics.Tokens.convexHull)
    mesh_prim("/World/Visual", trimesh.creation.icosphere(), collide=False)
    mesh_prim("/World/Off", trimesh.creation.icosphere(), UsdPhysics.Tokens.none, enabled=False)
    cube = UsdGeom.Cube.Define(stage, "/World/Floor")
    cube.CreateSizeAttr(1.0)
    cube.AddTranslateOp().Set((0.0, 0.0, -0.025))
    cube.AddScaleOp().Set((4.0, 4.0, 0.05))
    UsdPhysics.CollisionAPI.Apply(cube.GetPrim())

    surface = collider_surface(stage)
    expected = open_box(1.0).area + ell.convex_hull.area + 2 * 16 + 4 * 4 * 0.05
    assert surface.area == pytest.approx(expected, rel=1e-6)
    assert surface.bounds[0] == pytest.approx([-2, -2, -0.05])


def test_collider_faces_seen_squarely_by_many_views_are_trusted_and_unseen_ones_are_not():
    """A box filmed from its +x side only: that face is trusted, the far face and the top (above every
    camera) are uncertain because no view saw them, and the summary says so by area."""
    from twinscan.camera import look_at
    from twinscan.meshing.confidence import face_confidence
    from twinscan.meshing.raycast import render_mesh_views

    box = trimesh.creation.box(extents=(1.0, 1.0, 1.0))
    box.apply_translation((0, 0, 0.5))
    box = box.subdivide().subdivide()  # faces small enough that their centres sample each side
    K = np.array([[200.0, 0, 80], [0, 200.0, 60], [0, 0, 1]])
    cameras = np.array([look_at((3.0, y, 0.5), (0, 0, 0.5)) for y in np.linspace(-0.8, 0.8, 5)])
    views = render_mesh_views(box, K, cameras, 160, 120)
    trust = face_confidence(box, views, tolerance=0.01)
    normals = box.face_normals
    front, back, top = normals[:, 0] > 0.99, normals[:, 0] < -0.99, normals[:, 2] > 0.99
    assert trust.confidence[front].min() > 0.7
    assert (trust.views[front] == 5).all()
    assert trust.confidence[back].max() == 0 and trust.confidence[top].max() == 0
    summary = trust.summary(box.area_faces)
    assert summary["few_views_share"] >= 2 / 6  # back and top at least; the bottom is unseen too
    assert summary["uncertain_share"] == pytest.approx(float(box.area_faces[trust.uncertain].sum()) / 6, abs=1e-3)
    # nearer views make more of the same evidence: the footprint term
    nearer = np.array([look_at((2.0, y, 0.5), (0, 0, 0.5)) for y in np.linspace(-0.5, 0.5, 5)])
    near = face_confidence(box, render_mesh_views(box, K, nearer, 160, 120), tolerance=0.01)
    assert near.confidence[front].mean() > trust.confidence[front].mean()


def test_a_floor_slab_under_the_floor_costs_no_precision(truth):
    """The slab's underside, 5 cm below the floor, is out of any robot's reach: its top is the floor."""
    scene, seen = truth
    slab = trimesh.creation.box(extents=(4.0, 4.0, 0.05))
    slab.apply_translation((0, 0, -0.025))
    floor = metrics.region_scores(trimesh.util.concatenate([slab, open_box(1.0)]), scene, seen)["floor"]
    assert floor.precision[0.02] > 0.97 and floor.completeness[0.02] > 0.999

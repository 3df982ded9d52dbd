"""`twinscan check`: static validation of twin stages, and probes dropped on their colliders in NVIDIA Newton."""

from __future__ import annotations

import hashlib
from pathlib import Path

import cv2
import numpy as np
import pytest
import trimesh
from pxr import Gf, Usd, UsdGeom, UsdPhysics, Vt

from twinscan.check import CheckConfig, check_twin, plot_probes
from twinscan.check.physics import ProbeRest
from twinscan.check.probes import ProbeSite
from twinscan.check.report import classify_rest
from twinscan.check.validate import UnitsFacts, units_errors

FLOOR_XY = ((-2.0, -1.5), (2.0, 1.5))
MACHINE_EXTENTS = (1.0, 0.8, 0.8)  # a box-shaped machine on the floor, top at z = 0.8
MACHINE_CENTRE = (0.6, 0.4, 0.4)
HOLE_XY = ((-1.6, -1.2), (-0.8, -0.4))  # 0.8 m square where the scanned floor is missing


def _machine() -> trimesh.Trimesh:
    return trimesh.creation.box(extents=MACHINE_EXTENTS, transform=trimesh.transformations.translation_matrix(
        MACHINE_CENTRE))


def _floor_with_hole(cell: float = 0.2) -> trimesh.Trimesh:
    """The scanned floor as a triangle grid at z = 0, without the cells inside HOLE_XY."""
    (x0, y0), (x1, y1) = FLOOR_XY
    quads = []
    for x in np.arange(x0, x1 - 1e-9, cell):
        for y in np.arange(y0, y1 - 1e-9, cell):
            centre = (x + cell / 2, y + cell / 2)
            if HOLE_XY[0][0] < centre[0] < HOLE_XY[1][0] and HOLE_XY[0][1] < centre[1] < HOLE_XY[1][1]:
                continue
            quads.append([(x, y, 0), (x + cell, y, 0), (x + cell, y + cell, 0), (x, y + cell, 0)])
    vertices = np.asarray(quads, np.float64).reshape(-1, 3)
    first = np.arange(len(quads))[:, None] * 4
    faces = np.concatenate([first + [0, 1, 2], first + [0, 2, 3]])
    return trimesh.Trimesh(vertices, faces)


def _author_mesh_collider(stage: Usd.Stage, path: str, mesh: trimesh.Trimesh, mesh_api: bool = True) -> None:
    prim = UsdGeom.Mesh.Define(stage, path)
    points = Vt.Vec3fArray.FromNumpy(np.asarray(mesh.vertices, np.float32))
    prim.CreatePointsAttr(points)
    prim.CreateFaceVertexCountsAttr(Vt.IntArray.FromNumpy(np.full(len(mesh.faces), 3, np.int32)))
    prim.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(np.asarray(mesh.faces, np.int32).ravel()))
    prim.CreateExtentAttr(UsdGeom.PointBased.ComputeExtent(points))
    # polygonal with normals, as NVIDIA's Asset Validator (run by check_twin) asks of every mesh
    prim.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
    prim.CreateNormalsAttr(Vt.Vec3fArray.FromNumpy(np.asarray(mesh.vertex_normals, np.float32)))
    prim.SetNormalsInterpolation(UsdGeom.Tokens.vertex)
    prim.CreatePurposeAttr(UsdGeom.Tokens.guide)
    UsdPhysics.CollisionAPI.Apply(prim.GetPrim())
    if mesh_api:
        UsdPhysics.MeshCollisionAPI.Apply(prim.GetPrim()).CreateApproximationAttr(UsdPhysics.Tokens.none)


def _step_machine() -> trimesh.Trimesh:
    """A tall block (top 1.2 m) beside a low one (top 0.3 m): concave, so its convex hull covers the low top."""
    tall = trimesh.creation.box(extents=(0.4, 1.0, 1.2),
                                transform=trimesh.transformations.translation_matrix((-0.6, 0.0, 0.6)))
    low = trimesh.creation.box(extents=(1.2, 1.0, 0.3),
                               transform=trimesh.transformations.translation_matrix((0.2, 0.0, 0.15)))
    return trimesh.util.concatenate([tall, low])


def author_twin(path: Path, *, hole: bool = False, meters_per_unit: float = 1.0, mesh_api: bool = True,
                convex_hull_step: bool = False) -> Path:
    """A twin in issue 7's layout: /World, Z up, metres, /World/Collision/Mesh (the scan, approximation none)
    and /World/Collision/Floor, a 5 cm slab whose top is z = 0 -- or, with `hole`, the floor is part of the
    scanned mesh and has a hole, with no floor collider under it."""
    stage = Usd.Stage.CreateNew(str(path))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, meters_per_unit)
    UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
    stage.SetDefaultPrim(UsdGeom.Xform.Define(stage, "/World").GetPrim())
    UsdGeom.Scope.Define(stage, "/World/Collision")
    scan = trimesh.util.concatenate([_machine(), _floor_with_hole()]) if hole else _machine()
    _author_mesh_collider(stage, "/World/Collision/Mesh", scan, mesh_api)
    if convex_hull_step:  # a wrong approximation: physics sees the hull, not the mesh
        _author_mesh_collider(stage, "/World/Collision/Step", _step_machine().apply_translation((-0.8, 0.0, 0.0)))
        UsdPhysics.MeshCollisionAPI(stage.GetPrimAtPath("/World/Collision/Step")).GetApproximationAttr().Set(
            UsdPhysics.Tokens.convexHull)
    if not hole:
        (x0, y0), (x1, y1) = FLOOR_XY
        floor = UsdGeom.Cube.Define(stage, "/World/Collision/Floor")
        floor.CreateSizeAttr(1.0)
        floor.CreateExtentAttr([(-0.5, -0.5, -0.5), (0.5, 0.5, 0.5)])
        floor.CreatePurposeAttr(UsdGeom.Tokens.guide)
        floor.AddTranslateOp().Set(Gf.Vec3d((x0 + x1) / 2, (y0 + y1) / 2, -0.025))
        floor.AddScaleOp().Set(Gf.Vec3f(x1 - x0, y1 - y0, 0.05))
        UsdPhysics.CollisionAPI.Apply(floor.GetPrim())
    scene = UsdPhysics.Scene.Define(stage, "/World/PhysicsScene")
    scene.CreateGravityDirectionAttr(Gf.Vec3f(0, 0, -1))
    scene.CreateGravityMagnitudeAttr(9.81)
    stage.GetRootLayer().Save()
    return path


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- static validation (usd-core only) ---

def test_centimetre_metadata_on_metre_data_is_caught_and_says_what_to_fix(tmp_path: Path) -> None:
    twin = author_twin(tmp_path / "twin.usda", meters_per_unit=0.01)
    report = check_twin(twin, CheckConfig(physics=False))
    assert not report.verdict
    assert report.units.meters_per_unit == 0.01
    assert report.units.collider_span_units[:2] == pytest.approx((4.0, 3.0))
    assert report.units.collider_span_m[:2] == pytest.approx((0.04, 0.03))
    [message] = [error for error in report.errors if "metersPerUnit" in error]
    assert "0.01 (centimetres)" in message and "implausibly small" in message
    assert "the data are in metres" in message and "set metersPerUnit = 1" in message
    assert report.verdict_line.startswith("FAIL")


def test_a_sound_stage_has_no_static_errors_and_exact_counts(tmp_path: Path) -> None:
    twin = author_twin(tmp_path / "twin.usda")
    report = check_twin(twin, CheckConfig(physics=False))
    assert report.errors == [] and report.verdict and not report.probes
    assert report.units == UnitsFacts(1.0, "Z", 1.0, "/World", pytest.approx((4.0, 3.0, 0.85)),
                                      pytest.approx((4.0, 3.0, 0.85)))
    assert report.counts["colliders"] == 2 and report.counts["collider_triangles"] == 12 + 12
    assert "physics not run" in report.verdict_line


def test_nvidias_asset_validator_runs_in_check_and_its_failures_fail_the_verdict(tmp_path: Path) -> None:
    sound = check_twin(author_twin(tmp_path / "sound.usda"), CheckConfig(physics=False))
    assert sound.asset_validation is not None and sound.asset_validation.failures == []
    assert "NormalsExistChecker" in sound.asset_validation.rules_run and len(sound.asset_validation.rules_run) >= 40
    assert "NVIDIA Asset Validator 0 failures, 0 warnings" in sound.verdict_line and sound.verdict
    twin = author_twin(tmp_path / "no_normals.usda")
    stage = Usd.Stage.Open(str(twin))
    stage.GetPrimAtPath("/World/Collision/Mesh").RemoveProperty("normals")
    stage.GetRootLayer().Save()
    report = check_twin(twin, CheckConfig(physics=False))
    [line] = [error for error in report.errors if "NormalsExistChecker" in error]
    assert line.startswith("NVIDIA Asset Validator: NormalsExistChecker (failure) at /World/Collision/Mesh: ")
    assert not report.verdict and "NVIDIA Asset Validator 1 failure, 0 warnings" in report.verdict_line
    figures = report.figures()
    assert figures["asset_validator_failures"] == 1 and figures["asset_validator_warnings"] == 0
    assert figures["asset_validator_by_rule"] == {"NormalsExistChecker": {"failure": 1}}
    assert report.to_dict()["asset_validation"]["issues"][0]["prim"] == "/World/Collision/Mesh"
    skipped = check_twin(twin, CheckConfig(physics=False, asset_validator=False))
    assert skipped.asset_validation is None and "NVIDIA Asset Validator not run (not asked for)" in skipped.verdict_line


def test_a_mesh_collider_without_mesh_collision_api_is_an_error(tmp_path: Path) -> None:
    report = check_twin(author_twin(tmp_path / "twin.usda", mesh_api=False), CheckConfig(physics=False))
    assert any("/World/Collision/Mesh is a mesh collider without UsdPhysics.MeshCollisionAPI" in error
               for error in report.errors)
    assert not report.verdict


def test_millimetre_data_on_a_metre_stage_is_implausibly_large() -> None:
    facts = UnitsFacts(1.0, "Z", 1.0, "/World", (4000.0, 3000.0, 850.0), (4000.0, 3000.0, 850.0))
    [message] = units_errors(facts)
    assert "4e+03 m horizontally" in message and "not in metres" in message
    assert units_errors(UnitsFacts(1.0, "Y", 1.0, None, (4.0, 3.0, 1.0), (4.0, 3.0, 1.0)))[0].startswith(
        "the stage's upAxis is Y")


@pytest.mark.parametrize(("bottom_z", "speed", "outcome"), [
    (0.79, 0.0, "rested"), (0.829, 0.01, "rested"), (0.84, 0.0, "hovered"), (0.76, 0.0, "fell_through"),
    (-5.0, 9.0, "fell_through"), (0.8, 0.3, "unsettled")])
def test_a_probe_rests_only_within_3_cm_of_the_surface_below_and_still(bottom_z: float, speed: float,
                                                                       outcome: str) -> None:
    site = ProbeSite("probe_000", (0.5, 0.5), "object", 0.8)
    result = classify_rest(site, ProbeRest((0.5, 0.5, bottom_z + 0.1), bottom_z, speed), 0.03, 0.05)
    assert result.outcome == outcome and result.rest_error_m == pytest.approx(bottom_z - 0.8)


# --- physics proof (NVIDIA Newton, the `physics` extra) ---

@pytest.fixture(scope="module")
def newton_checked(tmp_path_factory: pytest.TempPathFactory) -> dict:
    pytest.importorskip("newton")
    folder = tmp_path_factory.mktemp("physics")
    twins = {"sound": author_twin(folder / "sound.usda"), "holed": author_twin(folder / "holed.usda", hole=True),
             "centimetres": author_twin(folder / "centimetres.usda", meters_per_unit=0.01),
             "hull": author_twin(folder / "hull.usda", convex_hull_step=True)}
    before = {path: _sha256(path) for path in twins.values()}
    reports = {name: check_twin(path) for name, path in twins.items()}
    return {"reports": reports, "before": before, "folder": folder}


def test_every_probe_rests_on_the_floor_or_the_machine_within_3_cm(newton_checked: dict) -> None:
    report = newton_checked["reports"]["sound"]
    assert report.physics_run and report.errors == []
    surfaces = [probe.surface for probe in report.probes]
    assert surfaces.count("object") >= 1 and surfaces.count("floor") >= 8 and "hole" not in surfaces
    for probe in report.probes:
        truth = MACHINE_EXTENTS[2] if probe.surface == "object" else 0.0
        assert probe.surface_z == pytest.approx(truth, abs=1e-3)
        assert probe.outcome == "rested", probe
        assert abs(probe.rest_bottom_z - truth) <= 0.03
        assert np.hypot(*(np.subtract(probe.rest_position[:2], probe.xy))) < 0.05  # it did not slide off
    assert report.verdict and report.verdict_line.startswith("PASS")


def test_a_hole_in_the_collision_mesh_is_caught_where_it_is(newton_checked: dict) -> None:
    report = newton_checked["reports"]["holed"]
    fallen = [probe for probe in report.probes if probe.outcome == "fell_through"]
    assert len(fallen) == 1 and fallen[0].surface == "hole"
    (x0, y0), (x1, y1) = HOLE_XY
    assert x0 < fallen[0].xy[0] < x1 and y0 < fallen[0].xy[1] < y1
    assert fallen[0].rest_bottom_z < -1.0
    assert all(probe.outcome == "rested" for probe in report.probes if probe is not fallen[0])
    assert not report.verdict and "1 fell through at" in report.verdict_line


def test_a_probe_held_up_by_a_convex_hull_over_a_concave_collider_hovers(newton_checked: dict) -> None:
    report = newton_checked["reports"]["hull"]
    [low_top] = [probe for probe in report.probes if probe.surface_z == pytest.approx(0.3, abs=1e-3)]
    assert low_top.outcome == "hovered" and low_top.rest_bottom_z > 0.3 + 0.03
    assert all(probe.outcome == "rested" for probe in report.probes if probe is not low_top)
    assert not report.verdict and "1 hovered at" in report.verdict_line


def test_physics_is_not_run_on_a_stage_whose_units_are_wrong(newton_checked: dict) -> None:
    report = newton_checked["reports"]["centimetres"]
    assert not report.physics_run and not report.probes and not report.verdict
    assert "physics not run (skipped: fix the units" in report.verdict_line


def test_the_files_on_disk_are_untouched(newton_checked: dict) -> None:
    for path, digest in newton_checked["before"].items():
        assert _sha256(path) == digest
    assert sorted(p.name for p in newton_checked["folder"].iterdir()) == [
        "centimetres.usda", "holed.usda", "hull.usda", "sound.usda"]


def test_the_top_down_figure_shows_each_probe_in_its_outcome_colour(newton_checked: dict) -> None:
    report = newton_checked["reports"]["holed"]
    png = plot_probes(report, newton_checked["folder"] / "figures" / "probes.png")
    image = cv2.imread(str(png))
    assert image is not None and max(image.shape[:2]) >= 800
    green = np.all(image == (80, 200, 60), axis=-1).sum()
    red = np.all(image == (40, 40, 230), axis=-1).sum()
    assert green > 50 * sum(probe.outcome == "rested" for probe in report.probes) and red > 10

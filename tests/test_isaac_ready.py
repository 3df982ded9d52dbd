"""Isaac-ready: NVIDIA's Asset Validator passes the twin (.usda and .usdz), the colliders carry a bound
UsdPhysics material, meshes are manifold, splats are SH degree 0 or 3, `twinscan check` names a broken rule,
and `usd --from-ply` says what its twin lacks. The real validator, usd-core and the CLI; no mocks."""

from __future__ import annotations

import ast
import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest
import trimesh
from pxr import Sdf, Usd, UsdPhysics, UsdShade
from test_gaussians import random_gaussians
from typer.testing import CliRunner

from twinscan.check.asset_validation import DISABLED_RULES, validate_asset
from twinscan.cli.app import app
from twinscan.gaussians import write_ply
from twinscan.usd_export import TwinContent, write_twin
from twinscan.usd_export.topology import SPLIT_NUDGE, manifold_surface
from twinscan.workspace import Workspace

av = pytest.importorskip("omni.asset_validator")
REPO = Path(__file__).resolve().parent.parent
runner = CliRunner()
# Rules the twin must pass that were failing or warning before (the issue's list) or that it could break.
KEY_RULES = {"MaterialUsdPreviewSurfaceChecker", "NormalsExistChecker", "ManifoldChecker", "IndexedPrimvarChecker",
             "GaussianSplatSchemaChecker", "WeldChecker", "NormalsWindingsChecker", "ColliderChecker",
             "UsdzPackageValidator"}
TWIN_FILES = ("twin.usda", "twin_splats.usdc", "twin_background.usdc", "twin_collision.usdc", "twin_visual.usdc",
              "twin_cameras.usdc", "twin_diffuse.png")


@pytest.fixture(scope="module")
def smoke_ws(smoke_capture: Path) -> Path:
    """The tiny synthetic walkthrough at smoke quality through every stage (tests/conftest.py)."""
    return smoke_capture


def _copy_twin(ws: Path, destination: Path) -> Path:
    destination.mkdir(parents=True)
    for name in TWIN_FILES:
        if (ws / name).exists():
            shutil.copyfile(ws / name, destination / name)
    return destination / "twin.usda"


@pytest.fixture(scope="module")
def usdz_workspace(smoke_ws: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the smoke capture re-exported by the CLI with --usdz and a non-default physics material."""
    copy = tmp_path_factory.mktemp("usdz") / "out"
    shutil.copytree(smoke_ws, copy, ignore=shutil.ignore_patterns(".twinscan.lock"))
    result = runner.invoke(app, ["usd", str(copy), "--usdz", "--force", "--static-friction", "0.9",
                                 "--dynamic-friction", "0.7", "--restitution", "0"])
    assert result.exit_code == 0, result.output
    return copy


def test_the_smoke_twin_passes_nvidias_asset_validator(smoke_ws: Path) -> None:
    validation = validate_asset(smoke_ws / "twin.usda")
    assert [issue.line() for issue in validation.issues] == []
    assert validation.failures == [] and validation.warnings == []
    assert KEY_RULES - {"UsdzPackageValidator"} <= set(validation.rules_run)
    assert DISABLED_RULES == {} and validation.disabled == {}  # no rule is switched off
    # `capture` ran `check`, which recorded the validator's figures in the manifest
    figures = Workspace(smoke_ws).stage_record("check")["figures"]
    assert figures["asset_validator_run"] is True
    assert figures["asset_validator_failures"] == 0 and figures["asset_validator_warnings"] == 0
    assert figures["verdict"] is True


def test_the_usdz_passes_too_package_rules_included(usdz_workspace: Path) -> None:
    usdz = usdz_workspace / "twin.usdz"
    validation = validate_asset(usdz)
    assert [issue.line() for issue in validation.issues] == []
    assert "UsdzPackageValidator" in validation.rules_run and "GaussianSplatSchemaChecker" in validation.rules_run


def _collider_material(stage: Usd.Stage, prim: Usd.Prim) -> UsdPhysics.MaterialAPI:
    material, _ = UsdShade.MaterialBindingAPI(prim).ComputeBoundMaterial("physics")
    assert material, f"{prim.GetPath()} has no physics material bound"
    assert material.GetPrim().HasAPI(UsdPhysics.MaterialAPI)
    return UsdPhysics.MaterialAPI(material.GetPrim())


@pytest.mark.parametrize(("which", "expected"), [("default", (0.6, 0.5, 0.1)), ("cli", (0.9, 0.7, 0.0))])
def test_every_collider_has_the_physics_material_bound(smoke_ws: Path, usdz_workspace: Path, which: str,
                                                       expected: tuple[float, float, float]) -> None:
    root = smoke_ws if which == "default" else usdz_workspace
    stage = Usd.Stage.Open(str(root / "twin.usda"))
    colliders = [prim for prim in stage.Traverse() if prim.HasAPI(UsdPhysics.CollisionAPI)]
    assert {str(prim.GetPath()) for prim in colliders} >= {"/World/Collision/Mesh", "/World/Collision/Floor"}
    for prim in colliders:
        material = _collider_material(stage, prim)
        assert material.GetPrim().GetPath() == "/World/Collision/PhysicsMaterials/Surface"
        values = (material.GetStaticFrictionAttr().Get(), material.GetDynamicFrictionAttr().Get(),
                  material.GetRestitutionAttr().Get())
        assert values == pytest.approx(expected)
    figures = Workspace(root).stage_record("usd")["figures"]
    assert (figures["static_friction"], figures["dynamic_friction"], figures["restitution"]) == pytest.approx(expected)


def test_a_physics_material_that_makes_no_sense_is_one_line_and_exit_code(tmp_path: Path) -> None:
    result = runner.invoke(app, ["usd", str(tmp_path / "out"), "--static-friction", "0.3",
                                 "--dynamic-friction", "0.8"])
    assert result.exit_code != 0
    assert "dynamic friction 0.8 is above static friction 0.3" in result.output
    assert not (tmp_path / "out").exists()


def _break_preview_surface(twin: Path) -> None:
    """UsdUVTexture's outputs:rgb authored as color3f (its definition says float3), as twinscan did before."""
    stage = Usd.Stage.Open(str(twin.parent / "twin_visual.usdc"))
    diffuse = UsdShade.Shader(stage.GetPrimAtPath("/Visual/Looks/Surface/Diffuse"))
    diffuse.GetPrim().RemoveProperty("outputs:rgb")
    surface = UsdShade.Shader(stage.GetPrimAtPath("/Visual/Looks/Surface/PreviewSurface"))
    surface.GetInput("diffuseColor").ConnectToSource(diffuse.CreateOutput("rgb", Sdf.ValueTypeNames.Color3f))
    stage.GetRootLayer().Save()


def _remove_collision_normals(twin: Path) -> None:
    stage = Usd.Stage.Open(str(twin.parent / "twin_collision.usdc"))
    stage.GetPrimAtPath("/Collision/Mesh").RemoveProperty("normals")
    stage.GetRootLayer().Save()


@pytest.mark.parametrize(("breakage", "rule", "prim"), [
    (_break_preview_surface, "MaterialUsdPreviewSurfaceChecker", "/World/Visual/Looks/Surface"),
    (_remove_collision_normals, "NormalsExistChecker", "/World/Collision/Mesh")])
def test_check_names_the_broken_rule_in_one_line_and_fails(smoke_ws: Path, tmp_path: Path, breakage,
                                                           rule: str, prim: str) -> None:
    twin = _copy_twin(smoke_ws, tmp_path / "broken")
    breakage(twin)
    result = runner.invoke(app, ["check", str(twin), "--no-physics"])
    assert result.exit_code == 1, result.output
    [line] = [line for line in result.output.splitlines() if rule in line]
    assert line.startswith("error NVIDIA Asset Validator:") and f"({'failure'}) at {prim}:" in line
    assert "NVIDIA Asset Validator 1 failure," in result.output and "FAIL" in result.output


def test_check_takes_the_capture_folder_for_its_twin(smoke_ws: Path, tmp_path: Path) -> None:
    """A technician passes the folder `twinscan capture -o` wrote; one without a twin says which file is missing."""
    result = runner.invoke(app, ["check", str(smoke_ws), "--no-physics"])
    assert result.exit_code == 0 and f"PASS {smoke_ws / 'twin.usda'}" in result.output, result.output
    result = runner.invoke(app, ["check", str(tmp_path), "--no-physics"])
    assert result.exit_code != 0 and f"{tmp_path / 'twin.usda'} does not exist" in result.output, result.output


def test_a_disabled_rule_is_not_run_and_the_others_still_are(smoke_ws: Path, tmp_path: Path) -> None:
    twin = _copy_twin(smoke_ws, tmp_path / "broken")
    _remove_collision_normals(twin)
    validation = validate_asset(twin, disabled={"ManifoldChecker": "for this test"})
    assert "ManifoldChecker" not in validation.rules_run and validation.disabled == {"ManifoldChecker": "for this test"}
    assert [issue.rule for issue in validation.failures] == ["NormalsExistChecker"]
    assert len(validation.rules_run) >= 40


def test_bowties_overfull_edges_and_flipped_faces_are_repaired() -> None:
    """Two squares touching at one corner (a bowtie), one of them wound half one way and half the other, a
    small fin on the first square's diagonal (a third triangle on that edge), and a repeated triangle."""
    vertices = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [2, 1, 0], [2, 2, 0], [1, 2, 0],
                         [0.5, 0.5, 0.1]], np.float64)
    faces = np.array([[0, 1, 2], [0, 3, 2],  # square 1, its second triangle wound against the first
                      [2, 4, 5], [5, 6, 2],  # square 2, meets square 1 only at vertex 2
                      [2, 0, 7],  # the fin on the diagonal 0-2
                      [2, 5, 4]])  # square 2's first triangle again, flipped
    before = av.check_manifold_elements(len(vertices), faces.ravel().tolist(), [3] * len(faces))
    assert before != (0, 0, True)
    surface = manifold_surface(vertices, faces)
    after = av.check_manifold_elements(len(surface.points), surface.faces.ravel().tolist(), [3] * len(surface.faces))
    assert after == (0, 0, True)
    assert len(np.unique(surface.points, axis=0)) == len(surface.points)  # split copies do not coincide
    moved = np.linalg.norm(surface.points - vertices[surface.source], axis=1)
    assert moved.max() <= SPLIT_NUDGE * 2.0 and surface.removed_faces >= 2
    # a clean mesh goes through unchanged
    box = trimesh.creation.box()
    clean = manifold_surface(box.vertices, box.faces)
    np.testing.assert_array_equal(clean.faces, box.faces)
    np.testing.assert_array_equal(clean.points, box.vertices.astype(np.float32))


@pytest.mark.parametrize("degree", [0, 1, 2, 3])
def test_splats_are_written_at_sh_degree_0_or_3(tmp_path: Path, degree: int) -> None:
    gaussians = random_gaussians(20, degree, seed=degree)
    twin = write_twin(tmp_path / "twin.usda", TwinContent(gaussians=gaussians))
    stage = Usd.Stage.Open(str(twin))
    prim = stage.GetPrimAtPath("/World/Splats")
    written = prim.GetAttribute("radiance:sphericalHarmonicsDegree").Get()
    assert written == (0 if degree == 0 else 3)
    coefficients = prim.GetAttribute("radiance:sphericalHarmonicsCoefficients")
    k = (degree + 1) ** 2
    values = np.asarray(coefficients.Get()).reshape(20, (written + 1) ** 2, 3)
    np.testing.assert_allclose(values[:, :k], gaussians.sh, rtol=1e-6)
    assert not values[:, k:].any()
    assert coefficients.GetMetadata("elementSize") == (written + 1) ** 2
    assert coefficients.GetMetadata("interpolation") == "vertex"


def test_from_ply_without_a_mesh_says_what_it_lacks_and_info_reads_it(tmp_path: Path) -> None:
    ply = write_ply(tmp_path / "splats.ply", random_gaussians(200, 3, seed=3))
    out = tmp_path / "out"
    result = runner.invoke(app, ["usd", str(out), "--from-ply", str(ply)])
    assert result.exit_code == 0, result.output
    assert "only collider is a z = 0 floor slab" in result.output and "the scale is arbitrary" in result.output
    stage = Usd.Stage.Open(str(out / "twin.usda"))
    assert not stage.GetPrimAtPath("/World").GetVariantSets().HasVariantSet("appearance")  # no empty "mesh"
    record = Workspace(out).stage_record("usd")
    assert record["status"] == "done" and record["figures"]["splats"] == 200
    assert any("the scale is arbitrary" in warning for warning in record["warnings"])
    info = runner.invoke(app, ["info", str(out)])
    assert info.exit_code == 0, info.output
    assert "not a twinscan workspace" not in info.output and "splats=200" in info.output
    assert "only collider is a z = 0 floor slab" in info.output
    assert validate_asset(out / "twin.usda").issues == ()


def test_a_failed_from_ply_leaves_no_folder_behind(tmp_path: Path) -> None:
    not_a_ply = tmp_path / "notes.ply"
    not_a_ply.write_text("hello")
    result = runner.invoke(app, ["usd", str(tmp_path / "out"), "--from-ply", str(not_a_ply)])
    assert result.exit_code != 0 and "not a PLY file" in result.output
    assert not (tmp_path / "out").exists()
    existing = tmp_path / "kept"
    existing.mkdir()
    (existing / "mine.txt").write_text("x")
    result = runner.invoke(app, ["usd", str(existing), "--from-ply", str(not_a_ply)])
    assert result.exit_code != 0 and (existing / "mine.txt").read_text() == "x"
    assert not (existing / "twin.usda").exists()


def test_the_isaac_guide_snippets_parse() -> None:
    text = (REPO / "docs" / "isaac.md").read_text()
    python = re.findall(r"^```python\n(.*?)^```", text, re.M | re.S)
    bash = re.findall(r"^```bash\n(.*?)^```", text, re.M | re.S)
    assert len(python) >= 5 and bash
    for block in python:
        ast.parse(block)
    for block in bash:
        for line in block.splitlines():
            words = shlex.split(line)
            if words and words[0] == "twinscan":
                assert runner.invoke(app, [words[1], "--help"]).exit_code == 0
                help_text = runner.invoke(app, [words[1], "--help"]).output
                for option in (word for word in words if word.startswith("--")):
                    assert option in help_text, option
    for heading in ("Isaac Sim 6.x", "Isaac Sim 5.x", "Isaac Lab: a static scene", "Isaac Lab: the twin as terrain"):
        assert f"## {heading}" in text
    from twinscan.usd_export.content import PhysicsMaterial
    material = PhysicsMaterial()
    assert (f"static friction {material.static_friction:g}, dynamic {material.dynamic_friction:g}, "
            f"restitution {material.restitution:g}") in text

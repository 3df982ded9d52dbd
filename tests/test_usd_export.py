"""The OpenUSD twin: every splat attribute, colliders, material binding, cameras, validation, clean opens."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import cv2
import numpy as np
import pytest
import trimesh
from pxr import Sdf, Usd, UsdGeom, UsdPhysics, UsdShade, UsdVol
from scipy.spatial.transform import Rotation
from test_gaussians import random_gaussians

from twinscan.errors import TwinscanError
from twinscan.gaussians import read_ply, split_similarity, transform, write_ply
from twinscan.usd_export import (CameraTrack, ExportOptions, FloorArea, TwinContent, TwinMetadata,
                                 package_from_ply, summarize, validation_errors, write_twin)

WORLD_FROM_COLMAP = np.eye(4)
WORLD_FROM_COLMAP[:3, :3] = 0.8 * Rotation.from_rotvec([0.4, -0.3, 1.2]).as_matrix()
WORLD_FROM_COLMAP[:3, 3] = [0.5, -1.0, 2.0]


def _splats_prim(stage: Usd.Stage) -> UsdVol.ParticleField3DGaussianSplat:
    return UsdVol.ParticleField3DGaussianSplat(stage.GetPrimAtPath("/World/Splats"))


@pytest.fixture(scope="module")
def from_ply(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("from_ply")
    ply = write_ply(folder / "splats.ply", random_gaussians(300, 3, seed=5))
    mesh = trimesh.creation.box(extents=(2.0, 3.0, 1.0))
    mesh.export(folder / "collision.obj")
    twin = package_from_ply(ply, folder / "out" / "twin.usda", mesh_path=folder / "collision.obj",
                            world_from_colmap=WORLD_FROM_COLMAP, scale_source="manual")
    expected_mesh = mesh.copy()
    expected_mesh.apply_transform(WORLD_FROM_COLMAP)
    return {"ply": ply, "twin": twin, "mesh": expected_mesh}


@pytest.mark.parametrize("half_precision", [False, True])
def test_every_splat_attribute_equals_the_ply_after_activation_and_frame_transform(
        tmp_path: Path, from_ply: dict, half_precision: bool) -> None:
    expected = transform(read_ply(from_ply["ply"]), *split_similarity(WORLD_FROM_COLMAP))
    twin = package_from_ply(from_ply["ply"], tmp_path / "twin.usda", world_from_colmap=WORLD_FROM_COLMAP,
                            options=ExportOptions(half_precision=half_precision))
    stage = Usd.Stage.Open(str(twin))
    splats = _splats_prim(stage)
    suffix = "h" if half_precision else ""
    rtol = 2e-3 if half_precision else 1e-6

    def authored(name: str) -> np.ndarray:
        attribute = splats.GetPrim().GetAttribute(name + suffix)
        assert not splats.GetPrim().GetAttribute(name + ("" if half_precision else "h")).HasAuthoredValue()
        return np.asarray(attribute.Get(), dtype=np.float64)

    np.testing.assert_array_equal(np.asarray(splats.GetPositionsAttr().Get()), expected.means)
    np.testing.assert_allclose(authored("scales"), expected.scales, rtol=rtol)
    np.testing.assert_allclose(authored("opacities"), expected.opacities, rtol=rtol, atol=1e-7)
    quats_xyzw = authored("orientations")
    np.testing.assert_allclose(np.roll(quats_xyzw, 1, axis=1), expected.quats, atol=rtol)
    coefficients = splats.GetPrim().GetAttribute("radiance:sphericalHarmonicsCoefficients" + suffix)
    assert coefficients.GetMetadata("elementSize") == 16
    np.testing.assert_allclose(np.asarray(coefficients.Get()).reshape(300, 16, 3), expected.sh,
                               rtol=rtol, atol=2e-3 if half_precision else 1e-7)
    assert splats.GetRadianceSphericalHarmonicsDegreeAttr().Get() == 3


def test_extents_contain_every_point(from_ply: dict) -> None:
    stage = Usd.Stage.Open(str(from_ply["twin"]))
    for prim in stage.Traverse():
        if not prim.IsA(UsdGeom.Boundable) or prim.IsA(UsdGeom.Cube):
            continue
        points_attr = prim.GetAttribute("positions") if prim.IsA(UsdVol.ParticleField) else prim.GetAttribute("points")
        points = np.asarray(points_attr.Get())
        lower, upper = np.asarray(UsdGeom.Boundable(prim).GetExtentAttr().Get())
        assert len(points) and np.all(points >= lower) and np.all(points <= upper), prim.GetPath()


def test_collision_mesh_floor_and_physics_scene(from_ply: dict) -> None:
    stage = Usd.Stage.Open(str(from_ply["twin"]))
    mesh = stage.GetPrimAtPath("/World/Collision/Mesh")
    assert mesh.HasAPI(UsdPhysics.CollisionAPI) and mesh.HasAPI(UsdPhysics.MeshCollisionAPI)
    assert UsdPhysics.MeshCollisionAPI(mesh).GetApproximationAttr().Get() == "none"
    assert UsdGeom.Imageable(mesh).ComputePurpose() == UsdGeom.Tokens.guide
    assert not mesh.HasAPI(UsdPhysics.RigidBodyAPI)  # a static environment
    np.testing.assert_allclose(np.asarray(UsdGeom.Mesh(mesh).GetPointsAttr().Get()), from_ply["mesh"].vertices,
                               atol=1e-5)

    floor = stage.GetPrimAtPath("/World/Collision/Floor")
    assert floor.HasAPI(UsdPhysics.CollisionAPI)
    bound = UsdGeom.Imageable(floor).ComputeWorldBound(Usd.TimeCode.Default(), UsdGeom.Tokens.guide)
    lower, upper = (np.asarray(corner) for corner in (bound.ComputeAlignedRange().GetMin(),
                                                      bound.ComputeAlignedRange().GetMax()))
    assert upper[2] == pytest.approx(0.0, abs=1e-9) and lower[2] < 0
    footprint = from_ply["mesh"].bounds[:, :2]
    assert np.all(lower[:2] < footprint[0]) and np.all(upper[:2] > footprint[1])

    scene = UsdPhysics.Scene(stage.GetPrimAtPath("/World/PhysicsScene"))
    assert tuple(scene.GetGravityDirectionAttr().Get()) == (0, 0, -1)
    assert UsdGeom.GetStageUpAxis(stage) == "Z" and UsdGeom.GetStageMetersPerUnit(stage) == 1.0
    assert UsdPhysics.GetStageKilogramsPerUnit(stage) == 1.0


def test_the_root_layer_is_small_and_heavy_data_lives_in_usdc_layers(from_ply: dict) -> None:
    twin = from_ply["twin"]
    assert twin.stat().st_size < 4096
    layer = Sdf.Layer.FindOrOpen(str(twin.parent / "twin_splats.usdc"))
    assert layer.GetFileFormat().formatId == "usdc" and layer.defaultPrim == "Splats"


def _far(gaussians):
    """The same splats 50 m along x: a background beyond the cell."""
    import dataclasses

    return dataclasses.replace(gaussians, means=gaussians.means + np.array([50.0, 0.0, 0.0], np.float32))


@pytest.fixture(scope="module")
def full_twin(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("full")
    texture = folder / "albedo.png"
    cv2.imwrite(str(texture), np.random.default_rng(0).integers(0, 255, (32, 32, 3), dtype=np.uint8))
    visual = trimesh.creation.icosphere(subdivisions=2)
    visual.visual = trimesh.visual.TextureVisuals(uv=np.random.default_rng(1).random((len(visual.vertices), 2)))
    times = np.linspace(0.0, 2.0, 5)
    world_from_cam = np.stack([np.eye(4)] * 5)
    world_from_cam[:, :3, :3] = Rotation.from_rotvec(np.outer(times, [0.2, 0.5, -0.1])).as_matrix()
    world_from_cam[:, :3, 3] = np.outer(times, [1.0, 0.5, 0.2]) + [0, 0, 1.5]
    track = CameraTrack(K=np.array([[700.0, 0, 300], [0, 690, 260], [0, 0, 1]]), width=640, height=480,
                        world_from_cam=world_from_cam, times=times)
    content = TwinContent(
        gaussians=random_gaussians(50, 1), background=_far(random_gaussians(12, 1, seed=7)),
        collision_mesh=trimesh.creation.box(),
        convex_parts=(trimesh.creation.box(), trimesh.creation.icosphere()), visual_mesh=visual,
        visual_texture=texture, cameras=track, floor=FloorArea((-3, -3), (3, 3)),
        metadata=TwinMetadata(source_sha256="ab" * 32, scale_source="marker", origin="marker 0",
                              figures={"psnr_db": 31.5}))
    usdz = write_twin(folder / "twin.usda", content, ExportOptions(usdz=True))
    return {"usda": folder / "twin.usda", "usdz": usdz, "track": track, "content": content}


def test_the_textured_mesh_binds_its_material_and_the_texture_resolves(full_twin: dict) -> None:
    stage = Usd.Stage.Open(str(full_twin["usda"]))
    mesh = stage.GetPrimAtPath("/World/Visual/Mesh")
    material, _ = UsdShade.MaterialBindingAPI(mesh).ComputeBoundMaterial()
    assert material.GetPath() == "/World/Visual/Looks/Surface"
    surface = material.ComputeSurfaceSource()[0]
    assert surface.GetIdAttr().Get() == "UsdPreviewSurface"
    texture = surface.GetInput("diffuseColor").GetConnectedSources()[0][0].source
    file_input = UsdShade.Shader(texture.GetPrim()).GetInput("file")
    assert UsdShade.Shader(texture.GetPrim()).GetIdAttr().Get() == "UsdUVTexture"
    assert Path(file_input.Get().resolvedPath).read_bytes() == (full_twin["usda"].parent / "albedo.png").read_bytes()
    assert UsdGeom.PrimvarsAPI(mesh).GetPrimvar("st").Get() is not None


def test_vertex_coloured_mesh_feeds_linear_display_colour_to_its_material(tmp_path: Path) -> None:
    visual = trimesh.creation.box()
    visual.visual.vertex_colors = np.tile([255, 128, 0, 255], (len(visual.vertices), 1))
    twin = write_twin(tmp_path / "twin.usda", TwinContent(gaussians=random_gaussians(5, 0), visual_mesh=visual))
    stage = Usd.Stage.Open(str(twin))
    mesh = stage.GetPrimAtPath("/World/Visual/Mesh")
    colours = np.asarray(UsdGeom.Mesh(mesh).GetDisplayColorPrimvar().Get())
    np.testing.assert_allclose(colours[0], [1.0, 0.21586, 0.0], atol=1e-4)  # sRGB 128 is linear 0.216
    material, _ = UsdShade.MaterialBindingAPI(mesh).ComputeBoundMaterial()
    assert material.GetPath() == "/World/Visual/Looks/Surface"
    assert validation_errors(twin) == []


def test_the_camera_reproduces_the_capture_poses_and_intrinsics(full_twin: dict) -> None:
    stage = Usd.Stage.Open(str(full_twin["usda"]))
    track = full_twin["track"]
    camera = UsdGeom.Camera(stage.GetPrimAtPath("/World/Cameras/Capture"))
    rng = np.random.default_rng(2)
    for time, world_from_cam in zip(track.times, track.world_from_cam, strict=True):
        code = Usd.TimeCode(time * stage.GetTimeCodesPerSecond())
        world_from_usd_cam = np.asarray(camera.ComputeLocalToWorldTransform(code)).T
        # USD looks down -Z with +Y up: the OpenCV axes with y and z flipped.
        np.testing.assert_allclose(world_from_usd_cam, world_from_cam @ np.diag([1, -1, -1, 1]), atol=1e-9)
        # Project OpenCV camera-frame points with K and with USD's own frustum.
        points_cv = np.column_stack([rng.uniform(-1, 1, (20, 2)), rng.uniform(1, 5, 20)])
        pixels = (points_cv @ track.K.T)[:, :2] / points_cv[:, 2:]
        projection = np.asarray(camera.GetCamera(code).frustum.ComputeProjectionMatrix())
        clip = np.column_stack([points_cv * [1, -1, -1], np.ones(20)]) @ projection
        ndc = clip[:, :2] / clip[:, 3:]
        usd_pixels = np.column_stack([(ndc[:, 0] + 1) / 2 * track.width, (1 - ndc[:, 1]) / 2 * track.height])
        np.testing.assert_allclose(usd_pixels, pixels, atol=1e-3)
    samples = camera.GetOrderedXformOps()[0].GetTimeSamples()
    assert len(samples) == 5 and stage.GetEndTimeCode() == samples[-1]


def test_the_appearance_variant_switches_between_splats_and_mesh(full_twin: dict) -> None:
    stage = Usd.Stage.Open(str(full_twin["usda"]))
    variants = stage.GetPrimAtPath("/World").GetVariantSets().GetVariantSet("appearance")

    def visible(name: str) -> bool:
        return UsdGeom.Imageable(stage.GetPrimAtPath(f"/World/{name}")).ComputeVisibility() != "invisible"

    assert variants.GetVariantSelection() == "splats" and visible("Splats") and not visible("Visual")
    variants.SetVariantSelection("mesh")
    assert not visible("Splats") and visible("Visual") and visible("Collision")


def test_the_background_splats_are_their_own_prim_off_until_turned_on(full_twin: dict) -> None:
    """The splats outside the captured region (the hall behind the cell) are kept, not dropped, but
    invisible by default, so "frame all" frames the cell; turning them on brings them back."""
    from twinscan.check.asset_validation import validate_asset

    stage = Usd.Stage.Open(str(full_twin["usda"]))
    background = UsdVol.ParticleField3DGaussianSplat(stage.GetPrimAtPath("/World/Background"))
    expected = full_twin["content"].background
    assert np.allclose(np.array(background.GetPositionsAttr().Get()), expected.means, atol=1e-6)
    assert background.ComputeVisibility() == UsdGeom.Tokens.invisible

    def world_max_x() -> float:
        cache = UsdGeom.BBoxCache(Usd.TimeCode.Default(), [UsdGeom.Tokens.default_])
        return cache.ComputeWorldBound(stage.GetPrimAtPath("/World")).ComputeAlignedRange().GetMax()[0]

    assert world_max_x() < 10  # the background stands 40-60 m away: "frame all" leaves it out
    background.GetPrim().GetAttribute("visibility").Set(UsdGeom.Tokens.inherited)
    assert world_max_x() > 39
    validation = validate_asset(full_twin["usda"])
    assert not validation.failures and not validation.warnings, validation.to_dict()


@pytest.mark.parametrize("kind", ["usda", "usdz"])
def test_validation_reports_no_errors(full_twin: dict, from_ply: dict, kind: str) -> None:
    assert validation_errors(full_twin[kind]) == []
    if kind == "usda":
        assert validation_errors(from_ply["twin"]) == []


def test_validation_catches_a_missing_layer(tmp_path: Path) -> None:
    twin = write_twin(tmp_path / "twin.usda", TwinContent(gaussians=random_gaussians(5, 0)))
    (tmp_path / "twin_splats.usdc").unlink()
    assert validation_errors(twin)


def test_the_usdz_holds_every_layer_and_the_texture(full_twin: dict) -> None:
    names = zipfile.ZipFile(full_twin["usdz"]).namelist()
    assert names[0] == "twin.usda"
    assert {"twin_splats.usdc", "twin_collision.usdc", "twin_visual.usdc", "twin_cameras.usdc",
            "twin_diffuse.png"} <= set(names)


@pytest.mark.parametrize("kind", ["usda", "usdz"])
def test_the_stage_opens_in_a_clean_process_with_only_pxr(full_twin: dict, kind: str) -> None:
    script = ("import sys\nfrom pxr import Usd\nstage = Usd.Stage.Open(sys.argv[1])\n"
              "splats = stage.GetPrimAtPath('/World/Splats')\n"
              "assert not any(m.split('.')[0] in ('numpy', 'twinscan', 'trimesh') for m in sys.modules)\n"
              "print(splats.GetTypeName(), len(splats.GetAttribute('positions').Get()),"
              " stage.GetPrimAtPath('/World/Visual/Mesh').IsValid())")
    result = subprocess.run([sys.executable, "-I", "-c", script, str(full_twin[kind])],
                            capture_output=True, text=True, timeout=120, cwd="/")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ParticleField3DGaussianSplat", "50", "True"]


def test_summarize_describes_the_twin(full_twin: dict) -> None:
    summary = summarize(full_twin["usda"])
    assert summary["default_prim"] == "/World" and summary["up_axis"] == "Z"
    assert summary["meters_per_unit"] == 1.0 and summary["kilograms_per_unit"] == 1.0
    assert summary["splats"] == 50 and summary["sh_degree"] == 3  # degree 1 is written as 3 (Isaac Sim hangs on 1)
    assert summary["background_splats"] == 12
    content = full_twin["content"]
    colliders = [content.collision_mesh, *content.convex_parts]
    assert summary["collision_triangles"] == sum(len(mesh.faces) for mesh in colliders)
    assert summary["visual_triangles"] == len(content.visual_mesh.faces)
    assert summary["colliders"] == 4 and summary["camera_samples"] == 5 and summary["textured"]
    assert summary["scale_source"] == "marker" and summary["figures"] == {"psnr_db": 31.5}
    assert summary["provenance"]["source_sha256"] == "ab" * 32 and summary["appearance"] == "splats"
    assert summary["provenance"]["origin"] == "marker 0"  # what x, y and yaw are tied to
    assert summary["prims"]["/World/Splats"] == "ParticleField3DGaussianSplat"


def test_bad_inputs_raise_twinscan_error(tmp_path: Path) -> None:
    ply = write_ply(tmp_path / "s.ply", random_gaussians(5, 0))
    with pytest.raises(TwinscanError, match="does not exist"):
        package_from_ply(ply, tmp_path / "twin.usda", mesh_path=tmp_path / "missing.obj")
    with pytest.raises(TwinscanError, match=".usda"):
        package_from_ply(ply, tmp_path / "twin.usdc")
    with pytest.raises(TwinscanError):
        summarize(tmp_path / "nothing.usda")
    assert not (tmp_path / "twin.usda").exists()


def test_the_twin_carries_every_figure_its_provenance_promises(smoke_capture):
    """Each figure `FIGURES_FROM` and `SFM_FIGURES` name is in the twin's customLayerData, with the stage's
    own value: a misspelt key (sfm's reprojection error was asked for without its `_px`) was dropped
    without a word. The sfm part comes from the stage's typed record, as do the scale source and origin."""
    from twinscan.recon.sfm.record import ScaleSource, read_sfm_record
    from twinscan.usd_export.inspection import summarize
    from twinscan.usd_export.stage import FIGURES_FROM, SFM_FIGURES
    from twinscan.workspace import Workspace

    summary = summarize(smoke_capture / "twin.usda")
    figures = summary["figures"]
    ws = Workspace(smoke_capture)
    for stage, keys in [*FIGURES_FROM.items(), ("sfm", SFM_FIGURES)]:
        for key in keys:
            assert figures[f"{stage}_{key}"] == pytest.approx(ws.stage_record(stage)["figures"][key]), key
    assert figures["sfm_mean_reprojection_error_px"] > 0
    record = read_sfm_record(ws)
    assert figures["sfm_registered"] == record.registered > 0
    assert record.world.scale_source == ScaleSource.MARKER and record.world.metric  # the tiny capture's marker
    assert summary["scale_source"] == "marker"

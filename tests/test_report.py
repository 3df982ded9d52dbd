"""OUT/report.html: self-contained, complete on a finished capture, honest about stages that did not
finish, and drawn by a real browser (headless Chromium)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from html import escape as html_escape
from pathlib import Path

import numpy as np
import pycolmap
import pytest
import trimesh
from PIL import Image

from twinscan.errors import TwinscanError
from twinscan.report import REPORT, build_report, write_report
from twinscan.report.figures import MeshLayer, heldout_view, oblique_camera, render_layers
from twinscan.workspace import Workspace

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SECTIONS = ("warnings", "stages", "frames", "plan", "heldout", "mesh", "usd", "check", "provenance")
BROKEN = "could not be drawn"


@pytest.fixture(scope="module")
def finished(smoke_capture: Path) -> Workspace:
    """The tiny synthetic walkthrough through every stage (smoke quality), as a user runs it (conftest)."""
    return Workspace(smoke_capture)


@pytest.fixture(scope="module")
def finished_html(finished: Workspace) -> str:
    return build_report(finished)


def _copy(ws: Workspace, destination: Path) -> Workspace:
    shutil.copytree(ws.root, destination, ignore=shutil.ignore_patterns(".twinscan.lock", REPORT))
    return Workspace(destination)


def _edit_manifest(ws: Workspace, edit) -> None:
    manifest = json.loads(ws.manifest_path.read_text())
    edit(manifest["stages"])
    ws.manifest_path.write_text(json.dumps(manifest))


def _section(html: str, anchor: str) -> str:
    match = re.search(rf'<section id="{anchor}">(.*?)</section>', html, re.S)
    assert match, f"section {anchor} missing"
    return match.group(1)


def _references(html: str) -> list[str]:
    return re.findall(r'\b(?:src|href|xlink:href)\s*=\s*"([^"]*)"', html)


# ---- a finished capture ---------------------------------------------------------------------------------------

def test_finished_report_is_self_contained_and_complete(finished: Workspace, finished_html: str) -> None:
    html = finished_html
    references = _references(html)
    assert references and all(ref.startswith(("data:image/", "#")) for ref in references), \
        [ref[:40] for ref in references if not ref.startswith(("data:image/", "#"))]
    assert not re.search(r"(https?:|file:)//", html), "a URL would need the network or a file beside the page"
    assert "<script" not in html and "<link" not in html and "@import" not in html
    for anchor in SECTIONS:
        assert f'<section id="{anchor}">' in html
    assert BROKEN not in html

    manifest = finished.manifest()
    frames_kept = manifest["stages"]["frames"]["figures"]["kept"]
    heldout = len(list(finished.path("splats/heldout").glob("*.png")))
    assert _section(html, "frames").count("<img") == min(frames_kept, 40)
    assert _section(html, "heldout").count("<img") == 3 * min(heldout, 6)  # render, photo, error per view
    assert _section(html, "mesh").count("<img") == 3  # visual, collision, collider confidence
    assert _section(html, "check").count('src="data:image/png') == 1  # probes.png
    assert _section(html, "plan").count("<svg") == 1
    for record in manifest["stages"].values():  # every warning, word for word
        for warning in record.get("warnings", []):
            assert warning.replace("'", "&#x27;") in html
    assert "Simulation-ready twin" in html or "Twin written, with" in html


def test_unposed_frames_and_the_camera_path_match_the_sfm_figures(finished: Workspace, finished_html: str) -> None:
    html = finished_html
    sfm = finished.manifest()["stages"]["sfm"]["figures"]
    unposed = sfm["total"] - sfm["registered"]
    assert _section(html, "frames").count('class="unregistered"') == unposed
    plan = _section(html, "plan")
    assert plan.count('r="2.6"') == sfm["registered"]  # one dot per posed camera
    # the path is dashed across unposed frames between posed ones; unposed frames before the first or
    # after the last posed one leave nothing to join
    kept = sorted(Path(entry["file"]).name for entry in json.loads(finished.path("frames.json").read_text()))
    posed = sorted(kept.index(image.name) for image in pycolmap.Reconstruction(finished.path("sfm")).images.values()
                   if image.has_pose)
    unposed_between = posed[-1] - posed[0] + 1 - len(posed)
    assert ('stroke-dasharray="5 4"' in plan) == (unposed_between > 0)
    if sfm["scale"] == "arbitrary":
        assert "scale: arbitrary" in _section(html, "warnings") and "y (units)" in plan
    assert f'<div class="v">{sfm["origin"]}</div>' in html  # what the twin's x, y and yaw hang on


def test_heldout_scores_match_the_trainers(finished: Workspace) -> None:
    """Per-view scores from the 8-bit PNGs average to the trainer's float figures: the halves are
    split and paired right."""
    figures = finished.manifest()["stages"]["splats"]["figures"]
    views = [heldout_view(png) for png in sorted(finished.path("splats/heldout").glob("*.png"))]
    assert len(views) == figures["heldout_views"]
    assert abs(np.mean([v.psnr for v in views]) - figures["psnr"]) < 0.2
    assert abs(np.mean([v.ssim for v in views]) - figures["ssim"]) < 0.02
    assert all(v.render.shape == v.truth.shape == v.error.shape for v in views)
    # scores are symmetric; detail is not: the photo is sharper than a splat render (left and right not swapped)
    assert all(_sharpness(v.truth) > _sharpness(v.render) for v in views)


def _sharpness(rgb: np.ndarray) -> float:
    import cv2

    return float(cv2.Laplacian(cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY), cv2.CV_64F).var())


# ---- stages that did not finish -------------------------------------------------------------------------------

def test_the_mesh_section_says_where_the_collider_is_uncertain(finished: Workspace, finished_html: str) -> None:
    """The per-face confidence is drawn and put in words that match the mesh stage's figures."""
    from twinscan.report.sections import confidence_in_words

    summary = finished.stage_record("mesh")["figures"]["collision_confidence"]
    confidence = np.load(finished.path("mesh/collision_confidence.npy"))
    collision = trimesh.load(finished.path("mesh/collision.obj"), process=False, force="mesh")
    assert len(confidence) == len(collision.faces) and 0 <= confidence.min() <= confidence.max() <= 1
    uncertain = float(collision.area_faces[confidence < 0.5].sum() / collision.area)
    assert summary["uncertain_share"] == pytest.approx(uncertain, abs=2e-4)
    mesh = _section(finished_html, "mesh")
    assert "collider confidence" in mesh and html_escape(confidence_in_words(summary)) in mesh
    check = _section(finished_html, "check")
    assert "NVIDIA Asset Validator</td><td>0 failures / 0 warnings" in check
    assert confidence_in_words({**summary, "uncertain_share": 0.0}).startswith("Every part")


def test_report_after_a_failed_mesh_stage(finished: Workspace, tmp_path: Path) -> None:
    ws = _copy(finished, tmp_path / "failed")
    shutil.rmtree(ws.path("mesh"))
    shutil.rmtree(ws.path("check"))
    for layer in ws.root.glob("twin*"):
        layer.unlink()

    def fail_mesh(stages: dict) -> None:
        stages["mesh"] = {**stages["mesh"], "status": "failed", "figures": {}, "outputs": [],
                          "error": "no surface where the cameras looked -- film the scene from closer"}
        del stages["usd"], stages["check"]

    _edit_manifest(ws, fail_mesh)
    path = write_report(ws)
    html = path.read_text()
    assert path == ws.path(REPORT)
    assert "Failed at stage &#x27;mesh&#x27;" in html
    assert "Fix: film the scene from closer" in _section(html, "warnings")
    assert "Fix: film the scene from closer" in _section(html, "mesh")
    for anchor in ("usd", "check"):
        assert "has not run (the mesh stage before it did not finish)" in _section(html, anchor)
    assert _section(html, "frames").count("<img") > 0 and _section(html, "heldout").count("<img") > 0
    assert "<svg" in _section(html, "plan") and "floor slab extent" not in _section(html, "plan")
    assert BROKEN not in html


def test_report_of_a_capture_interrupted_in_sfm(finished: Workspace, tmp_path: Path) -> None:
    ws = _copy(finished, tmp_path / "interrupted")
    for folder in ("sfm", "splats", "mesh", "check"):
        shutil.rmtree(ws.path(folder))

    def interrupt(stages: dict) -> None:
        stages["sfm"] = {key: stages["sfm"][key] for key in ("params", "inputs", "versions", "started")}
        stages["sfm"]["status"] = "running"  # what a killed run leaves behind
        for name in ("splats", "mesh", "usd", "check"):
            del stages[name]

    _edit_manifest(ws, interrupt)
    html = build_report(ws)
    assert "Interrupted during stage &#x27;sfm&#x27;" in html
    assert "was interrupted" in _section(html, "plan")
    assert _section(html, "frames").count('class="unregistered"') == 0  # nothing is known about poses yet
    for anchor in ("heldout", "mesh", "usd", "check"):
        assert "has not run (the sfm stage before it did not finish)" in _section(html, anchor)
    assert BROKEN not in html


def test_a_corrupt_file_costs_only_its_section(finished: Workspace, tmp_path: Path) -> None:
    ws = _copy(finished, tmp_path / "corrupt")
    ws.path("mesh/visual_colours.ply").write_bytes(b"ply\nformat binary_little_endian 1.0\nelement vertex 9")
    html = build_report(ws)
    assert BROKEN in _section(html, "mesh")
    assert all(BROKEN not in _section(html, anchor) for anchor in SECTIONS if anchor != "mesh")


def test_a_capture_whose_mesh_found_no_floor_draws_its_camera_path(finished: Workspace, tmp_path: Path) -> None:
    """mesh.json says "floor": null when no floor plane was found (a wall-hung object, a poor capture)."""
    ws = _copy(finished, tmp_path / "no_floor")
    summary = json.loads(ws.path("mesh/mesh.json").read_text())
    ws.path("mesh/mesh.json").write_text(json.dumps({**summary, "floor": None}))
    html = build_report(ws)
    assert BROKEN not in _section(html, "plan")
    assert _section(html, "plan").count('r="2.6"') == ws.stage_record("sfm")["figures"]["registered"]


def test_a_folder_without_manifest_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TwinscanError, match="not a twinscan workspace"):
        write_report(Workspace(tmp_path))
    assert not (tmp_path / REPORT).exists()


def test_report_command_writes_the_file(finished: Workspace, tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from twinscan.cli.report import report

    app = typer.Typer()
    app.command()(report)
    app.command("unused")(lambda: None)  # two commands, so typer keeps the command name
    ws = _copy(finished, tmp_path / "cli")
    result = CliRunner().invoke(app, ["report", str(ws.root)])
    assert result.exit_code == 0, result.output
    assert ws.path(REPORT).stat().st_size > 100_000
    assert CliRunner().invoke(app, ["report", str(tmp_path / "nothing")]).exit_code == 2


# ---- the mesh preview -----------------------------------------------------------------------------------------

def test_oblique_render_frames_the_mesh_with_its_colours() -> None:
    box = trimesh.creation.box(extents=(2.0, 1.0, 0.5))
    red = np.tile(np.array([[220, 30, 30]], np.uint8), (len(box.faces), 1))
    width, height = 320, 200
    K, world_from_cam = oblique_camera(np.asarray(box.vertices), width, height, margin=0.1)
    image = render_layers([MeshLayer(np.asarray(box.vertices), np.asarray(box.faces), red)], K, world_from_cam,
                          width, height)
    hit = (image[..., 0].astype(int) - image[..., 2]) > 40  # reddish: the box, shaded
    rows, cols = np.nonzero(hit)
    # the box's bounding box fills the frame up to the margin (10%) on its tighter axis, and stays inside
    assert rows.min() >= 0.1 * height - 2 and rows.max() <= 0.9 * height + 2
    assert cols.min() >= 0.1 * width - 2 and cols.max() <= 0.9 * width + 2
    assert max((rows.max() - rows.min()) / (0.8 * height), (cols.max() - cols.min()) / (0.8 * width)) > 0.9
    assert image[hit][:, 1].max() <= 30 and image[hit][:, 0].max() <= 220  # shading only darkens the colour
    assert len(np.unique(image[hit][:, 0])) >= 3  # faces facing the light differently are shaded differently


# ---- a real browser -------------------------------------------------------------------------------------------

def _screenshot(html_path: Path, png: Path, profile: Path) -> np.ndarray:
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={profile}", f"--screenshot={png}", "--window-size=1280,2000",
                    html_path.resolve().as_uri()], check=True, capture_output=True, timeout=120)
    return np.asarray(Image.open(png).convert("RGB")).astype(np.int16)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)")
def test_chromium_draws_the_report_with_its_images(finished: Workspace, tmp_path: Path) -> None:
    ws = _copy(finished, tmp_path / "browser")
    page = write_report(ws)
    shot = _screenshot(page, tmp_path / "report.png", tmp_path / "profile")
    assert shot.shape[:2] == (2000, 1280)
    assert shot.std() > 30, "the page is (nearly) blank"
    assert len(np.unique(shot.reshape(-1, 3) // 8, axis=0)) > 1000, "too few colours for photos and plots"
    assert shot[:120].mean() < 80, "the dark header is missing"
    # the same page with every embedded image removed must look clearly different: the images decode and show
    stripped = tmp_path / "stripped.html"
    stripped.write_text(re.sub(r'src="data:[^"]*"', 'src=""', page.read_text()))
    bare = _screenshot(stripped, tmp_path / "stripped.png", tmp_path / "profile")
    assert (np.abs(shot - bare).max(axis=-1) > 40).mean() > 0.03

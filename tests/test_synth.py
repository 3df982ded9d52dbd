"""The synthetic capture's ground truth is right: checked against OpenCV, open3d and PyAV, not against itself."""

from __future__ import annotations

import json
import subprocess
import sys

import av
import cv2
import numpy as np
import pytest
import trimesh

from twinscan.errors import TwinscanError
from twinscan.optional import open3d
from twinscan.synth import (PRESETS, CaptureConfig, build_scene, intrinsics, load_ground_truth, make_capture,
                            render_frame, scene_mesh)
from twinscan.synth.trajectory import Walkthrough

# a slow walk (one loop in 24 s) seen at 0.5 fps: realistic motion, few frames
WALK = dict(fps=0.5, duration_s=24.0, seed=3)


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth") / "capture"
    return make_capture(CaptureConfig(width=960, height=540, **WALK), out)


@pytest.fixture(scope="module")
def rotated_capture(tmp_path_factory):
    out = tmp_path_factory.mktemp("synth") / "rotated"
    return make_capture(CaptureConfig(width=320, height=180, fps=2.0, duration_s=1.5, seed=1, rotation_deg=90), out)


def detect_marker(rgb: np.ndarray, dict_name: str, marker_id: int) -> np.ndarray | None:
    """(4, 2) corners of the marker as cv2.aruco finds them, sub-pixel refined, or None."""
    dictionary = cv2.aruco.getPredefinedDictionary(getattr(cv2.aruco, f"DICT_{dict_name.upper()}"))
    params = cv2.aruco.DetectorParameters()
    params.cornerRefinementMethod = cv2.aruco.CORNER_REFINE_SUBPIX
    corners, ids, _ = cv2.aruco.ArucoDetector(dictionary, params).detectMarkers(cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY))
    if ids is None or marker_id not in ids.ravel():
        return None
    return corners[list(ids.ravel()).index(marker_id)][0]


def project(K: np.ndarray, world_from_cam: np.ndarray, points_world: np.ndarray) -> np.ndarray:
    cam_from_world = np.linalg.inv(world_from_cam)
    rvec, _ = cv2.Rodrigues(np.ascontiguousarray(cam_from_world[:3, :3]))
    uv, _ = cv2.projectPoints(np.ascontiguousarray(points_world, dtype=np.float64).reshape(-1, 1, 3), rvec,
                              np.ascontiguousarray(cam_from_world[:3, 3]), K, np.zeros(5))
    return uv[:, 0]


def decode(path) -> list[av.VideoFrame]:
    with av.open(str(path)) as container:
        return list(container.decode(video=0))


def upright(frame: av.VideoFrame) -> np.ndarray:
    """What a correct decoder shows: the coded pixels turned by the stream's display rotation."""
    return np.rot90(frame.to_ndarray(format="rgb24"), frame.rotation // 90)


def marker_offsets(frames_rgb, K, world_from_cam, dict_name, marker_id, corners_world, depth_maps=None):
    """(F, 4, 2) detected minus projected corners over the frames where cv2.aruco finds the marker.

    With `depth_maps`, frames where a corner is hidden (an occluder nearer than the floor) are skipped:
    the detector can still report a marker with a covered corner, but not where the corner is.
    """
    offsets = []
    for i, (rgb, pose) in enumerate(zip(frames_rgb, world_from_cam)):
        expected = project(K, pose, corners_world)
        if depth_maps is not None and not corners_visible(depth_maps[i], expected, pose, corners_world):
            continue
        detected = detect_marker(rgb, dict_name, marker_id)
        if detected is not None:
            offsets.append(detected - expected)
    return np.array(offsets).reshape(-1, 4, 2)


def corners_visible(depth, expected_uv, world_from_cam, corners_world) -> bool:
    z = (corners_world - world_from_cam[:3, 3]) @ world_from_cam[:3, 2]
    for (u, v), corner_z in zip(np.round(expected_uv).astype(int), z):
        patch = depth[max(v - 1, 0):v + 2, max(u - 1, 0):u + 2]
        if patch.size < 9 or not (np.abs(patch - corner_z) < 0.03 * corner_z).all():
            return False
    return True


def test_marker_corners_in_ideal_renders_match_their_projection():
    scene = build_scene(seed=0)
    width, height = 960, 540
    K = intrinsics(width, height, 65.0)
    world_from_cam = Walkthrough(duration_s=20.0, seed=0).world_from_cam(np.linspace(0.0, 19.0, 10))
    renders = [render_frame(scene, K, pose, width, height) for pose in world_from_cam]
    offsets = marker_offsets([r.rgb for r in renders], K, world_from_cam, scene.marker.dict_name, scene.marker.id,
                             scene.marker.corners_world(), [r.depth for r in renders])
    assert len(offsets) >= 3, f"marker found in only {len(offsets)} of {len(renders)} views"
    errors = np.linalg.norm(offsets, axis=-1)
    assert errors.max() < 1.0, errors
    # no systematic shift (a half-pixel convention slip would show here)
    assert np.linalg.norm(offsets.reshape(-1, 2).mean(axis=0)) < 0.25, offsets.mean(axis=(0, 1))


def test_marker_corners_in_decoded_video_match_ground_truth(capture):
    """Through lens blur, sRGB encoding, noise and H.264 the corners still land within a pixel or so.

    sRGB encoding of a blurred edge moves the 50 % crossing towards the dark side, so the detected
    black square is ~0.5 px smaller than the true one, as with a real camera, and motion blur of 1-2 px
    smears corners further: hence a median bound of 0.8 px and a worst case of 2 px.
    """
    marker = capture.marker
    scene = build_scene(capture.config.seed)
    depth_maps = [render_frame(scene, capture.K, pose, capture.width, capture.height, samples=1).depth
                  for pose in capture.world_from_cam]
    offsets = marker_offsets([upright(f) for f in decode(capture.video_path)], capture.K, capture.world_from_cam,
                             marker.dict_name, marker.id, marker.corners_world, depth_maps)
    assert len(offsets) >= 3, f"marker found unoccluded in {len(offsets)} of {capture.frame_count} frames"
    errors = np.linalg.norm(offsets, axis=-1)
    assert np.median(errors) < 0.8, errors
    assert errors.max() < 2.0, errors


def test_marker_ground_truth_is_consistent(capture):
    marker = capture.marker
    side = np.linalg.norm(np.diff(np.vstack([marker.corners_world, marker.corners_world[:1]]), axis=0), axis=1)
    np.testing.assert_allclose(side, marker.size_m, atol=1e-9)
    np.testing.assert_allclose(marker.corners_world[:, 2], capture.floor_z)
    # cv2.aruco's marker frame: corners at (-s/2, s/2), (s/2, s/2), (s/2, -s/2), (-s/2, -s/2)
    h = marker.size_m / 2
    local = np.array([[-h, h, 0, 1], [h, h, 0, 1], [h, -h, 0, 1], [-h, -h, 0, 1]])
    np.testing.assert_allclose((local @ marker.world_from_marker.T)[:, :3], marker.corners_world, atol=1e-12)


def test_rendered_depth_matches_raycasting_the_scene_mesh(capture):
    o3d = open3d()
    mesh = trimesh.load(capture.scene_mesh_path, process=False)
    raycaster = o3d.t.geometry.RaycastingScene()
    raycaster.add_triangles(o3d.core.Tensor(np.asarray(mesh.vertices, dtype=np.float32)),
                            o3d.core.Tensor(np.asarray(mesh.faces, dtype=np.uint32)))
    scene = build_scene(capture.config.seed)
    w, h = capture.width, capture.height
    u, v = np.meshgrid(np.arange(w), np.arange(h))
    rays_cam = np.stack([u, v, np.ones_like(u)], axis=-1).reshape(-1, 3) @ np.linalg.inv(capture.K).T
    for world_from_cam in capture.world_from_cam[::4]:
        depth = render_frame(scene, capture.K, world_from_cam, w, h, samples=1).depth
        dirs = rays_cam @ world_from_cam[:3, :3].T  # z = 1 in the camera: ray parameter = z-depth
        rays = np.hstack([np.broadcast_to(world_from_cam[:3, 3], dirs.shape), dirs]).astype(np.float32)
        expected = raycaster.cast_rays(o3d.core.Tensor(rays))["t_hit"].numpy().reshape(h, w)
        both = np.isfinite(expected) & np.isfinite(depth)
        assert both.mean() > 0.5
        # exact geometry: only a few silhouette pixels may disagree (float32 rounding in either caster)
        assert (np.isfinite(expected) != np.isfinite(depth)).sum() <= 20
        assert (np.abs(depth[both] - expected[both]) > 1e-3).sum() <= 20


def test_video_matches_ground_truth(capture):
    with av.open(str(capture.video_path)) as container:
        stream = container.streams.video[0]
        assert stream.codec_context.name == "h264"
        assert float(stream.average_rate) == pytest.approx(capture.fps)
        frames = list(container.decode(stream))
    assert len(frames) == capture.frame_count == len(capture.world_from_cam)
    assert all((f.width, f.height, f.rotation) == (capture.width, capture.height, 0) for f in frames)
    assert frames[0].format.name == "yuv420p"
    np.testing.assert_allclose([f.time for f in frames], capture.times_s, atol=1e-3)
    np.testing.assert_allclose(capture.times_s, np.arange(capture.frame_count) / capture.fps)


def test_poses_are_rigid_and_look_at_the_cell(capture):
    rotations = capture.world_from_cam[:, :3, :3]
    np.testing.assert_allclose(rotations @ rotations.transpose(0, 2, 1), np.broadcast_to(np.eye(3), rotations.shape),
                               atol=1e-9)
    np.testing.assert_allclose(np.linalg.det(rotations), 1.0, atol=1e-9)
    heights = capture.world_from_cam[:, 2, 3]
    assert ((heights > 1.3) & (heights < 1.7)).all()
    forward = rotations[:, :, 2]
    assert (forward[:, 2] < 0).all(), "the camera looks slightly down"
    to_centre = -capture.world_from_cam[:, :2, 3]
    cosine = (forward[:, :2] * to_centre).sum(1) / np.linalg.norm(forward[:, :2], axis=1) / np.linalg.norm(to_centre, axis=1)
    assert (cosine > 0.9).all()


def test_rotation_metadata_and_upright_pixels(rotated_capture, tmp_path):
    gt = rotated_capture
    frames = decode(gt.video_path)
    assert len(frames) == gt.frame_count
    assert {f.rotation for f in frames} == {-90}
    assert (frames[0].width, frames[0].height) == (gt.height, gt.width)  # coded sideways
    reference = make_capture(CaptureConfig(width=320, height=180, fps=2.0, duration_s=1.5, seed=1), tmp_path / "ref")
    for frame, ref in zip(frames, decode(reference.video_path)):
        shown = upright(frame).astype(np.int16)
        assert shown.shape == (gt.height, gt.width, 3)
        ref = ref.to_ndarray(format="rgb24")
        difference = np.abs(shown - ref).mean()  # the same pixels, compressed in another orientation
        assert difference < 6.0 and difference < 0.5 * np.abs(np.rot90(shown, 2) - ref).mean()
    assert json.loads((gt.video_path.parent / "ground_truth.json").read_text())["coded_width"] == gt.height


def test_ffmpeg_player_shows_rotated_video_upright(rotated_capture):
    """The display matrix is the standard one: the ffmpeg command line (autorotate) shows frames upright."""
    imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
    gt = rotated_capture
    raw = subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-v", "error", "-i", str(gt.video_path), "-f", "rawvideo",
                          "-pix_fmt", "rgb24", "-"], capture_output=True, check=True).stdout
    shown = np.frombuffer(raw, np.uint8).reshape(-1, gt.height, gt.width, 3)
    assert len(shown) == gt.frame_count
    for player, ours in zip(shown, decode(gt.video_path)):
        assert np.abs(player.astype(np.int16) - upright(ours)).mean() < 2.0


def test_same_seed_same_capture_other_seed_differs(rotated_capture, tmp_path):
    again = make_capture(rotated_capture.config, tmp_path / "again", workers=2)  # frames rendered on 2 processes
    assert (again.video_path.parent / "ground_truth.json").read_text() == \
        (rotated_capture.video_path.parent / "ground_truth.json").read_text()
    for a, b in zip(decode(again.video_path), decode(rotated_capture.video_path)):
        np.testing.assert_array_equal(a.to_ndarray(format="rgb24"), b.to_ndarray(format="rgb24"))
    other = Walkthrough(duration_s=1.5, seed=2).world_from_cam(rotated_capture.times_s)
    assert np.abs(other - rotated_capture.world_from_cam).max() > 0.1


def test_the_tiny_capture_is_the_same_video_in_every_process(tmp_path):
    """The tests' tiny capture made in two fresh processes decodes to the same pixels (x264's mbtree did not)."""
    code = ("import sys; from twinscan.synth.capture import PRESETS, make_capture; "
            "make_capture(PRESETS['tiny'], sys.argv[1])")
    for name in ("a", "b"):
        subprocess.run([sys.executable, "-c", code, str(tmp_path / name)], check=True)
    pairs = list(zip(decode(tmp_path / "a" / "video.mp4"), decode(tmp_path / "b" / "video.mp4")))
    assert len(pairs) == PRESETS["tiny"].frame_count()
    for a, b in pairs:
        np.testing.assert_array_equal(a.to_ndarray(format="rgb24"), b.to_ndarray(format="rgb24"))


def test_still_and_blur_stretches(tmp_path):
    walk = Walkthrough(duration_s=10.0, seed=0, still_stretch_s=(3.0, 5.0), blur_stretch_s=(7.0, 8.0))
    inside = walk.world_from_cam(np.linspace(3.5, 4.5, 11))[:, :3, 3]
    outside = walk.world_from_cam(np.linspace(1.0, 2.0, 11))[:, :3, 3]
    assert np.ptp(inside, axis=0).max() < 0.02 < np.ptp(outside, axis=0).max()
    assert walk.exposure_s(np.array([7.5]))[0] > 5 * walk.exposure_s(np.array([1.5]))[0]


def test_bad_inputs_are_refused(tmp_path):
    with pytest.raises(TwinscanError):
        make_capture(CaptureConfig(rotation_deg=45), tmp_path / "x")
    with pytest.raises(TwinscanError):
        make_capture(CaptureConfig(width=321), tmp_path / "x")
    with pytest.raises(TwinscanError):
        build_scene(marker_dict="9x9_7")
    with pytest.raises(TwinscanError):
        load_ground_truth(tmp_path)
    assert not (tmp_path / "x").exists()
    (tmp_path / "precious.txt").write_text("not a capture")
    with pytest.raises(TwinscanError):  # never replace a folder that is not a capture
        make_capture(CaptureConfig(width=64, height=64, fps=1.0, duration_s=1.0), tmp_path)
    assert (tmp_path / "precious.txt").exists()


def test_border_lap_films_the_floor_edge_from_close_by_while_walking_on_the_floor():
    """The sample's second lap: the walker stays on the floor (the mesher's walkway margin, 0.5 m, inside
    its edge) and clear of the low wall, moves and turns smoothly, and every stretch of the floor's edge
    that the wall does not hide is in view of some frame from within 2.5 m."""
    fps, duration_s, border_s = 30.0, 48.0, 28.0
    walk = Walkthrough(duration_s, seed=0, border_s=border_s)
    times = np.arange(0.0, duration_s, 1 / fps)
    poses = walk.world_from_cam(times)
    eyes = poses[:, :3, 3]
    scene = build_scene(seed=0)
    half = scene.floor_half_size_m
    assert np.abs(eyes[:, :2]).max() <= half - 0.5
    wall = next(box for box in scene.boxes if box.name == "low_wall")
    wall_face_y = wall.center[1] - wall.size[1] / 2
    assert eyes[:, 1].max() < wall_face_y - 0.5
    steps = np.linalg.norm(np.diff(eyes, axis=0), axis=1)
    turns = np.degrees(np.arccos(np.clip((np.einsum("nij,nij->n", poses[1:, :3, :3], poses[:-1, :3, :3]) - 1) / 2,
                                         -1, 1)))
    assert steps.max() < 1.6 / fps and turns.max() < 100 / fps, (steps.max() * fps, turns.max() * fps)
    # the first part is the plain loop, pose for pose
    loop = Walkthrough(duration_s - border_s, seed=0).world_from_cam(times[times <= duration_s - border_s])
    np.testing.assert_allclose(poses[: len(loop)], loop, atol=1e-9)

    along = np.linspace(-half, half, 37)
    edge = np.concatenate([np.column_stack([along, np.full_like(along, s * half)]) for s in (-1, 1)]
                          + [np.column_stack([np.full_like(along, s * half), along]) for s in (-1, 1)])
    edge = np.column_stack([edge, np.zeros(len(edge))])
    hidden = (edge[:, 1] == half) & (np.abs(edge[:, 0] - wall.center[0]) < wall.size[0] / 2 + 0.3)
    nearest = nearest_view_m(poses, edge)
    assert nearest[~hidden].max() < 2.5, edge[~hidden][nearest[~hidden] >= 2.5]
    # the loop alone sees most of the same edge only from across the cell
    assert np.median(nearest_view_m(loop, edge)[~hidden]) > 5.0


def nearest_view_m(world_from_cam: np.ndarray, points: np.ndarray) -> np.ndarray:
    """(M,) distance from each point to the nearest camera that has it in its 960x540 view (inf: none)."""
    K = intrinsics(960, 540, 65.0)
    cam = np.einsum("nji,mnj->mni", world_from_cam[:, :3, :3], points[:, None, :] - world_from_cam[None, :, :3, 3])
    uv = cam[..., :2] / np.maximum(cam[..., 2:], 1e-6) * K[0, 0] + K[:2, 2]
    in_view = (cam[..., 2] > 0.1) & (uv[..., 0] >= 0) & (uv[..., 0] < 960) & (uv[..., 1] >= 0) & (uv[..., 1] < 540)
    return np.where(in_view, np.linalg.norm(cam, axis=-1), np.inf).min(axis=1)


def test_no_surface_is_longer_than_its_texture_repeats():
    """A texture repeating on one surface lets SfM register a view of it one period away."""
    scene = build_scene(seed=0)
    assert scene.textures[0].period_m >= 2 * scene.floor_half_size_m
    longest_side = max(max(box.size) for box in scene.boxes)
    assert min(texture.period_m for texture in scene.textures[1:]) >= longest_side


def test_the_hard_cell_has_plain_and_glossy_panels_and_walls_behind_the_loop():
    """A plain panel looks the same, flat grey, from everywhere; a glossy one changes with the view; the
    walls stand behind the loop, so an inward-looking walk sees them only from across the cell."""
    from twinscan.camera import look_at
    from twinscan.synth.render import render_radiance
    from twinscan.synth.trajectory import LOOP_RADIUS_M

    scene = build_scene(5, hard=True)
    K = intrinsics(320, 180, 65.0)

    def centre_patch(eye, target):
        radiance, depth = render_radiance(scene, K, look_at(eye, target), 320, 180)
        assert abs(depth[90, 160] - np.linalg.norm(np.subtract(target, eye)) * 1.0) < 0.2  # the panel is hit
        return radiance[86:95, 156:165]

    plain = [centre_patch(eye, (0.6, 2.325, 0.6)) for eye in ((0.6, 3.7, 1.5), (1.8, 3.4, 1.3))]
    assert max(p.std(axis=(0, 1)).max() for p in plain) < 1e-4  # no texture, no grain
    np.testing.assert_allclose(plain[0], plain[1], atol=1e-4)  # matte: the same from both sides
    glossy = [centre_patch(eye, (2.425, -0.15, 0.9)) for eye in ((3.7, -1.0, 1.5), (3.5, 0.8, 1.5))]
    assert np.abs(glossy[0].mean(axis=(0, 1)) - glossy[1].mean(axis=(0, 1))).max() > 0.05
    walls = [b for b in scene.boxes if b.name.startswith("wall_")]
    assert len(walls) == 2 and all(np.hypot(*b.center[:2]) > LOOP_RADIUS_M + 0.5 for b in walls)
    assert len(scene_mesh(scene).faces) == 2 + 12 * len(scene.boxes)
    assert len(build_scene(5).boxes) == len(scene.boxes) - 6  # the other presets keep their cell

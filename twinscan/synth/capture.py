"""Synthetic phone captures with exact ground truth: video.mp4, ground_truth.json, scene.ply.

ground_truth.json (format "twinscan-synth-ground-truth", version 1):
  video, scene_mesh          file names next to it
  width, height              upright (display) frame size, pixels
  coded_width, coded_height  size of the pixels stored in the stream (swapped for 90/270 rotation)
  rotation_deg               clockwise turn a player applies to the coded pixels (see synth/video.py)
  fps, frame_count, times_s  frame i is shown at times_s[i] = i / fps
  K                          3x3 pinhole intrinsics of the upright frames, OpenCV (pixel centres at
                             integers); distortion is zero
  world_from_cam             (N, 4, 4) camera-to-world, OpenCV camera axes, world Z up, metres,
                             the pose at the middle of each frame's exposure
  exposure_s, gain           per-frame shutter time and auto-exposure gain
  motion_blur_px             per-frame largest image motion during the exposure, pixels
  marker                     {dict, id, size_m, corners_world (4x3, cv2.aruco order: top-left,
                             top-right, bottom-right, bottom-left), world_from_marker (4x4, cv2.aruco
                             marker axes: x right, y to the top edge, z out of the print)}
  floor_z                    0.0
  config                     the CaptureConfig that made it
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import trimesh

from twinscan.atomic import atomic_dir, write_json
from twinscan.errors import TwinscanError
from twinscan.synth.render import CameraRays, render_radiance
from twinscan.synth.scene import Scene, build_scene, scene_mesh
from twinscan.synth.sensor import expose
from twinscan.synth.trajectory import Walkthrough
from twinscan.synth.video import ROTATIONS_DEG, VideoWriter

FORMAT = "twinscan-synth-ground-truth"
VERSION = 1
MIN_SUBFRAMES = 4  # every frame averages at least this many renders: area sampling, no aliasing
MAX_SUBFRAMES = 16
SUBFRAME_STEP_PX = 1.5  # sub-frame renders are at most this far apart in the image


@dataclass(frozen=True)
class CaptureConfig:
    width: int = 960  # upright frame size
    height: int = 540
    fps: float = 30.0
    duration_s: float = 20.0
    seed: int = 0
    blur_stretch_s: tuple[float, float] | None = None  # frames in this range get strong motion blur
    still_stretch_s: tuple[float, float] | None = None  # the camera stands still (tiny jitter) in this range
    border_walk_s: float = 0.0  # the last seconds walk a lap along the floor's border, filming it (see trajectory)
    rotation_deg: int = 0  # 0/90/180/270: stored rotated, with display-rotation metadata
    marker_size_m: float = 0.30
    marker_dict: str = "4x4_50"
    marker_id: int = 0
    crf: int = 23
    hfov_deg: float = 65.0  # horizontal field of view across the upright frame width
    hard: bool = False  # add what makes real captures hard: plain and glossy panels, walls behind the loop

    def frame_count(self) -> int:
        return int(round(self.duration_s * self.fps))

    def validate(self) -> None:
        if self.rotation_deg not in ROTATIONS_DEG:
            raise TwinscanError(f"rotation {self.rotation_deg} is not supported", "use 0, 90, 180 or 270")
        if self.width % 2 or self.height % 2 or min(self.width, self.height) < 64:
            raise TwinscanError(f"frame size {self.width}x{self.height} is not usable",
                                "use even sizes of at least 64 pixels")
        if not 0 <= self.border_walk_s < self.duration_s:
            raise TwinscanError(f"a {self.border_walk_s} s border lap does not fit a {self.duration_s} s capture",
                                "make the border lap shorter than the capture, or 0")
        if self.frame_count() < 1 or self.fps <= 0:
            raise TwinscanError("the capture has no frames", "use a positive duration and frame rate")


PRESETS: dict[str, CaptureConfig] = {
    # the bundled sample (samples/factory_cell): small enough to commit, long enough for a real run
    "sample": CaptureConfig(width=960, height=540, fps=30.0, duration_s=48.0, seed=0,
                            still_stretch_s=(6.0, 7.2), blur_stretch_s=(13.0, 13.6), border_walk_s=28.0),
    # seconds to make, for trying things out
    "tiny": CaptureConfig(width=320, height=180, fps=3.0, duration_s=20.0, seed=0),
    # the sample's walk stretched to 2 minutes at 1080p, for timing a GPU node (benchmarks/gpu_check.sh); 5 fps,
    # not a phone's 30, so that 16 cores render it in about 2 minutes (600 frames; the frames stage then decodes
    # a sixth of what a phone's video holds)
    "walk1080": CaptureConfig(width=1920, height=1080, fps=5.0, duration_s=120.0, seed=0,
                              still_stretch_s=(6.0, 7.2), blur_stretch_s=(13.0, 13.6), border_walk_s=70.0),
    # one inward loop only, as a new user films (no border lap), around a cell with textureless and glossy
    # panels and walls seen only from across it; exposure drifts and one stretch is blurred
    "hard": CaptureConfig(width=640, height=360, fps=6.0, duration_s=30.0, seed=5, blur_stretch_s=(12.0, 12.6),
                          hard=True),
}


@dataclass(frozen=True)
class MarkerTruth:
    corners_world: np.ndarray  # (4, 3), cv2.aruco corner order
    world_from_marker: np.ndarray  # (4, 4)
    id: int
    dict_name: str
    size_m: float


@dataclass(frozen=True)
class GroundTruth:
    width: int  # upright (display) size
    height: int
    fps: float
    K: np.ndarray  # (3, 3) for upright frames
    world_from_cam: np.ndarray  # (N, 4, 4), OpenCV camera axes
    times_s: np.ndarray  # (N,)
    marker: MarkerTruth
    scene_mesh_path: Path
    video_path: Path
    floor_z: float
    rotation_deg: int
    exposure_s: np.ndarray  # (N,)
    gain: np.ndarray  # (N,)
    motion_blur_px: np.ndarray  # (N,)
    config: CaptureConfig

    @property
    def frame_count(self) -> int:
        return len(self.times_s)

    def scene_in_marker_frame(self) -> trimesh.Trimesh:
        """The generator's scene in the marker's frame: the twin's, when the sfm stage anchored it on the marker."""
        scene = trimesh.load(self.scene_mesh_path, force="mesh")
        scene.apply_transform(np.linalg.inv(self.marker.world_from_marker))
        return scene


def intrinsics(width: int, height: int, hfov_deg: float) -> np.ndarray:
    """Square pixels, principal point at the image centre (OpenCV: pixel centres at integers)."""
    f = (width / 2) / math.tan(math.radians(hfov_deg) / 2)
    return np.array([[f, 0.0, (width - 1) / 2], [0.0, f, (height - 1) / 2], [0.0, 0.0, 1.0]])


def image_motion_px(K: np.ndarray, width: int, height: int, world_from_cam_a: np.ndarray,
                    world_from_cam_b: np.ndarray, probes_world: np.ndarray) -> float:
    """Largest image displacement between two poses of the probe points that both images show."""
    uv, visible = [], np.ones(len(probes_world), dtype=bool)
    for world_from_cam in (world_from_cam_a, world_from_cam_b):
        cam = (probes_world - world_from_cam[:3, 3]) @ world_from_cam[:3, :3]
        z = np.maximum(cam[:, 2], 1e-6)
        pix = cam[:, :2] / z[:, None] * K[[0, 1], [0, 1]] + K[:2, 2]
        visible &= (cam[:, 2] > 0.3) & (pix[:, 0] >= 0) & (pix[:, 0] < width) & (pix[:, 1] >= 0) & (pix[:, 1] < height)
        uv.append(pix)
    return float(np.linalg.norm(uv[0] - uv[1], axis=1)[visible].max(initial=0.0))


def halton_offsets(n: int) -> np.ndarray:
    """(n, 2) sub-pixel offsets from the Halton (2, 3) sequence (well spread for any n), centred on the
    pixel centre so that their average lands exactly where the ground truth projects."""
    def radical_inverse(i: int, base: int) -> float:
        result, fraction = 0.0, 1.0 / base
        while i:
            result += (i % base) * fraction
            i //= base
            fraction /= base
        return result
    points = np.array([[radical_inverse(i, 2), radical_inverse(i, 3)] for i in range(1, n + 1)])
    return points - points.mean(axis=0)


def _probe_points(scene: Scene) -> np.ndarray:
    """Box corners and a floor grid: where image motion is measured."""
    g = np.linspace(-scene.floor_half_size_m, scene.floor_half_size_m, 9)
    floor = np.stack(np.meshgrid(g, g, [0.0]), axis=-1).reshape(-1, 3)
    return np.concatenate([scene.box_corners.reshape(-1, 3), floor])


class _Frames:
    """What rendering a frame needs, built from the config alone, so a worker process builds its own."""

    def __init__(self, cfg: CaptureConfig) -> None:
        self.cfg = cfg
        self.scene = build_scene(cfg.seed, cfg.marker_size_m, cfg.marker_dict, cfg.marker_id, cfg.hard)
        self.walk = Walkthrough(cfg.duration_s, cfg.seed, still_stretch_s=cfg.still_stretch_s,
                                blur_stretch_s=cfg.blur_stretch_s, frame_interval_s=1 / cfg.fps,
                                border_s=cfg.border_walk_s)
        self.K = intrinsics(cfg.width, cfg.height, cfg.hfov_deg)
        self.probes = _probe_points(self.scene)
        self.times = np.arange(cfg.frame_count()) / cfg.fps
        self.exposure = self.walk.exposure_s(self.times)
        self.gain = self.walk.gain(self.times)

    def render(self, i: int) -> tuple[float, np.ndarray]:
        """(largest image motion during the exposure in pixels, the exposed 8-bit frame) of frame i."""
        cfg, t = self.cfg, self.times[i]
        open_close = self.walk.world_from_cam([t - self.exposure[i] / 2, t + self.exposure[i] / 2])
        blur_px = image_motion_px(self.K, cfg.width, cfg.height, open_close[0], open_close[1], self.probes)
        subframes = int(np.clip(math.ceil(blur_px / SUBFRAME_STEP_PX), MIN_SUBFRAMES, MAX_SUBFRAMES))
        sub_times = t + self.exposure[i] * ((np.arange(subframes) + 0.5) / subframes - 0.5)
        # each sub-frame also samples its own point of every pixel: motion blur and
        # anti-aliasing come from the same renders, as in distributed ray tracing
        radiance = sum(render_radiance(self.scene, self.K, pose, cfg.width, cfg.height,
                                       CameraRays.of(self.K, cfg.width, cfg.height, offset))[0]
                       for pose, offset in zip(self.walk.world_from_cam(sub_times), halton_offsets(subframes)))
        radiance /= subframes
        return blur_px, expose(radiance, self.gain[i], np.random.default_rng([cfg.seed, 3, i]))


_worker_frames: _Frames | None = None  # a worker process's own scene and walk (`_start_worker`)


def _start_worker(cfg: CaptureConfig) -> None:
    global _worker_frames
    _worker_frames = _Frames(cfg)


def _render_in_worker(i: int) -> tuple[float, np.ndarray]:
    return _worker_frames.render(i)


@contextlib.contextmanager
def _rendered(frames: _Frames, workers: int) -> Iterator[Iterator[tuple[float, np.ndarray]]]:
    """Frames 0, 1, ... in order, rendered here or on `workers` processes (each frame is a pure function of
    the config and its index, its sensor noise seeded by it, so the video is the same either way)."""
    indices = range(frames.cfg.frame_count())
    if workers <= 1:
        yield map(frames.render, indices)
        return
    with concurrent.futures.ProcessPoolExecutor(workers, initializer=_start_worker, initargs=(frames.cfg,)) as pool:
        yield pool.map(_render_in_worker, indices, chunksize=2)


def make_capture(cfg: CaptureConfig, out_dir, on_frame: Callable[[int], None] | None = None,
                 workers: int = 1) -> GroundTruth:
    """Render the walkthrough, write out_dir/{video.mp4, ground_truth.json, scene.ply}; all or nothing.

    `workers` > 1 renders the frames on that many processes (the same video, sooner)."""
    cfg.validate()
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not (out_dir / "ground_truth.json").exists():
        raise TwinscanError(f"{out_dir} exists and is not a synthetic capture; it would be replaced",
                            "choose a new or empty folder")
    frames = _Frames(cfg)
    scene, K, times, exposure, gain = frames.scene, frames.K, frames.times, frames.exposure, frames.gain
    n = len(times)
    world_from_cam = frames.walk.world_from_cam(times)
    blur_px = np.zeros(n)
    with atomic_dir(out_dir) as tmp:
        with VideoWriter(tmp / "video.mp4", cfg.width, cfg.height, cfg.fps, cfg.crf, cfg.rotation_deg) as video, \
                _rendered(frames, workers) as rendered:
            for i, (blur, image) in enumerate(rendered):
                blur_px[i] = blur
                video.write(image)
                if on_frame is not None:
                    on_frame(i)
        scene_mesh(scene).export(tmp / "scene.ply")
        marker = scene.marker
        write_json(tmp / "ground_truth.json", {
            "format": FORMAT, "version": VERSION,
            "video": "video.mp4", "scene_mesh": "scene.ply",
            "width": cfg.width, "height": cfg.height,
            "coded_width": cfg.height if cfg.rotation_deg in (90, 270) else cfg.width,
            "coded_height": cfg.width if cfg.rotation_deg in (90, 270) else cfg.height,
            "rotation_deg": cfg.rotation_deg, "fps": cfg.fps, "frame_count": n,
            "K": K.tolist(), "distortion": [0.0] * 5,
            "times_s": times.tolist(),
            "world_from_cam": world_from_cam.tolist(),
            "exposure_s": exposure.tolist(), "gain": gain.tolist(), "motion_blur_px": blur_px.round(3).tolist(),
            "marker": {"dict": marker.dict_name, "id": marker.id, "size_m": marker.size_m,
                       "corners_world": marker.corners_world().tolist(),
                       "world_from_marker": marker.world_from_marker().tolist()},
            "floor_z": 0.0,
            "config": dataclasses.asdict(cfg),
        })
    return load_ground_truth(out_dir)


def load_ground_truth(capture_dir) -> GroundTruth:
    capture_dir = Path(capture_dir)
    path = capture_dir / "ground_truth.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise TwinscanError(f"no ground truth at {path}", "point at a folder made by `python -m twinscan.synth`") from None
    if data.get("format") != FORMAT or data.get("version") != VERSION:
        raise TwinscanError(f"{path} is not a version {VERSION} synthetic ground truth",
                            "regenerate the capture with this twinscan version")
    config = {k: tuple(v) if isinstance(v, list) else v for k, v in data["config"].items()}
    marker = data["marker"]
    return GroundTruth(
        width=data["width"], height=data["height"], fps=data["fps"], K=np.array(data["K"]),
        world_from_cam=np.array(data["world_from_cam"]), times_s=np.array(data["times_s"]),
        marker=MarkerTruth(np.array(marker["corners_world"]), np.array(marker["world_from_marker"]),
                           marker["id"], marker["dict"], marker["size_m"]),
        scene_mesh_path=capture_dir / data["scene_mesh"], video_path=capture_dir / data["video"],
        floor_z=data["floor_z"], rotation_deg=data["rotation_deg"],
        exposure_s=np.array(data["exposure_s"]), gain=np.array(data["gain"]),
        motion_blur_px=np.array(data["motion_blur_px"]), config=CaptureConfig(**config))

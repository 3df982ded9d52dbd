"""Camera paths for a dataset: views a robot would have, sampled in the captured cell; the capture's own
path; or a path given as a nerfstudio transforms.json."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from twinscan.errors import TwinscanError
from twinscan.camera import look_at, scaled_K
from twinscan.render.config import RenderConfig
from twinscan.render.geometry import Hits, SurfaceCaster
from twinscan.render.twin import CaptureCameras, RenderTwin

COVERAGE_SIDE_PX = 64  # coverage is judged on a view this many pixels wide (rays are cheap, not free)
SEEN_SIDE_PX = 160  # the capture's depth maps that decide what it saw
SEEN_CAMERAS = 60  # at most this many capture frames (spread along the walk) decide it
SEEN_TOLERANCE_M = 0.05  # a point was seen when a capture frame's surface lies this close ...
SEEN_TOLERANCE_SHARE = 0.03  # ... or this share of its depth, whichever is larger
ATTEMPTS_PER_VIEW = 300


@dataclass(frozen=True)
class View:
    K: np.ndarray  # (3, 3) pinhole, pixel centres at +0.5
    world_from_cam: np.ndarray  # (4, 4) OpenCV axes, twin frame
    width: int
    height: int
    source: str  # "sampled", "capture:<frame name>" or "file:<file_path>"


class CaptureCoverage:
    """Which surface points the capture saw: a point is seen when some capture frame's own surface lies
    where the point projects (so a point behind a wall is not seen through it), and that frame looked at the
    point's face from the side the viewer does (a machine's panel seen from inside, through a top the capture
    never saw, is not the panel the capture saw from outside). The side is judged on the face's own normal
    from both eyes, so it holds whichever way a scanned face happens to be wound."""

    def __init__(self, capture: CaptureCameras, surface: SurfaceCaster) -> None:
        self.surface = surface
        pick = np.unique(np.linspace(0, len(capture.names) - 1, min(SEEN_CAMERAS, len(capture.names))).round()
                         .astype(int))
        factor = SEEN_SIDE_PX / max(capture.width, capture.height)
        self.size = (max(1, round(capture.width * factor)), max(1, round(capture.height * factor)))
        self.Ks = np.stack([scaled_K(capture.Ks[i], (capture.width, capture.height), self.size) for i in pick])
        self.cam_from_world = np.linalg.inv(capture.world_from_cam[pick])
        self.centres = capture.world_from_cam[pick][:, :3, 3]
        self.depths = np.stack([surface.cast(K, np.linalg.inv(c), *self.size).depth
                                for K, c in zip(self.Ks, self.cam_from_world)])
        self.face_normals = np.asarray(surface.mesh.face_normals, np.float32)

    def seen(self, hits: Hits, eye: np.ndarray) -> np.ndarray:
        """(H*W,) bool per pixel of a view from `eye` whose surface hits these are: its surface was seen."""
        face = hits.face.reshape(-1)
        hit = np.flatnonzero(face >= 0)
        points = hits.points.reshape(-1, 3)[hit]
        normals = self.face_normals[face[hit]]
        viewer_side = np.einsum("ij,ij->i", points - np.asarray(eye, np.float32), normals) > 0
        seen = np.zeros(len(face), bool)
        for K, cam_from_world, centre, depth in zip(self.Ks, self.cam_from_world, self.centres, self.depths):
            cam = points @ cam_from_world[:3, :3].T + cam_from_world[:3, 3]
            z = cam[:, 2]
            with np.errstate(divide="ignore", invalid="ignore"):
                u = np.floor(K[0, 0] * cam[:, 0] / z + K[0, 2]).astype(np.int64, copy=False)
                v = np.floor(K[1, 1] * cam[:, 1] / z + K[1, 2]).astype(np.int64, copy=False)
            inside = (z > 0.05) & (u >= 0) & (u < self.size[0]) & (v >= 0) & (v < self.size[1])
            surface = np.full(len(z), np.inf, np.float32)
            surface[inside] = depth[v[inside], u[inside]]
            close = np.abs(surface - z) <= np.maximum(SEEN_TOLERANCE_M, SEEN_TOLERANCE_SHARE * z)
            same_side = (np.einsum("ij,ij->i", points - centre.astype(np.float32), normals) > 0) == viewer_side
            seen[hit[close & same_side]] = True
        return seen

    def share(self, view: View) -> float:
        """Share of the view's pixels (judged at COVERAGE_SIDE_PX wide) showing surface the capture saw."""
        width = COVERAGE_SIDE_PX
        height = max(1, round(view.height * width / view.width))
        K = scaled_K(view.K, (view.width, view.height), (width, height))
        hits = self.surface.cast(K, view.world_from_cam, width, height)
        return float(self.seen(hits, view.world_from_cam[:3, 3]).mean())


def camera_clear(twin: RenderTwin, eye: np.ndarray, clearance_m: float) -> bool:
    """Not inside any collider and at least `clearance_m` from every collider surface."""
    point = np.asarray(eye, np.float64)[None]
    return bool(twin.colliders.distance(point)[0] >= clearance_m and not twin.colliders.inside(point)[0])


def sampled_views(twin: RenderTwin, config: RenderConfig, coverage: CaptureCoverage) -> list[View]:
    """`config.views` cameras drawn inside the captured cell at the robot's heights, looking along the floor,
    each clear of the colliders and seeing captured surface in >= min_coverage of its pixels."""
    rng = np.random.default_rng([config.seed, 1])
    centres = twin.capture.world_from_cam[:, :3, 3]
    low, high = centres[:, :2].min(axis=0) - 0.5, centres[:, :2].max(axis=0) + 0.5
    K = np.array([[config.focal_px, 0.0, config.width / 2], [0.0, config.focal_px, config.height / 2], [0, 0, 1]])
    views: list[View] = []
    attempts = 0
    while len(views) < config.views:
        if attempts >= ATTEMPTS_PER_VIEW * config.views:
            raise TwinscanError(
                f"only {len(views)} of {config.views} sampled views are clear of the colliders and see captured "
                f"surface in {config.min_coverage:.0%} of their pixels",
                "film more of the cell, try other --heights, or use --path capture")
        attempts += 1
        eye = np.array([*rng.uniform(low, high), rng.uniform(*config.heights_m)])
        yaw, pitch = rng.uniform(0.0, 2 * math.pi), math.radians(rng.uniform(*config.pitch_deg))
        forward = np.array([math.cos(pitch) * math.cos(yaw), math.cos(pitch) * math.sin(yaw), math.sin(pitch)])
        view = View(K, look_at(eye, eye + forward), config.width, config.height, "sampled")
        if camera_clear(twin, eye, config.clearance_m) and coverage.share(view) >= config.min_coverage:
            views.append(view)
    return views


def capture_views(twin: RenderTwin, config: RenderConfig) -> list[View]:
    """The capture's own frames (all of them, or `config.views` spread along the walk), at their intrinsics."""
    capture = twin.capture
    count = len(capture.names)
    pick = range(count) if config.views >= count else np.linspace(0, count - 1, config.views).round().astype(int)
    return [View(capture.Ks[i], capture.world_from_cam[i], capture.width, capture.height,
                 f"capture:{capture.names[i]}") for i in pick]


def file_views(path: Path, config: RenderConfig) -> list[View]:
    """A nerfstudio transforms.json's cameras (pinhole; distortion ignored), at most `config.views`."""
    from twinscan.recon.sfm.nerfstudio import read_transforms

    camera, frames = read_transforms(path)
    if any(abs(camera[key]) > 0 for key in ("k1", "k2", "p1", "p2")):
        raise TwinscanError(f"{path} has lens distortion", "give a pinhole path (k1 = k2 = p1 = p2 = 0)")
    K = np.array([[camera["fl_x"], 0.0, camera["cx"]], [0.0, camera["fl_y"], camera["cy"]], [0.0, 0.0, 1.0]])
    return [View(K, world_from_cam, int(camera["w"]), int(camera["h"]), f"file:{name}")
            for name, world_from_cam in frames[:config.views]]


def plan_views(twin: RenderTwin, config: RenderConfig) -> list[View]:
    if config.path == "sampled":  # only sampled cameras need to know what the capture saw
        return sampled_views(twin, config, CaptureCoverage(twin.capture, twin.surface))
    if config.path == "capture":
        return capture_views(twin, config)
    return file_views(Path(config.path), config)

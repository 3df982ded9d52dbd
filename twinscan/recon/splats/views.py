"""Posed training images and the SfM points that seed the splats, loaded once into memory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
import torch
from torch import Tensor

from twinscan.camera import cam_from_world_matrix, scaled_K
from twinscan.errors import TwinscanError
from twinscan.layout import UNDISTORTED, UNDISTORTED_CAMERAS, UNDISTORTED_IMAGES
from twinscan.workspace import Workspace



@dataclass
class TrainingViews:
    """C posed views (OpenCV cameras) and M coloured points, all in the twin world frame."""

    names: list[str]
    images: list[Tensor]  # C x [H, W, 3] float32 in [0, 1]
    Ks: Tensor  # [C, 3, 3] pinhole intrinsics at the images' resolution
    cam_from_world: Tensor  # [C, 4, 4] (gsplat's `viewmats`)
    points: np.ndarray  # [M, 3]
    point_colors: np.ndarray  # [M, 3] in [0, 1]
    # per view [P, 3] (u, v, depth) of the SfM points it observed: pixel coordinates at the image's
    # resolution (centres at +0.5, as K), depth along the optical axis; what the sparse depth loss pins
    observed_depths: list[Tensor]

    def __len__(self) -> int:
        return len(self.names)

    def split(self, heldout_every: int) -> tuple[list[int], list[int]]:
        """(train, held-out) indices: every `heldout_every`-th view by name is held out (as gsplat's
        `test_every`), so held-out views are spread along the walk."""
        order = sorted(range(len(self)), key=lambda i: self.names[i])
        heldout = [i for rank, i in enumerate(order) if rank % heldout_every == 0]
        train = [i for i in order if i not in set(heldout)]
        if not train or not heldout:
            raise TwinscanError(f"{len(self)} registered views are too few to hold some out for metrics",
                                f"give at least 2 views (better {2 * heldout_every} or more)")
        return train, heldout

    def scene_extent(self) -> float:
        """gsplat's scene scale: 1.1 x the largest camera distance from the cameras' centroid."""
        world_from_cam = torch.linalg.inv(self.cam_from_world)
        centres = world_from_cam[:, :3, 3]
        extent = (centres - centres.mean(0)).norm(dim=1).max().item() * 1.1
        return extent if extent > 0 else 1.0


def _resized(image: np.ndarray, K: np.ndarray, max_side: int) -> tuple[np.ndarray, np.ndarray]:
    """Downscale (area filter) so the longest side is at most `max_side`; K follows."""
    height, width = image.shape[:2]
    factor = min(1.0, max_side / max(height, width))
    if factor == 1.0:
        return image, K
    size = (max(1, round(width * factor)), max(1, round(height * factor)))
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA), scaled_K(K, (width, height), size)


def observed_depths(points: np.ndarray, cam_from_world: np.ndarray, K: np.ndarray, width: int,
                    height: int) -> Tensor:
    """[P, 3] (u, v, depth) of `points` (world) in front of the camera and inside its image."""
    camera = np.asarray(points, np.float64).reshape(-1, 3) @ cam_from_world[:3, :3].T + cam_from_world[:3, 3]
    camera = camera[camera[:, 2] > 1e-6]
    pixels = camera @ np.asarray(K, np.float64).T
    uv = pixels[:, :2] / pixels[:, 2:]
    inside = (uv[:, 0] >= 0) & (uv[:, 0] < width) & (uv[:, 1] >= 0) & (uv[:, 1] < height)
    return torch.tensor(np.column_stack([uv[inside], camera[inside, 2]]), dtype=torch.float32)


def views_from_reconstruction(reconstruction, image_dir: Path, max_side: int) -> TrainingViews:
    """The registered images of an undistorted (pinhole) pycolmap model, downscaled to `max_side`."""
    names, images, Ks, cam_from_world, depths = [], [], [], [], []
    for image in sorted(reconstruction.images.values(), key=lambda im: im.name):
        if not image.has_pose:
            continue
        camera = reconstruction.cameras[image.camera_id]
        if camera.model.name not in ("PINHOLE", "SIMPLE_PINHOLE"):
            raise TwinscanError(f"camera {image.camera_id} is {camera.model.name}, not an undistorted pinhole",
                                "run the sfm stage again (it writes undistorted images for training)")
        bgr = cv2.imread(str(image_dir / image.name), cv2.IMREAD_COLOR)
        if bgr is None:
            raise TwinscanError(f"cannot read {image_dir / image.name}", "run the sfm stage again (--force)")
        rgb, K = _resized(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), camera.calibration_matrix(), max_side)
        names.append(image.name)
        images.append(torch.from_numpy(rgb).float() / 255.0)
        Ks.append(K)
        cam_from_world.append(cam_from_world_matrix(image))
        seen = [reconstruction.points3D[p.point3D_id].xyz for p in image.points2D if p.has_point3D()]
        depths.append(observed_depths(np.array(seen).reshape(-1, 3), cam_from_world[-1], K, rgb.shape[1], rgb.shape[0]))
    if not names:
        raise TwinscanError("the SfM model has no registered images", "run the sfm stage again")
    ids = list(reconstruction.points3D)
    points = np.array([reconstruction.points3D[i].xyz for i in ids], dtype=np.float64).reshape(-1, 3)
    colors = np.array([reconstruction.points3D[i].color for i in ids], dtype=np.float64).reshape(-1, 3) / 255.0
    if len(points) < 4:
        raise TwinscanError(f"the SfM model has only {len(points)} 3D points to start the splats from",
                            "film more texture, or run the sfm stage with more frames")
    return TrainingViews(names, images, torch.tensor(np.array(Ks), dtype=torch.float32),
                         torch.tensor(np.array(cam_from_world), dtype=torch.float32), points, colors, depths)


def load_training_views(ws: Workspace, max_side: int) -> TrainingViews:
    """OUT/sfm/undistorted/ (written by the sfm stage) as training views."""
    import pycolmap

    if not ws.path(UNDISTORTED_CAMERAS).is_dir() or not ws.path(UNDISTORTED_IMAGES).is_dir():
        raise TwinscanError(f"{ws.path(UNDISTORTED)} is missing: the splats stage needs the sfm stage's undistorted "
                            f"images", f"run `twinscan sfm {ws.root}` first")
    return views_from_reconstruction(pycolmap.Reconstruction(ws.path(UNDISTORTED_CAMERAS)), ws.path(UNDISTORTED_IMAGES),
                                     max_side)

"""nerfstudio's transforms.json: camera-to-world with OpenGL camera axes, one shared OPENCV camera."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from twinscan import atomic
from twinscan.camera import world_from_cam_matrix
from twinscan.errors import TwinscanError

GL_FROM_CV = np.diag([1.0, -1.0, -1.0, 1.0])  # flips y and z; its own inverse
OPENCV_KEYS = ("fl_x", "fl_y", "cx", "cy", "k1", "k2", "p1", "p2")


def write_transforms(reconstruction, path: Path, image_prefix: str) -> None:
    """Write the posed images of a single-camera OPENCV model; file_path = image_prefix + name."""
    cameras = list(reconstruction.cameras.values())
    if len(cameras) != 1 or cameras[0].model_name != "OPENCV":
        raise TwinscanError("transforms.json needs one shared OPENCV camera",
                            "reconstruct with twinscan sfm (it uses one OPENCV camera for a video)")
    camera = cameras[0]
    frames = [{"file_path": image_prefix + image.name,
               "transform_matrix": (world_from_cam_matrix(image) @ GL_FROM_CV).tolist(),
               "colmap_im_id": int(image.image_id)}
              for image in sorted(reconstruction.images.values(), key=lambda im: im.name) if image.has_pose]
    content = {"camera_model": "OPENCV", "w": int(camera.width), "h": int(camera.height),
               **{key: float(value) for key, value in zip(OPENCV_KEYS, camera.params)}, "frames": frames}
    atomic.write_json(path, content)


def read_transforms(path: Path) -> tuple[dict[str, Any], list[tuple[str, np.ndarray]]]:
    """(shared camera dict with OPENCV_KEYS, w, h; [(file_path, world_from_cam OpenCV 4x4)])."""
    try:
        content = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise TwinscanError(f"cannot read {path} ({error})", "give a nerfstudio transforms.json") from error
    if "frames" not in content or not content["frames"]:
        raise TwinscanError(f"{path} has no frames", "give a nerfstudio transforms.json with a frames list")
    first = content["frames"][0]
    missing = [key for key in ("fl_x", "fl_y", "w", "h") if key not in content and key not in first]
    if missing:
        raise TwinscanError(f"{path} lacks the shared intrinsics {', '.join(missing)}",
                            "export transforms.json with one shared camera (fl_x, fl_y, cx, cy, w, h)")

    def shared(key: str, default: float = 0.0) -> float:
        return float(content.get(key, first.get(key, default)))

    width, height = shared("w"), shared("h")
    camera = {"w": width, "h": height, "cx": shared("cx", width / 2), "cy": shared("cy", height / 2),
              **{key: shared(key) for key in ("fl_x", "fl_y", "k1", "k2", "p1", "p2")}}
    frames = [(frame["file_path"], np.asarray(frame["transform_matrix"], dtype=np.float64) @ GL_FROM_CV)
              for frame in content["frames"]]
    return camera, frames

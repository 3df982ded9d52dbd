"""A dataset folder: per-frame image files, per-frame records, `render.json` and nerfstudio's transforms.json.

DATASET/
  transforms.json            written last: nerfstudio's layout (camera-to-world, OpenGL axes, twin frame)
  render.json                what was rendered from what (twin fingerprints, config, planned views), and
                             the run's figures and timings (the only file that differs between two runs)
  images/frame_00000.png     RGB from the splats, randomized
  depth/frame_00000.png      uint16 millimetres along the optical axis, 0: no surface
  normals/frame_00000.png    world-frame unit normals as round((n + 1) / 2 * 255), (0, 0, 0): no surface
  masks/frame_00000.png      uint8 classes: 0 nothing, 1 floor, 2 structure, 3 distractor box
  instances/frame_00000.png  uint16: collider part 1..P (largest first), distractor boxes P+1.., 0 none
  agreement/frame_00000.png  uint8: 255 where the depth is corroborated (mesh and splats agree), else 0
  records/frame_00000.json   the frame's transforms.json entry; present once the frame's files are complete
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from twinscan import atomic, layout
from twinscan.errors import TwinscanError
from twinscan.recon.sfm.nerfstudio import GL_FROM_CV
from twinscan.render.cameras import View
from twinscan.render.config import RenderConfig
from twinscan.render.frame import FrameImages
from twinscan.render.randomize import Randomization

FORMAT = "twinscan-render-dataset"
VERSION = 2  # 2: the agreement layer
RECORD = "render.json"
TRANSFORMS = layout.TRANSFORMS  # nerfstudio's file name, as in a capture workspace
FOLDERS = {"file_path": "images", "depth_file_path": "depth", "normal_file_path": "normals",
           "mask_file_path": "masks", "instance_file_path": "instances", "agreement_file_path": "agreement"}
RECORDS = "records"


def frame_name(index: int) -> str:
    return f"frame_{index:05d}"


def _png(image: np.ndarray) -> bytes:
    ok, data = cv2.imencode(".png", image[..., ::-1] if image.ndim == 3 else image)
    if not ok:
        raise TwinscanError("PNG encoding failed", "check the free disk space and memory, then run again")
    return data.tobytes()


def view_record(view: View) -> dict[str, Any]:
    return {"K": view.K.tolist(), "world_from_cam": view.world_from_cam.tolist(), "width": view.width,
            "height": view.height, "source": view.source}


def view_from_record(record: dict[str, Any]) -> View:
    return View(np.array(record["K"]), np.array(record["world_from_cam"]), int(record["width"]),
                int(record["height"]), str(record["source"]))


def plan_record(config: RenderConfig, inputs: dict[str, str], views: list[View], part_count: int) -> dict[str, Any]:
    return {"format": FORMAT, "version": VERSION, "inputs": inputs, "config": dataclasses.asdict(config),
            "collider_parts": part_count, "views": [view_record(view) for view in views]}


def open_dataset(folder: Path, config: RenderConfig, inputs: dict[str, str], force: bool) -> dict[str, Any] | None:
    """The plan of an unfinished or finished dataset in `folder` made from the same twin and settings (to
    resume), or None for a new one. A folder holding something else is refused, or replaced with --force."""
    record_path = folder / RECORD
    if record_path.is_file():
        try:
            plan = json.loads(record_path.read_text())
        except json.JSONDecodeError:
            plan = {}
        difference = _difference(plan if isinstance(plan, dict) else {}, config, inputs)
        if difference is None and not force:
            return plan
        if not force:
            raise TwinscanError(f"{folder} holds a dataset {difference}",
                                "give a new -o folder, or add --force to replace it")
        shutil.rmtree(folder)
    elif folder.exists() and any(folder.iterdir()):
        raise TwinscanError(f"{folder} exists and is not a twinscan dataset; it would be mixed with one",
                            "give a new or empty -o folder")
    return None


def _difference(plan: dict[str, Any], config: RenderConfig, inputs: dict[str, str]) -> str | None:
    """Why a dataset's record does not match this run (None: it does), said so the user knows which."""
    if plan.get("format") != FORMAT:
        return f"whose {RECORD} is not a twinscan render record"
    if plan.get("version") != VERSION:
        return f"of layout version {plan.get('version')} (this twinscan writes version {VERSION})"
    if plan.get("inputs") != inputs:
        changed = sorted(name for name in inputs if (plan.get("inputs") or {}).get(name) != inputs[name])
        return f"rendered from another twin ({', '.join(changed) or 'other files'} differ)"
    wanted = json.loads(json.dumps(dataclasses.asdict(config)))
    if plan.get("config") != wanted:
        recorded = plan.get("config") or {}
        changed = sorted(key for key in {*wanted, *recorded} if recorded.get(key) != wanted.get(key))
        return "rendered with other settings (" + "; ".join(
            f"{key} {recorded.get(key)!r}, now {wanted.get(key)!r}" for key in changed) + ")"
    return None


def write_plan(folder: Path, plan: dict[str, Any]) -> None:
    atomic.write_json(folder / RECORD, plan)


def done_frames(folder: Path, count: int) -> set[int]:
    return {i for i in range(count) if (folder / RECORDS / f"{frame_name(i)}.json").is_file()}


def write_frame(folder: Path, index: int, view: View, images: FrameImages, randomization: Randomization) -> None:
    """The frame's six images, then its record: a frame with a record is complete."""
    name = frame_name(index)
    layers = {"file_path": images.rgb, "depth_file_path": images.depth_mm, "normal_file_path": images.normals,
              "mask_file_path": images.classes, "instance_file_path": images.instances,
              "agreement_file_path": images.agreement}
    entry: dict[str, Any] = {key: f"{FOLDERS[key]}/{name}.png" for key in FOLDERS}
    for key, image in layers.items():
        atomic.write_bytes(folder / entry[key], _png(image))
    entry.update({"transform_matrix": (view.world_from_cam @ GL_FROM_CV).tolist(),
                  "fl_x": float(view.K[0, 0]), "fl_y": float(view.K[1, 1]), "cx": float(view.K[0, 2]),
                  "cy": float(view.K[1, 2]), "w": view.width, "h": view.height, "source": view.source,
                  "depth_from_splats": images.depth_from_splats, "depth_agreed": images.depth_agreed,
                  "randomization": randomization.record()})
    atomic.write_json(folder / RECORDS / f"{name}.json", entry)


def write_transforms(folder: Path, count: int, part_count: int) -> dict[str, Any]:
    """nerfstudio's transforms.json from every frame record (per-frame intrinsics, as nerfstudio allows)."""
    frames = [json.loads((folder / RECORDS / f"{frame_name(i)}.json").read_text()) for i in range(count)]
    content = {"camera_model": "OPENCV", "k1": 0.0, "k2": 0.0, "p1": 0.0, "p2": 0.0,
               "depth_unit_scale_factor": 0.001, "frame": "twin (Z up, metres, floor at z = 0)",
               "classes": {"0": "nothing", "1": "floor", "2": "structure", "3": "distractor"},
               "collider_parts": part_count, "frames": frames}
    atomic.write_json(folder / TRANSFORMS, content)
    return content

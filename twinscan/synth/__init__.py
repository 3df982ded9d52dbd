"""Synthetic phone captures of a factory cell with exact ground truth (poses, intrinsics, mesh, marker)."""

from twinscan.synth.capture import (PRESETS, CaptureConfig, GroundTruth, MarkerTruth, intrinsics,
                                    load_ground_truth, make_capture)
from twinscan.synth.render import Render, render_frame
from twinscan.synth.scene import Scene, build_scene, scene_mesh

__all__ = ["PRESETS", "CaptureConfig", "GroundTruth", "MarkerTruth", "Render", "Scene", "build_scene",
           "intrinsics", "load_ground_truth", "make_capture", "render_frame", "scene_mesh"]

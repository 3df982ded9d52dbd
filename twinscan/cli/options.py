"""The command line's option types, shared by every command (`app` and the commands in their own modules)."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer


class QualityChoice(str, Enum):
    auto = "auto"
    smoke = "smoke"
    preview = "preview"
    standard = "standard"
    high = "high"


class DeviceChoice(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class MapperChoice(str, Enum):
    global_ = "global"
    incremental = "incremental"


Quality = Annotated[QualityChoice, typer.Option(
    "--quality", "-q", help="auto (standard on a usable CUDA GPU, else preview), smoke (a minute: proves the setup on a "
                            "tiny capture), preview (minutes on a laptop), standard (GPU node), or high (GPU node, 5-minute walks).")]
Device = Annotated[DeviceChoice, typer.Option(
    help="auto picks CUDA when this machine has a usable GPU (splats on gsplat; SIFT too with pycolmap-cuda12), else the CPU.")]
Force = Annotated[bool, typer.Option("--force", help="Redo the stage even if it already finished.")]
OutDir = Annotated[Path, typer.Option("--out", "-o", help="Capture workspace folder (created if missing).")]
Workdir = Annotated[Path, typer.Argument(help="Capture workspace folder made by `twinscan frames` or `capture`.")]
VideoArg = Annotated[Path, typer.Argument(help="Walkthrough video (mp4/mov/m4v, H.264 or HEVC) or a folder of images.")]
MaxFrames = Annotated[Optional[int], typer.Option(help="Keep at most this many frames (default: the preset's).")]
Mapper = Annotated[MapperChoice, typer.Option(help="incremental (default: fastest accurate one in benchmarks/bench_sfm.py) or global (GLOMAP).")]
MarkerSize = Annotated[Optional[float], typer.Option(
    help="Side length in metres of a printed ArUco/AprilTag marker in the scene: gives metric scale.")]
MarkerDict = Annotated[str, typer.Option(help="Marker dictionary, e.g. 4x4_50, 6x6_250, apriltag_36h11.")]
Scale = Annotated[Optional[float], typer.Option(help="Known metres per reconstruction unit, when there is no marker.")]
Convex = Annotated[bool, typer.Option("--convex", help="Add a convex decomposition (CoACD) for dynamic bodies.")]
Usdz = Annotated[bool, typer.Option("--usdz", help="Also write one packaged .usdz.")]
Half = Annotated[bool, typer.Option("--half", help="Store splat attributes in half precision (half the size).")]
StaticFriction = Annotated[float, typer.Option(
    help="Colliders' static friction (UsdPhysics material; 0.6: sealed concrete plant floor).")]
DynamicFriction = Annotated[float, typer.Option(
    help="Colliders' dynamic (sliding) friction, at most the static one (0.5: plant floor).")]
Restitution = Annotated[float, typer.Option(help="Colliders' restitution (bounce), 0 to 1 (0.1: plant floor).")]

"""What a user may set on the command line, for any stage: each stage builds its config from it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CaptureOptions:
    """Everything a user may set on the command line, for any stage."""

    quality: str = "auto"  # a preset, or auto: standard on a usable CUDA GPU, else preview (presets.preset_choice)
    device: str = "auto"
    force: bool = False
    max_frames: int | None = None
    mapper: str = "incremental"
    marker_size: float | None = None
    marker_dict: str = "4x4_50"
    scale: float | None = None
    min_registered: float = 0.6
    convex: bool = False
    usdz: bool = False
    half: bool = False
    physics: bool = True
    static_friction: float = 0.6  # the colliders' UsdPhysics material (UsdConfig's defaults: a plant floor)
    dynamic_friction: float = 0.5
    restitution: float = 0.1

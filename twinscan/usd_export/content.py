"""What goes into a twin stage, and how it is written: plain typed values, no USD types."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import trimesh

from twinscan.gaussians import Gaussians

ScaleSource = Literal["marker", "manual", "arbitrary"]


@dataclass(frozen=True)
class CameraTrack:
    """The capture trajectory: one pinhole camera (OpenCV K, pixels) and its poses over time."""

    K: np.ndarray  # (3, 3)
    width: int
    height: int
    world_from_cam: np.ndarray  # (T, 4, 4), OpenCV camera axes
    times: np.ndarray  # (T,) seconds into the video


@dataclass(frozen=True)
class FloorArea:
    """The rectangle of the z = 0 floor that gets a collider (metres, twin frame)."""

    xy_min: tuple[float, float]
    xy_max: tuple[float, float]
    thickness: float = 0.05


@dataclass(frozen=True)
class PhysicsMaterial:
    """Contact properties of every collider (UsdPhysics.MaterialAPI). The defaults are a sealed concrete
    plant floor under steel, plastic or rubber parts: PhysX's own default is 0.5/0.5/0."""

    static_friction: float = 0.6
    dynamic_friction: float = 0.5
    restitution: float = 0.1

    def problems(self) -> list[str]:
        found = []
        if not (self.static_friction >= 0 and self.dynamic_friction >= 0):
            found.append(f"friction must be 0 or more (static {self.static_friction:g}, "
                         f"dynamic {self.dynamic_friction:g})")
        elif self.dynamic_friction > self.static_friction:
            found.append(f"dynamic friction {self.dynamic_friction:g} is above static friction "
                         f"{self.static_friction:g}: sliding would grip harder than standing")
        if not 0 <= self.restitution <= 1:
            found.append(f"restitution {self.restitution:g} is outside 0..1")
        return found


@dataclass(frozen=True)
class TwinMetadata:
    """Provenance and trust figures, stored in the root layer's customLayerData."""

    source_sha256: str = ""
    scale_source: ScaleSource = "arbitrary"
    origin: str = ""  # what the x, y origin and yaw are tied to, e.g. "marker 0" (sfm's manifest record)
    figures: dict[str, float] = field(default_factory=dict)
    created_utc: str = ""  # ISO 8601; empty means "now"


@dataclass(frozen=True)
class TwinContent:
    """Everything in the twin frame (Z up, metres); any part but the splats may be missing."""

    gaussians: Gaussians
    background: Gaussians | None = None  # splats outside the captured region (the hall behind the cell)
    collision_mesh: trimesh.Trimesh | None = None
    planar_patches: trimesh.Trimesh | None = None  # planes closed where fusion left fragments (meshing/planes.py)
    convex_parts: tuple[trimesh.Trimesh, ...] = ()
    visual_mesh: trimesh.Trimesh | None = None
    visual_texture: Path | None = None  # image the visual mesh's UVs index (PNG/JPEG)
    cameras: CameraTrack | None = None
    floor: FloorArea | None = None
    metadata: TwinMetadata = field(default_factory=TwinMetadata)
    physics_material: PhysicsMaterial = field(default_factory=PhysicsMaterial)


@dataclass(frozen=True)
class ExportOptions:
    half_precision: bool = False  # splat attributes (not positions) as half: half the size, ~1e-3 relative error
    usdz: bool = False  # also write one packaged .usdz beside the .usda
    appearance: Literal["splats", "mesh"] = "splats"  # the default selection of the "appearance" variant set
    time_codes_per_second: float = 30.0

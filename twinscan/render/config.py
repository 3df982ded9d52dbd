"""What `twinscan render` makes: the views, the camera path and how hard the data is randomized."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from twinscan.errors import TwinscanError

# where a robot's camera sits: a mobile base's mast, a humanoid's head (metres above the floor)
CAMERA_HEIGHTS: dict[str, tuple[float, float]] = {"mobile": (0.3, 1.5), "humanoid": (1.5, 1.8)}
RANDOMIZE_LEVELS = ("none", "light", "heavy")
PATH_KINDS = ("sampled", "capture")  # or the path of a nerfstudio transforms.json
DEPTH_SOURCES = ("mesh", "splats")


@dataclass(frozen=True)
class RenderConfig:
    """One dataset's settings. Every view is a pure function of (twin, config, view index): resumable,
    and the same whether one process renders it or a Ray worker does."""

    views: int = 100
    width: int = 640
    height: int = 480
    hfov_deg: float = 70.0  # sampled views; capture and file paths keep their own intrinsics
    path: str = "sampled"  # "sampled", "capture" or a transforms.json file
    heights_m: tuple[float, float] = CAMERA_HEIGHTS["mobile"]
    pitch_deg: tuple[float, float] = (-35.0, -5.0)  # looking along the floor, a little down
    min_coverage: float = 0.9  # share of a sampled view's pixels that must show captured surface
    clearance_m: float = 0.2  # a sampled camera keeps this far from every collider
    depth_source: str = "mesh"  # see docs/render.md: the visual mesh is the measured better source
    randomize: str = "light"
    seed: int = 0

    def validate(self) -> None:
        if self.views < 1:
            raise TwinscanError(f"--views {self.views} renders nothing", "give --views 1 or more")
        if not (16 <= self.width <= 8192 and 16 <= self.height <= 8192):
            raise TwinscanError(f"image size {self.width}x{self.height} is not usable",
                                "give --width and --height between 16 and 8192 pixels")
        if not 10.0 <= self.hfov_deg <= 150.0:
            raise TwinscanError(f"--hfov {self.hfov_deg} degrees is not a pinhole camera's field of view",
                                "give a horizontal field of view between 10 and 150 degrees")
        if self.path not in PATH_KINDS and not Path(self.path).is_file():
            raise TwinscanError(f"--path {self.path} is neither 'sampled', 'capture' nor a file",
                                "give --path sampled, --path capture or the path of a nerfstudio transforms.json")
        low, high = self.heights_m
        if not (0.05 <= low <= high <= 10.0):
            raise TwinscanError(f"camera heights {low}-{high} m are not usable",
                                "give --heights mobile, humanoid or LOW-HIGH in metres, e.g. 0.4-1.2")
        if not -89.0 <= self.pitch_deg[0] <= self.pitch_deg[1] <= 89.0:
            raise TwinscanError(f"pitch range {self.pitch_deg} is not usable", "give degrees from -89 to 89, low first")
        if not 0.0 < self.min_coverage <= 1.0:
            raise TwinscanError(f"coverage {self.min_coverage} is not a share", "give a value in (0, 1]")
        if self.depth_source not in DEPTH_SOURCES:
            raise TwinscanError(f"unknown depth source {self.depth_source!r}", f"use one of {', '.join(DEPTH_SOURCES)}")
        if self.randomize not in RANDOMIZE_LEVELS:
            raise TwinscanError(f"unknown --randomize level {self.randomize!r}",
                                f"use one of {', '.join(RANDOMIZE_LEVELS)}")
        if self.seed < 0:
            raise TwinscanError(f"--seed {self.seed} is negative", "give a seed of 0 or more")

    @property
    def focal_px(self) -> float:
        return (self.width / 2) / math.tan(math.radians(self.hfov_deg) / 2)


def parse_heights(text: str) -> tuple[float, float]:
    """'mobile', 'humanoid' or 'LOW-HIGH' (metres) -> (low, high)."""
    if text in CAMERA_HEIGHTS:
        return CAMERA_HEIGHTS[text]
    try:
        low, high = (float(part) for part in text.split("-"))
    except ValueError:
        raise TwinscanError(f"--heights {text!r} is not a height range",
                            "give mobile (0.3-1.5 m), humanoid (1.5-1.8 m) or LOW-HIGH in metres, e.g. 0.4-1.2") from None
    return low, high

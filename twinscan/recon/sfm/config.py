"""What the SfM stage is asked to do: one frozen, validated config derived from a quality preset."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from twinscan.errors import TwinscanError
from twinscan.presets import Preset
from twinscan.recon.sfm.device import SfmDevice

MAPPERS = ("global", "incremental")
MATCHINGS = ("sequential", "exhaustive")


def aruco_dictionary_id(name: str) -> int:
    """OpenCV's id for a marker dictionary named like '4x4_50' or 'apriltag_36h11'."""
    import cv2

    value = getattr(cv2.aruco, f"DICT_{name.upper()}", None)
    if value is None:
        known = sorted(n[5:].lower() for n in dir(cv2.aruco) if n.startswith("DICT_"))
        raise TwinscanError(f"unknown marker dictionary '{name}'", f"use one of: {', '.join(known)}")
    return int(value)


@dataclass(frozen=True)
class SfmConfig:
    max_side: int = 1280  # longest image side for feature extraction, pixels
    max_features: int | None = None  # SIFT features per image; None: by the frames' own size (for_frames)
    mapper: str = "incremental"  # or "global" (GLOMAP); the default is chosen in benchmarks/bench_sfm.py
    matching: str = "sequential"  # "sequential" (video order + loop keyframes) or "exhaustive"
    overlap: int = 10  # sequential matching: each frame is matched with this many next frames
    loop_keyframes: int = 40  # frames spread over the video, matched all-to-all to close loops
    focal_factor: float = 1.2  # focal length prior = factor * longest side when EXIF has none
    marker_size: float | None = None  # side of the printed ArUco/AprilTag marker, metres
    marker_dict: str = "4x4_50"
    scale: float | None = None  # metres per reconstruction unit, when the user knows it
    min_registered: float = 0.6  # fail below this fraction of registered frames
    # Incremental mapping registers a frame on at least this many 2D-3D inliers. COLMAP's 30 suits photos
    # with thousands of features; a 320 px video frame has about 900, and frames 12 degrees apart past a
    # box 1 m away share about 32. On the same matches, 30 registers 18/30 such frames and 20 registers
    # 25/30, as accurately (bench_sfm.py --min-pose-inliers 30 20; docs/benchmarks.md).
    min_pose_inliers: int = 20
    seed: int = 0
    device: SfmDevice = SfmDevice()  # where SIFT extraction and matching run, and why (recon/sfm/device.py)

    def __post_init__(self) -> None:
        if self.mapper not in MAPPERS:
            raise TwinscanError(f"unknown mapper '{self.mapper}'", f"use one of: {', '.join(MAPPERS)}")
        if self.matching not in MATCHINGS:
            raise TwinscanError(f"unknown matching '{self.matching}'", f"use one of: {', '.join(MATCHINGS)}")
        if self.marker_size is not None and not self.marker_size > 0:
            raise TwinscanError(f"--marker-size must be positive (got {self.marker_size})",
                                "give the printed marker's black square side in metres, e.g. 0.30")
        if self.scale is not None and not self.scale > 0:
            raise TwinscanError(f"--scale must be positive (got {self.scale})",
                                "give metres per reconstruction unit, e.g. 1.0")
        if self.marker_size is not None and self.scale is not None:
            raise TwinscanError("both --marker-size and --scale were given", "give only one scale source")
        if not 0 < self.min_registered <= 1:
            raise TwinscanError(f"min_registered must be in (0, 1] (got {self.min_registered})",
                                "use a fraction such as 0.6")
        if self.marker_size is not None:
            aruco_dictionary_id(self.marker_dict)
        if self.device.name not in ("cpu", "cuda"):
            raise TwinscanError(f"SfM device '{self.device.name}' is not resolved", "resolve it with sfm_device(--device)")

    @classmethod
    def from_preset(cls, preset: Preset, **overrides: Any) -> SfmConfig:
        return replace(cls(max_side=preset.frame_max_side), **overrides)

    def for_frames(self, longest_side: int) -> SfmConfig:
        """This config with its SIFT features chosen for frames of `longest_side` pixels, unless set.

        The frames' own size decides, not the preset's: a 640 x 360 video stays 640 px under a preset
        that allows 960 (its frames hold fewer than 4096 features: hard seed 4 gave the same model with
        4096 as with 8192, docs/benchmarks.md session 41)."""
        if self.max_features is not None:
            return self
        return replace(self, max_features=features_for_side(min(longest_side, self.max_side)))


def features_for_side(side: int) -> int:
    """SIFT features a frame of longest side `side` px is asked for: 4096 up to 640 px, 8192 above
    (docs/benchmarks.md, "sfm at 960 px")."""
    return 4096 if side <= 640 else 8192

"""What the frames stage keeps, in one typed config derived from a quality preset."""

from __future__ import annotations

from dataclasses import dataclass

from twinscan.errors import TwinscanError
from twinscan.presets import Preset


@dataclass(frozen=True)
class FramesConfig:
    max_frames: int = 200  # frame budget; a longer walk is thinned evenly along its path
    max_side: int = 1280  # longest side of the written JPEGs (never upscaled)
    jpeg_quality: int = 95
    score_side: int = 480  # longest side of the small grey image every frame is scored on (at most half the source)
    # a window closes at this (80th percentile) feature displacement since the last kept frame (fraction of the diagonal)
    motion_step: float = 0.035  # the presets' (twinscan/presets.py says why)
    window_start: float = 0.7  # ... and opens at this fraction of motion_step: closer is redundant
    blur_ratio: float = 0.5  # blurred: less sharp than this fraction of the recent typical sharpness
    max_gap_steps: float = 2.0  # ... yet kept, if nothing sharper came within this many motion steps
    min_sharpness: float = 10.0  # blurred whatever the neighbours: variance of Laplacian on the score image
    reference_s: float = 1.5  # how far back "recent" reaches for the typical sharpness (see SharpnessReference)
    dark_level: float = 25.0  # badly exposed: mean grey below this (0-255) ...
    bright_level: float = 230.0  # ... or above this ...
    max_clipped: float = 0.5  # ... or more than this fraction of pixels crushed to black or burnt to white
    min_frames: int = 3  # fewer usable kept frames than this cannot make a reconstruction
    min_decoded: int = 10  # a source with fewer frames is too short to be a walkthrough

    def __post_init__(self) -> None:
        if self.max_frames < self.min_frames:
            raise TwinscanError(f"--max-frames {self.max_frames} is too few",
                                f"keep at least {self.min_frames} frames (the presets keep 40 to 600)")
        if self.max_side < 64:
            raise TwinscanError(f"maximum image side {self.max_side} px is too small", "use at least 64 px")

    @classmethod
    def from_preset(cls, preset: Preset, max_frames: int | None = None) -> FramesConfig:
        return cls(max_frames=preset.max_frames if max_frames is None else max_frames,
                   max_side=preset.frame_max_side, max_gap_steps=preset.max_gap_steps, motion_step=preset.motion_step)

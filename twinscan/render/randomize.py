"""Domain randomization: per frame, a seeded draw (recorded in full) and the image effects it applies.

Every quantity is drawn for every frame (a level sets ranges, never on/off switches), so the record of
a frame says exactly what was done to it and two seeds differ in every quantity. Each frame draws from
its own generator, seeded by (dataset seed, frame index): a frame is the same whichever worker renders it
and whether the run was resumed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import cv2
import numpy as np


@dataclass(frozen=True)
class Ranges:
    exposure_ev: float  # +- stops
    white_balance: float  # +- share per channel (red and blue; green fixed)
    gamma: tuple[float, float]  # display gamma multiplier
    noise_sigma: float  # up to this std of read noise, 8-bit levels (plus shot noise of the same scale)
    blur_px: float  # up to this length of linear motion blur
    jpeg_quality: tuple[int, int]  # JPEG round trip at a quality in this range
    dc_jitter: float  # +- shift of the splats' colour (SH DC term, in RGB units) per channel
    shading: float  # up to this strength of a directional light over the geometry's normals
    distractors: tuple[int, int]  # how many boxes stand on the floor


LEVELS: dict[str, Ranges | None] = {
    "none": None,
    "light": Ranges(exposure_ev=0.3, white_balance=0.05, gamma=(0.9, 1.1), noise_sigma=2.0, blur_px=3.0,
                    jpeg_quality=(75, 95), dc_jitter=0.04, shading=0.15, distractors=(0, 2)),
    "heavy": Ranges(exposure_ev=1.0, white_balance=0.15, gamma=(0.75, 1.35), noise_sigma=8.0, blur_px=12.0,
                    jpeg_quality=(30, 90), dc_jitter=0.15, shading=0.4, distractors=(1, 5)),
}


@dataclass(frozen=True)
class Distractor:
    """A box standing on the floor: its centre on the floor (x, y), size (x, y, z) and yaw."""

    centre_xy: tuple[float, float]
    size: tuple[float, float, float]
    yaw_deg: float
    colours: tuple[tuple[float, float, float], tuple[float, float, float]]  # two paints, linear RGB
    texture_seed: int


@dataclass(frozen=True)
class Randomization:
    exposure_ev: float = 0.0
    white_balance: tuple[float, float, float] = (1.0, 1.0, 1.0)
    gamma: float = 1.0
    noise_sigma: float = 0.0
    blur_px: float = 0.0
    blur_angle_deg: float = 0.0
    jpeg_quality: int | None = None  # None: no JPEG round trip
    dc_shift: tuple[float, float, float] = (0.0, 0.0, 0.0)
    shading: float = 0.0
    light_direction: tuple[float, float, float] = (0.0, 0.0, 1.0)
    distractors: tuple[Distractor, ...] = ()
    noise_seed: int = 0

    def record(self) -> dict:
        return asdict(self)


def frame_rng(seed: int, index: int, stream: int) -> np.random.Generator:
    return np.random.default_rng([seed, index, stream])


def draw(level: str, seed: int, index: int, place_distractors) -> Randomization:
    """The frame's randomization; `place_distractors(rng, count)` puts boxes where this view sees them."""
    ranges = LEVELS[level]
    if ranges is None:
        return Randomization()
    rng = frame_rng(seed, index, 2)
    wb = 1.0 + rng.uniform(-ranges.white_balance, ranges.white_balance, 2)
    azimuth, elevation = rng.uniform(0, 2 * math.pi), rng.uniform(math.radians(20), math.radians(80))
    light = (math.cos(elevation) * math.cos(azimuth), math.cos(elevation) * math.sin(azimuth), math.sin(elevation))
    return Randomization(
        exposure_ev=float(rng.uniform(-ranges.exposure_ev, ranges.exposure_ev)),
        white_balance=(float(wb[0]), 1.0, float(wb[1])),
        gamma=float(rng.uniform(*ranges.gamma)),
        noise_sigma=float(rng.uniform(0.0, ranges.noise_sigma)),
        blur_px=float(rng.uniform(0.0, ranges.blur_px)),
        blur_angle_deg=float(rng.uniform(0.0, 180.0)),
        jpeg_quality=int(rng.integers(ranges.jpeg_quality[0], ranges.jpeg_quality[1] + 1)),
        dc_shift=tuple(float(x) for x in rng.uniform(-ranges.dc_jitter, ranges.dc_jitter, 3)),
        shading=float(rng.uniform(0.0, ranges.shading)),
        light_direction=light,
        distractors=tuple(place_distractors(rng, int(rng.integers(ranges.distractors[0], ranges.distractors[1] + 1)))),
        noise_seed=int(rng.integers(0, 2**31)),
    )


def srgb_to_linear(srgb: np.ndarray) -> np.ndarray:
    return np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)


def linear_to_srgb(linear: np.ndarray) -> np.ndarray:
    linear = np.clip(linear, 0.0, 1.0)
    return np.where(linear <= 0.0031308, linear * 12.92, 1.055 * linear ** (1 / 2.4) - 0.055)


def motion_blur_kernel(length_px: float, angle_deg: float) -> np.ndarray | None:
    """A normalised line kernel (None below one pixel: nothing to blur)."""
    if length_px < 1.0:
        return None
    size = int(math.ceil(length_px)) | 1
    kernel = np.zeros((size, size), np.float32)
    c = size // 2
    dx, dy = math.cos(math.radians(angle_deg)), math.sin(math.radians(angle_deg))
    for t in np.linspace(-length_px / 2, length_px / 2, 4 * size):
        kernel[int(round(c + t * dy)), int(round(c + t * dx))] = 1.0
    return kernel / kernel.sum()


def apply(rgb: np.ndarray, normals: np.ndarray, r: Randomization) -> np.ndarray:
    """The camera and light effects on an (H, W, 3) uint8 sRGB render; normals (H, W, 3) world (0: none)."""
    linear = srgb_to_linear(rgb.astype(np.float32) / 255.0)
    if r.shading > 0:  # a light from `light_direction` over the twin's baked lighting, mean brightness kept
        facing = normals @ np.asarray(r.light_direction, np.float32)
        lit = np.any(normals != 0, axis=-1)
        linear *= np.where(lit, 1.0 + r.shading * (facing - 0.5), 1.0)[..., None]
    linear *= np.asarray(r.white_balance, np.float32) * np.float32(2.0 ** r.exposure_ev)
    kernel = motion_blur_kernel(r.blur_px, r.blur_angle_deg)
    if kernel is not None:
        linear = cv2.filter2D(linear, -1, kernel, borderType=cv2.BORDER_REFLECT)
    srgb = linear_to_srgb(linear) ** np.float32(1.0 / r.gamma) * 255.0
    if r.noise_sigma > 0:
        noise_rng = np.random.default_rng(r.noise_seed)
        sigma = np.sqrt(r.noise_sigma ** 2 + r.noise_sigma * srgb / 255.0 * 4.0)  # read + shot noise
        srgb = srgb + noise_rng.standard_normal(srgb.shape).astype(np.float32) * sigma
    out = np.clip(srgb + 0.5, 0, 255).astype(np.uint8)
    if r.jpeg_quality is not None:
        _, data = cv2.imencode(".jpg", out[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, r.jpeg_quality])
        out = cv2.imdecode(data, cv2.IMREAD_COLOR)[..., ::-1]
    return out

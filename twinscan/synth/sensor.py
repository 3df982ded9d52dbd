"""What a phone camera does to the light: lens blur, exposure gain, shot and read noise, sRGB encoding."""

from __future__ import annotations

import cv2
import numpy as np

from twinscan.synth.render import linear_to_srgb8

LENS_BLUR_SIGMA_PX = 0.45
READ_NOISE = 0.004  # linear units, std
SHOT_NOISE = 0.0015  # variance per unit of signal


def expose(radiance: np.ndarray, gain: float, rng: np.random.Generator) -> np.ndarray:
    """(H, W, 3) linear radiance -> noisy sRGB uint8 as the sensor records it."""
    signal = cv2.GaussianBlur(radiance, (0, 0), LENS_BLUR_SIGMA_PX) * np.float32(gain)
    sigma = np.sqrt(READ_NOISE ** 2 + SHOT_NOISE * np.clip(signal, 0.0, None))
    noisy = signal + sigma * rng.standard_normal(signal.shape, dtype=np.float32)
    return linear_to_srgb8(noisy)

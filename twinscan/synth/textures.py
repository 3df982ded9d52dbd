"""Procedural surface textures that SIFT and 3DGS both like: high contrast, multi-scale, non-repeating.

A texture is a periodic (S, S, 2) float32 image sampled by metric surface coordinates: channel 0 is a
paint pattern in [0, 1] (blends an object's two paint colours), channel 1 a brightness detail around 1.
Fractal noise is made by spectral synthesis (one FFT, periodic by construction, every octave at once);
hashed blobs and label rectangles drawn on top give sharp corners and blob features.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np


@dataclass(frozen=True)
class Texture:
    data: np.ndarray  # (S, S, 2) float32; periodic
    texel_m: float  # metres per texel

    @property
    def period_m(self) -> float:
        return self.data.shape[0] * self.texel_m

    def sample(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Bilinear lookup at metric coordinates (M,), (M,) -> (M, 2); wraps around the period."""
        size = self.data.shape[0]
        x = u / np.float32(self.texel_m)
        y = v / np.float32(self.texel_m)
        x -= np.floor(x / size) * size  # wrap into [0, size): cv2.remap wants small coordinates
        y -= np.floor(y / size) * size
        # cv2.remap takes maps of under 32767 rows: lay the points out as rows of 1024
        padded = -(-len(x) // 1024) * 1024
        map_x = np.zeros(padded, dtype=np.float32)
        map_y = np.zeros(padded, dtype=np.float32)
        map_x[:len(x)], map_y[:len(y)] = x, y
        texels = cv2.remap(self.data, map_x.reshape(-1, 1024), map_y.reshape(-1, 1024), cv2.INTER_LINEAR,
                           borderMode=cv2.BORDER_WRAP)
        return texels.reshape(-1, 2)[:len(x)]


def fractal_noise(rng: np.random.Generator, size: int, beta: float, min_period_texels: float) -> np.ndarray:
    """Periodic noise with a power-law spectrum (amplitude ~ f^-beta), zero mean, unit std."""
    white = rng.standard_normal((size, size))
    freq_y = np.fft.fftfreq(size)[:, None]
    freq_x = np.fft.rfftfreq(size)[None, :]
    radius = np.hypot(freq_y, freq_x)
    radius[0, 0] = 1.0
    amplitude = radius ** -beta
    amplitude[radius > 1.0 / min_period_texels] = 0.0
    amplitude[0, 0] = 0.0
    noise = np.fft.irfft2(np.fft.rfft2(white) * amplitude, s=(size, size))
    return ((noise - noise.mean()) / noise.std()).astype(np.float32)


def make_texture(rng: np.random.Generator, size: int, texel_m: float, blobs_per_m2: float = 40.0) -> Texture:
    """A paint pattern of sharp-edged fractal blobs, hashed dots and label rectangles, plus fine grain."""
    pattern = 1.0 / (1.0 + np.exp(-4.0 * fractal_noise(rng, size, beta=1.6, min_period_texels=3.0)))
    area_m2 = (size * texel_m) ** 2
    for _ in range(int(blobs_per_m2 * area_m2)):
        centre = tuple(int(c) for c in rng.integers(0, size, 2))
        value = float(rng.choice([0.0, 1.0]))
        if rng.random() < 0.7:
            radius = int(rng.integers(2, 16))
            cv2.circle(pattern, centre, radius, value, thickness=-1, lineType=cv2.LINE_AA)
        else:
            half = rng.integers(3, 24, 2)
            corner0 = (centre[0] - int(half[0]), centre[1] - int(half[1]))
            corner1 = (centre[0] + int(half[0]), centre[1] + int(half[1]))
            cv2.rectangle(pattern, corner0, corner1, value, thickness=-1)
            cv2.rectangle(pattern, corner0, corner1, 1.0 - value, thickness=1)
    detail = 1.0 + 0.22 * np.clip(fractal_noise(rng, size, beta=0.9, min_period_texels=2.0), -2.5, 2.5)
    return Texture(np.ascontiguousarray(np.stack([pattern, detail], axis=-1), dtype=np.float32), texel_m)

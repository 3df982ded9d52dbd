"""A handheld walkthrough: one loop around the cell, looking at its centre, with a human's imperfections.

Everything is a smooth, seeded function of time, so sub-frame poses (for motion blur) come from the same
model as the frame poses. The pose of a frame is the pose at the middle of its exposure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

LOOP_RADIUS_M = 3.7
LOOP_FRACTION = 0.96  # ends a little short of the start: a loop closure, not a duplicate frame
EYE_HEIGHT_M = 1.5
LOOK_AT = np.array([0.0, 0.0, 0.45])
TIME_STEP_S = 1e-3  # resolution of the walking-progress table


def _smoothstep(x: np.ndarray) -> np.ndarray:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3 - 2 * x)


def _window(t: np.ndarray, stretch: tuple[float, float] | None, ramp_s: float) -> np.ndarray:
    """1 inside [t0, t1], 0 outside, with smooth ramps of `ramp_s` inside the edges."""
    if stretch is None:
        return np.zeros_like(t)
    t0, t1 = stretch
    return _smoothstep((t - t0) / ramp_s) * _smoothstep((t1 - t) / ramp_s)


@dataclass(frozen=True)
class Wobble:
    """Sum of a few sinusoids per channel: smooth, band-limited, seeded hand motion."""

    amplitude: np.ndarray  # (C,)
    freq_hz: np.ndarray  # (C, S)
    phase: np.ndarray  # (C, S)

    @classmethod
    def random(cls, rng: np.random.Generator, amplitude, low_hz: float, high_hz: float, terms: int = 3):
        amplitude = np.asarray(amplitude, dtype=np.float64)
        shape = (len(amplitude), terms)
        return cls(amplitude, rng.uniform(low_hz, high_hz, shape), rng.uniform(0, 2 * np.pi, shape))

    def __call__(self, t: np.ndarray) -> np.ndarray:
        """(N, C) offsets at times (N,)."""
        waves = np.sin(2 * np.pi * self.freq_hz[None] * t[:, None, None] + self.phase[None])
        return self.amplitude * waves.sum(-1) / np.sqrt(self.freq_hz.shape[1])


class Walkthrough:
    """Poses, exposure time and auto-exposure gain of the handheld camera as functions of time."""

    def __init__(self, duration_s: float, seed: int, still_stretch_s: tuple[float, float] | None = None,
                 blur_stretch_s: tuple[float, float] | None = None, frame_interval_s: float = 1 / 30):
        rng = np.random.default_rng([seed, 1])
        self.still_stretch_s = still_stretch_s
        self.blur_stretch_s = blur_stretch_s
        self.frame_interval_s = frame_interval_s
        self.start_angle = rng.uniform(0, 2 * np.pi)
        self.shape_phase = rng.uniform(0, 2 * np.pi, 3)
        self.hand_rotation = Wobble.random(rng, np.radians([0.6, 0.6, 0.9]), 0.2, 2.0)
        self.hand_position = Wobble.random(rng, [0.010, 0.010, 0.008], 0.3, 2.5)
        self.exposure_phase = rng.uniform(0, 2 * np.pi, 3)
        # walking progress in [0, 1]: speed drops to zero while standing still
        grid = np.arange(0.0, duration_s + 1.0, TIME_STEP_S)
        speed = 1.0 - _window(grid, still_stretch_s, 0.4)
        progress = np.concatenate([[0.0], np.cumsum(speed[:-1]) * TIME_STEP_S])
        self._grid, self._progress = grid, progress / (progress[np.searchsorted(grid, duration_s)] or 1.0)

    def _stillness(self, t: np.ndarray) -> np.ndarray:
        return _window(t, self.still_stretch_s, 0.4)

    def world_from_cam(self, t) -> np.ndarray:
        """(N, 4, 4) camera-to-world poses, OpenCV camera axes, at times t (N,)."""
        t = np.atleast_1d(np.asarray(t, dtype=np.float64))
        progress = np.interp(t, self._grid, self._progress)
        angle = self.start_angle + 2 * np.pi * LOOP_FRACTION * progress
        radius = LOOP_RADIUS_M + 0.12 * np.sin(2 * angle + self.shape_phase[0])
        walking = 1.0 - self._stillness(t)
        bob = 0.012 * np.sin(2 * np.pi * 1.8 * t) * walking  # steps
        eye = np.stack([radius * np.cos(angle), radius * np.sin(angle),
                        EYE_HEIGHT_M + 0.06 * np.sin(0.7 * angle + self.shape_phase[1]) + bob], axis=-1)
        hand = 0.25 + 0.75 * walking  # standing still, the hand is steadier
        eye = eye + self.hand_position(t) * hand[:, None]
        target = LOOK_AT + 0.25 * np.stack([np.sin(angle + self.shape_phase[2]),
                                            np.cos(1.3 * angle), np.zeros_like(angle)], axis=-1)
        rotation = _look_at(eye, target)
        jitter = self.hand_rotation(t) * hand[:, None]
        shake = _window(t, self.blur_stretch_s, 0.15) * np.radians(4.0) * np.sin(2 * np.pi * 2.5 * t)
        jitter[:, 1] += shake  # a quick pan back and forth: strong motion blur
        rotation = rotation @ Rotation.from_rotvec(jitter).as_matrix()
        world_from_cam = np.tile(np.eye(4), (len(t), 1, 1))
        world_from_cam[:, :3, :3] = rotation
        world_from_cam[:, :3, 3] = eye
        return world_from_cam

    def exposure_s(self, t) -> np.ndarray:
        """Shutter time: auto exposure wanders between ~1/330 s and 1/120 s; long inside the blur stretch."""
        t = np.atleast_1d(np.asarray(t, dtype=np.float64))
        normal = np.exp(np.log(1 / 200) + 0.5 * np.sin(2 * np.pi * t / 13.0 + self.exposure_phase[0]))
        blur = _window(t, self.blur_stretch_s, 0.15)
        return normal + (0.9 * self.frame_interval_s - normal) * blur

    def gain(self, t) -> np.ndarray:
        """Auto-exposure brightness drift (slow, about +-15 %)."""
        t = np.atleast_1d(np.asarray(t, dtype=np.float64))
        return np.exp(0.12 * np.sin(2 * np.pi * t / 9.0 + self.exposure_phase[1])
                      + 0.05 * np.sin(2 * np.pi * t / 3.7 + self.exposure_phase[2]))


def _look_at(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """(N, 3, 3) world_from_cam rotations, OpenCV axes (x right, y down, z forward), no roll."""
    forward = target - eye
    forward /= np.linalg.norm(forward, axis=-1, keepdims=True)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right, axis=-1, keepdims=True)
    down = np.cross(forward, right)
    return np.stack([right, down, forward], axis=-1)

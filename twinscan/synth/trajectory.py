"""A handheld walkthrough: one loop around the cell, looking at its centre, with a human's imperfections;
optionally a second lap along the floor's border, filming it and what lies behind the first loop.

Everything is a smooth, seeded function of time, so sub-frame poses (for motion blur) come from the same
model as the frame poses. The pose of a frame is the pose at the middle of its exposure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from twinscan.camera import look_at_rotations

LOOP_RADIUS_M = 3.7
LOOP_FRACTION = 0.96  # ends a little short of the start: a loop closure, not a duplicate frame
EYE_HEIGHT_M = 1.5
LOOK_AT = np.array([0.0, 0.0, 0.45])
TIME_STEP_S = 1e-3  # resolution of the walking-progress table
# The border lap: a rounded rectangle inside the 9 x 9 m floor (kept 0.74 m off the low wall), walked
# anticlockwise like the loop, the phone turned outward and down so the floor's edge is filmed from close by.
BORDER_RECT_M = ((-3.85, -3.85), (3.85, 3.55))  # x, y of opposite corners
BORDER_CORNER_M = 1.0
BORDER_LAPS = 1.12  # past its start by what the turn at its start missed: the lap closes on itself
BORDER_YAW_DEG = -12.0  # from the walking direction: negative turns outward (right, walking anticlockwise)
BORDER_PITCH_DEG = -40.0
BORDER_TURN_S = 3.0  # how long turning from the cell to the border takes, walking on


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
                 blur_stretch_s: tuple[float, float] | None = None, frame_interval_s: float = 1 / 30,
                 border_s: float = 0.0):
        """`border_s`: the last seconds of `duration_s` walk the border lap (0: the loop takes it all)."""
        rng = np.random.default_rng([seed, 1])
        self.still_stretch_s = still_stretch_s
        self.blur_stretch_s = blur_stretch_s
        self.frame_interval_s = frame_interval_s
        self.start_angle = rng.uniform(0, 2 * np.pi)
        self.shape_phase = rng.uniform(0, 2 * np.pi, 3)
        self.hand_rotation = Wobble.random(rng, np.radians([0.6, 0.6, 0.9]), 0.2, 2.0)
        self.hand_position = Wobble.random(rng, [0.010, 0.010, 0.008], 0.3, 2.5)
        self.exposure_phase = rng.uniform(0, 2 * np.pi, 3)
        # walking progress round the loop in [0, 1]: speed drops to zero while standing still
        self.loop_s = duration_s - border_s
        grid = np.arange(0.0, self.loop_s + 1.0, TIME_STEP_S)
        speed = 1.0 - _window(grid, still_stretch_s, 0.4)
        progress = np.concatenate([[0.0], np.cumsum(speed[:-1]) * TIME_STEP_S])
        self._grid, self._progress = grid, progress / (progress[np.searchsorted(grid, self.loop_s)] or 1.0)
        self._border = BorderLap(self.start_angle + 2 * np.pi * LOOP_FRACTION, border_s) if border_s > 0 else None

    def _stillness(self, t: np.ndarray) -> np.ndarray:
        return _window(t, self.still_stretch_s, 0.4)

    def world_from_cam(self, t) -> np.ndarray:
        """(N, 4, 4) camera-to-world poses, OpenCV camera axes, at times t (N,)."""
        t = np.atleast_1d(np.asarray(t, dtype=np.float64))
        progress = np.interp(np.minimum(t, self.loop_s), self._grid, self._progress)
        angle = self.start_angle + 2 * np.pi * LOOP_FRACTION * progress
        radius = LOOP_RADIUS_M + 0.12 * np.sin(2 * angle + self.shape_phase[0])
        turned = np.zeros_like(t)  # 0 while filming the cell, 1 once turned to the border
        if self._border is not None:
            on_border = t > self.loop_s
            angle = np.where(on_border, self._border.angle(t - self.loop_s), angle)
            radius = LOOP_RADIUS_M + 0.12 * np.sin(2 * angle + self.shape_phase[0])
            turned = _smoothstep((t - self.loop_s) / BORDER_TURN_S) * on_border
            radius = radius + turned * (self._border.radius(angle) - radius)
        walking = 1.0 - self._stillness(t)
        bob = 0.012 * np.sin(2 * np.pi * 1.8 * t) * walking  # steps
        eye = np.stack([radius * np.cos(angle), radius * np.sin(angle),
                        EYE_HEIGHT_M + 0.06 * np.sin(0.7 * angle + self.shape_phase[1]) + bob], axis=-1)
        hand = 0.25 + 0.75 * walking  # standing still, the hand is steadier
        eye = eye + self.hand_position(t) * hand[:, None]
        target = LOOK_AT + 0.25 * np.stack([np.sin(angle + self.shape_phase[2]),
                                            np.cos(1.3 * angle), np.zeros_like(angle)], axis=-1)
        if self._border is not None:
            target = eye + _turn_to_border(target - eye, self._border.heading(angle), turned)
        rotation = look_at_rotations(eye, target)
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


class BorderLap:
    """The border lap as functions of the polar angle round the cell's centre, walked at constant speed."""

    def __init__(self, start_angle: float, duration_s: float, samples: int = 20_000) -> None:
        (x0, y0), (x1, y1) = BORDER_RECT_M
        r = BORDER_CORNER_M
        corners = [(x1 - r, y0 + r, -np.pi / 2), (x1 - r, y1 - r, 0.0), (x0 + r, y1 - r, np.pi / 2),
                   (x0 + r, y0 + r, np.pi)]  # centre of each rounded corner, where its arc starts, anticlockwise
        arc = np.linspace(0, np.pi / 2, 64)
        arcs = [np.column_stack([cx + r * np.cos(a0 + arc), cy + r * np.sin(a0 + arc)]) for cx, cy, a0 in corners]
        side = np.linspace(0, 1, 256)[1:-1, None]
        outline = np.concatenate([part for i, this in enumerate(arcs)
                                  for part in (this, this[-1] + side * (arcs[(i + 1) % 4][0] - this[-1]))])
        polar = np.arctan2(outline[:, 1], outline[:, 0])
        order = np.argsort(polar)
        self._polar = np.concatenate([polar[order] - 2 * np.pi, polar[order], polar[order] + 2 * np.pi])
        self._radius = np.tile(np.linalg.norm(outline, axis=1)[order], 3)
        # arc length along the lap from its start, by polar angle
        self._angles = start_angle + np.linspace(0, 2 * np.pi * BORDER_LAPS * 1.05, samples)
        points = self.radius(self._angles)[:, None] * np.column_stack([np.cos(self._angles), np.sin(self._angles)])
        self._length = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(points, axis=0), axis=1))])
        lap = self._length[np.searchsorted(self._angles, start_angle + 2 * np.pi)]
        self.speed_m_s = lap * BORDER_LAPS / duration_s

    def radius(self, angle: np.ndarray) -> np.ndarray:
        return np.interp(np.mod(angle + np.pi, 2 * np.pi) - np.pi, self._polar, self._radius)

    def angle(self, elapsed_s: np.ndarray) -> np.ndarray:
        return np.interp(self.speed_m_s * elapsed_s, self._length, self._angles)

    def heading(self, angle: np.ndarray, step: float = 1e-3) -> np.ndarray:
        """(N, 2) unit walking direction at polar angles `angle`."""
        ahead = [self.radius(a)[:, None] * np.column_stack([np.cos(a), np.sin(a)]) for a in (angle - step, angle + step)]
        direction = ahead[1] - ahead[0]
        return direction / np.linalg.norm(direction, axis=1, keepdims=True)


def _turn_to_border(forward: np.ndarray, heading: np.ndarray, turned: np.ndarray) -> np.ndarray:
    """(N, 3) view direction part way (`turned`, 0..1) from `forward` to the border view: yaw and pitch
    blend through the walking direction, as a person turns from the cell to the floor's edge."""
    yaw = np.arctan2(forward[:, 1], forward[:, 0])
    pitch = np.arcsin(forward[:, 2] / np.linalg.norm(forward, axis=1))
    border_yaw = np.arctan2(heading[:, 1], heading[:, 0]) + np.radians(BORDER_YAW_DEG)
    yaw = yaw + turned * (np.mod(border_yaw - yaw + np.pi, 2 * np.pi) - np.pi)
    pitch = pitch + turned * (np.radians(BORDER_PITCH_DEG) - pitch)
    return np.column_stack([np.cos(pitch) * np.cos(yaw), np.cos(pitch) * np.sin(yaw), np.sin(pitch)])

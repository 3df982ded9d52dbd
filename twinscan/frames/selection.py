"""Which frames to keep: one sharp frame per window of camera motion.

A window opens once the camera has moved `window_start * motion_step` since the last kept frame
(closer is redundant) and closes at `motion_step` (further would weaken the overlap); the
sharpest usable frame inside it is kept. Standing still never closes a window, so it yields at
most the one frame; a fast pan closes windows often, so it yields more. A window due to close
stays open while sharpness is still rising, so after a blurred or dark stretch the sharpest of the
first sharp frames is kept, not the last blurred one.

Frames before a window opens cannot be kept, so the decoder may drop the disposable ones among
them (`cannot_keep`): the motion since the last kept frame is extrapolated at twice its recent
speed, and the window opens later than that estimate in all but sudden starts.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from twinscan.frames.config import FramesConfig
from twinscan.frames.scoring import MotionTracker, TrackSnapshot, sharpness, well_exposed
from twinscan.frames.source import SourceFrame


@dataclass
class Candidate:
    frame: SourceFrame
    sharpness: float
    motion: float  # since the last kept frame, fraction of the image diagonal
    tracks: TrackSnapshot


@dataclass
class SelectionCounts:
    decoded: int = 0
    badly_exposed: int = 0
    blurred: int = 0


class SharpnessReference:
    """Typical recent sharpness (upper quartile of a trailing window): blur is judged against it,
    so textureless walls are not mistaken for blur and a long blurred stretch is still caught."""

    def __init__(self, length: int) -> None:
        self._recent: deque[float] = deque(maxlen=max(5, length))

    def add(self, value: float) -> float:
        self._recent.append(value)
        return float(np.percentile(self._recent, 75))


SPEED_FRAMES = 8  # the recent speed of motion is measured over this many frames
SPEED_MARGIN = 2.0  # ... and the motion is extrapolated this many times faster


class KeyframeSelector:
    """Feed every frame in order with `push`; it yields the frames to keep as windows close."""

    def __init__(self, config: FramesConfig, fps: float | None) -> None:
        self.config = config
        self.counts = SelectionCounts()
        self._tracker = MotionTracker()
        self._reference = SharpnessReference(round(config.reference_s * (fps or 10.0)))
        self._best: Candidate | None = None
        self._kept = 0
        self._recent: deque[tuple[float, float]] = deque(maxlen=SPEED_FRAMES)  # (time_s, motion) since the last kept

    def cannot_keep(self, time_s: float) -> bool:
        """Whether a frame shown at time_s (ahead of the frames pushed so far) falls before the next
        window opens, so that it could not be kept."""
        if not self._kept or self._best is not None or self._tracker.lost or len(self._recent) < 2:
            return False
        (first_s, first_motion), (last_s, motion) = self._recent[0], self._recent[-1]
        if last_s <= first_s:
            return False
        speed = max(0.0, motion - first_motion) / (last_s - first_s)
        ahead = motion + SPEED_MARGIN * speed * max(0.0, time_s - last_s)
        return ahead < self.config.window_start * self.config.motion_step

    def push(self, frame: SourceFrame) -> Iterator[Candidate]:
        config = self.config
        self.counts.decoded += 1
        motion = self._tracker.update(frame.grey)
        score = sharpness(frame.grey)
        typical = self._reference.add(score)
        usable = True
        if not well_exposed(frame.grey, config.dark_level, config.bright_level, config.max_clipped):
            self.counts.badly_exposed += 1
            usable = False
        elif score < max(config.min_sharpness, config.blur_ratio * typical):
            self.counts.blurred += 1
            usable = False
        if usable:
            self._consider(frame, score, motion)
        overdue = motion >= config.motion_step or self._tracker.lost
        rising = self._best is not None and self._best.frame is frame  # wait for the sharpest of a run
        if self._best is not None and overdue and not rising:
            kept = self._best
            self._best = None
            self._kept += 1
            yield kept
            motion = self._tracker.rebase(kept.tracks)
            self._recent.clear()
            if kept.frame.time_s is not None:
                self._recent.append((kept.frame.time_s, 0.0))
            if usable:
                self._consider(frame, score, motion)
        if frame.time_s is not None:
            self._recent.append((frame.time_s, motion))

    def finish(self) -> Iterator[Candidate]:
        if self._best is not None:
            yield self._best
            self._best = None

    def _consider(self, frame: SourceFrame, score: float, motion: float) -> None:
        opened = self._kept == 0 or motion >= self.config.window_start * self.config.motion_step
        if opened and (self._best is None or score > self._best.sharpness):
            self._best = Candidate(frame, score, motion, self._tracker.snapshot())


def thin_evenly(count: int, budget: int) -> np.ndarray:
    """Indices of `budget` of `count` kept frames, evenly spread (kept frames are evenly spread in motion)."""
    if count <= budget:
        return np.arange(count)
    return np.unique(np.round(np.linspace(0, count - 1, budget)).astype(int))

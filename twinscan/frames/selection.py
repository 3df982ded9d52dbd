"""Which frames to keep: one sharp frame per window of camera motion.

A window opens once the camera has moved `window_start * motion_step` since the last kept frame
(closer is redundant) and closes at `motion_step` (further would weaken the overlap); the
sharpest usable frame inside it is kept. Standing still never closes a window, so it yields at
most the one frame; a fast pan closes windows often, so it yields more. A window due to close
stays open while sharpness is still rising, so after a blurred or dark stretch the sharpest of the
first sharp frames is kept, not the last blurred one.

Blur is judged against recent sharpness, so turning quickly from a detailed machine to a plain floor
looks like blur for a while. Coverage comes first: once the camera has moved `max_gap_steps` windows
with no usable frame, the latest frame that failed only that comparison is kept, so the views
still overlap enough for SfM to chain them; but not one less than `blur_ratio` as sharp as the last
frame kept: a sudden drop is blur, a gradual one is the view changing.
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
    kept_for_coverage: int = 0  # frames kept although less sharp than recent ones: nothing sharper in reach


class SharpnessReference:
    """Typical recent sharpness (upper quartile of a trailing window): blur is judged against it,
    so textureless walls are not mistaken for blur and a long blurred stretch is still caught."""

    def __init__(self, length: int) -> None:
        self._recent: deque[float] = deque(maxlen=max(5, length))

    def add(self, value: float) -> float:
        self._recent.append(value)
        return float(np.percentile(self._recent, 75))


class KeyframeSelector:
    """Feed every frame in order with `push`; it yields the frames to keep as windows close."""

    def __init__(self, config: FramesConfig, fps: float | None) -> None:
        self.config = config
        self.counts = SelectionCounts()
        self._tracker = MotionTracker()
        self._reference = SharpnessReference(round(config.reference_s * (fps or 10.0)))
        self._best: Candidate | None = None
        self._softer: Candidate | None = None  # the latest frame rejected only as less sharp than recent ones
        self._last_kept: Candidate | None = None
        self._kept = 0

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
            gradual = self._last_kept is not None and score >= config.blur_ratio * self._last_kept.sharpness
            if score >= config.min_sharpness and gradual and self._opened(motion):  # the latest: most coverage
                self._softer = Candidate(frame, score, motion, self._tracker.snapshot())
        if usable:
            self._consider(frame, score, motion)
        overdue = motion >= config.motion_step or self._tracker.lost
        # wait for the sharpest of a run, but not past the gap coverage allows
        rising = self._best is not None and self._best.frame is frame and \
            motion < config.max_gap_steps * config.motion_step
        if self._best is None and self._softer is not None and motion >= config.max_gap_steps * config.motion_step \
                and not self._tracker.lost:
            self._best = self._softer
            self.counts.kept_for_coverage += 1
        if self._best is not None and overdue and not rising:
            kept = self._last_kept = self._best
            self._best = self._softer = None
            self._kept += 1
            yield kept
            motion = self._tracker.rebase(kept.tracks)
            if usable:
                self._consider(frame, score, motion)

    def finish(self) -> Iterator[Candidate]:
        if self._best is not None:
            yield self._best
            self._best = None

    def _opened(self, motion: float) -> bool:
        return self._kept == 0 or motion >= self.config.window_start * self.config.motion_step

    def _consider(self, frame: SourceFrame, score: float, motion: float) -> None:
        if self._opened(motion) and (self._best is None or score > self._best.sharpness):
            self._best = Candidate(frame, score, motion, self._tracker.snapshot())


def thin_evenly(count: int, budget: int) -> np.ndarray:
    """Indices of `budget` of `count` kept frames, evenly spread (kept frames are evenly spread in motion)."""
    if count <= budget:
        return np.arange(count)
    return np.unique(np.round(np.linspace(0, count - 1, budget)).astype(int))

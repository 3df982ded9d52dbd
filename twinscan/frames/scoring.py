"""Per-frame measurements on small grey images: sharpness, exposure, and motion by sparse optical flow."""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np


def sharpness(grey: np.ndarray) -> float:
    """Variance of the Laplacian: high for crisp edges, collapses under blur of any kind."""
    _, std = cv2.meanStdDev(cv2.Laplacian(grey, cv2.CV_16S))
    return float(std[0, 0]) ** 2


def well_exposed(grey: np.ndarray, dark_level: float, bright_level: float, max_clipped: float) -> bool:
    """False for frames too dark or too bright to match features in."""
    histogram = cv2.calcHist([grey], [0], None, [256], [0, 256]).ravel()
    mean = float(histogram @ np.arange(256)) / grey.size
    clipped = float(histogram[:9].sum() + histogram[247:].sum())
    return dark_level <= mean <= bright_level and clipped <= max_clipped * grey.size


@dataclass(frozen=True)
class TrackSnapshot:
    """Where the tracked features were in one frame, by feature id."""

    ids: np.ndarray
    points: np.ndarray


MOTION_PERCENTILE = 80


class MotionTracker:
    """KLT features tracked frame to frame; motion is measured against an anchor frame.

    Each feature remembers where it was (or, for features found later, would have been) in the
    anchor frame; motion is the 80th percentile of the displacements from there, as a fraction of
    the image diagonal: orbiting an object barely moves its centre while the view changes a lot,
    so the features that move most tell the viewpoint change; hand shake moves all of them alike.
    Tracking every frame keeps the flow small, so fast pans stay measurable.
    """

    def __init__(self, max_features: int = 100, min_features: int = 15) -> None:
        self.max_features = max_features
        self.min_features = min_features
        self._previous: np.ndarray | None = None
        self._ids = np.empty(0, np.int64)
        self._points = np.empty((0, 2), np.float32)
        self._anchors = np.empty((0, 2), np.float32)
        self._next_id = 0
        self._diagonal = 1.0
        self.lost = False  # the view changed too much to measure: the tracked features were lost

    def update(self, image: np.ndarray) -> float:
        """Track into the next frame (small grey image); return its motion relative to the anchor frame."""
        if self._previous is None:
            self._diagonal = float(np.hypot(*image.shape))
            self._previous = image
            self._top_up(image)
            return 0.0
        tracked_before = len(self._points)
        if tracked_before:
            moved, status, _ = cv2.calcOpticalFlowPyrLK(
                self._previous, image, self._points.reshape(-1, 1, 2), None, winSize=(11, 11), maxLevel=2,
                criteria=(cv2.TERM_CRITERIA_COUNT | cv2.TERM_CRITERIA_EPS, 20, 0.03))
            moved = moved.reshape(-1, 2)
            height, width = image.shape
            inside = (moved[:, 0] >= 0) & (moved[:, 0] < width) & (moved[:, 1] >= 0) & (moved[:, 1] < height)
            keep = status.ravel().astype(bool) & inside
            self._ids, self._points, self._anchors = self._ids[keep], moved[keep], self._anchors[keep]
        self._previous = image
        if tracked_before >= self.min_features > len(self._points):
            self.lost = True
        if len(self._points) < self.max_features // 2:
            self._top_up(image)
        return self.motion()

    def motion(self) -> float:
        if self.lost:
            return float("inf")
        if not len(self._points):
            return 0.0
        return float(np.percentile(np.linalg.norm(self._points - self._anchors, axis=1), MOTION_PERCENTILE)) \
            / self._diagonal

    def snapshot(self) -> TrackSnapshot:
        return TrackSnapshot(self._ids.copy(), self._points.copy())

    def rebase(self, anchor: TrackSnapshot) -> float:
        """Make the frame of `anchor` the new anchor frame; return the current motion relative to it."""
        common, here, there = np.intersect1d(self._ids, anchor.ids, assume_unique=True, return_indices=True)
        self._ids, self._points, self._anchors = common, self._points[here], anchor.points[there]
        self.lost = False
        if len(self._points) < self.max_features // 2 and self._previous is not None:
            self._top_up(self._previous)
        return self.motion()

    def _top_up(self, image: np.ndarray) -> None:
        """Find new features away from the tracked ones, anchored by the median offset of the survivors."""
        mask = np.full(image.shape, 255, np.uint8)
        spacing = max(3, round(min(image.shape) / 30))
        for x, y in self._points.astype(int):
            cv2.circle(mask, (int(x), int(y)), spacing, 0, -1)
        found = cv2.goodFeaturesToTrack(image, self.max_features - len(self._points), 0.01, spacing, mask=mask)
        if found is None:
            return
        found = found.reshape(-1, 2).astype(np.float32)
        offset = np.median(self._points - self._anchors, axis=0) if len(self._points) else np.zeros(2, np.float32)
        self._ids = np.concatenate([self._ids, np.arange(self._next_id, self._next_id + len(found))])
        self._next_id += len(found)
        self._points = np.concatenate([self._points, found])
        self._anchors = np.concatenate([self._anchors, found - offset.astype(np.float32)])

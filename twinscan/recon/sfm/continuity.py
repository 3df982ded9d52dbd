"""Frames of one walk cannot jump: views SfM placed far from where the walk was a moment before are wrong.

A repeating floor or wall pattern lets SfM register a stretch of views that see only that pattern one
period away from where they were taken. Each such stretch is consistent in itself (low reprojection
error), so only the video's continuity gives it away: the camera would have to move tens of times
faster than the rest of the walk to get there and back.
"""

from __future__ import annotations

import numpy as np

JUMP_FACTOR = 10.0  # a move this many times faster than the walk's median speed is a jump, not a walk


def off_path_frames(times_s: np.ndarray, positions: np.ndarray, jump_factor: float = JUMP_FACTOR) -> np.ndarray:
    """Mask of frames (in any order) that lie in stretches cut off from the walk by jumps.

    The walk is cut into stretches wherever the camera would move faster than `jump_factor` times its
    median speed. Growing outward in time from one stretch, a stretch joins if the camera could get
    there from the joined ones at that speed; the start that gathers the most frames wins, so a wrong
    stretch longer than each right one still loses to the right ones together.
    """
    order = np.argsort(times_s)
    times, points = np.asarray(times_s, float)[order], np.asarray(positions, float)[order]
    if len(times) < 3:
        return np.zeros(len(times), bool)
    speeds = np.linalg.norm(np.diff(points, axis=0), axis=1) / np.maximum(np.diff(times), 1e-3)
    limit = jump_factor * max(float(np.median(speeds)), 1e-9)
    starts = np.concatenate([[0], np.flatnonzero(speeds > limit) + 1, [len(times)]])
    stretches = [np.arange(a, b) for a, b in zip(starts[:-1], starts[1:])]
    kept = max((_grow(stretches, first, times, points, limit) for first in range(len(stretches))), key=len)
    result = np.ones(len(times), bool)
    result[order[kept]] = False
    return result


def _grow(stretches: list[np.ndarray], first: int, times: np.ndarray, points: np.ndarray,
          limit: float) -> np.ndarray:
    kept = stretches[first]
    for i in [*range(first - 1, -1, -1), *range(first + 1, len(stretches))]:
        stretch = stretches[i]
        anchor = kept[np.argmin(np.abs(times[kept] - times[stretch[0]]))]
        nearest = stretch[np.argmin(np.abs(times[stretch] - times[anchor]))]
        elapsed = max(abs(times[nearest] - times[anchor]), 1e-3)
        if np.linalg.norm(points[nearest] - points[anchor]) <= limit * elapsed:
            kept = np.concatenate([kept, stretch])
    return kept

"""Frames stage: sharp, well-spaced frames from a phone walkthrough video or a folder of images."""

from twinscan.frames.config import FramesConfig
from twinscan.frames.stage import run_frames

__all__ = ["FramesConfig", "run_frames"]

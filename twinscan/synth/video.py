"""H.264 mp4 writing with PyAV, including phone-style display rotation.

A phone held sideways stores its pixels rotated and a display matrix telling players how to turn them
upright. With `rotation_deg` r (clockwise turn a player applies, as the legacy `rotate` tag), the coded
pixels are the upright image turned r degrees counterclockwise, `np.rot90(upright, r // 90)`, and the
stream carries FFmpeg's display matrix for -r degrees: ffprobe prints "rotation of -90.00 degrees" for
r = 90, as for an iPhone portrait video, and PyAV reports `frame.rotation == -90` on decoded frames.
A decoder gets the upright image back with `np.rot90(coded, frame.rotation // 90)`.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from twinscan.errors import TwinscanError

ROTATIONS_DEG = (0, 90, 180, 270)


class VideoWriter:
    """Context manager: `write(upright_rgb)` frame by frame; frame i gets pts i at 1/fps."""

    def __init__(self, path: Path, width: int, height: int, fps: float, crf: int = 23, rotation_deg: int = 0):
        if rotation_deg not in ROTATIONS_DEG:
            raise TwinscanError(f"rotation {rotation_deg} degrees is not supported", "use 0, 90, 180 or 270")
        if width % 2 or height % 2:
            raise TwinscanError(f"frame size {width}x{height} is odd", "use an even width and height (yuv420p)")
        self.path, self.width, self.height, self.rotation_deg = Path(path), width, height, rotation_deg
        self._container = av.open(str(self.path), mode="w", format="mp4")
        rate = Fraction(fps).limit_denominator(1001)
        # x264's macroblock-tree rate control reads memory it never wrote: the same frames encoded in two
        # processes decoded up to 43 levels apart, so the tests' tiny capture differed run to run and its SfM
        # registered 18 to 34 of its frames. Without mbtree the video is the same byte for byte.
        options = {"crf": str(crf), "preset": "medium", "x264-params": "mbtree=0"}
        self._stream = self._container.add_stream("libx264", rate=rate, options=options)
        self._stream.width, self._stream.height = (height, width) if rotation_deg in (90, 270) else (width, height)
        self._stream.pix_fmt = "yuv420p"
        self._stream.time_base = 1 / rate
        if rotation_deg:
            self._stream.set_display_rotation(-rotation_deg)
        self._count = 0

    def write(self, upright_rgb: np.ndarray) -> None:
        if upright_rgb.shape != (self.height, self.width, 3):
            raise ValueError(f"frame shape {upright_rgb.shape} != {(self.height, self.width, 3)}")
        coded = np.ascontiguousarray(np.rot90(upright_rgb, self.rotation_deg // 90))
        frame = av.VideoFrame.from_ndarray(coded, format="rgb24")
        frame.pts = self._count
        self._count += 1
        self._container.mux(self._stream.encode(frame))

    def __enter__(self) -> VideoWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        try:
            if exc_info[0] is None:
                self._container.mux(self._stream.encode(None))
        finally:
            self._container.close()

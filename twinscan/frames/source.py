"""Frames from a video (PyAV, streaming) or a folder of images, as small grey score images.

Only the score image is made for every frame; the full upright picture is rendered on demand,
for the few frames that are kept. A decoded video frame is held only while it is a candidate.
Decoding (and reading images) runs in its own thread, PREFETCH_FRAMES ahead of the consumer.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import av
import cv2
import numpy as np

from twinscan.errors import TwinscanError
from twinscan.frames.prefetch import prefetched

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp"}
# Pixel formats whose first plane is 8-bit luma: read it directly instead of asking swscale for grey.
LUMA_FIRST_FORMATS = {"yuv420p", "yuvj420p", "yuv422p", "yuvj422p", "yuv444p", "yuvj444p", "nv12", "nv21", "gray"}
PREFETCH_FRAMES = 4  # decoded frames waiting for the selector: a 4K frame is 12 MB


@dataclass
class SourceFrame:
    index: int  # the frame's place in the source, from 0 (presentation order, undecoded frames included)
    time_s: float | None  # presentation time (None for a folder of images)
    grey: np.ndarray  # score image: grey, longest side about FramesConfig.score_side, stored orientation
    render: Callable[[int], np.ndarray]  # max_side -> upright BGR image no larger than max_side


@dataclass
class SourceReport:
    """What decoding found, filled in while frames are read."""

    kind: str  # "video" or "images"
    expected_frames: int | None = None
    fps: float | None = None
    rotation_deg: int = 0  # counter-clockwise display rotation applied to the stored pictures
    frames: int = 0  # frames of the source gone through so far, decoded or not
    decoded: int = 0
    warnings: list[str] = field(default_factory=list)


def fit_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    """Even size within max_side keeping the aspect ratio; never upscales."""
    scale = min(1.0, max_side / max(width, height))
    return max(2, round(width * scale / 2) * 2), max(2, round(height * scale / 2) * 2)


def open_source(path: Path, score_side: int) -> tuple[SourceReport, Iterator[SourceFrame]]:
    """Check the input and return its report and an iterator over its frames, decoded in a thread.

    The report fills in as frames are read: read its counts once the iterator is exhausted or closed.
    """
    path = Path(path)
    if not path.exists():
        raise TwinscanError(f"{path} does not exist", "check the path to the walkthrough video or image folder")
    if path.is_dir():
        report, frames = _image_folder(path, score_side)
    else:
        report, frames = _video(path, score_side)
    return report, prefetched(frames, PREFETCH_FRAMES)


# ---- video -------------------------------------------------------------------------------------
def _luma(frame: av.VideoFrame) -> np.ndarray:
    plane = frame.planes[0]
    return np.frombuffer(plane, np.uint8).reshape(plane.height, plane.line_size)[:, : plane.width]


def score_size(width: int, height: int, score_side: int) -> tuple[int, int]:
    """At most score_side, and at most half the source: averaging pixels keeps sensor noise from
    passing for sharpness."""
    return fit_size(width, height, min(score_side, max(width, height) // 2))


def _score_image(frame: av.VideoFrame, score_side: int) -> np.ndarray:
    """Small grey image, cheaply: subsample the luma plane to about twice the size, then area-average."""
    width, height = score_size(frame.width, frame.height, score_side)
    if frame.format.name not in LUMA_FIRST_FORMATS:  # e.g. 10-bit HDR from phones
        return frame.reformat(width=width, height=height, format="gray").to_ndarray()
    stride = max(1, max(frame.width, frame.height) // max(width, height) // 2)
    return cv2.resize(_luma(frame)[::stride, ::stride], (width, height), interpolation=cv2.INTER_AREA)


def _renderer(frame: av.VideoFrame, rotation_quarters: int) -> Callable[[int], np.ndarray]:
    def render(max_side: int) -> np.ndarray:
        width, height = fit_size(frame.width, frame.height, max_side)
        bgr = frame.reformat(width=width, height=height, format="bgr24", interpolation="AREA").to_ndarray()
        return np.ascontiguousarray(np.rot90(bgr, rotation_quarters))

    return render


def _video(path: Path, score_side: int) -> tuple[SourceReport, Iterator[SourceFrame]]:
    try:
        container = av.open(str(path))
    except av.error.FFmpegError as error:
        raise TwinscanError(f"{path} cannot be read as a video ({error.strerror or error})",
                            "give an mp4/mov/m4v video (H.264 or HEVC) or a folder of images; "
                            "if it is one, it is corrupt or truncated: copy it from the phone again") from error
    if not container.streams.video:
        container.close()
        raise TwinscanError(f"{path} has no video stream", "give the walkthrough video itself, not an audio file")
    stream = container.streams.video[0]
    stream.thread_type = "AUTO"  # frame and slice threads: decoding is most of the stage's time
    report = SourceReport("video", expected_frames=stream.frames or None,
                          fps=float(stream.average_rate) if stream.average_rate else None)
    return report, _decode(container, stream, report, score_side)


class PresentationOrder:
    """A frame's place in the source from its timestamp: the number of packets shown before it.

    Counting timestamps rather than decoded frames keeps the places right when damaged packets
    lose their frames, and with variable frame rate. The decoder gives a frame out only after
    every packet shown before it has gone in, so the count is final by then; packets older than
    the last frame out are folded into a running total.
    """

    def __init__(self) -> None:
        self._before = 0
        self._pending: list[int] = []  # sorted timestamps of packets not yet passed by a frame out

    def add_packet(self, pts: int) -> None:
        bisect.insort(self._pending, pts)

    def place(self, pts: int) -> int:
        place = self._before + bisect.bisect_left(self._pending, pts)
        passed = bisect.bisect_right(self._pending, pts)
        self._before += passed
        del self._pending[:passed]
        return place

    @property
    def packets(self) -> int:
        return self._before + len(self._pending)


def _decode(container: av.container.InputContainer, stream: av.video.stream.VideoStream, report: SourceReport,
            score_side: int) -> Iterator[SourceFrame]:
    """Demux and decode packet by packet, so a corrupt packet costs its frames, not the video."""
    bad_packets = 0
    order = PresentationOrder()
    timed = True  # every packet so far had a timestamp: places come from timestamps
    try:
        packets = container.demux(stream)
        while True:
            try:
                packet = next(packets)
            except StopIteration:
                break
            except av.error.FFmpegError as error:
                report.warnings.append(f"the video ends early: reading stopped after {report.frames} frames "
                                       f"({error})")
                break
            if packet.size:
                timed = timed and packet.pts is not None
                if timed:
                    order.add_packet(packet.pts)
            try:
                frames = packet.decode()
            except av.error.FFmpegError:
                bad_packets += 1
                continue
            for frame in frames:
                if report.decoded == 0:
                    report.rotation_deg = round(frame.rotation / 90) * 90 % 360
                index = report.frames  # one past the last place: places only grow, even with broken timestamps
                if timed and frame.pts is not None:
                    index = max(index, order.place(frame.pts))
                time_s = frame.time
                if time_s is None and report.fps:
                    time_s = index / report.fps
                report.frames = max(report.frames, index + 1)
                yield SourceFrame(index, time_s, _score_image(frame, score_side),
                                  _renderer(frame, report.rotation_deg // 90))
                report.decoded += 1
    finally:
        container.close()
    if timed:
        report.frames = max(report.frames, order.packets)
    if bad_packets:
        report.warnings.append(f"{bad_packets} damaged packets were skipped; their frames are missing")
    if report.expected_frames and report.frames < 0.95 * report.expected_frames:
        report.warnings.append(f"only {report.frames} of {report.expected_frames} frames could be read: "
                               "the video is truncated or damaged; the frames that decoded were used")


# ---- folder of images --------------------------------------------------------------------------
def _image_folder(path: Path, score_side: int) -> tuple[SourceReport, Iterator[SourceFrame]]:
    files = sorted(p for p in path.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    if not files:
        raise TwinscanError(f"{path} holds no images ({', '.join(sorted(IMAGE_SUFFIXES))})",
                            "give a folder of photos or a walkthrough video")
    report = SourceReport("images", expected_frames=len(files))
    return report, _read_images(files, report, score_side)


def _read_images(files: list[Path], report: SourceReport, score_side: int) -> Iterator[SourceFrame]:
    unreadable = 0
    for file in files:
        bgr = cv2.imread(str(file), cv2.IMREAD_COLOR)  # applies the EXIF orientation
        if bgr is None:
            unreadable += 1
            continue
        height, width = bgr.shape[:2]
        grey = cv2.resize(cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY), score_size(width, height, score_side),
                          interpolation=cv2.INTER_AREA)
        yield SourceFrame(report.decoded, None, grey, _image_renderer(file))
        report.decoded += 1
        report.frames += 1
    if unreadable:
        report.warnings.append(f"{unreadable} of {len(files)} images could not be read and were skipped")


def _image_renderer(file: Path) -> Callable[[int], np.ndarray]:
    def render(max_side: int) -> np.ndarray:
        bgr = cv2.imread(str(file), cv2.IMREAD_COLOR)
        height, width = bgr.shape[:2]
        size = fit_size(width, height, max_side)
        return bgr if size == (width, height) else cv2.resize(bgr, size, interpolation=cv2.INTER_AREA)

    return render

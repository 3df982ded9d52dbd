"""What later stages may read of the frames stage: OUT/frames.json, one entry per kept frame in capture
order (twinscan/records.py). The sfm stage reconstructs these frames; usd times the camera track with
them; the report shows them. COLMAP / transforms.json imports write it for the images they adopt."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import PurePosixPath

from twinscan import atomic
from twinscan.layout import FRAMES_DIR, FRAMES_JSON
from twinscan.records import read_record
from twinscan.workspace import Workspace


@dataclass(frozen=True)
class FrameEntry:
    file: str  # relative to OUT/: frames/<name>
    source_index: int  # the frame's index in the video (or image folder)
    # None (or left out of a hand-written frames.json): not known, as for imported poses
    time_s: float | None = None  # in the video; also None for an image folder
    sharpness: float | None = None
    motion: float | None = None  # image motion since the previous kept frame (share of the frame; 1.0: tracking lost)

    @property
    def name(self) -> str:
        """The image's name inside OUT/frames/, as the COLMAP model names it."""
        return PurePosixPath(self.file).relative_to(FRAMES_DIR).as_posix()


def write_frames(ws: Workspace, entries: list[FrameEntry]) -> None:
    atomic.write_json(ws.path(FRAMES_JSON), [asdict(entry) for entry in entries])


def read_frames(ws: Workspace) -> list[FrameEntry]:
    """The frames stage's record; a one-line error when the stage has not written one."""
    return read_record(ws, FRAMES_JSON, f"twinscan frames VIDEO -o {ws.root}",
                       lambda entries: [FrameEntry(**entry) for entry in entries])

"""What a batch runs: the videos (given directly or listed in manifest files) and their workspaces."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from twinscan.errors import TwinscanError

MANIFEST_SUFFIX = ".txt"


@dataclass(frozen=True)
class CaptureJob:
    """One capture of a batch: its video and the workspace ROOT/<name> it runs in."""

    name: str
    video: Path
    workspace: Path


def read_manifest(path: Path) -> list[Path]:
    """A `.txt` manifest: one video path per line; blank lines and `#` comments are skipped, and
    relative paths are relative to the manifest's folder (so a manifest travels with its videos)."""
    videos = []
    for line in path.read_text().splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry:
            video = Path(entry).expanduser()
            videos.append(video if video.is_absolute() else path.parent / video)
    if not videos:
        raise TwinscanError(f"the manifest {path} lists no videos", "write one video path per line")
    return videos


def read_captures(inputs: Iterable[Path]) -> list[Path]:
    """Videos (or image folders) in the given order, each `.txt` manifest expanded in place.

    A missing video is kept: it fails alone in the batch. A missing manifest fails the batch now.
    """
    videos: list[Path] = []
    for path in inputs:
        if path.suffix.lower() == MANIFEST_SUFFIX:
            if not path.is_file():
                raise TwinscanError(f"the manifest {path} does not exist", "check the path to the list of videos")
            videos.extend(read_manifest(path))
        else:
            videos.append(path)
    if not videos:
        raise TwinscanError("no captures given", "pass video files or a .txt manifest (one video path per line)")
    return videos


def plan_jobs(videos: Iterable[Path], root: Path) -> list[CaptureJob]:
    """Workspace ROOT/<stem> per video; a repeated stem gets -2, -3, ... in input order, so the same
    command line maps every video to the same workspace again (that is what makes a rerun resume)."""
    jobs: list[CaptureJob] = []
    taken: set[str] = set()
    for video in videos:
        stem = video.stem or video.resolve().name
        name, n = stem, 1
        while name in taken:
            n += 1
            name = f"{stem}-{n}"
        taken.add(name)
        jobs.append(CaptureJob(name, video.absolute(), (root / name).absolute()))
    return jobs

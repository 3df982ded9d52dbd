"""The frames stage: source -> keyframe selection -> OUT/frames/*.jpg + OUT/frames.json + manifest figures."""

from __future__ import annotations

import time
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import cv2

from twinscan import atomic
from twinscan.layout import FRAMES_DIR, FRAMES_JSON
from twinscan.errors import TwinscanError
from twinscan.frames.config import FramesConfig
from twinscan.frames.record import FrameEntry, write_frames
from twinscan.frames.selection import Candidate, KeyframeSelector, SelectionCounts, thin_evenly
from twinscan.frames.source import SourceReport, open_source
from twinscan.progress import progress_bar
from twinscan.options import CaptureOptions
from twinscan.presets import resolve_preset
from twinscan.stages import execute
from twinscan.workspace import StageRun, Workspace, fingerprint



@dataclass(frozen=True)
class FramesStage:
    """Keep sharp, well-spaced frames of a video (or image folder)."""

    source: Path | None = None  # the video or image folder; None only to build the config
    name: str = "frames"
    versions: tuple[str, ...] = ("av", "opencv-python-headless", "numpy")
    required: tuple[str, ...] = ()

    def config(self, options: CaptureOptions) -> FramesConfig:
        return FramesConfig.from_preset(resolve_preset(options.quality, options.device), max_frames=options.max_frames)

    def inputs(self, ws: Workspace) -> dict[str, str]:
        if self.source is None or not Path(self.source).exists():
            raise TwinscanError(f"{self.source} does not exist", "check the path to the walkthrough video or image folder")
        return {"video": fingerprint(self.source)}

    def run(self, ws: Workspace, config: FramesConfig, run: StageRun, force: bool) -> None:
        started = time.perf_counter()
        with atomic.atomic_dir(ws.path(FRAMES_DIR)) as folder:
            records, report, counts = _select_and_write(Path(self.source), config, folder, run)
        write_frames(ws, records)
        seconds = time.perf_counter() - started
        run.outputs += [FRAMES_DIR, FRAMES_JSON]
        run.figures.update(_figures(records, report, counts, seconds))


def run_frames(workspace: Workspace, source: str | Path, config: FramesConfig, force: bool = False) -> dict[str, Any]:
    """The frames stage on `source` (skipped when done before on the same input with the same config);
    its figures."""
    return execute(FramesStage(Path(source)), workspace, config, force).figures


def _select_and_write(source: Path, config: FramesConfig, folder: Path,
                      run: StageRun) -> tuple[list[FrameEntry], SourceReport, SelectionCounts]:
    """Stream the source through the selector, writing each kept frame as soon as its window closes."""
    # Every frame is decoded: letting the selector drop disposable frames as they go in made the kept
    # set depend on the decoder threads' timing (24 or 26 frames kept from the same tiny video).
    report, frames = open_source(source, config.score_side)
    selector = KeyframeSelector(config, report.fps)
    records: list[FrameEntry] = []
    try:
        with closing(frames), progress_bar(f"frames from {source.name}", report.expected_frames) as advance:
            shown = 0
            for frame in frames:
                for kept in selector.push(frame):
                    records.append(_write(kept, folder, config, first=not records))
                if frame.index + 1 - shown >= 32:
                    advance(frame.index + 1 - shown, status=f"kept {len(records)}")
                    shown = frame.index + 1
            for kept in selector.finish():
                records.append(_write(kept, folder, config, first=not records))
            advance(report.frames - shown, status=f"kept {len(records)}")
    finally:
        run.warnings += report.warnings  # also on failure (the decoder has stopped): a truncated video says so
    _check_enough(source, config, report, selector.counts, len(records))
    records = _thin_to_budget(records, config.max_frames, folder)
    return records, report, selector.counts


def _write(kept: Candidate, folder: Path, config: FramesConfig, first: bool) -> FrameEntry:
    name = f"{kept.frame.index:06d}.jpg"
    image = kept.frame.render(config.max_side)
    if not cv2.imwrite(str(folder / name), image, [cv2.IMWRITE_JPEG_QUALITY, config.jpeg_quality]):
        raise TwinscanError(f"could not write {folder / name}",
                            "check that the output folder is writable and has space")
    return FrameEntry(
        file=f"{FRAMES_DIR}/{name}",
        source_index=kept.frame.index,
        time_s=None if kept.frame.time_s is None else round(kept.frame.time_s, 4),
        sharpness=round(kept.sharpness, 2),
        motion=0.0 if first else round(min(kept.motion, 1.0), 4),  # 1.0: tracking was lost
    )


def _thin_to_budget(records: list[FrameEntry], budget: int, folder: Path) -> list[FrameEntry]:
    """Drop frames evenly down to the budget; motion then sums over the dropped steps."""
    chosen = set(thin_evenly(len(records), budget).tolist())
    thinned: list[FrameEntry] = []
    carried = 0.0
    for i, record in enumerate(records):
        carried += record.motion
        if i in chosen:
            thinned.append(replace(record, motion=round(carried, 4) if thinned else 0.0))
            carried = 0.0
        else:
            (folder / Path(record.file).name).unlink()
    return thinned


def _check_enough(source: Path, config: FramesConfig, report: SourceReport, counts: SelectionCounts,
                  kept: int) -> None:
    """Fail with the reason a user can act on when the source cannot give a reconstruction."""
    what = "video" if report.kind == "video" else "image folder"
    if report.decoded == 0:
        raise TwinscanError(f"no frame of {source} could be decoded",
                            "the file is corrupt or truncated: copy it from the phone again")
    if report.frames < config.min_decoded:
        raise TwinscanError(f"the {what} {source} is too short ({report.frames} frames)",
                            "record a slow walkthrough of at least 10 seconds around the cell")
    if counts.badly_exposed == counts.decoded:
        raise TwinscanError(f"every frame of {source} is too dark or too bright",
                            "light the cell evenly and let the phone settle its exposure before walking")
    if counts.badly_exposed + counts.blurred == counts.decoded:
        raise TwinscanError(f"every frame of {source} is blurred",
                            "walk slower, hold the phone steady, clean the lens, or add light")
    if kept < config.min_frames:
        raise TwinscanError(
            f"only {kept} usable frames in {source} ({counts.blurred} blurred, {counts.badly_exposed} badly exposed, "
            f"of {counts.decoded})",
            "walk around the cell so it is seen from many viewpoints, slowly and in good light")


def _figures(records: list[FrameEntry], report: SourceReport, counts: SelectionCounts,
             seconds: float) -> dict[str, Any]:
    return {
        "kept": len(records),
        "decoded": report.frames,  # frames of the source gone through, of which these were not decoded:
        "not_decoded": report.frames - report.decoded,  # lost with damaged packets
        "blurred": counts.blurred,
        "kept_for_coverage": counts.kept_for_coverage,
        "badly_exposed": counts.badly_exposed,
        "mean_sharpness": round(sum(r.sharpness for r in records) / len(records), 2),
        "rotation_deg": report.rotation_deg,
        "seconds": round(seconds, 3),
        "fps": round(report.frames / max(seconds, 1e-6), 1),
    }

"""The stages in order, each built from one set of user options; `capture` runs them all.

Stage modules are imported lazily so `twinscan --help` stays fast and a missing heavy backend
only matters for the stage that needs it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from twinscan.errors import TwinscanError
from twinscan.layout import STAGES
from twinscan.options import CaptureOptions
from twinscan.presets import preset_choice
from twinscan.stages import Stage, StageResult, execute
from twinscan.workspace import Workspace

__all__ = ["CaptureOptions", "capture_stages", "import_sfm_stage", "load_stage", "run_capture", "run_stage",
           "stage_configs"]


def load_stage(name: str, video: Path | None = None, options: CaptureOptions = CaptureOptions()) -> Stage:
    """The stage called `name`, its module imported now; `video` is the frames stage's source, and the
    check stage is told whether physics was asked for (its config also says whether Newton can run)."""
    if name == "frames":
        from twinscan.frames.stage import FramesStage
        return FramesStage(video)
    if name == "sfm":
        from twinscan.recon.sfm.stage import SfmStage
        return SfmStage()
    if name == "splats":
        from twinscan.recon.splats.stage import SplatsStage
        return SplatsStage()
    if name == "mesh":
        from twinscan.meshing.stage import MeshStage
        return MeshStage()
    if name == "usd":
        from twinscan.usd_export.stage import UsdStage
        return UsdStage()
    if name == "check":
        from twinscan.check.stage import CheckStage
        return CheckStage(options.physics)
    raise ValueError(f"no stage called {name!r}")


def capture_stages(video: Path | None = None, options: CaptureOptions = CaptureOptions()) -> tuple[Stage, ...]:
    """The stages `capture` runs, in order (layout.STAGES)."""
    return tuple(load_stage(name, video, options) for name in STAGES)


def stage_configs(options: CaptureOptions, stages: tuple[Stage, ...] | None = None) -> dict[str, Any]:
    """Build (and so check) every stage's config from the options, before any stage runs.

    The one place a run's options are checked: a bad one (`--marker-size -1`, `--device cuda` on a
    machine without a usable GPU) is one TwinscanError here, before anything is decoded or written,
    not a failure after the stages before the one that reads it have run.
    """
    return {stage.name: stage.config(options) for stage in stages or capture_stages(options=options)}


def run_stage(name: str, ws: Workspace, options: CaptureOptions, video: Path | None = None) -> StageResult:
    """One stage by name (a `twinscan <stage>` command), its config from the options."""
    stage = load_stage(name, video, options)
    return execute(stage, ws, stage.config(options), options.force)


def import_sfm_stage(ws: Workspace, options: CaptureOptions, from_colmap: Path | None = None,
                     from_transforms: Path | None = None) -> dict[str, Any]:
    """The sfm stage from poses made elsewhere (points triangulated when the import has none); skipped
    when done before from the same source with the same options."""
    from twinscan.recon.sfm.importers import SfmImport

    stage = SfmImport(from_colmap, "colmap") if from_colmap is not None else SfmImport(from_transforms, "transforms")
    return execute(stage, ws, stage.config(options), options.force).figures


def run_capture(video: Path, out: Path, options: CaptureOptions,
                on_stage: Callable[[str, dict[str, Any], float, bool], None] | None = None) -> dict[str, dict[str, Any]]:
    """Run every stage in order under one workspace lock; finished stages are skipped (resume).

    `on_stage(name, figures, seconds, skipped)` follows each stage; `skipped`: it had finished before
    with the same inputs and parameters, so nothing ran."""
    if not video.exists():
        raise TwinscanError(f"{video} does not exist", "check the path to the walkthrough video")
    stages = capture_stages(video, options)
    configs = stage_configs(options, stages)  # every option checked before any stage runs or the workspace is touched
    from twinscan.report import write_report

    ws = Workspace(out)
    results: dict[str, dict[str, Any]] = {}
    with ws.locked():
        ws.set_info("source", {"video": str(video.resolve())})
        ws.set_info("quality", {"requested": options.quality} | asdict(preset_choice(options.quality, options.device)))
        try:
            for stage in stages:
                started = time.time()
                try:
                    result = execute(stage, ws, configs[stage.name], options.force)
                except TwinscanError as error:
                    raise TwinscanError(f"stage '{stage.name}' failed: {error.what}", error.fix) from error
                results[stage.name] = result.figures
                if on_stage:
                    on_stage(stage.name, result.figures, time.time() - started, not result.ran)
        except BaseException:
            with contextlib.suppress(Exception):  # the report shows the failure; the stage's error is the one to raise
                write_report(ws)
            raise
        write_report(ws)
    return results

"""The stages in order, each built from one set of user options; `capture` runs them all.

Stage modules are imported lazily so `twinscan --help` stays fast and a missing heavy backend
only matters for the stage that needs it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from twinscan.errors import TwinscanError
from twinscan.presets import get_preset
from twinscan.workspace import Workspace

if TYPE_CHECKING:
    from twinscan.recon.sfm import SfmConfig


@dataclass(frozen=True)
class CaptureOptions:
    """Everything a user may set on the command line, for any stage."""

    quality: str = "preview"
    device: str = "auto"
    force: bool = False
    max_frames: int | None = None
    mapper: str = "incremental"
    marker_size: float | None = None
    marker_dict: str = "4x4_50"
    scale: float | None = None
    min_registered: float = 0.6
    convex: bool = False
    usdz: bool = False
    half: bool = False
    physics: bool = True


def run_frames_stage(ws: Workspace, video: Path, options: CaptureOptions) -> dict[str, Any]:
    from twinscan.frames import FramesConfig, run_frames

    config = FramesConfig.from_preset(get_preset(options.quality), max_frames=options.max_frames)
    return run_frames(ws, video, config, force=options.force)


def sfm_config(options: CaptureOptions) -> SfmConfig:
    from twinscan.recon.sfm import SfmConfig

    return SfmConfig.from_preset(
        get_preset(options.quality), mapper=options.mapper, marker_size=options.marker_size,
        marker_dict=options.marker_dict, scale=options.scale, min_registered=options.min_registered)


def run_sfm_stage(ws: Workspace, options: CaptureOptions) -> dict[str, Any]:
    from twinscan.recon.sfm import run_sfm

    return run_sfm(ws, sfm_config(options), force=options.force)


def import_sfm_stage(ws: Workspace, options: CaptureOptions, from_colmap: Path | None = None,
                     from_transforms: Path | None = None) -> dict[str, Any]:
    """The sfm stage from poses made elsewhere (points triangulated when the import has none)."""
    from twinscan.recon.sfm import import_colmap, import_transforms

    if from_colmap is not None:
        return import_colmap(ws, from_colmap, sfm_config(options))
    return import_transforms(ws, from_transforms, sfm_config(options))


def run_splats_stage(ws: Workspace, options: CaptureOptions) -> dict[str, Any]:
    from twinscan.recon.splats import SplatsConfig, run_splats

    return run_splats(ws, SplatsConfig.from_preset(get_preset(options.quality), device=options.device),
                      force=options.force)


def run_mesh_stage(ws: Workspace, options: CaptureOptions) -> dict[str, Any]:
    from twinscan.meshing import MeshConfig, run_mesh

    return run_mesh(ws, MeshConfig.from_preset(get_preset(options.quality), convex=options.convex),
                    force=options.force)


def run_usd_stage(ws: Workspace, options: CaptureOptions) -> dict[str, Any]:
    from twinscan.usd_export.stage import UsdConfig, run_usd

    return run_usd(ws, UsdConfig(half_precision=options.half, usdz=options.usdz), force=options.force)


def run_check_stage(ws: Workspace, options: CaptureOptions) -> dict[str, Any]:
    from twinscan.check.stage import run_check

    return run_check(ws, physics=options.physics, force=options.force)


@dataclass(frozen=True)
class StageStep:
    name: str
    run: Callable[[Workspace, Path, CaptureOptions], dict[str, Any]]


CAPTURE_STEPS: tuple[StageStep, ...] = (
    StageStep("frames", lambda ws, video, options: run_frames_stage(ws, video, options)),
    StageStep("sfm", lambda ws, video, options: run_sfm_stage(ws, options)),
    StageStep("splats", lambda ws, video, options: run_splats_stage(ws, options)),
    StageStep("mesh", lambda ws, video, options: run_mesh_stage(ws, options)),
    StageStep("usd", lambda ws, video, options: run_usd_stage(ws, options)),
    StageStep("check", lambda ws, video, options: run_check_stage(ws, options)),
)


def run_capture(video: Path, out: Path, options: CaptureOptions,
                on_stage: Callable[[str, dict[str, Any], float, bool], None] | None = None) -> dict[str, dict[str, Any]]:
    """Run every stage in order under one workspace lock; finished stages are skipped (resume).

    `on_stage(name, figures, seconds, skipped)` follows each stage; `skipped`: it had finished before
    with the same inputs and parameters, so nothing ran."""
    if not video.exists():
        raise TwinscanError(f"{video} does not exist", "check the path to the walkthrough video")
    from twinscan.report import write_report

    ws = Workspace(out)
    results: dict[str, dict[str, Any]] = {}
    with ws.locked():
        ws.set_info("source", {"video": str(video.resolve())})
        try:
            for step in CAPTURE_STEPS:
                started = time.time()
                before = ws.stage_record(step.name)
                try:
                    results[step.name] = step.run(ws, video, options)
                except TwinscanError as error:
                    raise TwinscanError(f"stage '{step.name}' failed: {error.what}", error.fix) from error
                if on_stage:
                    skipped = before is not None and ws.stage_record(step.name) == before
                    on_stage(step.name, results[step.name], time.time() - started, skipped)
        except BaseException:
            with contextlib.suppress(Exception):  # the report shows the failure; the stage's error is the one to raise
                write_report(ws)
            raise
        write_report(ws)
    return results

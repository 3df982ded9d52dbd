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
    from twinscan.frames import FramesConfig
    from twinscan.meshing import MeshConfig
    from twinscan.recon.sfm import SfmConfig
    from twinscan.recon.splats import SplatsConfig
    from twinscan.usd_export.stage import UsdConfig


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
    static_friction: float = 0.6  # the colliders' UsdPhysics material (UsdConfig's defaults: a plant floor)
    dynamic_friction: float = 0.5
    restitution: float = 0.1


def frames_config(options: CaptureOptions) -> FramesConfig:
    from twinscan.frames import FramesConfig

    return FramesConfig.from_preset(get_preset(options.quality), max_frames=options.max_frames)


def sfm_config(options: CaptureOptions) -> SfmConfig:
    from twinscan.recon.sfm import SfmConfig

    return SfmConfig.from_preset(
        get_preset(options.quality), mapper=options.mapper, marker_size=options.marker_size,
        marker_dict=options.marker_dict, scale=options.scale, min_registered=options.min_registered)


def splats_config(options: CaptureOptions) -> SplatsConfig:
    from twinscan.recon.splats import SplatsConfig

    return SplatsConfig.from_preset(get_preset(options.quality), device=options.device)


def mesh_config(options: CaptureOptions) -> MeshConfig:
    from twinscan.meshing import MeshConfig

    return MeshConfig.from_preset(get_preset(options.quality), convex=options.convex)


def usd_config(options: CaptureOptions) -> UsdConfig:
    from twinscan.usd_export.stage import UsdConfig

    return UsdConfig(half_precision=options.half, usdz=options.usdz, static_friction=options.static_friction,
                     dynamic_friction=options.dynamic_friction, restitution=options.restitution)


@dataclass(frozen=True)
class StageConfigs:
    """Every stage's config, built from one set of options."""

    frames: FramesConfig
    sfm: SfmConfig
    splats: SplatsConfig
    mesh: MeshConfig
    usd: UsdConfig


def stage_configs(options: CaptureOptions) -> StageConfigs:
    """Build (and so check) every stage's config from the options, before any stage runs.

    The one place a run's options are checked: a bad one (`--marker-size -1`, `--device cuda` on a
    machine without a usable GPU) is one TwinscanError here, before anything is decoded or written,
    not a failure after the stages before the one that reads it have run.
    """
    configs = StageConfigs(frames=frames_config(options), sfm=sfm_config(options), splats=splats_config(options),
                           mesh=mesh_config(options), usd=usd_config(options))
    if options.device == "cuda":
        from twinscan.recon.splats import select_backend

        select_backend(configs.splats.device, configs.splats.strategy)  # raises when CUDA is not usable
    return configs


def run_frames_stage(ws: Workspace, video: Path, options: CaptureOptions,
                     config: FramesConfig | None = None) -> dict[str, Any]:
    from twinscan.frames import run_frames

    return run_frames(ws, video, config or frames_config(options), force=options.force)


def run_sfm_stage(ws: Workspace, options: CaptureOptions, config: SfmConfig | None = None) -> dict[str, Any]:
    from twinscan.recon.sfm import run_sfm

    return run_sfm(ws, config or sfm_config(options), force=options.force)


def import_sfm_stage(ws: Workspace, options: CaptureOptions, from_colmap: Path | None = None,
                     from_transforms: Path | None = None) -> dict[str, Any]:
    """The sfm stage from poses made elsewhere (points triangulated when the import has none)."""
    from twinscan.recon.sfm import import_colmap, import_transforms

    if from_colmap is not None:
        return import_colmap(ws, from_colmap, sfm_config(options))
    return import_transforms(ws, from_transforms, sfm_config(options))


def run_splats_stage(ws: Workspace, options: CaptureOptions, config: SplatsConfig | None = None) -> dict[str, Any]:
    from twinscan.recon.splats import run_splats

    return run_splats(ws, config or splats_config(options), force=options.force)


def run_mesh_stage(ws: Workspace, options: CaptureOptions, config: MeshConfig | None = None) -> dict[str, Any]:
    from twinscan.meshing import run_mesh

    return run_mesh(ws, config or mesh_config(options), force=options.force)


def run_usd_stage(ws: Workspace, options: CaptureOptions, config: UsdConfig | None = None) -> dict[str, Any]:
    from twinscan.usd_export.stage import run_usd

    return run_usd(ws, config or usd_config(options), force=options.force)


def run_check_stage(ws: Workspace, options: CaptureOptions) -> dict[str, Any]:
    from twinscan.check.stage import run_check

    return run_check(ws, physics=options.physics, force=options.force)


@dataclass(frozen=True)
class StageStep:
    name: str
    run: Callable[[Workspace, Path, CaptureOptions, StageConfigs], dict[str, Any]]


CAPTURE_STEPS: tuple[StageStep, ...] = (
    StageStep("frames", lambda ws, video, options, configs: run_frames_stage(ws, video, options, configs.frames)),
    StageStep("sfm", lambda ws, video, options, configs: run_sfm_stage(ws, options, configs.sfm)),
    StageStep("splats", lambda ws, video, options, configs: run_splats_stage(ws, options, configs.splats)),
    StageStep("mesh", lambda ws, video, options, configs: run_mesh_stage(ws, options, configs.mesh)),
    StageStep("usd", lambda ws, video, options, configs: run_usd_stage(ws, options, configs.usd)),
    StageStep("check", lambda ws, video, options, configs: run_check_stage(ws, options)),
)


def run_capture(video: Path, out: Path, options: CaptureOptions,
                on_stage: Callable[[str, dict[str, Any], float, bool], None] | None = None) -> dict[str, dict[str, Any]]:
    """Run every stage in order under one workspace lock; finished stages are skipped (resume).

    `on_stage(name, figures, seconds, skipped)` follows each stage; `skipped`: it had finished before
    with the same inputs and parameters, so nothing ran."""
    if not video.exists():
        raise TwinscanError(f"{video} does not exist", "check the path to the walkthrough video")
    configs = stage_configs(options)  # every option checked before any stage runs or the workspace is touched
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
                    results[step.name] = step.run(ws, video, options, configs)
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

"""The `splats` stage: OUT/sfm/undistorted/ in; OUT/splats/splats.ply (the cell), background.ply (what lies
outside the captured region), the stage's record splats.json (recon/splats/record.py) and held-out renders out.

OUT/splats/ appears complete or not at all. While training, a checkpoint in OUT/.splats-checkpoint.pt
lets an interrupted run (Ctrl-C, power loss) resume at its last saved step; it is removed on success.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
import math
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch

from twinscan.atomic import atomic_dir, write_json
from twinscan.errors import TwinscanError
from twinscan.figures import format_figure
from twinscan.gaussians import write_ply
from twinscan.gaussians.crop import captured_region, crop_mask, outside_region
from twinscan.layout import (BACKGROUND_PLY, HELDOUT_DIR, SPLATS_CHECKPOINT, SPLATS_DIR, SPLATS_PLY, SPLATS_RECORD,
                             UNDISTORTED, inside)
from twinscan.progress import progress_bar
from twinscan.recon.sfm.record import read_sfm_record
from twinscan.recon.splats.backend import Backend, select_backend
from twinscan.recon.splats.config import SplatsConfig
from twinscan.recon.splats.params import gaussians_from_params
from twinscan.recon.splats.record import SplatsRecord
from twinscan.recon.splats.trainer import TrainResult, evaluate, train_splats
from twinscan.recon.splats.views import TrainingViews, load_training_views
from twinscan.options import CaptureOptions
from twinscan.presets import resolve_preset
from twinscan.stages import execute
from twinscan.workspace import StageRun, Workspace, fingerprint

VERSIONS = ("torch", "gsplat", "numba", "numpy")


def _status(status: dict[str, Any]) -> str:
    psnr = status.get("psnr", math.nan)
    return (f"{status.get('it_s', 0.0):.1f} it/s  {status['num_gaussians']:,} splats  loss {status['loss']:.4f}"
            + ("" if math.isnan(psnr) else f"  held-out {psnr:.2f} dB"))


@dataclasses.dataclass(frozen=True)
class CroppedSplats:
    """The trained splats cut at the captured region: `result` holds the cell's (its evaluation renders
    cell and background together, as the twin shows them with its background on), `background` the
    splats outside the region (None when there are none); the under-floor splats are dropped."""

    result: TrainResult
    background: torch.nn.ParameterDict | None
    figures: dict[str, Any]


def _subset(params: torch.nn.ParameterDict, keep: np.ndarray) -> torch.nn.ParameterDict:
    kept = torch.from_numpy(keep).to(params["means"].device)
    return torch.nn.ParameterDict({name: torch.nn.Parameter(value.detach()[kept], requires_grad=False)
                                   for name, value in params.items()})


def crop_to_captured_region(ws: Workspace, views: TrainingViews, cfg: SplatsConfig, backend: Backend,
                            result: TrainResult) -> CroppedSplats:
    """Split the splats at the captured region (twinscan.gaussians.crop): the cell's, the background's
    (outside the region: on the sample the hall behind the cell, 5.9 dB of its held-out PSNR) and the
    under-floor floaters, which go. Held-out scores are taken again: `psnr`/`ssim` with the background,
    `psnr_cell_only`/`ssim_cell_only` without it, so the figures describe what the PLYs hold."""
    floor_found = read_sfm_record(ws).world.floor_found
    centres = torch.linalg.inv(views.cam_from_world)[:, :3, 3].numpy()
    region = captured_region(views.points, centres, floor_found)
    means = result.params["means"].detach().cpu().numpy()
    keep, counts = crop_mask(means, region)
    far = outside_region(means, region)
    figures: dict[str, Any] = {
        "captured_region_m": [[round(float(v), 3) for v in region.lower], [round(float(v), 3) for v in region.upper]],
        **counts}  # cropped_outside: the splats moved to background.ply
    if keep.all():
        return CroppedSplats(result, None, figures | {"psnr_cell_only": round(result.evaluation.psnr, 3),
                                                      "ssim_cell_only": round(result.evaluation.ssim, 4)})
    heldout = views.split(cfg.heldout_every)[1]
    sh_degree = cfg.sh_degree_at(result.steps)
    cell = _subset(result.params, keep)
    background = _subset(result.params, far) if far.any() else None
    # with no floater under the floor, cell and background are every splat: training's own evaluation
    shown = result.evaluation if (keep | far).all() else evaluate(
        _subset(result.params, keep | far), views, heldout, sh_degree, backend.rasterize, keep_renders=True)
    cell_only = evaluate(cell, views, heldout, sh_degree, backend.rasterize) if background is not None else shown
    figures |= {"psnr_cell_only": round(cell_only.psnr, 3), "ssim_cell_only": round(cell_only.ssim, 4)}
    return CroppedSplats(dataclasses.replace(result, params=cell, evaluation=shown), background, figures)


def write_outputs(ws: Workspace, views: TrainingViews, result: TrainResult,
                  background: torch.nn.ParameterDict | None, heldout_every: int) -> list[str]:
    """splats.ply, background.ply (when any splat lies outside the captured region), the stage's record
    and, per held-out view, a PNG of the render beside its ground truth."""
    record = SplatsRecord(heldout_every, tuple(views.names[i] for i in views.split(heldout_every)[1]),
                          result.num_gaussians, 0 if background is None else len(background["means"]))
    with atomic_dir(ws.path(SPLATS_DIR)) as tmp:
        write_ply(tmp / inside(SPLATS_DIR, SPLATS_PLY), gaussians_from_params(result.params))
        if background is not None:
            write_ply(tmp / inside(SPLATS_DIR, BACKGROUND_PLY), gaussians_from_params(background))
        write_json(tmp / inside(SPLATS_DIR, SPLATS_RECORD), record.to_json())
        heldout = tmp / inside(SPLATS_DIR, HELDOUT_DIR)
        heldout.mkdir()
        for name, rendered in result.evaluation.renders.items():
            truth = (views.images[views.names.index(name)].numpy() * 255 + 0.5).astype(np.uint8)
            side_by_side = cv2.cvtColor(np.concatenate([rendered, truth], axis=1), cv2.COLOR_RGB2BGR)
            png = heldout / f"{Path(name).stem}.png"
            if not cv2.imwrite(str(png), side_by_side):
                raise TwinscanError(f"could not write {png}", "check that the output folder is writable and has space")
    return [SPLATS_PLY, *([BACKGROUND_PLY] if background is not None else []), SPLATS_RECORD, HELDOUT_DIR]


@dataclass(frozen=True)
class SplatsStage:
    """Train the splats and write them. An interrupted run resumes from its checkpoint."""

    name: str = "splats"
    versions: tuple[str, ...] = VERSIONS
    required: tuple[str, ...] = (SPLATS_RECORD,)  # absent from workspaces of twinscan before the record

    def config(self, options: CaptureOptions) -> SplatsConfig:
        cfg = SplatsConfig.from_preset(resolve_preset(options.quality, options.device), device=options.device)
        if options.device == "cuda":
            select_backend(cfg.device, cfg.strategy)  # raises when CUDA is not usable, before any stage runs
        return cfg

    def inputs(self, ws: Workspace) -> dict[str, str]:
        return {UNDISTORTED: fingerprint(ws.path(UNDISTORTED))} if ws.path(UNDISTORTED).exists() else {}

    def run(self, ws: Workspace, config: SplatsConfig, run: StageRun, force: bool) -> None:
        _train_and_write(ws, config, run, force)


def run_splats(ws: Workspace, cfg: SplatsConfig, force: bool = False) -> dict[str, Any]:
    """The splats stage (skipped when done before with the same config and SfM output); its figures."""
    return execute(SplatsStage(), ws, cfg, force).figures


def _train_and_write(ws: Workspace, cfg: SplatsConfig, run: StageRun, force: bool) -> None:
    checkpoint = ws.path(SPLATS_CHECKPOINT)
    if force:
        checkpoint.unlink(missing_ok=True)
    views = load_training_views(ws, cfg.max_side)
    backend = select_backend(cfg.device, cfg.strategy)
    with progress_bar(f"splats ({backend.device})", total=cfg.steps) as advance:
        shown = 0

        def on_step(step: int, status: dict[str, Any]) -> None:
            nonlocal shown
            advance(step - shown, status=_status(status))
            shown = step

        result = train_splats(views, cfg, backend, checkpoint=checkpoint, on_step=on_step)
        cropped = crop_to_captured_region(ws, views, cfg, backend, result)
        result = cropped.result
        # the bar ends on the figures the stage records (its last in-training score is older)
        advance(result.steps - shown, status=f"{result.num_gaussians:,} splats  held-out "
                                             f"{format_figure(round(result.evaluation.psnr, 3), 'psnr')}, "
                                             f"SSIM {format_figure(round(result.evaluation.ssim, 4))}")
    run.outputs = write_outputs(ws, views, result, cropped.background, cfg.heldout_every)
    height, width = views.images[0].shape[:2]
    gains = result.exposure.gains()
    run.figures.update({
        "psnr": round(result.evaluation.psnr, 3), "ssim": round(result.evaluation.ssim, 4),
        "lpips": None,  # LPIPS needs downloaded network weights; none are used
        "num_gaussians": result.num_gaussians, "steps": result.steps, "seconds": round(result.seconds, 1),
        "resumed_from_step": result.resumed_from, "device": result.device, "strategy": result.strategy,
        "train_resolution": [width, height], "train_views": len(views) - len(result.evaluation.renders),
        "heldout_views": len(result.evaluation.renders),
        "exposure_gain_range": [round(gains.min().item(), 3), round(gains.max().item(), 3)], **cropped.figures})
    with contextlib.suppress(FileNotFoundError):
        checkpoint.unlink()

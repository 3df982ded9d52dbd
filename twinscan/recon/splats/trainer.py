"""3D Gaussian Splatting optimisation, as gsplat's examples/simple_trainer.py does it, independent of files.

Adapted to walkthrough captures: per-image exposure compensation, optional pose refinement, every
8th view held out for PSNR/SSIM, and checkpoints that make an interrupted run resume where it stopped
(same result as an uninterrupted one: all optimiser, strategy and random states are saved).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from gsplat.strategy import DefaultStrategy, MCMCStrategy
from torch import Tensor

from twinscan.atomic import atomic_path
from twinscan.recon.splats.adjust import ExposureCompensation, PoseRefinement
from twinscan.recon.splats.backend import Backend, cpu_training_threads, select_backend
from twinscan.recon.splats.config import SplatsConfig
from twinscan.recon.splats.geometry import flatness, normal_consistency, sparse_depth_loss
from twinscan.recon.splats.metrics import photometric_loss, psnr, ssim
from twinscan.recon.splats.params import init_params
from twinscan.recon.splats.views import TrainingViews

MCMC_OPACITY_REG = 0.01  # gsplat's MCMC config regularises opacity and scale
MCMC_SCALE_REG = 0.01
CHECKPOINT_FORMAT = 1


@dataclass
class Evaluation:
    psnr: float  # mean over held-out views, dB
    ssim: float
    renders: dict[str, np.ndarray] = field(default_factory=dict)  # name -> [H, W, 3] uint8


@dataclass
class TrainResult:
    params: torch.nn.ParameterDict
    evaluation: Evaluation
    steps: int
    resumed_from: int  # the checkpoint step training continued from (0 when started afresh)
    seconds: float  # this run's training time (excluding time before a resume)
    device: str
    strategy: str
    history: list[tuple[int, float]]  # (step, held-out PSNR)
    train_ids: list[int]  # view indices trained on, in the order of `exposure`'s rows
    exposure: ExposureCompensation

    @property
    def num_gaussians(self) -> int:
        return len(self.params["means"])


def render(params: torch.nn.ParameterDict, cam_from_world: Tensor, Ks: Tensor, width: int, height: int,
           sh_degree: int, rasterize: Callable, render_mode: str = "RGB") -> tuple[Tensor, dict[str, Any]]:
    """Colours [C, H, W, 3] of the splats seen by C cameras (with "RGB+ED", the expected depth as a
    fourth channel), and the rasterizer's meta."""
    colors, _, meta = rasterize(
        params["means"], params["quats"], torch.exp(params["scales"]), torch.sigmoid(params["opacities"]),
        torch.cat([params["sh0"], params["shN"]], 1), cam_from_world, Ks, width, height, sh_degree=sh_degree,
        render_mode=render_mode)
    return colors, meta


@torch.no_grad()
def evaluate(params: torch.nn.ParameterDict, views: TrainingViews, ids: list[int], sh_degree: int,
             rasterize: Callable, keep_renders: bool = False) -> Evaluation:
    """Held-out PSNR and SSIM at the SfM poses, without the per-image corrections (none were learned)."""
    device = params["means"].device
    psnrs, ssims, renders = [], [], {}
    for i in ids:
        target = views.images[i].to(device)[None]
        height, width = target.shape[1:3]
        colors, _ = render(params, views.cam_from_world[i:i + 1].to(device), views.Ks[i:i + 1].to(device),
                           width, height, sh_degree, rasterize)
        colors = colors.clamp(0, 1)
        psnrs.append(psnr(colors, target))
        ssims.append(ssim(colors, target).item())
        if keep_renders:
            renders[views.names[i]] = (colors[0].cpu().numpy() * 255 + 0.5).astype(np.uint8)
    return Evaluation(float(np.mean(psnrs)), float(np.mean(ssims)), renders)


def _optimizers(params: torch.nn.ParameterDict, cfg: SplatsConfig, scene_extent: float) -> dict[str, torch.optim.Adam]:
    lrs = {"means": cfg.means_lr * scene_extent, "scales": cfg.scales_lr, "quats": cfg.quats_lr,
           "opacities": cfg.opacities_lr, "sh0": cfg.sh0_lr, "shN": cfg.shN_lr}
    # fused: one kernel per step instead of a dozen elementwise passes over every splat parameter
    return {name: torch.optim.Adam([{"params": params[name], "lr": lr, "name": name}], eps=1e-15, fused=True)
            for name, lr in lrs.items()}


def _strategy(name: str, cfg: SplatsConfig) -> DefaultStrategy | MCMCStrategy:
    if name == "mcmc":
        return MCMCStrategy(cap_max=cfg.max_gaussians, refine_start_iter=cfg.refine_start_step,
                            refine_stop_iter=max(cfg.refine_stop_step, int(0.8 * cfg.steps)),
                            refine_every=cfg.refine_every)
    return DefaultStrategy(refine_start_iter=cfg.refine_start_step, refine_stop_iter=cfg.refine_stop_step,
                           reset_every=cfg.reset_every, refine_every=cfg.refine_every)


class _Run:
    """Everything that evolves during training; `state_dict`/`load` make it a checkpoint."""

    def __init__(self, views: TrainingViews, cfg: SplatsConfig, backend: Backend) -> None:
        self.cfg, self.backend, self.views = cfg, backend, views
        self.device = torch.device(backend.device)
        self.train_ids, self.heldout_ids = views.split(cfg.heldout_every)
        self.scene_extent = views.scene_extent()
        mcmc = backend.strategy == "mcmc"
        self.params = init_params(views.points, views.point_colors, cfg.sh_degree,
                                  init_opacity=0.5 if mcmc else cfg.init_opacity,
                                  init_scale=0.1 if mcmc else cfg.init_scale, seed=cfg.seed).to(self.device)
        self.optimizers = _optimizers(self.params, cfg, self.scene_extent)
        self.scheduler = torch.optim.lr_scheduler.ExponentialLR(self.optimizers["means"],
                                                                gamma=0.01 ** (1.0 / cfg.steps))
        self.strategy = _strategy(backend.strategy, cfg)
        self.strategy.check_sanity(self.params, self.optimizers)
        self.strategy_state = (self.strategy.initialize_state() if mcmc
                               else self.strategy.initialize_state(scene_scale=self.scene_extent))
        self.exposure = ExposureCompensation(len(self.train_ids)).to(self.device)
        self.corrections = [torch.optim.Adam(self.exposure.parameters(), lr=cfg.exposure_lr)]
        self.poses = PoseRefinement(len(self.train_ids)).to(self.device) if cfg.pose_refine else None
        if self.poses is not None:
            self.corrections.append(torch.optim.Adam(self.poses.parameters(), lr=cfg.pose_lr,
                                                     weight_decay=cfg.pose_reg))
        self.generator = torch.Generator().manual_seed(cfg.seed)
        torch.manual_seed(cfg.seed)  # the strategy samples split positions from torch's global generator
        self.step = 0
        self.history: list[tuple[int, float]] = []

    def identity(self) -> dict[str, Any]:
        """What a checkpoint must match to be resumed: the config and the views."""
        return {"format": CHECKPOINT_FORMAT, "config": asdict(self.cfg), "names": self.views.names,
                "strategy": self.backend.strategy}

    def state_dict(self) -> dict[str, Any]:
        return {
            "identity": self.identity(), "step": self.step, "history": self.history,
            "params": {name: p.detach().cpu() for name, p in self.params.items()},
            "optimizers": {name: opt.state_dict() for name, opt in self.optimizers.items()},
            "scheduler": self.scheduler.state_dict(),
            "strategy_state": self.strategy_state,
            "exposure": self.exposure.state_dict(),
            "poses": self.poses.state_dict() if self.poses is not None else None,
            "corrections": [opt.state_dict() for opt in self.corrections],
            "generator": self.generator.get_state(), "torch_rng": torch.get_rng_state(),
        }

    def load(self, checkpoint: dict[str, Any]) -> None:
        self.params = torch.nn.ParameterDict(
            {name: torch.nn.Parameter(t.to(self.device)) for name, t in checkpoint["params"].items()})
        self.optimizers = _optimizers(self.params, self.cfg, self.scene_extent)
        for name, opt in self.optimizers.items():
            opt.load_state_dict(checkpoint["optimizers"][name])
        self.scheduler = torch.optim.lr_scheduler.ExponentialLR(self.optimizers["means"],
                                                                gamma=0.01 ** (1.0 / self.cfg.steps))
        self.scheduler.load_state_dict(checkpoint["scheduler"])
        self.strategy_state = {k: v.to(self.device) if isinstance(v, Tensor) else v
                               for k, v in checkpoint["strategy_state"].items()}
        self.exposure.load_state_dict(checkpoint["exposure"])
        if self.poses is not None:
            self.poses.load_state_dict(checkpoint["poses"])
        for opt, saved in zip(self.corrections, checkpoint["corrections"]):
            opt.load_state_dict(saved)
        self.generator.set_state(checkpoint["generator"])
        torch.set_rng_state(checkpoint["torch_rng"])
        self.step = checkpoint["step"]
        self.history = [tuple(h) for h in checkpoint["history"]]

    def train_step(self) -> float:
        """One optimisation step on one random training image; returns the loss."""
        cfg, step = self.cfg, self.step
        slot = int(torch.randint(len(self.train_ids), (1,), generator=self.generator))
        view = self.train_ids[slot]
        slots = torch.tensor([slot], device=self.device)
        target = self.views.images[view].to(self.device)[None]
        cam_from_world = self.views.cam_from_world[view:view + 1].to(self.device)
        if self.poses is not None:
            cam_from_world = self.poses(cam_from_world, slots)
        observed = self.views.observed_depths[view].to(self.device)
        pinned = cfg.depth_weight > 0 and len(observed) > 0  # the depth rides along as a fourth channel
        rendered, info = render(self.params, cam_from_world, self.views.Ks[view:view + 1].to(self.device),
                                target.shape[2], target.shape[1], self.cfg.sh_degree_at(step), self.backend.rasterize,
                                render_mode="RGB+ED" if pinned else "RGB")
        colors = self.exposure(rendered[..., :3], slots)
        self.strategy.step_pre_backward(self.params, self.optimizers, self.strategy_state, step, info)
        loss = photometric_loss(colors, target, cfg.ssim_lambda)
        if pinned:
            loss = loss + cfg.depth_weight * sparse_depth_loss(rendered[0, ..., 3], observed, self.scene_extent)
        flatten, normals = cfg.geometry_at(step)
        if flatten:
            loss = loss + cfg.flat_weight * flatness(self.params["scales"])
        if normals:
            loss = loss + cfg.normal_weight * normal_consistency(
                self.params["means"], self.params["quats"], self.params["scales"],
                torch.sigmoid(self.params["opacities"]), cam_from_world, self.views.Ks[view].to(self.device),
                target.shape[2], target.shape[1], self.backend.rasterize)
        if self.backend.strategy == "mcmc":
            loss = (loss + MCMC_OPACITY_REG * torch.sigmoid(self.params["opacities"]).mean()
                    + MCMC_SCALE_REG * torch.exp(self.params["scales"]).mean())
        loss.backward()
        for opt in [*self.optimizers.values(), *self.corrections]:
            opt.step()
            opt.zero_grad(set_to_none=True)
        self.scheduler.step()
        if self.backend.strategy == "mcmc":
            self.strategy.step_post_backward(self.params, self.optimizers, self.strategy_state, step, info,
                                             lr=self.scheduler.get_last_lr()[0])
        elif len(self.params["means"]) < cfg.max_gaussians:  # DefaultStrategy stops growing at the cap
            self.strategy.step_post_backward(self.params, self.optimizers, self.strategy_state, step, info,
                                             packed=False)
        self.step += 1
        return loss.item()

    def evaluate(self, keep_renders: bool = False) -> Evaluation:
        evaluation = evaluate(self.params, self.views, self.heldout_ids, self.cfg.sh_degree_at(self.step),
                              self.backend.rasterize, keep_renders)
        self.history.append((self.step, evaluation.psnr))
        return evaluation


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path: Path | None) -> dict[str, Any] | None:
    if path is None or not path.exists():
        return None
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception:  # a checkpoint from another version, or damaged: start afresh
        return None


def train_splats(views: TrainingViews, cfg: SplatsConfig, backend: Backend | None = None,
                 checkpoint: Path | None = None,
                 on_step: Callable[[int, dict[str, Any]], None] | None = None) -> TrainResult:
    """Optimise splats on `views`; resume from `checkpoint` when it holds a run of the same config.

    `on_step(step, status)` is called after every step (status: loss, num_gaussians, it_s, psnr).
    """
    backend = backend or select_backend(cfg.device, cfg.strategy)
    with cpu_training_threads(backend.device):
        return _train(_Run(views, cfg, backend), checkpoint, on_step)


def _train(run: _Run, checkpoint: Path | None,
           on_step: Callable[[int, dict[str, Any]], None] | None) -> TrainResult:
    cfg, backend = run.cfg, run.backend
    saved = load_checkpoint(checkpoint)
    if saved is not None and saved["identity"] == run.identity():
        run.load(saved)
    resumed_from = run.step
    started = time.perf_counter()
    window_start, window_steps = started, 0
    status: dict[str, Any] = {"psnr": run.history[-1][1] if run.history else math.nan}
    while run.step < cfg.steps:
        loss = run.train_step()
        window_steps += 1
        now = time.perf_counter()
        if now - window_start > 1.0:
            status["it_s"] = window_steps / (now - window_start)
            window_start, window_steps = now, 0
        if run.step % cfg.eval_every == 0 and run.step < cfg.steps:
            status["psnr"] = run.evaluate().psnr
        if checkpoint is not None and run.step % cfg.checkpoint_every == 0 and run.step < cfg.steps:
            save_checkpoint(checkpoint, run.state_dict())
        status.update(loss=loss, num_gaussians=len(run.params["means"]))
        if on_step is not None:
            on_step(run.step, status)
    seconds = time.perf_counter() - started
    evaluation = run.evaluate(keep_renders=True)
    return TrainResult(run.params, evaluation, run.step, resumed_from, seconds, backend.device,
                       backend.strategy, run.history, run.train_ids, run.exposure)

"""What the splats stage is asked to do: one frozen, validated config derived from a quality preset."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from twinscan.errors import TwinscanError
from twinscan.gaussians.backend import DEVICES
from twinscan.presets import Preset

STRATEGIES = ("auto", "default", "mcmc")


@dataclass(frozen=True)
class SplatsConfig:
    steps: int = 30_000
    max_side: int = 1600  # longest training image side, pixels (images are downscaled to it)
    max_gaussians: int = 1_000_000  # MCMC budget; DefaultStrategy stops densifying at it
    device: str = "auto"  # "auto": CUDA where torch sees a GPU and gsplat compiles, else the CPU rasterizer
    strategy: str = "auto"  # "auto": MCMC on CUDA, DefaultStrategy on CPU (MCMC relocation is CUDA-only)
    sh_degree: int = 3
    sh_degree_interval: int = 1000  # raise the SH degree by one every this many steps
    ssim_lambda: float = 0.2  # loss = (1 - l) * L1 + l * (1 - SSIM)
    # learning rates (gsplat's simple_trainer); means are scaled by the scene extent
    means_lr: float = 1.6e-4
    scales_lr: float = 5e-3
    opacities_lr: float = 5e-2
    quats_lr: float = 1e-3
    sh0_lr: float = 2.5e-3
    shN_lr: float = 2.5e-3 / 20
    init_opacity: float = 0.1
    init_scale: float = 1.0  # times the mean distance to the 3 nearest SfM points
    # DefaultStrategy schedule; None = gsplat's numbers scaled to `steps`
    refine_start: int | None = None
    refine_stop: int | None = None
    reset_every: int = 3000
    refine_every: int = 100
    exposure_lr: float = 1e-3  # per-image 3x3 colour matrix + bias (phones auto-expose)
    pose_refine: bool = False
    pose_lr: float = 1e-5
    pose_reg: float = 1e-6
    # geometric priors (recon/splats/geometry.py, as 2DGS / PGSR): from this share of the steps on, splats
    # are pushed flat and their normals toward the normals of the depth they render (that pass every
    # `geometry_every` steps: on the CPU it is a second rasterization). Off (weights 0): tried on the sample
    # at preview with 2DGS's normal weight 0.05 and flatness 0.1, held-out PSNR fell 0.66 dB and the
    # colliders' structure p95 rose 6.58 -> 7.11 cm (docs/benchmarks.md, "Geometric priors")
    normal_weight: float = 0.0
    flat_weight: float = 0.0
    geometry_from: float = 0.3
    geometry_every: int = 3
    # sparse depth loss (gsplat simple_trainer's depth_loss): each training view's rendered expected depth
    # pinned to the SfM points it observed, in disparity (L1 of 1 / depth, times the scene extent). Colour
    # alone places a wall seen only from across the cell wherever its colour is explained; its SfM points
    # say where it is. gsplat's depth_lambda is 0.01; on the hard cell at preview 0, 0.01, 0.1 and 1 gave
    # collider F @5 cm 0.660, 0.675, 0.685, 0.688 and held-out PSNR +0, -0.10, +0.21, -0.49 dB
    # (docs/benchmarks.md, "Sparse depth")
    depth_weight: float = 0.1
    heldout_every: int = 8  # every 8th registered image (by name) is held out for metrics
    eval_every: int = 500  # held-out PSNR this often (and at the end)
    checkpoint_every: int = 500
    seed: int = 0

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise TwinscanError(f"unknown device '{self.device}'", f"use one of: {', '.join(DEVICES)}")
        if self.strategy not in STRATEGIES:
            raise TwinscanError(f"unknown densification strategy '{self.strategy}'",
                                f"use one of: {', '.join(STRATEGIES)}")
        if self.steps < 1 or self.max_side < 16 or self.max_gaussians < 1:
            raise TwinscanError(f"steps, max_side and max_gaussians must be positive "
                                f"(got {self.steps}, {self.max_side}, {self.max_gaussians})",
                                "use a quality preset, or positive values")
        if not 0 <= self.sh_degree <= 3:
            raise TwinscanError(f"sh_degree must be 0..3 (got {self.sh_degree})", "use 3 (the default) or less")
        if self.normal_weight < 0 or self.flat_weight < 0 or not 0 <= self.geometry_from <= 1 \
                or self.geometry_every < 1:
            raise TwinscanError(f"geometric priors {self.normal_weight}, {self.flat_weight} from {self.geometry_from} "
                                f"every {self.geometry_every} steps are invalid",
                                "use weights >= 0, a start between 0 and 1 and a period of 1 or more steps")
        if self.depth_weight < 0:
            raise TwinscanError(f"depth_weight must be >= 0 (got {self.depth_weight})",
                                "use 0.1 (the default), or 0 to train on colour alone")
        if self.heldout_every < 2:
            raise TwinscanError(f"heldout_every must be >= 2 (got {self.heldout_every})",
                                "hold out every 8th image (the default)")

    @property
    def refine_start_step(self) -> int:
        return self.refine_start if self.refine_start is not None else min(500, self.steps // 5)

    @property
    def refine_stop_step(self) -> int:
        return self.refine_stop if self.refine_stop is not None else self.steps // 2

    def geometry_at(self, step: int) -> tuple[bool, bool]:
        """(flatten, normal consistency) at `step`: both from `geometry_from` on, the second every `geometry_every`."""
        on = step >= self.geometry_from * self.steps
        return on and self.flat_weight > 0, on and self.normal_weight > 0 and step % self.geometry_every == 0

    def sh_degree_at(self, step: int) -> int:
        """The SH degree trained (and rendered) after `step` steps: one more every sh_degree_interval."""
        return min(step // self.sh_degree_interval, self.sh_degree)

    @classmethod
    def from_preset(cls, preset: Preset, **overrides: Any) -> SplatsConfig:
        """The preview preset trains small and short so the CPU path finishes in minutes; the GPU presets
        render the normal pass at every step."""
        quick = preset.splat_steps < 5000
        base = cls(steps=preset.splat_steps, max_side=min(preset.max_side, 480) if quick else preset.max_side,
                   max_gaussians=preset.max_gaussians, pose_refine=not quick,
                   sh_degree_interval=max(preset.splat_steps // 6, 100) if quick else 1000,
                   eval_every=max(preset.splat_steps // 3, 1) if quick else 2000,
                   checkpoint_every=max(min(500, preset.splat_steps // 3), 1) if quick else 2000,
                   geometry_every=cls.geometry_every if quick else 1)  # a GPU renders the normal pass cheaply
        return replace(base, **overrides)

"""Quality presets: the only knob a technician turns. Each stage derives its config from one."""

from __future__ import annotations

from dataclasses import dataclass

from twinscan.errors import TwinscanError


@dataclass(frozen=True)
class Preset:
    name: str
    max_frames: int  # frame budget kept from the video
    max_side: int  # longest image side, pixels, for SfM and training
    splat_steps: int  # 3DGS optimisation steps
    max_gaussians: int  # cap on the splat count (MCMC budget)
    mesh_faces: int  # collision mesh face budget


PRESETS: dict[str, Preset] = {
    "preview": Preset("preview", max_frames=60, max_side=640, splat_steps=3000, max_gaussians=100_000, mesh_faces=20_000),
    "standard": Preset("standard", max_frames=200, max_side=1280, splat_steps=15_000, max_gaussians=1_000_000, mesh_faces=50_000),
    "high": Preset("high", max_frames=400, max_side=1920, splat_steps=30_000, max_gaussians=3_000_000, mesh_faces=200_000),
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise TwinscanError(
            f"unknown quality preset '{name}'", f"use one of: {', '.join(PRESETS)}"
        ) from None

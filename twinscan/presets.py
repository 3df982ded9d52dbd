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
    mesh_resolution: int  # TSDF voxels along the captured region's longest side
    texture_size: int  # visual mesh texture atlas side, pixels
    # frames: most motion steps between kept frames where the view turns to plainer surfaces. A smoke
    # capture's 320 px frames hold fewer features, and 2 steps split its SfM model (10/29 registered in a
    # loaded run); at 1.5 it registers 35/35. The sample at preview keeps 2: 1.5 joined its laps every time
    # but cost 0.5 cm of collision p95 (docs/benchmarks.md).
    max_gap_steps: float = 2.0


PRESETS: dict[str, Preset] = {
    # a minute on a CPU for a tiny capture: proves a capture (or a batch, or a node) works end to end
    "smoke": Preset("smoke", max_frames=40, max_side=320, splat_steps=300, max_gaussians=20_000, mesh_faces=5_000,
                    mesh_resolution=128, texture_size=512, max_gap_steps=1.5),
    # minutes on a laptop: the sample (180 frames) takes 9.5 min on 2 cores, 7.5 of them splats (3000 steps)
    "preview": Preset("preview", max_frames=180, max_side=640, splat_steps=3000, max_gaussians=100_000, mesh_faces=20_000,
                      mesh_resolution=384, texture_size=1024),
    "standard": Preset("standard", max_frames=200, max_side=1280, splat_steps=15_000, max_gaussians=1_000_000, mesh_faces=50_000,
                       mesh_resolution=512, texture_size=2048),
    "high": Preset("high", max_frames=400, max_side=1920, splat_steps=30_000, max_gaussians=3_000_000, mesh_faces=200_000,
                   mesh_resolution=768, texture_size=4096),
}


def get_preset(name: str) -> Preset:
    try:
        return PRESETS[name]
    except KeyError:
        raise TwinscanError(
            f"unknown quality preset '{name}'", f"use one of: {', '.join(PRESETS)}"
        ) from None

"""What `twinscan check` drops where, and how long it simulates."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CheckConfig:
    physics: bool = True  # drop probes in NVIDIA Newton (the `physics` extra); False: static checks only
    asset_validator: bool = True  # run NVIDIA's Asset Validator (the `physics` extra) next to UsdValidation
    probe_size_m: float = 0.2  # edge of the cube probes
    drop_height_m: float = 0.4  # gap between a probe's bottom and the surface below it at release
    probe_spacing_m: float = 0.6  # grid step of the probes over the floor and object tops
    max_probes: int = 48  # the grid step grows on large floors to stay under this
    rest_tolerance_m: float = 0.03  # a probe rests when its bottom is this close to the surface below
    settled_speed_m_s: float = 0.05  # ... and it moves slower than this at the end
    height_map_cell_m: float = 0.05  # ray casting grid used to find flat spots and holes
    sim_seconds: float = 1.5  # a 0.4 m drop takes 0.29 s; the rest lets probes settle
    sim_dt_s: float = 1.0 / 200.0
    solver_iterations: int = 4  # XPBD iterations per step
    device: str | None = None  # warp device ("cpu", "cuda:0"); None: warp's default (a GPU if present)
    kernel_cache_dir: Path | None = None  # compiled warp kernels; None: $WARP_CACHE_PATH or ~/.cache/warp

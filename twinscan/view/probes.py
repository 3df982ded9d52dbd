"""The physics probes for the viewer: where `twinscan check` left them, when it recorded that; else
where it drops them and the height they must rest at (planned from the colliders as the check plans
them), with the check's recorded counts.

The check stage writes `check/probes.json`, read as its typed record (`check/record.py`); a workspace
not checked yet has none, and the probes are then planned from the colliders. The manifest's check
figures and params are read for the panel's line and that plan only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from twinscan.check.record import read_probes_record
from twinscan.layout import PROBES_JSON
from twinscan.view.meshes import Triangles
from twinscan.workspace import Workspace


@dataclass(frozen=True)
class Probe:
    name: str
    centre: tuple[float, float, float]  # the cube's centre: at rest (recorded) or resting on its surface (planned)
    outcome: str  # rested / hovered / fell_through / unsettled, or "planned"


@dataclass(frozen=True)
class Probes:
    probes: list[Probe]
    size_m: float
    recorded: bool  # True: rest positions from the physics run; False: planned sites only
    summary: str  # one line for the panel


def _check_figures(manifest: dict[str, Any]) -> dict[str, Any]:
    return ((manifest.get("stages") or {}).get("check") or {}).get("figures") or {}


def recorded_summary(manifest: dict[str, Any]) -> str:
    figures = _check_figures(manifest)
    if not figures:
        return "twinscan check has not run on this workspace"
    if not figures.get("physics_run"):
        return "twinscan check ran without physics (no probes dropped)"
    return (f"check: {figures.get('probes_rested', 0)}/{figures.get('probes', 0)} probes rested, worst "
            f"{100 * float(figures.get('worst_rest_error_m', 0.0)):.1f} cm")


def plan_probes(colliders: list[Triangles], size_m: float, params: dict[str, Any]) -> list[Probe]:
    """The sites `twinscan check` drops probes on (same planner, same settings), each resting on its surface."""
    import trimesh

    from twinscan.check.config import CheckConfig
    from twinscan.check.probes import floor_extent, height_map, plan_probe_sites

    parts = [trimesh.Trimesh(mesh.vertices, mesh.faces, process=False) for mesh in colliders if mesh.count]
    if not parts:
        return []
    mesh = trimesh.util.concatenate(parts)
    known = {name: params[name] for name in CheckConfig.__dataclass_fields__ if name in params}
    config = CheckConfig(**{**known, "kernel_cache_dir": None})
    floor = floor_extent(mesh, tolerance=config.rest_tolerance_m)
    area = floor if floor is not None else np.asarray(mesh.bounds)[:, :2]
    heights = height_map(mesh, area, config.height_map_cell_m)
    sites = plan_probe_sites(heights, config.probe_size_m, config.probe_spacing_m, config.max_probes,
                             floor_tolerance=config.rest_tolerance_m)
    return [Probe(site.name, (site.xy[0], site.xy[1], site.surface_z + size_m / 2), "planned") for site in sites]


def load_probes(root: Path, manifest: dict[str, Any], colliders: list[Triangles]) -> Probes:
    record = (manifest.get("stages") or {}).get("check") or {}
    params = record.get("params") or {}
    size = float(params.get("probe_size_m", 0.2))
    summary = recorded_summary(manifest)
    if (root / PROBES_JSON).is_file():
        record = read_probes_record(Workspace(root))
        return Probes([Probe(p.name, p.rest_position, p.outcome) for p in record.probes], record.probe_size_m, True,
                      summary + " (shown where they came to rest)")
    planned = plan_probes(colliders, size, params)
    if not planned:
        return Probes([], size, False, summary)
    return Probes(planned, size, False,
                  summary + "; rest positions are not recorded, so the probes are shown where the check "
                  "drops them, at the height they must rest at")

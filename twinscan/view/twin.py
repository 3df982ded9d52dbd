"""Everything the viewer shows, loaded from a workspace into plain arrays (no viser here)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from twinscan.gaussians import read_ply
from twinscan.layout import COLLISION, COLLISION_CONFIDENCE, FLOOR, SFM_RECORD, SPLATS_PLY, VISUAL_GLB
from twinscan.recon.sfm.record import WorldFrame, read_sfm_record
from twinscan.view.cameras import CaptureCamera, load_cameras
from twinscan.view.meshes import ColouredPart, Triangles, collider_parts, load_confidence, load_triangles
from twinscan.view.source import workspace_root
from twinscan.view.splats import DEFAULT_MAX_SPLATS, SplatLayer, splat_layer
from twinscan.workspace import Workspace


@dataclass(frozen=True)
class Marker:
    label: str  # e.g. "marker 0 (4x4_50)"
    marker_id: int
    dictionary: str
    size_m: float
    centre_z_m: float


@dataclass(frozen=True)
class TwinView:
    root: Path
    manifest: dict[str, Any]
    splats: SplatLayer
    visual_glb: bytes | None
    colliders: Triangles | None
    collider_parts: list[ColouredPart]
    confidence_coloured: bool
    floor: Triangles | None
    cameras: list[CaptureCamera]
    marker: Marker | None
    metric: bool  # False: the capture had no scale source, lengths are in arbitrary units
    origin: str  # what the twin's x, y and yaw hang on (the sfm record's world.origin)

    @property
    def collider_meshes(self) -> list[Triangles]:
        return [mesh for mesh in (self.colliders, self.floor) if mesh is not None]

    def notices(self) -> list[str]:
        notices = []
        if (notice := self.splats.notice()) is not None:
            notices.append(notice)
        if not self.metric:
            notices.append("scale: arbitrary (no marker or --scale at capture): the grid's cells are not metres")
        if self.colliders is None:
            notices.append("no collision mesh yet: run `twinscan mesh` for colliders and the floor slab")
        return notices


def _marker(world: WorldFrame | None) -> Marker | None:
    if world is None or world.marker_id is None or world.marker_size_m is None or world.marker_dict is None:
        return None
    return Marker(f"{world.origin} ({world.marker_dict}, {world.marker_size_m:.2f} m)", world.marker_id,
                  world.marker_dict, world.marker_size_m, world.marker_centre_z_m or 0.0)


def load_twin(path: Path, max_splats: int = DEFAULT_MAX_SPLATS) -> TwinView:
    """Read the workspace (or the workspace of a twin.usda) that `path` names. Raises TwinscanError."""
    root = workspace_root(Path(path))
    ws = Workspace(root)
    manifest = ws.manifest()
    world = read_sfm_record(ws).world if ws.path(SFM_RECORD).is_file() else None  # None: no sfm yet (or imported .ply)
    splats = splat_layer(read_ply(root / SPLATS_PLY), max_splats)
    colliders = load_triangles(root / COLLISION)
    confidence = load_confidence(root / COLLISION_CONFIDENCE, colliders.count) if colliders is not None else None
    visual = root / VISUAL_GLB
    return TwinView(
        root=root, manifest=manifest, splats=splats,
        visual_glb=visual.read_bytes() if visual.is_file() else None,
        colliders=colliders,
        collider_parts=collider_parts(colliders, confidence) if colliders is not None else [],
        confidence_coloured=confidence is not None,
        floor=load_triangles(root / FLOOR),
        cameras=load_cameras(root),
        marker=_marker(world),
        metric=world is not None and world.metric,
        origin=world.origin if world is not None else "unknown",
    )


def describe(view: TwinView) -> dict[str, Any]:
    """Counts for the panel and the command's summary line."""
    return {"splats_shown": view.splats.shown, "splats_total": view.splats.total,
            "collider_faces": view.colliders.count if view.colliders is not None else 0,
            "floor_slab": view.floor is not None, "visual_mesh": view.visual_glb is not None,
            "cameras": len(view.cameras), "marker": view.marker.label if view.marker else None,
            "metric": view.metric}


def read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None

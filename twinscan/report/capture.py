"""A read-only view of a capture workspace for the report: manifest, stage states, model files."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from twinscan.layout import FRAMES_DIR, FRAMES_JSON, HELDOUT_DIR, MESH_SUMMARY, SFM_DIR
from twinscan.frames.record import FrameEntry, read_frames
from twinscan.meshing.record import read_mesh_record
from twinscan.recon.sfm.record import read_sfm_record
from twinscan.report.markup import esc, notice
from twinscan.report.plan import TopDownPlan
from twinscan.report.status import StageState, stage_states
from twinscan.workspace import Workspace



@dataclass
class Capture:
    ws: Workspace
    manifest: dict[str, Any]

    @functools.cached_property
    def states(self) -> dict[str, StageState]:
        return stage_states(self.manifest)

    @property
    def name(self) -> str:
        return self.ws.root.resolve().name

    def gate(self, stage: str, *files: str) -> str | None:
        """None when `stage` is done and its `files` exist; else a notice saying what is missing."""
        state = self.states[stage]
        if state.status == "not run":
            earlier = [s.name for s in self.states.values() if s.status in ("failed", "interrupted")]
            reason = f"the {earlier[0]} stage before it did not finish" if earlier else "not yet"
            return notice("info", f"The <b>{esc(stage)}</b> stage has not run ({esc(reason)}), so there is "
                                  "nothing to show.")
        if state.status == "interrupted":
            return notice("warn", f"The <b>{esc(stage)}</b> stage was interrupted before it finished: "
                                  "run the same capture command again to resume.")
        if state.status == "failed":
            return failure_notice(state)
        missing = [f for f in files if not self.ws.path(f).exists()]
        if missing:
            return notice("warn", f"The <b>{esc(stage)}</b> stage finished, but {esc(', '.join(missing))} "
                                  f"{'is' if len(missing) == 1 else 'are'} missing from the workspace "
                                  f"(run it again with --force).")
        return None

    def frames(self) -> list[FrameEntry]:
        return read_frames(self.ws)

    @functools.cached_property
    def model(self):
        """The aligned COLMAP model (pycolmap.Reconstruction) in the twin's world frame."""
        import pycolmap

        return pycolmap.Reconstruction(self.ws.path(SFM_DIR))

    def registered_names(self) -> set[str]:
        return {image.name for image in self.model.images.values() if image.has_pose}

    def markers(self) -> dict[int, np.ndarray]:
        """Marker corners in the world frame, found again in the frames the way the sfm stage scaled
        the model (its record keeps the anchor marker's id, not where each marker lies)."""
        from twinscan.recon.sfm.markers import detect_markers, triangulate_markers

        world = read_sfm_record(self.ws).world
        if world.marker_dict is None:  # no --marker-size
            return {}
        frames = self.ws.path(FRAMES_DIR)
        detections = detect_markers(((name, frames / name) for name in sorted(self.registered_names())),
                                    world.marker_dict)
        return triangulate_markers(detections, self.model)

    def floor_xy(self) -> tuple[tuple[float, float], tuple[float, float]] | None:
        if not self.states["mesh"].done or not self.ws.path(MESH_SUMMARY).exists():
            return None
        floor = read_mesh_record(self.ws).floor  # None: no floor found
        return floor.bounds_xy if floor is not None else None

    def plan(self) -> TopDownPlan:
        from twinscan.camera import world_from_cam_matrix

        images = sorted((image for image in self.model.images.values() if image.has_pose), key=lambda im: im.name)
        world_from_cams = np.array([world_from_cam_matrix(image) for image in images]).reshape(-1, 4, 4)
        points = list(self.model.points3D.values())
        kept = sorted(entry.name for entry in self.frames()) if self.ws.path(FRAMES_JSON).exists() else []
        order = [kept.index(image.name) for image in images if image.name in kept]  # all, or none if imported
        return TopDownPlan(
            camera_centres=world_from_cams[:, :3, 3], camera_forward=world_from_cams[:, :3, 2],
            points=np.array([p.xyz for p in points]).reshape(-1, 3),
            point_colours=np.array([p.color for p in points], dtype=np.uint8).reshape(-1, 3),
            floor_xy=self.floor_xy(), markers=self.markers(),
            metric=read_sfm_record(self.ws).world.metric,
            gaps=frozenset(i for i in range(1, len(order)) if order[i] - order[i - 1] > 1))

    def heldout_pngs(self) -> list[Path]:
        return sorted(self.ws.path(HELDOUT_DIR).glob("*.png"))


def failure_notice(state: StageState) -> str:
    what, _, fix = (state.error or "failed without a recorded reason").partition(" -- ")
    fix_html = f'<span class="fix">Fix: {esc(fix)}</span>' if fix else ""
    return notice("fail", f"<b>The {esc(state.name)} stage failed:</b> {esc(what)}{fix_html}")

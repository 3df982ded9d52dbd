"""What later stages may read of the mesh stage: OUT/mesh/mesh.json, written inside the stage's atomic
output (twinscan/records.py). The usd stage bounds the twin's floor area with it; the report draws it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from twinscan.layout import MESH_SUMMARY
from twinscan.records import read_record
from twinscan.workspace import Workspace


@dataclass(frozen=True)
class FloorRecord:
    """The floor plane the mesh stage found (meshing/floor.Floor), in the twin frame."""

    height_m: float  # the fitted plane's height at the floor's centre (the sfm stage put it near 0)
    tilt_deg: float  # between its normal and +Z
    bounds_xy: tuple[tuple[float, float], tuple[float, float]]  # (min x, min y), (max x, max y): the slab's extent
    area_m2: float  # of mesh faces classified as floor


@dataclass(frozen=True)
class MeshRecord:
    files: tuple[str, ...]  # names inside OUT/mesh/
    floor: FloorRecord | None  # None: no floor plane was found (no slab)
    figures: dict[str, Any]  # the stage's figures, for people (as in the manifest)
    warnings: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"files": list(self.files), "warnings": list(self.warnings),
                               "floor": None if self.floor is None else asdict(self.floor) | {
                                   "bounds_xy": [list(corner) for corner in self.floor.bounds_xy]}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> MeshRecord:
        floor = data["floor"]
        return cls(**(data | {"files": tuple(data["files"]), "warnings": tuple(data["warnings"]),
                              "floor": None if floor is None else FloorRecord(**(floor | {
                                  "bounds_xy": tuple(tuple(float(v) for v in corner)
                                                     for corner in floor["bounds_xy"])}))}))


def read_mesh_record(ws: Workspace) -> MeshRecord:
    """The mesh stage's record; a one-line error when the stage has not written one."""
    return read_record(ws, MESH_SUMMARY, f"twinscan mesh {ws.root}", MeshRecord.from_json)

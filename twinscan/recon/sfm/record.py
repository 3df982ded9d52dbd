"""What later stages may read of the sfm stage: OUT/sfm/world.json, written inside the stage's atomic
output, so it describes the model on disk or is absent with it (twinscan/records.py).

The manifest's figures are for people (the report, `twinscan info`); stages read this record.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass
from typing import Any

from twinscan.layout import SFM_RECORD
from twinscan.records import read_record
from twinscan.workspace import Workspace


class ScaleSource(str, enum.Enum):
    """Where the twin's metres come from."""

    MARKER = "marker"  # triangulated fiducial markers of a known side (--marker-size)
    MANUAL = "manual"  # --scale
    IMPORTED = "imported"  # the imported poses' own (transforms.json: metric when from ARKit)
    NONE = "none"  # arbitrary


@dataclass(frozen=True)
class WorldFrame:
    """How the model was put in the twin's frame (CONVENTIONS.md)."""

    scale_source: ScaleSource
    metric: bool  # True when the twin is in metres (a marker or --scale)
    origin: str  # in words, e.g. "marker 0", "camera centroid (yaw arbitrary)", "as imported"
    marker_id: int | None  # the marker the origin and +X are tied to, when one is
    marker_size_m: float | None  # the printed markers' side (--marker-size), when markers were asked for
    marker_dict: str | None  # their dictionary (--marker-dict), likewise
    marker_centre_z_m: float | None  # height of marker `marker_id`'s centre in the twin frame
    floor_found: bool  # a floor plane was found among the sparse points (z = 0 is on it)
    world_from_colmap: dict[str, Any] | None  # the similarity applied to the raw model (world_frame.Similarity)


@dataclass(frozen=True)
class SfmRecord:
    """The aligned model's world frame and its registration and accuracy."""

    world: WorldFrame
    registered: int
    total: int
    mean_reprojection_error_px: float

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["world"]["scale_source"] = self.world.scale_source.value
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SfmRecord:
        world = data["world"]
        return cls(**(data | {"world": WorldFrame(**(world | {"scale_source": ScaleSource(world["scale_source"])}))}))


def read_sfm_record(ws: Workspace) -> SfmRecord:
    """The sfm stage's record; a one-line error when the stage has not written one."""
    return read_record(ws, SFM_RECORD, f"twinscan sfm {ws.root}", SfmRecord.from_json)

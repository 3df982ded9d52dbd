"""What readers may take of the check stage: OUT/check/probes.json (`CheckReport.to_dict`, written inside
the stage's outputs), read as a typed record (twinscan/records.py). The viewer places the probes from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from twinscan.layout import PROBES_JSON
from twinscan.records import read_record
from twinscan.workspace import Workspace


@dataclass(frozen=True)
class RestedProbe:
    name: str
    rest_position: tuple[float, float, float]  # the cube's centre at the end of the physics run, twin frame
    outcome: str  # check.report's Outcome: rested / hovered / fell_through / unsettled


@dataclass(frozen=True)
class ProbesRecord:
    """The probes the check dropped on the twin's colliders and where each came to rest."""

    probe_size_m: float  # cube side
    physics_run: bool  # False: no physics engine ran, so no probe was dropped
    probes: tuple[RestedProbe, ...]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ProbesRecord:
        return cls(float(data["probe_size_m"]), bool(data["physics_run"]),
                   tuple(RestedProbe(str(p["name"]), tuple(float(v) for v in p["rest_position"]), str(p["outcome"]))
                         for p in data["probes"]))


def read_probes_record(ws: Workspace) -> ProbesRecord:
    """The check stage's probes; a one-line error when the stage has not written them (or wrote an older file)."""
    return read_record(ws, PROBES_JSON, f"twinscan check {ws.root}", ProbesRecord.from_json)

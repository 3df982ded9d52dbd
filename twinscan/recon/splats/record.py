"""What later stages may read of the splats stage: OUT/splats/splats.json, written inside the stage's
atomic output (twinscan/records.py). `twinscan render` takes the held-out frames from it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from twinscan.layout import SPLATS_RECORD
from twinscan.records import read_record
from twinscan.workspace import Workspace


@dataclass(frozen=True)
class SplatsRecord:
    """Which registered views training held out, and how many splats each PLY holds."""

    heldout_every: int  # every heldout_every-th registered view by name was held out (TrainingViews.split)
    heldout_views: tuple[str, ...]  # their image names: scored, never trained on
    splats: int  # in splats.ply (the cell)
    background_splats: int  # in background.ply (0: none, and no file)

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"heldout_views": list(self.heldout_views)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SplatsRecord:
        return cls(**(data | {"heldout_views": tuple(data["heldout_views"])}))


def read_splats_record(ws: Workspace) -> SplatsRecord:
    """The splats stage's record; a one-line error when the stage has not written one."""
    return read_record(ws, SPLATS_RECORD, f"twinscan splats {ws.root}", SplatsRecord.from_json)

"""The stage protocol, and the one function that runs a stage: lock, skip or run, record.

A stage names itself, builds its config from the user's options, fingerprints its inputs (raising a
one-line error when one it needs is missing) and runs, reporting figures, outputs and warnings to the
manifest through `StageRun`. `execute` skips it when the manifest says it finished with the same
config and inputs and its outputs still exist: that is what makes an interrupted capture resume.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from twinscan.options import CaptureOptions
from twinscan.workspace import StageRun, Workspace, tool_versions


class Stage(Protocol):
    name: str  # one of twinscan.layout.STAGES
    versions: tuple[str, ...]  # the distributions whose versions the manifest records with the stage
    required: tuple[str, ...]  # outputs later stages need: a finished stage without one (older twinscan) runs again

    def config(self, options: CaptureOptions) -> Any:
        """The stage's typed config from the user's options; raises TwinscanError on a bad one."""

    def inputs(self, ws: Workspace) -> dict[str, str]:
        """{input: fingerprint} of what the stage reads; raises TwinscanError when a needed one is missing."""

    def run(self, ws: Workspace, config: Any, run: StageRun, force: bool) -> None:
        """Do the work: write the outputs (atomically) and report them in `run`."""


@dataclass(frozen=True)
class StageResult:
    figures: dict[str, Any]
    ran: bool  # False: finished before with the same config and inputs, so skipped


def execute(stage: Stage, ws: Workspace, config: Any, force: bool = False) -> StageResult:
    """Run `stage` on the workspace under its lock, unless it is done (see the module docstring)."""
    inputs = stage.inputs(ws)  # before the lock, which makes OUT/: a missing input leaves nothing behind
    with ws.locked():
        if not force and ws.is_done(stage.name, config, inputs) and all(ws.path(p).exists() for p in stage.required):
            return StageResult(ws.stage_record(stage.name)["figures"], ran=False)
        with ws.run_stage(stage.name, config, inputs, tool_versions(*stage.versions)) as run:
            stage.run(ws, config, run, force)
        return StageResult(run.figures, ran=True)

"""What the manifest says about each stage, and the capture's verdict in one line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from twinscan.layout import STAGES


@dataclass(frozen=True)
class StageState:
    """One stage as the report shows it; `status` is done, failed, interrupted or not run."""

    name: str
    status: str
    seconds: float | None = None
    figures: dict[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    error: str | None = None
    record: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.status == "done"


def stage_states(manifest: dict[str, Any]) -> dict[str, StageState]:
    """Every stage of a capture in order. A record still 'running' when nobody holds the workspace
    (the report is written under its lock) is a run that was killed: 'interrupted'."""
    stages = manifest.get("stages", {})
    states = {}
    for name in STAGES:
        record = stages.get(name)
        if record is None:
            states[name] = StageState(name, "not run")
            continue
        status = record.get("status", "unknown")
        states[name] = StageState(
            name, "interrupted" if status == "running" else status, record.get("seconds"),
            record.get("figures") or {}, tuple(record.get("warnings") or ()), record.get("error"), record)
    return states


@dataclass(frozen=True)
class Verdict:
    level: str  # ok, warn or fail (the colour)
    headline: str
    detail: str


def capture_verdict(states: dict[str, StageState]) -> Verdict:
    """Failed beats interrupted beats incomplete beats warnings: the worst fact leads."""
    failed = [s for s in states.values() if s.status == "failed"]
    if failed:
        return Verdict("fail", f"Failed at stage '{failed[0].name}'", (failed[0].error or "").split(" -- ")[0])
    interrupted = [s.name for s in states.values() if s.status == "interrupted"]
    if interrupted:
        return Verdict("warn", f"Interrupted during stage '{interrupted[0]}'",
                       "run the same capture command again to resume")
    missing = [s.name for s in states.values() if not s.done]
    if missing:
        return Verdict("warn", "Incomplete", f"not run yet: {', '.join(missing)}")
    warnings = sum(len(s.warnings) for s in states.values())
    check = states["check"].figures
    probes = f"{check.get('probes_rested', 0)}/{check.get('probes', 0)} probes rested" if check.get("probes") else ""
    if warnings:
        return Verdict("warn", f"Twin written, with {warnings} warning{'s' * (warnings != 1)}",
                       "; ".join(filter(None, ["read the warnings below", probes])))
    return Verdict("ok", "Simulation-ready twin", "; ".join(filter(None, ["every stage passed", probes])))

"""The `check` stage of `capture`: check OUT/twin.usda and record the verdict and probe plot."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from twinscan.atomic import write_json
from twinscan.check.config import CheckConfig
from twinscan.check.physics import newton_available
from twinscan.check.plot import plot_probes
from twinscan.check.run import check_twin
from twinscan.errors import TwinscanError
from twinscan.layout import CHECK_DIR, PROBES_JSON, PROBES_PNG, TWIN
from twinscan.optional import install_hint
from twinscan.options import CaptureOptions
from twinscan.stages import execute
from twinscan.workspace import StageRun, Workspace, fingerprint



@dataclass(frozen=True)
class CheckStage:
    """Validate and (when Newton is installed) drop probes; a failed verdict fails the stage."""

    physics: bool = True  # asked for: the config's `physics` is also False when Newton is not installed
    name: str = "check"
    versions: tuple[str, ...] = ("newton", "warp-lang", "usd-core")
    required: tuple[str, ...] = ()

    def config(self, options: CaptureOptions) -> CheckConfig:
        return CheckConfig(physics=options.physics and newton_available())

    def inputs(self, ws: Workspace) -> dict[str, str]:
        twin = ws.path(TWIN)
        if not twin.exists():
            raise TwinscanError(f"{twin} is missing", f"run `twinscan usd {ws.root}` first")
        return {"twin": fingerprint(twin)}

    def run(self, ws: Workspace, config: CheckConfig, run: StageRun, force: bool) -> None:
        _check_and_record(ws.path(TWIN), ws, config, run, physics_asked=self.physics)


def run_check(ws: Workspace, physics: bool = True, force: bool = False) -> dict[str, Any]:
    """The check stage (skipped when the twin and config are unchanged); its figures."""
    stage = CheckStage(physics)
    return execute(stage, ws, stage.config(CaptureOptions(physics=physics)), force).figures


def _check_and_record(twin: Path, ws: Workspace, config: CheckConfig, run: StageRun, physics_asked: bool) -> None:
    if physics_asked and not config.physics:
        run.warnings.append(f"physics proof not run: Newton is not installed ({install_hint('newton')})")
    report = check_twin(twin, config)
    run.figures.update(report.figures())
    ws.path(CHECK_DIR).mkdir(exist_ok=True)
    write_json(ws.path(PROBES_JSON), report.to_dict())
    run.outputs.append(PROBES_JSON)
    if report.probes:
        plot_probes(report, ws.path(PROBES_PNG))
        run.outputs.append(PROBES_PNG)
    run.warnings.extend(report.errors)
    run.warnings.extend(report.warnings)  # the Asset Validator's warnings, by rule and prim
    if report.asset_validator_note.startswith("not installed"):
        run.warnings.append(f"NVIDIA Asset Validator {report.asset_validator_note}")
    if not report.verdict:
        raise TwinscanError(report.verdict_line,
                            f"the twin is not safe to simulate: see {PROBES_PNG} and `twinscan check {twin}`")

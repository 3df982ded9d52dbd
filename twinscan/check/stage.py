"""The `check` stage of `capture`: check OUT/twin.usda and record the verdict and probe plot."""

from __future__ import annotations

from typing import Any

from twinscan.atomic import write_json
from twinscan.check.config import CheckConfig
from twinscan.check.physics import newton_available
from twinscan.check.plot import plot_probes
from twinscan.check.run import check_twin
from twinscan.errors import TwinscanError
from twinscan.layout import CHECK_DIR, PROBES_JSON, PROBES_PNG, TWIN
from twinscan.workspace import Workspace, fingerprint, tool_versions



def run_check(ws: Workspace, physics: bool = True, force: bool = False) -> dict[str, Any]:
    """Validate and (when Newton is installed) drop probes; a failed verdict fails the stage."""
    twin = ws.path(TWIN)
    if not twin.exists():
        raise TwinscanError(f"{twin} is missing", f"run `twinscan usd {ws.root}` first")
    config = CheckConfig(physics=physics and newton_available())
    inputs = {"twin": fingerprint(twin)}
    if not force and ws.is_done("check", config, inputs):
        return ws.stage_record("check")["figures"]
    with ws.run_stage("check", config, inputs, tool_versions("newton", "warp-lang", "usd-core")) as run:
        if physics and not config.physics:
            run.warnings.append('physics proof not run: Newton is not installed (pip install "twinscan[physics]")')
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
    return run.figures

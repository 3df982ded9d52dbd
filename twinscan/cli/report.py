"""`twinscan report OUT`: (re)write the capture's report.html from its workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from twinscan.cli.errors import user_errors
from twinscan.progress import say
from twinscan.workspace import Workspace


@user_errors
def report(workdir: Annotated[Path, typer.Argument(help="Capture workspace folder made by `twinscan capture`.")]
           ) -> None:
    """Write OUT/report.html: one self-contained page (frames, camera path, held-out renders, mesh,
    USD summary, physics check, warnings) that opens offline in any browser.

    Example: twinscan report cell_twin
    """
    from twinscan.report import write_report

    path = write_report(Workspace(workdir))
    say(("report", "bold green"), f" -> {path}")

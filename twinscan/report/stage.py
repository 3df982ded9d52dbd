"""OUT/report.html, written whole or not at all, under the workspace lock."""

from __future__ import annotations

from pathlib import Path

from twinscan.atomic import write_bytes
from twinscan.layout import REPORT
from twinscan.report.build import build_report
from twinscan.workspace import Workspace


def write_report(ws: Workspace) -> Path:
    """Write OUT/report.html for the workspace as it stands (after a failure too); return its path."""
    html = build_report(ws)
    with ws.locked():
        write_bytes(ws.path(REPORT), html.encode("utf-8"))
    return ws.path(REPORT)

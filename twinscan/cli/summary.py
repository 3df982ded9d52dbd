"""Tables people read at the end of a run, and for `twinscan info`."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from twinscan.errors import TwinscanError
from twinscan.figures import format_figure
from twinscan.progress import console, say, styled
from twinscan.layout import STAGES
from twinscan.workspace import Workspace

_STATUS_STYLE = {"done": "green", "running": "yellow", "interrupted": "red", "failed": "red"}


def _figures_text(record: dict[str, Any], limit: int = 8) -> str:
    figures = record.get("figures") or {}
    simple = [(k, v) for k, v in figures.items() if isinstance(v, (int, float, str, bool))]
    return ", ".join(f"{k}={format_figure(v, k)}" for k, v in simple[:limit])


def print_workspace_info(ws: Workspace, only: str | None = None) -> None:
    if not ws.manifest_path.exists():
        raise TwinscanError(f"{ws.root} is not a twinscan workspace (no manifest.json)",
                            "run `twinscan capture VIDEO -o FOLDER` first")
    stages = ws.manifest()["stages"]
    # a stage recorded running while no process holds the workspace was killed mid-way
    running = "running" if ws.in_use() else "interrupted"
    table = Table(title=styled(f"twinscan workspace {ws.root}"))
    for column in ("stage", "status", "seconds", "figures"):
        table.add_column(column)
    for name in STAGES:
        if only and name != only:
            continue
        record = stages.get(name)
        if record is None:
            table.add_row(name, styled(("not run", "dim")), "", "")
            continue
        status = record.get("status", "?")
        if status == "running":
            status = running
        detail = record.get("error", "") if status == "failed" else _figures_text(record)
        if status == "interrupted":
            detail = "killed before it finished: run the same command again to resume"
        table.add_row(name, styled((status, _STATUS_STYLE.get(status, "white"))),
                      format_figure(record.get("seconds", "")), detail)
    console.print(table)
    for name, record in stages.items():
        for warning in record.get("warnings", []):
            say(("warning", "yellow"), f" ({name}): {warning}")


def print_capture_summary(ws: Workspace, timings: dict[str, float]) -> None:
    print_workspace_info(ws)
    quality = ws.manifest().get("quality")
    if quality:
        say(("quality", "bold"), f" {quality['name']} ({quality['reason']})")
    total = sum(timings.values())
    say(("done", "bold green"), f" in {total:.0f} s -> twin {ws.path('twin.usda')}, report {ws.path('report.html')}")


def print_usd_summary(usd_path) -> None:
    from twinscan.usd_export import summarize

    summary = summarize(usd_path)
    table = Table(title=styled(f"twin {usd_path}"), show_header=False)
    table.add_column("what")
    table.add_column("value")
    for key, value in summary.items():
        if key == "prims":
            table.add_row("prims", str(len(value)))
        elif isinstance(value, dict):
            table.add_row(key, ", ".join(f"{k}={format_figure(v, k)}" for k, v in value.items()))
        else:
            table.add_row(key, format_figure(value, key))
    console.print(table)

"""Workspace in, one self-contained HTML page out (nothing written): the capture at a glance."""

from __future__ import annotations

from twinscan.errors import TwinscanError
from twinscan.report.capture import Capture
from twinscan.report.markup import duration, esc, notice, page, section
from twinscan.report.overview import key_cards
from twinscan.report.sections import SECTIONS, Section
from twinscan.report.status import capture_verdict
from twinscan.workspace import Workspace


def _section_html(capture: Capture, part: Section) -> str:
    """A section that cannot be drawn (a corrupt file, a missing backend) says why; the rest still shows."""
    try:
        body = part.render(capture)
    except Exception as error:  # noqa: BLE001 -- one broken figure must not cost the whole report
        reason = error.one_line() if isinstance(error, TwinscanError) else f"{type(error).__name__}: {error}"
        body = notice("fail", f"<b>This section could not be drawn:</b> {esc(reason)}")
    return section(part.anchor, part.title, body)


def _header(capture: Capture) -> str:
    manifest, states = capture.manifest, capture.states
    verdict = capture_verdict(states)
    started = sorted(s.record["started"] for s in states.values() if s.record.get("started"))
    date = started[0].replace("T", " ")[:16] + " UTC" if started else "–"
    total = sum(s.seconds or 0.0 for s in states.values())
    video = (manifest.get("source") or {}).get("video", "unknown")
    meta = [("source video", video), ("captured", date), ("twinscan", manifest.get("twinscan_version", "?")),
            ("total stage time", duration(total)), ("workspace", str(capture.ws.root.resolve()))]
    toc = "".join(f'<a href="#{part.anchor}">{esc(part.title.split(":")[0].split(" (")[0])}</a>' for part in SECTIONS)
    return (f"<h1>{esc(capture.name)}</h1>"
            f'<div class="meta">{" · ".join(f"{esc(k)} <b>{esc(v)}</b>" for k, v in meta)}</div>'
            f'<div><span class="verdict {verdict.level}">{esc(verdict.headline)}</span>'
            f'<span class="verdict-detail">{esc(verdict.detail)}</span></div>'
            f'<nav class="toc">{toc}</nav>')


def build_report(ws: Workspace) -> str:
    """The report of `ws` as it stands: stages that have not run or failed say so in their sections."""
    if not ws.manifest_path.exists():
        raise TwinscanError(f"{ws.root} is not a twinscan workspace (no manifest.json)",
                            "run `twinscan capture VIDEO -o FOLDER` first")
    capture = Capture(ws, ws.manifest())
    body = key_cards(capture) + "".join(_section_html(capture, part) for part in SECTIONS)
    return page(f"twinscan report: {capture.name}", _header(capture), body,
                "Written by twinscan from the workspace's manifest.json and files; every image is embedded.")

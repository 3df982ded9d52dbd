"""The top of the report: key figures, warnings and errors, each stage's status and time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twinscan.report.capture import Capture, failure_notice
from twinscan.report.markup import duration, esc, fmt, notice, table


def _worst_rest(f: dict[str, Any]) -> str:
    if not f.get("physics_run"):
        return f"{fmt(f.get('validation_errors'))} validation errors; physics not run"
    return (f"{fmt(f.get('probes_rested'))}/{fmt(f.get('probes'))} probes rested "
            f"(worst {100 * (f.get('worst_rest_error_m') or 0):.2f} cm off)")


# The few figures of a finished stage that say whether it went well, as one line of text.
STAGE_SUMMARIES: dict[str, Callable[[dict[str, Any]], str]] = {
    "frames": lambda f: f"{fmt(f.get('kept'))} of {fmt(f.get('decoded'))} frames kept, "
                        f"{fmt(f.get('blurred'))} blurred",
    "sfm": lambda f: f"{fmt(f.get('registered'))}/{fmt(f.get('total'))} registered, {fmt(f.get('points3d'))} "
                     f"points, {fmt(f.get('mean_reprojection_error_px'))} px reprojection, "
                     f"scale {f.get('scale', '?')}",
    "splats": lambda f: f"{fmt(f.get('num_gaussians'))} splats, PSNR {fmt(f.get('psnr'))} dB, "
                        f"SSIM {fmt(f.get('ssim'))} ({fmt(f.get('steps'))} steps on {f.get('device', '?')})",
    "mesh": lambda f: f"{fmt(f.get('visual_faces'))} visual / {fmt(f.get('collision_faces'))} collision faces, "
                      f"floor {fmt(f.get('floor_area_m2'))} m²",
    "usd": lambda f: f"{fmt(f.get('splats'))} splats, {fmt(f.get('colliders'))} colliders, "
                     f"{fmt(f.get('validation_errors'))} validation errors",
    "check": _worst_rest,
}


def _card(key: str, value: str, sub: str, level: str = "") -> str:
    return (f'<div class="card {level}"><div class="k">{esc(key)}</div><div class="v">{esc(value)}</div>'
            f'<div class="s">{esc(sub)}</div></div>')


def key_cards(capture: Capture) -> str:
    s = capture.states

    def card(stage: str, key: str, make: Callable[[dict[str, Any]], tuple[str, str, str]]) -> str:
        state = s[stage]
        if not state.done:
            return _card(key, "–", f"{stage}: {state.status}", "fail" if state.status == "failed" else "")
        return _card(key, *make(state.figures))

    def scale(f: dict[str, Any]) -> tuple[str, str, str]:
        metric = f.get("scale") == "metric"
        return str(f.get("scale", "?")), str(f.get("scale_source", "")), "" if metric else "warn"

    def origin(f: dict[str, Any]) -> tuple[str, str, str]:
        anchored = str(f.get("origin", "")).startswith("marker")
        return str(f.get("origin", "?")), "holds the twin's x, y origin and yaw", "" if anchored else "warn"

    def physics(f: dict[str, Any]) -> tuple[str, str, str]:
        if not f.get("physics_run"):
            return "not run", "validation only", "warn"
        rested, probes = f.get("probes_rested", 0), f.get("probes", 0)
        return f"{rested}/{probes}", "probes came to rest", "" if rested == probes else "fail"

    cards = [
        card("frames", "frames kept", lambda f: (fmt(f.get("kept")), f"of {fmt(f.get('decoded'))} decoded", "")),
        card("sfm", "registered", lambda f: (f"{fmt(f.get('registered'))}/{fmt(f.get('total'))}",
                                             f"{fmt(f.get('points3d'))} sparse points",
                                             "" if f.get("registered") == f.get("total") else "warn")),
        card("sfm", "scale", scale),
        card("sfm", "origin", origin),
        card("splats", "splats", lambda f: (fmt(f.get("num_gaussians")),
                                            f"{fmt(f.get('steps'))} steps on {f.get('device', '?')}", "")),
        card("splats", "held-out PSNR", lambda f: (f"{fmt(f.get('psnr'))} dB", f"SSIM {fmt(f.get('ssim'))}", "")),
        card("mesh", "mesh faces", lambda f: (fmt(f.get("visual_faces")),
                                              f"visual; {fmt(f.get('collision_faces'))} collision", "")),
        card("check", "physics", physics),
    ]
    return f'<div class="cards">{"".join(cards)}</div>'


def problems(capture: Capture) -> str:
    """Failures first, then every warning of every stage, word for word."""
    parts = [failure_notice(state) for state in capture.states.values() if state.status == "failed"]
    warnings = [(state.name, text) for state in capture.states.values() for text in state.warnings]
    if warnings:
        items = "".join(f"<li><b>{esc(stage)}:</b> {esc(text)}</li>" for stage, text in warnings)
        count = len(warnings)
        parts.append(notice("warn", f"<b>{count} warning{'s' * (count != 1)}</b>"
                                    f'<ul class="warnings">{items}</ul>'))
    if capture.states["sfm"].figures.get("scale") == "arbitrary":
        parts.append(notice("warn", "<b>scale: arbitrary</b> — distances in this twin are in model units, "
                                    "not metres; physics on it is not to scale. Film a printed marker and "
                                    "give --marker-size, or give --scale."))
    if not parts:
        parts.append(notice("ok", "No warnings: every stage that ran finished cleanly."))
    return "".join(parts)


def stage_table(capture: Capture) -> str:
    seconds = [state.seconds or 0.0 for state in capture.states.values()]
    longest = max(seconds + [1e-9])
    rows = []
    for state in capture.states.values():
        status_class = state.status.replace(" ", "-")
        if state.done:
            detail = esc(STAGE_SUMMARIES[state.name](state.figures))
        elif state.status == "failed":
            detail = f'<span style="color:var(--fail)">{esc((state.error or "").split(" -- ")[0])}</span>'
        else:
            detail = ""
        share = 100 * (state.seconds or 0) / longest
        bar = (f'<div class="bar {status_class}" style="width:{share:.1f}%"></div>'
               if state.seconds is not None else "")
        rows.append([f"<b>{esc(state.name)}</b>", f'<span class="tag {status_class}">{esc(state.status)}</span>',
                     duration(state.seconds), bar, detail])
    rows.append(["<b>total</b>", "", f"<b>{duration(sum(seconds))}</b>", "", ""])
    return table(rows, ["stage", "status", "time", "", "result"], css_class="stages")

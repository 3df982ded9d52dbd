"""HTML building blocks for a page that works offline: escaped text, data URIs, tables, one style sheet."""

from __future__ import annotations

import base64
import html
from collections.abc import Iterable, Sequence


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def data_uri(data: bytes, mime: str) -> str:
    """The bytes inline (RFC 2397), so the page needs no file or network beside it."""
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def img(data: bytes, mime: str, alt: str, css_class: str = "") -> str:
    class_attr = f' class="{css_class}"' if css_class else ""
    return f'<img{class_attr} alt="{esc(alt)}" src="{data_uri(data, mime)}">'


def table(rows: Iterable[Sequence[str]], header: Sequence[str] = (), css_class: str = "") -> str:
    """Cells are HTML already (escape text with `esc` first)."""
    class_attr = f' class="{css_class}"' if css_class else ""
    head = "<thead><tr>" + "".join(f"<th>{cell}</th>" for cell in header) + "</tr></thead>" if header else ""
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table{class_attr}>{head}<tbody>{body}</tbody></table>"


def notice(level: str, text_html: str) -> str:
    """A coloured box: level is 'ok', 'warn', 'fail' or 'info'."""
    return f'<div class="notice {level}">{text_html}</div>'


def section(anchor: str, title: str, body_html: str, subtitle: str = "") -> str:
    sub = f'<p class="sub">{esc(subtitle)}</p>' if subtitle else ""
    return f'<section id="{anchor}"><h2>{esc(title)}</h2>{sub}{body_html}</section>'


def details(summary: str, body_html: str) -> str:
    return f"<details><summary>{esc(summary)}</summary>{body_html}</details>"


def fmt(value: object, digits: int = 4) -> str:
    """Numbers as people read them: thousands separated, floats to `digits` significant digits."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        from twinscan.figures import number  # the CLI's formatter: fixed notation, never 1.99e+04

        return number(value, digits)
    if value is None:
        return "–"
    return str(value)


def size(num_bytes: int) -> str:
    for unit, factor in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if num_bytes >= factor:
            return f"{num_bytes / factor:,.1f} {unit}"
    return f"{num_bytes} B"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


STYLE = """
:root { --ok:#1f7a3a; --ok-bg:#e6f4ea; --warn:#8a5a00; --warn-bg:#fff4d6; --fail:#b42318; --fail-bg:#fde8e7;
        --info:#35506b; --info-bg:#eef3f8; --ink:#1d232b; --muted:#5f6b7a; --line:#dde2e8; --card:#ffffff; }
* { box-sizing: border-box; }
body { margin:0; background:#f3f5f8; color:var(--ink);
       font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif; }
main { max-width:1180px; margin:0 auto; padding:24px 28px 60px; }
header.top { background:#18212c; color:#f4f6f8; padding:26px 28px 22px; }
header.top .inner { max-width:1180px; margin:0 auto; }
header.top h1 { margin:0 0 4px; font-size:26px; font-weight:650; letter-spacing:.2px; }
header.top .meta { color:#b8c2cf; font-size:13.5px; }
header.top .meta b { color:#e7ecf2; font-weight:600; }
.verdict { display:inline-block; margin:14px 0 4px; padding:7px 14px; border-radius:6px; font-weight:650;
           font-size:16px; }
.verdict.ok { background:#2f9e55; color:#fff; } .verdict.warn { background:#f0b429; color:#2b1d00; }
.verdict.fail { background:#d64545; color:#fff; }
.verdict-detail { color:#d5dce5; font-size:14px; margin-left:10px; }
.cards { display:grid; grid-template-columns:repeat(auto-fit,minmax(150px,1fr)); gap:10px; margin:18px 0 6px; }
.card { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:10px 12px; }
.card .k { font-size:12px; color:var(--muted); text-transform:uppercase; letter-spacing:.5px; }
.card .v { font-size:20px; font-weight:650; margin-top:2px; }
.card .s { font-size:12.5px; color:var(--muted); }
.card.warn { border-color:#f0b429; background:var(--warn-bg); }
.card.fail { border-color:#d64545; background:var(--fail-bg); }
section { background:var(--card); border:1px solid var(--line); border-radius:10px; padding:18px 22px 20px;
          margin:18px 0; }
section h2 { margin:0 0 2px; font-size:19px; }
p.sub { margin:0 0 12px; color:var(--muted); font-size:13.5px; }
.notice { border-radius:8px; padding:10px 14px; margin:10px 0; border:1px solid; }
.notice.ok { background:var(--ok-bg); border-color:#9fd3ae; color:var(--ok); }
.notice.warn { background:var(--warn-bg); border-color:#f0b429; color:#5c3c00; }
.notice.fail { background:var(--fail-bg); border-color:#e8a19b; color:var(--fail); }
.notice.info { background:var(--info-bg); border-color:#c4d3e3; color:var(--info); }
.notice .fix { display:block; color:var(--ink); margin-top:3px; }
ul.warnings { margin:6px 0 0; padding-left:20px; } ul.warnings li { margin:3px 0; }
.tag { display:inline-block; font-size:11.5px; font-weight:650; border-radius:4px; padding:1px 7px;
       text-transform:uppercase; letter-spacing:.4px; }
.tag.done { background:var(--ok-bg); color:var(--ok); } .tag.failed { background:var(--fail-bg); color:var(--fail); }
.tag.interrupted, .tag.running { background:var(--warn-bg); color:var(--warn); }
.tag.not-run { background:#eceff3; color:var(--muted); }
table { border-collapse:collapse; width:100%; font-size:13.5px; }
th, td { text-align:left; padding:6px 9px; border-bottom:1px solid var(--line); vertical-align:top; }
th { color:var(--muted); font-weight:600; font-size:12px; text-transform:uppercase; letter-spacing:.4px; }
table.stages td:nth-child(3), table.files td:nth-child(2) { text-align:right; white-space:nowrap;
  font-variant-numeric:tabular-nums; }
table.stages td:nth-child(4) { width:22%; vertical-align:middle; }
table.kv td:first-child { color:var(--muted); width:38%; }
.bar { height:10px; background:#4c78a8; border-radius:3px; min-width:2px; }
.bar.failed { background:#d64545; }
.strip { display:grid; grid-template-columns:repeat(auto-fill,minmax(104px,1fr)); gap:6px; }
.strip figure { margin:0; text-align:center; font-size:11px; line-height:1.3; color:var(--muted); }
.strip img { display:block; width:100%; height:auto; border-radius:3px; border:2px solid transparent; }
.strip figure.unregistered img { border-color:#d64545; opacity:.75; }
.strip figure.unregistered figcaption { color:var(--fail); }
.grid2 { display:grid; grid-template-columns:1fr 1fr; gap:14px; }
.grid2 > div { min-width:0; }
figure.panel { margin:0; } figure.plan { max-width:880px; margin:0 auto; }
figure.panel img, figure.panel svg { width:100%; height:auto; display:block; border-radius:6px;
  border:1px solid var(--line); }
figure.panel figcaption { font-size:12.5px; color:var(--muted); margin-top:4px; }
.heldout { display:grid; grid-template-columns:repeat(3,1fr); gap:6px; margin-bottom:12px; }
.heldout img { width:100%; display:block; border-radius:4px; }
.heldout.head { margin-bottom:0; font-size:12px; color:var(--muted); font-weight:600; text-transform:uppercase;
  letter-spacing:.4px; }
.heldout-title { font-size:13px; font-weight:600; margin:4px 0 3px; font-variant-numeric:tabular-nums; }
.legend { display:flex; flex-wrap:wrap; gap:16px; font-size:12.5px; color:var(--muted); margin-top:6px; }
.legend span.sw { display:inline-block; width:14px; height:10px; margin-right:5px; vertical-align:middle;
                  border-radius:2px; }
details { margin-top:10px; } summary { cursor:pointer; color:var(--info); font-size:13.5px; }
pre { background:#f6f8fa; border:1px solid var(--line); border-radius:6px; padding:10px; font-size:12px;
      overflow-x:auto; }
nav.toc { font-size:13px; margin-top:12px; } nav.toc a { color:#9ec5ff; margin-right:14px; text-decoration:none; }
footer { color:var(--muted); font-size:12px; text-align:center; margin-top:30px; }
@media (max-width: 820px) { .grid2 { grid-template-columns:1fr; } }
"""


def page(title: str, header_html: str, body_html: str, footer_html: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>"
            f"<header class=\"top\"><div class=\"inner\">{header_html}</div></header>"
            f"<main>{body_html}<footer>{footer_html}</footer></main></body></html>\n")

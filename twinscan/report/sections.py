"""The report's sections in order, each `Capture -> HTML`; a stage that did not finish gets a notice instead."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from twinscan.layout import (COLLISION, COLLISION_CONFIDENCE, FLOOR, FRAMES_JSON, HELDOUT_DIR, PLANES, PROBES_PNG,
                             SFM_DIR, STAGES, TWIN, VISUAL_COLOURS)
from twinscan.recon.sfm.markers import MIN_VIEWS
from twinscan.recon.sfm.record import read_sfm_record
from twinscan.report import figures
from twinscan.report.capture import Capture
from twinscan.report.markup import details, esc, fmt, img, notice, size, table
from twinscan.report.overview import problems, stage_table
from twinscan.report.plan import FLOOR_COLOUR, MARKER_COLOUR, PATH_COLOUR, plan_svg

MAX_THUMBNAILS = 40
THUMBNAIL_HEIGHT = 144  # shown about 70 px high: sharp on high-density screens
MAX_HELDOUT = 6
HELDOUT_PANEL_WIDTH = 480
MESH_RENDER_SIZE = (800, 500)
TRUSTED_RGB, DOUBTFUL_RGB, UNCERTAIN_RGB = np.array([64, 160, 90]), np.array([230, 170, 60]), (214, 76, 60)
COLLISION_RGB, FLOOR_RGB, PLANES_RGB = (150, 172, 196), (205, 196, 178), (150, 110, 190)


# ---- frames -----------------------------------------------------------------------------------------------------

def frames_strip(capture: Capture) -> str:
    if (gate := capture.gate("frames", FRAMES_JSON)) is not None:
        return gate
    entries = capture.frames()
    registered = capture.registered_names() if capture.states["sfm"].done and capture.ws.path(SFM_DIR).exists() else None
    shown = [entries[round(i)] for i in np.linspace(0, len(entries) - 1, min(MAX_THUMBNAILS, len(entries)))]
    tiles = []
    for entry in shown:
        unregistered = registered is not None and entry.name not in registered
        caption = f"{entry.time_s or 0.0:.1f} s" + (" · not posed" if unregistered else "")
        tiles.append(f'<figure class="{"unregistered" if unregistered else ""}">'
                     f'{img(figures.thumbnail(capture.ws.path(entry.file), THUMBNAIL_HEIGHT), "image/jpeg", entry.name)}'
                     f"<figcaption>{esc(caption)}</figcaption></figure>")
    note = f"{len(entries)} frames kept" + (f", {len(shown)} shown evenly spaced" if len(shown) < len(entries) else "")
    if registered is not None:
        lost = sum(entry.name not in registered for entry in entries)
        note += f"; {lost} could not be posed by SfM (red)" if lost else "; every one was posed by SfM"
    return f'<p class="sub">{esc(note)}. Captions: time in the video.</p><div class="strip">{"".join(tiles)}</div>'


# ---- top-down plan ----------------------------------------------------------------------------------------------

def top_down(capture: Capture) -> str:
    if (gate := capture.gate("sfm", "sfm")) is not None:
        return gate
    plan = capture.plan()
    unit = "metres" if plan.metric else "model units (no metric scale)"
    gaps = "; dashed: frames between could not be posed" if plan.gaps else ""
    legend = [f'<span><span class="sw" style="background:{PATH_COLOUR}"></span>camera path '
              f"({len(plan.camera_centres)} posed frames; ticks: viewing direction{gaps})</span>",
              '<span><span class="sw" style="background:#9aa5b1"></span>sparse points, in their colour '
              f"({fmt(len(plan.points))})</span>"]
    if plan.floor_xy is not None:
        legend.append(f'<span><span class="sw" style="border:2px dashed {FLOOR_COLOUR}"></span>'
                      "floor slab extent</span>")
    if plan.markers:
        legend.append(f'<span><span class="sw" style="background:{MARKER_COLOUR}"></span>marker</span>')
    notes = []
    sfm = capture.states["sfm"]
    if not plan.markers and read_sfm_record(capture.ws).world.marker_size_m is not None:
        seen = sfm.figures.get("marker_frames", 0)
        notes.append(notice("warn", f"No marker could be placed: it was detected in {seen} posed "
                                    f"frame{'s' * (seen != 1)}, and triangulating it needs {MIN_VIEWS}."))
    if plan.floor_xy is None:
        notes.append(notice("info", "The floor extent comes from the mesh stage, which has not finished."))
    return (f'<p class="sub">Seen from above, +x right, +y up, in {esc(unit)}; the grid is labelled in the '
            f"same unit.</p>{''.join(notes)}<figure class=\"panel plan\">{plan_svg(plan, width_px=880)}"
            f'<figcaption><div class="legend">{"".join(legend)}</div></figcaption></figure>')


# ---- held-out renders -------------------------------------------------------------------------------------------

def heldout(capture: Capture) -> str:
    if (gate := capture.gate("splats", HELDOUT_DIR)) is not None:
        return gate
    f = capture.states["splats"].figures
    pngs = capture.heldout_pngs()
    shown = [pngs[round(i)] for i in np.linspace(0, len(pngs) - 1, min(MAX_HELDOUT, len(pngs)))] if pngs else []
    head = (f'<p class="sub">Frames the splats were never trained on ({fmt(f.get("heldout_views"))} held out, '
            f'{fmt(f.get("train_views"))} trained on). Over all held-out views: <b>PSNR {fmt(f.get("psnr"))} dB, '
            f'SSIM {fmt(f.get("ssim"))}</b> (at {"×".join(map(str, f.get("train_resolution", [])))} px). '
            f"Per view below, from the 8-bit images. Error: mean absolute difference, black 0 to yellow "
            f"{figures.ERROR_FULL_SCALE:g} and above.</p>")
    rows = []
    for png in shown:
        view = figures.heldout_view(png)
        panels = "".join(
            f'<div>{img(figures.encode(figures.fit_width(image, HELDOUT_PANEL_WIDTH), quality=90), "image/jpeg", alt)}'
            "</div>" for image, alt in ((view.render, f"{view.name} render"), (view.truth, f"{view.name} photo"),
                                        (view.error, f"{view.name} error")))
        rows.append(f'<div class="heldout-title">frame {esc(view.name)} · PSNR {view.psnr:.2f} dB · '
                    f'SSIM {view.ssim:.3f}</div><div class="heldout">{panels}</div>')
    if not rows:
        return head + notice("warn", "No held-out renders were written.")
    columns = ('<div class="heldout head"><div>render (splats)</div><div>ground truth (photo)</div>'
               "<div>error</div></div>")
    return head + columns + "".join(rows)


# ---- mesh -------------------------------------------------------------------------------------------------------

def _layer(path, rgb: tuple[int, int, int] | None = None) -> figures.MeshLayer:
    import trimesh

    mesh = trimesh.load(path, process=False, force="mesh")
    colours = (np.asarray(mesh.visual.face_colors)[:, :3] if rgb is None
               else np.tile(np.array(rgb, np.uint8), (len(mesh.faces), 1)))
    return figures.MeshLayer(np.asarray(mesh.vertices), np.asarray(mesh.faces), colours)


def mesh_preview(capture: Capture) -> str:
    if (gate := capture.gate("mesh", VISUAL_COLOURS, COLLISION)) is not None:
        return gate
    width, height = MESH_RENDER_SIZE
    visual = _layer(capture.ws.path(VISUAL_COLOURS))
    collision = [_layer(capture.ws.path(COLLISION), COLLISION_RGB)]
    if capture.ws.path(FLOOR).exists():
        collision.append(_layer(capture.ws.path(FLOOR), FLOOR_RGB))
    if capture.ws.path(PLANES).exists():
        collision.append(_layer(capture.ws.path(PLANES), PLANES_RGB))
    K, world_from_cam = figures.oblique_camera(visual.vertices, width, height)
    panels = []
    for layers, caption in (([visual], "visual mesh, vertex colours"),
                            (collision, "collision mesh (blue), floor slab (sand) and planar patches closed over "
                                        "what fusion left in fragments (violet): what physics sees")):
        rgb = figures.render_layers(layers, K, world_from_cam, width, height)
        panels.append(f'<figure class="panel">{img(figures.encode(rgb, quality=90), "image/jpeg", caption)}'
                      f"<figcaption>{esc(caption)}</figcaption></figure>")
    f = capture.states["mesh"].figures
    rows = [["visual faces", fmt(f.get("visual_faces"))], ["collision faces", fmt(f.get("collision_faces"))],
            ["collision watertight", fmt(f.get("collision_watertight"))],
            ["non-manifold edges", fmt(f.get("collision_non_manifold_edges"))],
            ["floor height / tilt", f"{fmt(f.get('floor_height_m'))} m / {fmt(f.get('floor_tilt_deg'))}°"],
            ["floor from", fmt(f.get("floor_source"))],
            ["floor area seen", f"{fmt(f.get('floor_area_m2'))} m²"],
            ["floor carried on to the walls / where the photos agree",
             f"{fmt(f.get('floor_to_walls_m2'))} m² / {fmt(f.get('floor_photographed_m2'))} m²"],
            ["voxel size", f"{fmt(f.get('voxel_size_m'))} m"],
            ["floaters / components removed", f"{fmt(f.get('floating_removed'))} / {fmt(f.get('components_removed'))}"],
            ["planar patches (inferred, not fused)",
             f"{fmt(f.get('planar_patches'))}, {fmt(f.get('planar_area_m2'))} m² (textureless panels from their "
             f"outlines: {fmt(f.get('textureless_panels'))}; walls from the photos alone: {fmt(f.get('swept_walls'))}; "
             f"tops seen at a graze: {fmt(f.get('level_lids'))}; "
             f"fronts of parts from the photos: {fmt(f.get('part_fronts'))})"],
            ["reflection faces removed", fmt(f.get("ghost_faces_removed"))]]
    half = (len(rows) + 1) // 2
    tables = "".join(f'<div>{table([[esc(k), esc(v)] for k, v in part], css_class="kv")}</div>'
                     for part in (rows[:half], rows[half:]))
    return (f'<p class="sub">Both meshes from the same oblique camera (ray-cast on the CPU, shaded by surface '
            f'normal).</p><div class="grid2">{"".join(panels)}</div><div class="grid2">{tables}</div>'
            f'{collider_confidence(capture, collision[0], K, world_from_cam)}')


def collider_confidence(capture: Capture, collision: figures.MeshLayer, K: np.ndarray,
                        world_from_cam: np.ndarray) -> str:
    """Where the collider is a guess, in a picture and in words (meshing/confidence.py)."""
    from twinscan.meshing.confidence import UNCERTAIN_BELOW

    path = capture.ws.path(COLLISION_CONFIDENCE)
    summary = capture.states["mesh"].figures.get("collision_confidence")
    if not path.exists() or not summary:
        return ""
    confidence = np.load(path)
    if len(confidence) != len(collision.faces):
        return notice("warn", esc("the collider's confidence does not match its faces: rerun `twinscan mesh --force`"))
    blend = np.clip((confidence - UNCERTAIN_BELOW) / (1 - UNCERTAIN_BELOW), 0, 1)[:, None]
    colours = (DOUBTFUL_RGB * (1 - blend) + TRUSTED_RGB * blend).astype(np.uint8)
    colours[confidence < UNCERTAIN_BELOW] = UNCERTAIN_RGB
    width, height = MESH_RENDER_SIZE
    rgb = figures.render_layers([figures.MeshLayer(collision.vertices, collision.faces, colours)], K,
                                world_from_cam, width, height)
    caption = "collider confidence: green seen squarely by several frames, amber weakly, red uncertain"
    panel = (f'<figure class="panel">{img(figures.encode(rgb, quality=90), "image/jpeg", caption)}'
             f"<figcaption>{esc(caption)}</figcaption></figure>")
    return f'<div class="grid2">{panel}<div><p>{esc(confidence_in_words(summary))}</p></div></div>'


def confidence_in_words(summary: dict) -> str:
    """The collider confidence figures as a sim engineer needs them: how much to doubt, and why."""
    if not summary.get("uncertain_share"):
        return "Every part of the collider was seen squarely by several kept frames."
    reasons = [(summary.get("few_views_share", 0), "was seen by fewer than two kept frames"),
               (summary.get("grazing_share", 0), "only at grazing angles (over 70° from square-on)"),
               (summary.get("far_share", 0), "only from far away (over 1 cm a pixel)")]
    why = "; ".join(f"{share * 100:.0f} % {text}" for share, text in reasons if share >= 0.005)
    return (f"{summary['uncertain_share'] * 100:.0f} % of the collider ({summary['uncertain_m2']:.2f} m²) is "
            f"uncertain (red){': ' + why if why else ''}. The real surface may lie elsewhere there: a robot could "
            f"pass through or stop short of it. Film those parts again from closer and more squarely.")


# ---- USD --------------------------------------------------------------------------------------------------------

def usd_summary(capture: Capture) -> str:
    if (gate := capture.gate("usd", TWIN)) is not None:
        return gate
    from twinscan.usd_export import summarize

    summary = summarize(capture.ws.path(TWIN))
    keys = ("default_prim", "up_axis", "meters_per_unit", "kilograms_per_unit", "appearance", "scale_source",
            "splats", "sh_degree", "colliders", "collision_triangles", "visual_triangles", "textured",
            "camera_samples")
    rows = [[esc(key.replace("_", " ")), esc(fmt(summary.get(key)))] for key in keys]
    layers = sorted(capture.ws.root.glob("twin*"))
    files = [[esc(path.name), size(path.stat().st_size)] for path in layers]
    prims = table([[esc(path), esc(kind or "–")] for path, kind in summary["prims"].items()], ["prim", "type"])
    provenance = {**summary.get("provenance", {}), "figures": summary.get("figures", {})}
    prim_count = f"{len(summary['prims'])} prims"
    return (f'<p class="sub">{esc(TWIN)} as OpenUSD reads it (what <code>twinscan info {esc(TWIN)}</code> '
            f'prints).</p><div class="grid2"><div>{table(rows, css_class="kv")}</div><div>'
            f'{table(files, ["layer file", "size"], css_class="files")}</div></div>'
            f"{details(prim_count, prims)}"
            + details("provenance (customLayerData)", f"<pre>{esc(json.dumps(provenance, indent=2))}</pre>"))


# ---- physics check ----------------------------------------------------------------------------------------------

def physics_check(capture: Capture) -> str:
    state = capture.states["check"]
    gate = capture.gate("check")
    probes_png = capture.ws.path(PROBES_PNG)
    failed_with_plot = state.status == "failed" and probes_png.exists()
    if gate is not None and not failed_with_plot:
        return gate
    picture = (f'<figure class="panel">{img(probes_png.read_bytes(), "image/png", "probes at rest")}'
               "<figcaption>Probe boxes dropped on the colliders, at rest, over the colliders' height map "
               "(top-down).</figcaption></figure>" if probes_png.exists()
               else notice("info", "No probe plot (physics did not run)."))
    f = state.figures
    rows = [["verdict", "pass" if f.get("verdict") else "FAIL"],
            ["validation errors", fmt(f.get("validation_errors"))],
            ["NVIDIA Asset Validator", f"{fmt(f.get('asset_validator_failures'))} failures / "
                                       f"{fmt(f.get('asset_validator_warnings'))} warnings"
             if f.get("asset_validator_run") else "not run"],
            ["physics run", fmt(f.get("physics_run"))],
            ["probes dropped", fmt(f.get("probes"))], ["rested", fmt(f.get("probes_rested"))],
            ["hovered", fmt(f.get("probes_hovered"))], ["fell through", fmt(f.get("probes_fell_through"))],
            ["unsettled", fmt(f.get("probes_unsettled"))],
            ["worst rest error", f"{100 * (f.get('worst_rest_error_m') or 0):.2f} cm"],
            ["colliders / triangles (slab's included)", f"{fmt(f.get('colliders'))} / {fmt(f.get('collider_triangles'))}"]]
    figures_table = table([[esc(k), esc(v)] for k, v in rows], css_class="kv") if state.done else ""
    return (f'<p class="sub">Boxes dropped on the collision geometry in NVIDIA Newton must come to rest on it, '
            f'neither falling through nor hovering.</p>{gate or ""}'
            f'<div class="grid2"><div>{picture}</div><div>{figures_table}</div></div>')


# ---- provenance -------------------------------------------------------------------------------------------------

def provenance(capture: Capture) -> str:
    parts = []
    for name in STAGES:
        record = capture.states[name].record
        if not record:
            continue
        shown = {key: record.get(key) for key in ("started", "finished", "params", "versions", "inputs")}
        parts.append(details(f"{name}: parameters, versions, input fingerprints",
                             f"<pre>{esc(json.dumps(shown, indent=2))}</pre>"))
    return "".join(parts) or notice("info", "No stage has run.")


@dataclass(frozen=True)
class Section:
    anchor: str
    title: str
    render: Callable[[Capture], str]


SECTIONS = (
    Section("warnings", "Warnings and errors", problems),
    Section("stages", "Stages and time", stage_table),
    Section("frames", "Kept frames", frames_strip),
    Section("plan", "Camera path, sparse points, floor and marker (top-down)", top_down),
    Section("heldout", "Held-out views: splat renders beside ground truth", heldout),
    Section("mesh", "Mesh preview", mesh_preview),
    Section("usd", "USD twin", usd_summary),
    Section("check", "Physics check", physics_check),
    Section("provenance", "Provenance", provenance),
)

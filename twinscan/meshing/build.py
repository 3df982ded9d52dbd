"""The mesher's functional core: rendered views in, visual and collision meshes out (no files)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import PIL.Image
import trimesh

from twinscan import optional
from twinscan.errors import TwinscanError
from twinscan.meshing import cleanup, collision, fusion, texture
from twinscan.meshing.confidence import face_confidence
from twinscan.meshing.config import MeshConfig
from twinscan.meshing.floor import (Floor, detect_floor, flatten_floor, floor_faces, floor_from_points, floor_grid,
                                    floor_slab, outside_footprint, to_walls, with_walkway, within_points)
from twinscan.meshing.floor_edges import photographed_floor
from twinscan.meshing.planes import complete_planes
from twinscan.meshing.raycast import mesh_depths
from twinscan.meshing.sweep import grey_images
from twinscan.meshing.views import DepthViews


@dataclass
class MeshResult:
    visual: trimesh.Trimesh  # vertex-coloured surface; its floor a flat grid at z = 0 over the slab's extent
    textured: trimesh.Trimesh | None  # the same surface with UVs and the baked atlas (None: no xatlas)
    collision: trimesh.Trimesh  # decimated structure without the floor
    floor: Floor | None  # None when no floor plane was found near z = 0
    floor_slab: trimesh.Trimesh | None  # box collider with its top at z = 0 over the captured floor, on to the walls
    convex_parts: list[trimesh.Trimesh] = field(default_factory=list)
    collision_confidence: np.ndarray | None = None  # (F,) per collision face, see meshing/confidence.py
    figures: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    planes: trimesh.Trimesh | None = None  # planar collider patches the collision mesh lacks (meshing/planes.py)


def _no_progress(n: float = 1, status: str | None = None) -> None:
    pass


def progress_steps(cfg: MeshConfig) -> int:
    """Steps `build_meshes` reports: fusion, cleanup, floor, collision, visual (+ convex parts)."""
    return 6 if cfg.convex else 5


FLOATING_GAP_M = 0.05  # a part further than this from the floor and from every part that rests is floating
FLOOR_FACE_SHARE = 10  # the visual floor grid gets 1 / this of the visual face budget: it is flat


def build_meshes(views: DepthViews, cfg: MeshConfig, advance: Callable[..., None] = _no_progress,
                 sfm_points: np.ndarray | None = None, sfm_floor: bool = False) -> MeshResult:
    """Fuse the views (TSDF), clean the surface, find the floor, then make the collision meshes (whose
    walls bounding the capture the floor is extended to) and the visual mesh.

    `sfm_points` (twin frame), when given, bound the floor: it reaches as far as the points on it.
    With `sfm_floor` (the SfM stage found the floor) they are the floor where the surface shows too
    little of it (`floor_from_points`).
    """
    started = time.time()
    seconds: dict[str, float] = {}
    figures: dict[str, Any] = {"views": len(views)}
    warnings: list[str] = []

    def timed(name: str, status: str, step_started: float) -> None:
        seconds[name] = time.time() - step_started
        advance(1, status=status)

    step = time.time()
    surface, voxel, depth = _fuse(views, cfg, figures)
    timed("fusion", f"fused {len(views)} views, voxel {voxel * 100:.1f} cm", step)

    step = time.time()
    # planes are sought on all that was captured: walls stand past the floor's footprint, in fragments
    surface, captured = _clean(surface, views, depth, voxel, cfg, figures)
    timed("cleanup", f"removed {figures['components_removed']} small components", step)

    step = time.time()
    floor, source = detect_floor(surface, cfg.floor_band, cfg.floor_max_tilt_deg, distance=1.5 * voxel), "surface"
    if floor is None and sfm_floor and sfm_points is not None:
        floor, source = floor_from_points(surface, sfm_points, cfg.floor_band, 1.5 * voxel), "sfm points"
    figures["floor_source"] = source if floor is not None else None
    is_floor = np.zeros(len(surface.faces), bool)
    if floor is None:
        warnings.append(f"no floor plane found within {cfg.floor_band} m of z = 0: no floor collider")
    else:
        if sfm_points is not None:
            floor = within_points(floor, sfm_points, cfg.floor_band)
        walked = with_walkway(floor, views.world_from_cam, cfg.walkway_margin)
        beyond_points = walked.bounds_xy != floor.bounds_xy  # sides the walk, not the floor's points, set
        floor = walked
        surface, below = cleanup.drop_below(surface, floor.height - cfg.floor_band)
        # what the fusion put beyond the captured floor is background the splats explained, not structure
        beyond = outside_footprint(surface, floor, 2 * voxel)
        surface = cleanup.keep_faces(surface, ~beyond)
        figures.update(faces_below_floor=below, faces_beyond_floor=int(beyond.sum()))
        is_floor = floor_faces(surface, floor.height, 1.5 * voxel)
        surface = flatten_floor(surface, is_floor)
        figures.update(floor_height_m=round(floor.height, 4), floor_tilt_deg=round(floor.tilt_deg, 2),
                       floor_area_m2=round(floor.area, 3))
        if abs(floor.height) > 2 * voxel:
            warnings.append(f"the floor lies {floor.height * 100:.1f} cm from z = 0: the world alignment is off")
    timed("floor", "floor found" if floor else "no floor", step)

    # without a floor nothing can be said to rest on it, so nothing is called floating
    floater_tolerance = min(3 * voxel, FLOATING_GAP_M) if floor is not None else None
    max_floater = cfg.max_floater_voxels * voxel ** 2
    step = time.time()
    # The slab is the floor's collider. Floor the fusion left a little off z = 0 is no structure: as
    # colliders such pieces are thin holed sheets, and past the slab they claim floor nobody saw whole.
    # Nothing collides in or under the slab: faces wholly below one voxel over z = 0 go too (flattened
    # floor facing down, crumbs at floor height).
    floor_like = is_floor | floor_faces(surface, 0.0, 3 * voxel) if floor is not None else is_floor
    structure = cleanup.keep_faces(surface, ~floor_like)
    if floor is not None:
        structure, _ = cleanup.drop_below(structure, voxel)
    min_area = cfg.min_component_voxels * voxel ** 2
    structure, _ = cleanup.keep_large_components(structure, min_area)
    collider = collision.make_manifold(collision.decimate(structure, cfg.collision_faces))
    collider, _ = cleanup.keep_large_components(collider, min_area)  # crumbs the decimation split off
    collider, _ = _drop_floating(collider, floater_tolerance, max_floater, sfm_points)
    planes = None
    if floor is not None and cfg.planes.enabled:  # planes are upright or level: the twin must be
        planar = complete_planes(captured, sfm_points, views, collider, voxel, cfg.planes)
        collider, _ = cleanup.keep_large_components(cleanup.keep_faces(collider, ~planar.ghosts), min_area)
        planes = planar.mesh if len(planar.mesh.faces) else None
        figures.update(planar.figures)
        # the floor runs on to the walls bounding the capture: the visual floor and the slab alike
        extended = to_walls(floor, planar.walls)
        figures.update(floor_to_walls_m2=round(_rectangle_area(extended) - _rectangle_area(floor), 3))
        floor = extended
    if floor is not None and cfg.floor_photos and beyond_points.any():
        step_photos = time.time()
        carried = _photographed(floor, beyond_points, collider, planes, views, cfg.floor_slab_thickness)
        figures.update(floor_photographed_m2=round(_rectangle_area(carried) - _rectangle_area(floor), 3))
        floor = carried
        seconds["floor_photos"] = time.time() - step_photos
    trust = face_confidence(collider, views, tolerance=2 * voxel)
    figures.update(collision_faces=len(collider.faces), collision_watertight=bool(collider.is_watertight),
                   collision_non_manifold_edges=collision.non_manifold_edges(collider),
                   collision_confidence=trust.summary(collider.area_faces))
    timed("collision", f"collision mesh {len(collider.faces)} faces", step)

    slab = floor_slab(floor, cfg.floor_slab_thickness) if floor else None

    step = time.time()
    visual, floating_removed = _visual_surface(surface, is_floor, floor, cfg, floater_tolerance, max_floater,
                                               sfm_points)
    # Colour comes from the views that see each part of the final mesh (its own depth decides),
    # so the floor past the fused patch takes the pictures' colours too.
    seen_by = replace(views, depth=mesh_depths(visual, views.K, views.world_from_cam, views.size[1], views.size[0]),
                      alpha=np.ones_like(views.alpha))
    visual.visual.vertex_colors = _vertex_colours(visual, surface, seen_by, tolerance=voxel)
    textured = None
    if cfg.texture_size and optional.available("xatlas"):
        textured = _textured(visual, seen_by, cfg.texture_size, tolerance=voxel)
    elif cfg.texture_size:
        warnings.append(f"xatlas is not installed: the visual mesh has vertex colours only ({optional.install_hint('xatlas')})")
    figures.update(visual_faces=len(visual.faces), floating_removed=floating_removed,
                   texture_size=cfg.texture_size if textured else 0)
    timed("visual", f"visual mesh {len(visual.faces)} faces", step)

    parts: list[trimesh.Trimesh] = []
    if cfg.convex and optional.available("coacd"):
        convex = collision.convex_decomposition(collider, cfg.convex_threshold, cfg.convex_max_parts)
        parts = convex.parts
        figures.update(convex_parts=len(parts))
        seconds["convex"] = convex.seconds
    elif cfg.convex:
        warnings.append(f"coacd is not installed: no convex decomposition ({optional.install_hint('coacd')})")
    if cfg.convex:
        advance(1, status=f"{len(parts)} convex parts")

    seconds["total"] = time.time() - started
    figures["seconds"] = {name: round(value, 2) for name, value in seconds.items()}
    return MeshResult(visual=visual, textured=textured, collision=collider, floor=floor, floor_slab=slab,
                      convex_parts=parts, collision_confidence=trust.confidence.astype(np.float32),
                      figures=figures, warnings=warnings, planes=planes)


def _fuse(views: DepthViews, cfg: MeshConfig, figures: dict[str, Any]) -> tuple[trimesh.Trimesh, float, np.ndarray]:
    """(raw TSDF surface, voxel size, cleaned depth maps)."""
    lower, upper = fusion.captured_extent(views, cfg.min_alpha)
    depth = fusion.clean_depth(views, cfg.min_alpha, cfg.edge_jump)
    voxel = cfg.voxel_size(float(np.max(upper - lower)), fusion.pixel_footprint(views, depth))
    if cfg.min_agreeing_views:
        depth, kept = fusion.consistent_depth(views, depth, cfg.min_agreeing_views, cfg.agreement_tolerance,
                                              cfg.agreement_beyond)
        figures.update(depth_pixels_agreeing=round(kept, 4))
    raw = fusion.fuse_tsdf(views, depth, voxel, cfg.trunc_voxels, _max_depth(depth), cfg.min_weight)
    figures.update(voxel_size_m=round(voxel, 5), raw_faces=len(raw.faces))
    if len(raw.faces) == 0:
        raise TwinscanError("TSDF fusion produced no surface",
                            "check that the views overlap and that the depth renders are in metres")
    return raw, voxel, depth


def _photographed(floor: Floor, open_sides: np.ndarray, collider: trimesh.Trimesh, planes: trimesh.Trimesh | None,
                  views: DepthViews, slab_thickness: float) -> Floor:
    """The floor carried on past its `open_sides` where the photos agree on it (meshing/floor_edges.py):
    past the walk's margin, behind the walk, the floor is seen only from across the cell. What stands on
    it and the slab itself hide it from the views."""
    standing = [collider] if planes is None else [collider, planes]
    held = trimesh.util.concatenate([*standing, floor_slab(floor, slab_thickness)])
    known = mesh_depths(held, views.K, views.world_from_cam, views.size[1], views.size[0])
    return photographed_floor(floor, views, grey_images(views), known, open_sides)


def _rectangle_area(floor: Floor) -> float:
    """Square metres of the floor's rectangle (the slab's top; `floor.area` is that of its fused faces)."""
    return float(np.prod(floor.bounds_xy[1] - floor.bounds_xy[0]))


def _max_depth(depth: np.ndarray) -> float:
    return float(depth[depth > 0].max()) * 1.01


def _clean(raw: trimesh.Trimesh, views: DepthViews, depth: np.ndarray, voxel: float, cfg: MeshConfig,
           figures: dict[str, Any]) -> tuple[trimesh.Trimesh, trimesh.Trimesh]:
    """Crop to the captured region, drop small components, close small holes. (The surface, and the
    captured surface before its small components went.)"""
    captured, outside_faces = cleanup.crop_to_captured(raw, views, cfg.min_views, _max_depth(depth))
    large, components_removed = cleanup.keep_large_components(captured, cfg.min_component_voxels * voxel ** 2,
                                                              floor_band=1.5 * voxel)
    surface, hole_faces = cleanup.fill_small_holes(large, cfg.hole_perimeter)
    figures.update(faces_outside_capture=outside_faces,
                   components_removed=components_removed, hole_faces_added=hole_faces)
    return surface, captured


def _visual_surface(surface: trimesh.Trimesh, is_floor: np.ndarray, floor: Floor | None, cfg: MeshConfig,
                    floater_tolerance: float | None, max_floater: float,
                    sfm_points: np.ndarray | None) -> tuple[trimesh.Trimesh, int]:
    """The decimated surface with its fused floor replaced by a flat grid over the slab's extent:
    the floor a sim shows is the floor it collides with. (Floating pieces removed: how many.)"""
    if floor is None:
        return _drop_floating(collision.decimate(surface, cfg.visual_faces), floater_tolerance, max_floater,
                              sfm_points)
    grid = floor_grid(floor, cfg.visual_faces // FLOOR_FACE_SHARE)
    structure = collision.decimate(cleanup.keep_faces(surface, ~is_floor), cfg.visual_faces - len(grid.faces))
    structure, removed = _drop_floating(structure, floater_tolerance, max_floater, sfm_points)
    return trimesh.util.concatenate([structure, grid]), removed


def _vertex_colours(visual: trimesh.Trimesh, surface: trimesh.Trimesh, seen_by: DepthViews,
                    tolerance: float) -> np.ndarray:
    """(V, 4) uint8: projected from the views that see a vertex; else the fused surface's nearest
    colour, or for the floor nobody saw (under the walkway, under machines) the seen floor's median."""
    colours = texture.transfer_vertex_colours(visual, surface)
    projected, seen = texture.project_colours(visual.vertices, visual.vertex_normals, seen_by, tolerance)
    colours[seen, :3] = np.clip(projected[seen], 0, 255).astype(np.uint8)
    on_floor = np.abs(visual.vertices[:, 2]) < 1e-9
    if (on_floor & seen).any():
        colours[on_floor & ~seen] = np.median(colours[on_floor & seen], axis=0).astype(np.uint8)
    return colours


def _drop_floating(mesh: trimesh.Trimesh, tolerance: float | None, max_area: float,
                   sfm_points: np.ndarray | None) -> tuple[trimesh.Trimesh, int]:
    return (mesh, 0) if tolerance is None else cleanup.drop_floating(mesh, tolerance, max_area, sfm_points)


def _textured(visual: trimesh.Trimesh, views: DepthViews, size: int, tolerance: float) -> trimesh.Trimesh:
    """`visual` re-indexed along UV seams, carrying the atlas baked from the views."""
    vertex_map, faces, uvs = texture.uv_atlas(visual, size)
    vertices = np.asarray(visual.vertices)[vertex_map]
    colours = np.asarray(visual.visual.vertex_colors)[vertex_map]
    atlas = texture.bake_texture(vertices, faces, uvs, views, size, tolerance, fallback=colours)
    material = trimesh.visual.material.PBRMaterial(baseColorTexture=PIL.Image.fromarray(atlas),
                                                   metallicFactor=0.0, roughnessFactor=1.0)
    return trimesh.Trimesh(vertices, faces, visual=trimesh.visual.TextureVisuals(uv=uvs, material=material),
                           process=False)

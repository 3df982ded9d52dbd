"""Large planar structure closed where the photos show it: walls, cabinet and machine fronts, table tops.

Fusion leaves such surfaces in fragments where depth is sparse (walls seen only from across the cell,
textureless panels) and the collider's fragment rules then rightly drop the fragments; a glossy front
fuses as a ghost behind it, from the depth of its reflections. A robot still needs the wall and the
front. So upright and level planes are voted for among the fused surface and the rendered depth (by
orientation and offset, and upright ones also by position alone, as far walls fuse too bumpy for their
normals), placed by the renders or the SfM points, bounded by what the views saw on them (the hull of
the support's fragments, down to the floor), carved back where views looked through them and where they
run inside what the collider holds, kept only where the views in front render them, and added as flat
collider patches where the collider does not already hold them. A wall bounding the cell (every camera
in front of it, nothing captured behind it) that the collider lacks is judged by the views that are not
blocked by what stands before it, and takes all of its scattered, fragmentary support as one surface;
such walls are also sought as the outermost bands of what was captured (the position vote's clutter
eats their sparse fragments), stand on the floor and end where the views stop rendering them.
A level plane's footprint the views render in place too seldom as a whole is judged hull by hull, once
every wall is placed: a machine's top seen at a graze shares its plane with taller machines' middles.
Collider faces that the views only ever rendered through an accepted patch (a reflection's ghost) are
removed. Textureless panels, which leave no fragment at all, are found by their outlines in the photos
(meshing/panels.py), and walls bounding the capture that left no point at all where the photos agree
on them (meshing/sweep.py), which also places the walls found by their biased layers; the fronts of
the collider's parts where the photos agree on them in front of it (meshing/fronts.py: a glossy cabinet
carved by its reflections). Only upright and level planes: a plant's large planes are walls, fronts and
tops, and the twin frame is level (the floor is z = 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import trimesh
from scipy import ndimage
from scipy.spatial import ConvexHull, cKDTree

from twinscan.meshing.floor import refine_plane
from twinscan.meshing.fronts import part_fronts
from twinscan.meshing.patches import Frame, cells_mesh, ghosts_behind, raster_index
from twinscan.meshing.panels import Panel, panel_mesh, textureless_panels
from twinscan.meshing.raycast import cast_along, mesh_depths, raycasting_scene
from twinscan.meshing.sweep import CELL as SWEEP_CELL
from twinscan.meshing.sweep import SweptWall, grey_images, swept_wall, turned, views_seeing
from twinscan.meshing.views import DepthViews


@dataclass(frozen=True)
class PlaneConfig:
    enabled: bool = True
    max_tilt_deg: float = 10.0  # upright planes within this of vertical, level ones within this of level
    distance_voxels: float = 1.5  # support lies within this many voxels of its plane
    normal_agreement_deg: float = 30.0  # a surface point supports a plane only facing the same way
    cell: float = 0.05  # metres: the patches' raster on the plane
    bridge: float = 0.60  # metres: fragments of one surface this close are one patch (their hull)
    min_area: float = 0.30  # m2: smaller supported footprints add no patch
    min_support: float = 0.25  # a plane needs fused or rendered samples over this share of min_area
    min_views: int = 3  # a patch needs support rendered by this many views
    carve_seen_share: float = 0.15  # cells fewer than this share of the views render (the rest look through) go
    min_seen_share: float = 0.3  # ... and rendered where it lies by this share of the views rendering it or past it
    min_seen_share_missing: float = 0.18  # ... or this share, where the collider holds at most missing_share of it
    missing_share: float = 0.05
    covered: float = 0.03  # metres: patch cells this close to the collider are already there
    max_covered_share: float = 0.8  # patches the collider already holds to this share add nothing
    min_height: float = 0.10  # metres: level planes lower than this are the floor's business
    max_planes: int = 40
    panels: bool = True  # also close textureless panels, found by their outlines in the photos (meshing/panels.py)
    sweep: bool = True  # also seek the walls bounding the capture where the photos agree (meshing/sweep.py)
    fronts: bool = True  # also place the fronts of the collider's parts where the photos agree (meshing/fronts.py)


MIN_PINNING_POINTS = 10  # SfM points that place a plane voted for by position
# a wall stands at least as high as this share of its SfM points: they thin out towards a far wall's top
# (default seed 3's low wall, 1.2 m high: 432 points, their 95th percentile at 0.94 m, the 99th at 1.17 m)
PINNED_TOP = 0.99
BAND_WIDTHS = 4  # a plane voted for by position takes the points this many bins either side
DEPTH_SHARE = 0.02  # renders count as showing a point within this share of its depth (or the tolerance)
NORMAL_NEIGHBOURS = 16  # samples (one per voxel) a point's normal is fitted to
RENDER_STRIDE = 4  # every this-th pixel of the renders, each way, refits the planes
MIN_CELLS_SEEN = 4  # a view supports a patch when it renders at least this many of its cells
OUTER_STEPS = 4  # the outermost band is sought in steps of this share of its width
OUTER_PAST_SHARE = 0.05  # ... with at most this share of its count captured past it
OUTER_MAX_WALLS = 8
LAYER_TURN_DEG = 10.0  # degrees: walls and patches turned less than this from each other face the same way
LAYER_DEPTH = 0.10  # metres: a footprint this near a patch facing its way is that surface's second layer
TOP_SHARE = 0.5  # a wall's top rows rendered less than this share as often as the rows below are floaters
TOP_ROWS = 4  # ... the rows below: this many; and any rendered by fewer than TOP_NONE views per cell
TOP_NONE = 0.25
WALL_YAW_DEG = 3.0  # a wall's plan line is sought this far either side of the vote's direction ...
WALL_YAW_STEP_DEG = 0.1  # ... in these steps
# views that must render a wall bounding the capture: its whole band is one surface, judged by these views
# alone. The hard cells' and the sample's walls are rendered by 9-62 views; a 0.5 m fragment of a low wall
# that 4 views rendered, across the cell, took a plan yaw 8 degrees off (hard seed 3, 2026-12-04)
MIN_WALL_VIEWS = 6
# metres: a wall bounding the capture is at least this long. Its band is a layer 0.4 m thick, and a shorter
# fragment in it fixes no direction: hard seed 1's low wall, reconstructed only at its end (0.5 m, 0.36 m
# deep), came out turned 20 degrees, 0.95 m long; the hard cells' and the sample's walls are 1.85-5.4 m
MIN_WALL_LENGTH = 1.5
SWEEP_MARGIN = 1.5  # metres: a swept wall is sought this far past the walk's ends along it
# SfM points within SWEEP_PINNING_REACH of a swept wall's patch: its features triangulated there too. The
# bundled sample's capture swept two walls 1.1 m high past the ends of the cell, where nothing stands
# (F@5 0.945 -> 0.889): 0 SfM points within 20 cm of either;
# the true far walls of hard seeds 1, 3, 4 held 13 to 591 within 10 cm (2026-12-05). Only points more than
# SWEEP_PINNING_CLEARANCE above the floor count: the rectangle reaches down to z = 0, and default seed 3's
# false wall over open floor, 22 cm inside the floor's edge, was pinned by 811 of the floor's own points along
# its foot (SfM at 960 px); 1 of its 818 lay more than 10 cm up (2026-12-07)
SWEEP_PINNING, SWEEP_PINNING_REACH, SWEEP_PINNING_CLEARANCE = 5, 0.10, 0.10
WALL_STRAY_SHARE = 0.01  # of a wall's support points, this share past either end may be strays
BEHIND_DEPTH = 0.30  # metres: captured points this far behind a plane stand beyond it ...
BEHIND_SHARE = 0.02  # ... and a plane with them behind more than this share of its cells bounds nothing


LID_CLEARANCE = 0.05  # metres: the collider this far above a level patch's cell stands over it ...
MAX_LID_COVERED = 0.35  # ... and over a lid's cells it stands over at most this share of them
LOWER_TOP_DEPTH = 0.30  # metres: a level face the collider holds this far under a lid's cell is a lower top's
INSIDE_DEPTH = 0.05  # metres: patch cells this far behind the collider's nearest surface are inside it ...
INSIDE_REACH = 0.50  # ... when that surface is this near (further off, the nearest face says little)
HULL_TOLERANCE = 1e-9  # cells: a centre this far outside a hull's facet lies on it (rounding)


@dataclass(frozen=True)
class Plane:
    normal: np.ndarray  # (3,) unit, facing the views that saw it
    centre: np.ndarray  # (3,) a point on it
    support: int  # points within reach and facing the same way (0: a textureless panel, found by its edges)
    views: int  # views whose renders show the support
    area: float  # m2 of patch added (after carving and what the collider already held)


@dataclass
class PlanarPatches:
    mesh: trimesh.Trimesh  # flat patches facing the views, empty when none were added
    ghosts: np.ndarray  # (F,) collider faces only ever rendered through a patch: a reflection's depth
    planes: list[Plane] = field(default_factory=list)
    walls: list[np.ndarray] = field(default_factory=list)  # plan points (N, 2) of each bounding wall's patch
    figures: dict[str, Any] = field(default_factory=dict)


def complete_planes(surface: trimesh.Trimesh, sfm_points: np.ndarray | None, views: DepthViews,
                    collider: trimesh.Trimesh, voxel: float, cfg: PlaneConfig) -> PlanarPatches:
    """Patches for the planar structure `collider` misses, found on the cleaned fused `surface`
    (before anything was cut as background) and the SfM points (twin frame, z = 0 the floor)."""
    distance = cfg.distance_voxels * voxel
    band = BAND_WIDTHS * 2 * distance  # the reach of a wall voted for by position, or placed by its SfM points
    rendered, rendered_normals = _rendered_points(views, RENDER_STRIDE)
    # the fused surface and what the views rendered, one sample per cell: the renders keep a glossy
    # front that fusion lost to its reflections, the fusion a wall that few renders show whole
    points, normals = _one_per_voxel(np.concatenate([surface.triangles_center, rendered]),
                                     np.concatenate([surface.face_normals, rendered_normals]), cfg.cell)
    above = points[:, 2] > cfg.min_height / 2
    points, normals = points[above], _smoothed(points[above], normals[above])
    rendered = rendered[rendered[:, 2] > cfg.min_height / 2]
    sfm = np.zeros((0, 3)) if sfm_points is None else sfm_points[sfm_points[:, 2] > cfg.min_height / 2]
    min_support = cfg.min_support * cfg.min_area / cfg.cell ** 2
    candidates = _find_planes(points, normals, distance, min_support, cfg)
    cameras = views.world_from_cam[:, :3, 3]
    # a wall stands above the floor's fringe (what the fusion leaves at the floor's edge)
    outermost = _outermost_walls(points[points[:, 2] >= cfg.min_height], cameras, band,
                                 min_support, cfg.bridge)
    candidates += outermost
    candidates += _upright_by_position(points, sfm, cameras, distance, min_support, cfg)
    grey = grey_images(views)  # the photos the sweeps compare
    known = _known_depth(views, collider) if cfg.sweep and outermost else None
    swept = [_placed(wall, sfm, band) for wall in _swept_walls(views, grey, known, outermost)] \
        if known is not None else []
    parts, planes, walls = [], [], []
    # the walls placed so far: a point on one wall supports no other (its swept walls, then those accepted)
    placed = [_WallLine.of(wall.normal, wall.support[:, :2]) for wall in swept]
    ghosts = np.zeros(len(collider.faces), bool)
    depth = np.where(views.valid(0.5), views.depth, 0.0)

    def add(cells: np.ndarray, frame: Frame, covered: float, normal: np.ndarray, centre: np.ndarray, support: int,
            seen_by: int) -> bool:
        """Adds a plane's patch unless the collider, with the patches before it, holds `covered` of its cells
        (max_covered_share or more); either way the collider's faces views saw only through it go as ghosts."""
        ghosts[:] |= ghosts_behind(collider, cells, frame, cfg.cell, views, depth, distance)
        patch = cells_mesh(cells, frame, cfg.cell) if covered < cfg.max_covered_share else trimesh.Trimesh()
        if not len(patch.faces):
            return False
        parts.append(patch)
        planes.append(Plane(normal, centre, support, seen_by, float(patch.area)))
        return True

    levels = []  # level footprints the views judge as a whole too seldom rendered: judged hull by hull last
    for normal, centre, support in candidates:
        if support < min_support:  # a position vote's band may hold too few points near where it settles
            continue
        normal, centre = _refit(rendered, normal, centre, distance, cfg.normal_agreement_deg)
        if normal[2] > 0.5 and centre[2] < cfg.min_height:
            continue  # the floor's business
        wall = None
        if abs(normal[2]) <= 0.5:
            mine, mine_sfm = (~_on_crossing_walls(pts, normal, placed, band) for pts in (points, sfm))
            wall = _bounding_wall(points[mine], sfm[mine_sfm], cameras, normal, centre, band, cfg)
        wall = _where_photos_agree(wall, swept, cfg.cell)
        if wall is not None:
            cells, seen_by, _, unblocked = _judged(wall.cells, wall.frame, views, depth, distance, cfg,
                                                   keep_below=wall.pinned_top)
            cells = _outside(collider, cells, wall.frame, cfg, own_layer=BEHIND_DEPTH)
            if _second_layer(parts, planes, cells, wall.frame, cfg.cell, BEHIND_DEPTH):
                continue
            covered = _held_share(collider, parts, cells, wall.frame, cfg)
            # nothing stands behind it: what most views show in front of it (the machines before the wall)
            # says nothing against it; only views that looked past it do. And the collider may hold some of
            # it: fusion keeps the fragments of a far wall the most views agree on (hard seed 2's south wall:
            # 13 %; left to the footprint's rules, which judge it by all the views, it was lost)
            if not (cells.any(axis=1).sum() * cfg.cell >= MIN_WALL_LENGTH and seen_by >= MIN_WALL_VIEWS
                    and unblocked >= cfg.min_seen_share and covered < cfg.max_covered_share):
                wall = None
            else:
                normal, centre, frame = wall.frame.normal, wall.centre, wall.frame
        if wall is None:
            cells, frame = _footprint(points, normals, sfm, normal, centre, distance, cfg)
            if cells is None:
                continue
            judged, seen_by, share, _ = _judged(cells, frame, views, depth, distance, cfg)
            if frame.normal[2] > 0.5 and share < cfg.min_seen_share_missing:
                levels.append((normal, centre, support, cells, frame))
                continue
            cells = _outside(collider, judged, frame, cfg)
            if not cells.any() or seen_by < cfg.min_views or share < cfg.min_seen_share_missing \
                    or _second_layer(parts, planes, cells, frame, cfg.cell, LAYER_DEPTH):
                continue
            covered = _held_share(collider, parts, cells, frame, cfg)
            # where the collider holds none of it (a wall seen only from across the cell, behind machines),
            # less of the views must show it: most of them look at what stands in front
            if share < (cfg.min_seen_share if covered > cfg.missing_share else cfg.min_seen_share_missing):
                continue
        if add(cells, frame, covered, normal, centre, support, seen_by) and wall is not None:
            walls.append(np.asarray(parts[-1].vertices)[:, :2])
            placed.append(_WallLine.of(normal, walls[-1]))
    swept_added = 0
    for wall in swept:
        added = _swept_patch(wall, views, known, points, sfm, collider, parts, planes, cfg)
        if added is not None:
            parts.append(added[0])
            planes.append(added[1])
            walls.append(np.asarray(added[0].vertices)[:, :2])
            swept_added += 1
    found_lids = 0
    for normal, centre, support, cells, frame in levels:
        cells, seen_by = _lids(cells, frame, views, depth, distance, collider, walls, band, cfg)
        if not cells.any() or _second_layer(parts, planes, cells, frame, cfg.cell, LAYER_DEPTH):
            continue
        found_lids += add(cells, frame, _held_share(collider, parts, cells, frame, cfg), normal, centre, support, seen_by)
    found_panels = textureless_panels(views, depth, trimesh.util.concatenate([collider, *parts])) if cfg.panels else []
    for panel in found_panels:
        patch = panel_mesh([panel])
        parts.append(patch)
        planes.append(Plane(*_panel_plane(panel, cameras), support=0, views=panel.views, area=float(patch.area)))
    found_fronts = 0
    if cfg.fronts:
        held = trimesh.util.concatenate([collider, *parts])
        held_depth = _known_depth(views, held)
        for front in part_fronts(views, grey, held_depth, collider):
            patch = cells_mesh(front.cells, front.frame, SWEEP_CELL)
            if not len(patch.faces):
                continue
            ghosts |= ghosts_behind(collider, front.cells, front.frame, SWEEP_CELL, views, depth, distance)
            centre = patch.vertices.mean(axis=0)
            seen = views_seeing(views, held_depth, patch.vertices, MIN_CELLS_SEEN)
            parts.append(patch)
            planes.append(Plane(front.frame.normal, centre, front.agreed, seen, float(patch.area)))
            found_fronts += 1
    mesh = trimesh.util.concatenate(parts) if parts else trimesh.Trimesh()
    mesh.merge_vertices()  # runs of cells share corners: one point each (NVIDIA's WeldChecker)
    figures = {"planes_found": len(candidates), "planar_patches": len(planes),
               "planar_area_m2": round(sum(p.area for p in planes), 3), "planar_faces": len(mesh.faces),
               "textureless_panels": len(found_panels), "swept_walls": swept_added, "level_lids": found_lids,
               "part_fronts": found_fronts,
               "ghost_faces_removed": int(ghosts.sum())}
    return PlanarPatches(mesh, ghosts, planes, walls=walls, figures=figures)


def _swept_walls(views: DepthViews, grey: np.ndarray, known: np.ndarray,
                 outermost: list[tuple[np.ndarray, np.ndarray, int]]) -> list[SweptWall]:
    """The walls beyond the walk where the photos (`grey`) agree (meshing/sweep.py), swept in the four
    directions square to the fullest wall found bounding the capture (a cell's walls meet square), each
    turned onto its own yaw; `known`: the collider's depth in every view (what hides a wall from it), inf
    where none."""
    fullest = max(outermost, key=lambda wall: wall[2])[0]
    cameras = views.world_from_cam[:, :3, 3]
    found = []
    for quarter in range(4):
        normal = turned(fullest, quarter * np.pi / 2)
        along = cameras @ np.cross([0.0, 0.0, 1.0], normal)
        wall = swept_wall(views, grey, known, normal,
                          np.arange(along.min() - SWEEP_MARGIN, along.max() + SWEEP_MARGIN, SWEEP_CELL))
        if wall is not None:
            found.append(wall)
    return found


def _where_photos_agree(wall: _Wall | None, swept: list[SweptWall], cell: float) -> _Wall | None:
    """The wall turned and moved onto the swept wall facing its way within BEHIND_DEPTH of it, if any
    (`_placed`), and run along itself as far as the photos agree on it (`_run_along`). Placed by its points,
    a wall seen only from across the cell lies where its fused layer does, biased towards the views (hard
    seed 4's low wall: 7.4 cm in front of its face; where the photos agree, 1.8 cm); and its points' yaw is
    looser than the photos' (default seed 3's low wall: its 478 SfM points' line 0.2 degrees off, 1.6-3.3 cm
    in front of its face over its 5 m; its sweep square to the cell, 0.5 cm in front from end to end)."""
    if wall is None:
        return None
    facing = np.cos(np.radians(LAYER_TURN_DEG))
    for other in swept:
        shift = other.level - wall.centre @ other.normal
        if other.normal @ wall.frame.normal >= facing and abs(shift) <= BEHIND_DEPTH:
            frame = _turned_onto(wall.frame, wall.centre, other.normal)
            moved = shift * other.normal
            wall = replace(wall, frame=replace(frame, origin=frame.origin + moved), centre=wall.centre + moved)
            return _run_along(wall, other.support, cell)
    return wall


def _turned_onto(frame: Frame, pivot: np.ndarray, normal: np.ndarray) -> Frame:
    """The upright plane's raster turned about the vertical through `pivot` until it faces `normal` (level)."""
    yaw = np.arctan2(np.cross(frame.normal, normal)[2], frame.normal @ normal)
    c, s = np.cos(yaw), np.sin(yaw)
    rotation = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    return Frame(origin=pivot + rotation @ (frame.origin - pivot), u=rotation @ frame.u, v=rotation @ frame.v,
                 normal=np.asarray(normal, float))


def _run_along(wall: _Wall, support: np.ndarray, cell: float) -> _Wall:
    """The wall's rectangle carried along itself (at its height) over the columns the swept wall's
    `support` spans (its WALL_STRAY_SHARE quantiles). The points place a wall seen from across the cell
    where they reach, the photos wherever they agree on it between the machines: hard seed 6's east wall,
    5 m long, ran 3.45 m by its points and 4.95 m by its sweep; the rest of its rectangle the views judge
    as before (carved where they looked through, trimmed where they stop rendering it)."""
    columns = (support - wall.frame.origin) @ wall.frame.u / cell
    low, high = np.floor(np.quantile(columns, [WALL_STRAY_SHARE, 1 - WALL_STRAY_SHARE])).astype(np.int64)
    first, count = min(int(low), 0), wall.cells.shape[0]
    cells = np.zeros((max(int(high) + 1, count) - first, wall.cells.shape[1]), bool)
    cells[low - first:high + 1 - first] = wall.cells.any(axis=0)
    cells[-first:count - first] |= wall.cells
    return replace(wall, cells=cells, frame=replace(wall.frame, origin=wall.frame.origin + first * cell * wall.frame.u))


def _placed(wall: SweptWall, sfm: np.ndarray, band: float) -> SweptWall:
    """The swept wall, moved to the median of the SfM points within `band` of it (MIN_PINNING_POINTS or
    more) where its sweep lies flat about its level: a low wall's photos agree only along its top edge, as
    much at every offset within its thickness. Hard seed 3's low wall: its layer's points 8.0 cm behind its
    face, the flat sweep 4.1 cm, the median of its 15 SfM points, on that edge, 0.5 cm; hard seed 6's,
    swept alone (no wall found by its points): the sweep 5.0 cm in front of its face, its 13 SfM points
    0.8 cm."""
    if wall.peaked:
        return wall
    pinning = _near_plane(sfm, wall.normal, wall.level * wall.normal, band)
    if len(pinning) < MIN_PINNING_POINTS:
        return wall
    level = float(np.median(pinning @ wall.normal))
    return replace(wall, level=level, support=wall.support + (level - wall.level) * wall.normal)


def _known_depth(views: DepthViews, collider: trimesh.Trimesh) -> np.ndarray:
    """(N, H, W) the collider's depth in every view, inf where it has none."""
    if not len(collider.faces):
        return np.full(views.depth.shape, np.inf)
    h, w = views.size
    return mesh_depths(collider, views.K, views.world_from_cam, w, h)


def _swept_patch(wall: SweptWall, views: DepthViews, known: np.ndarray, points: np.ndarray, sfm: np.ndarray,
                 collider: trimesh.Trimesh, parts: list[trimesh.Trimesh], planes: list[Plane],
                 cfg: PlaneConfig) -> tuple[trimesh.Trimesh, Plane] | None:
    """A swept wall's patch and plane, by the bounding walls' rules, or None: the rectangle its support
    spans, down to the floor; nothing captured (`points`, `sfm`) behind it, SWEEP_PINNING SfM points on
    it, seen by MIN_WALL_VIEWS views, as long as MIN_WALL_LENGTH, and neither closed already (the same
    wall's patch from the points) nor held by the collider. Its support is not cut to its longest run: the
    photos agree on the swept plane alone, so its gaps are the machines before it, not an open corner (hard
    seed 1's east wall: 1.2 m agreed on, 1.75 m hidden, 2.1 m agreed on; 3 stray cells past its ends of
    2,060)."""
    # the rectangle reaches its support's highest cell: the cells the photos agree on by chance lie at any
    # height (hard seed 3's low wall, 1.2 m high, came out 2.1 m high), the wall's own below it
    support = wall.support[wall.support[:, 2] <= np.quantile(wall.support[:, 2], 1 - WALL_STRAY_SHARE)]
    centre = support.mean(axis=0)
    centre += (wall.level - centre @ wall.normal) * wall.normal
    cells, frame = _footprint(np.zeros((0, 3)), np.zeros((0, 3)), support, wall.normal, centre, SWEEP_CELL, cfg,
                              bounding=True)
    if cells is None or not _nothing_behind(np.concatenate([points, sfm]), views.world_from_cam[:, :3, 3], cells,
                                            frame, cfg.cell):
        return None
    if _pinning_points(sfm, cells, frame, centre, cfg.cell) < SWEEP_PINNING:
        return None
    cells = _outside(collider, cells, frame, cfg, own_layer=BEHIND_DEPTH)
    if not cells.any() or _second_layer(parts, planes, cells, frame, cfg.cell, BEHIND_DEPTH):
        return None
    seen = views_seeing(views, known, support, MIN_CELLS_SEEN)
    if cells.any(axis=1).sum() * cfg.cell < MIN_WALL_LENGTH or seen < MIN_WALL_VIEWS \
            or _held_share(collider, parts, cells, frame, cfg) >= cfg.max_covered_share:
        return None
    patch = cells_mesh(cells, frame, cfg.cell)
    if not len(patch.faces):
        return None
    return patch, Plane(frame.normal, centre, len(support), seen, float(patch.area))


def _pinning_points(sfm: np.ndarray, cells: np.ndarray, frame: Frame, centre: np.ndarray, cell: float) -> int:
    """SfM points on a swept wall's rectangle (within SWEEP_PINNING_REACH of its plane) above the floor's."""
    on = _near_plane(sfm[sfm[:, 2] > SWEEP_PINNING_CLEARANCE], frame.normal, centre, SWEEP_PINNING_REACH)
    return int(raster_index(on, cells.shape, frame, cell)[2].sum())


def _held_share(collider: trimesh.Trimesh, parts: list[trimesh.Trimesh], cells: np.ndarray, frame: Frame,
                cfg: PlaneConfig) -> float:
    """Share of the patch's cells the collider, with the patches added before it, already holds (a
    plane found twice adds once)."""
    held = trimesh.util.concatenate([collider, *parts]) if parts else collider
    kept = cells.ravel()
    if not len(held.faces) or not kept.any():
        return 0.0
    return _covered_share(held, _cell_centres(cells, frame, cfg.cell)[kept], cfg.covered)


def _trimmed_top(cells: np.ndarray, seen: np.ndarray, keep_rows: int = 0) -> np.ndarray:
    """An upright patch's cells (raster rows bottom up; `seen`, one per cell of the raster: how many views render
    it where it lies) less its top rows, above its first `keep_rows`, that the views render less than
    TOP_SHARE as often as the best of the TOP_ROWS rows below them, or next to never (when its best row is
    rendered by at least one view per cell, on average: a wall seen in scraps says nothing of its top). The
    hull of its support reaches up to the floaters above its top (5-27 cm on the hard cells' walls, 15 cm on
    the sample's low wall), and nothing behind a wall carves them (the views render the machines before it, or
    nothing). Against the rows just below, not the best row: how often a wall is rendered may fall off
    gradually with height (the sample's low wall: 13 views per cell at its foot, 3 at its top; the best-row
    rule cut it to 0.46 m), and that is no top."""
    rows = np.flatnonzero(cells.any(axis=0))  # frame.v points up: the last rows are the top
    if not len(rows):
        return cells
    per_cell = np.where(cells, seen.reshape(cells.shape), 0)[:, rows].sum(axis=0) / cells[:, rows].sum(axis=0)
    trimmed = cells.copy()
    trimmed[:, max(rows[_top_row(per_cell)] + 1, keep_rows):] = False
    return trimmed


def _top_row(rendered: np.ndarray) -> int:
    """The top row kept of a patch whose rows, bottom up, the views render `rendered` times per cell."""
    top = len(rendered) - 1
    if rendered.max() < 1.0:
        return top
    while top >= TOP_ROWS and (rendered[top] < TOP_SHARE * rendered[top - TOP_ROWS:top].max()
                               or rendered[top] < TOP_NONE):
        top -= 1
    return top


def _second_layer(parts: list[trimesh.Trimesh], planes: list[Plane], cells: np.ndarray, frame: Frame,
                  cell: float, depth: float) -> bool:
    """Whether most of the patch's cells lie within `depth` of a patch added before, facing the same way:
    one surface found twice. Seen only from across the cell, a wall renders and fuses as a layer 20-40 cm
    thick, and the position vote may find its back as a plane of its own (BEHIND_DEPTH); a machine's
    front fuses a few centimetres thick, and the support's planes may find it twice (hard seed 7: 4.4 cm
    apart; seed 1: 64 % of the second's cells within 5 cm of the first), the second hull bridging on
    across the machine beside it (LAYER_DEPTH)."""
    facing = np.cos(np.radians(LAYER_TURN_DEG))
    same = [part for part, plane in zip(parts, planes) if plane.normal @ frame.normal >= facing]
    kept = cells.ravel()
    if not same or not kept.any():
        return False
    return _covered_share(trimesh.util.concatenate(same), _cell_centres(cells, frame, cell)[kept], depth) > 0.5


def _outside(collider: trimesh.Trimesh, cells: np.ndarray, frame: Frame, cfg: PlaneConfig,
             own_layer: float = 0.0) -> np.ndarray:
    """The patch's cells less those more than INSIDE_DEPTH behind the collider's surface nearest them
    (within INSIDE_REACH): inside a machine the collider already holds. The hull of one surface's
    fragments may bridge through a neighbour standing at an angle (on the sample, a machine front's patch
    ran 10 cm deep through the turned press beside it). The fused surface faces the views that saw it
    (98 % of the sample's collider faces are seen from their front), so behind it is solid. Faces behind
    the patch's plane turned away from its views are the back of the solid whose front the patch is, not
    a machine it runs into: fusion closes a thin wall behind its face, and where the front was lost its
    back alone would cut the patch (default seed 3's low wall, 12 cm thick: 173 cells, four holes 0.3-0.55
    m wide). Faces within `own_layer` of the plane, either side, are the surface's own layer: seen from
    across the cell, a wall bounding the capture fuses as a layer 20-40 cm thick, its faces turned every
    way (default seed 3's low wall: the faces nearest the cells it cut lay 7 cm behind to 13 cm before it,
    turned 30-110 degrees from its normal; they cut holes 0.35 and 0.6 m wide, through which held-out
    views saw nothing, and no rule on their normals kept those cells)."""
    kept = cells.ravel()
    if not len(collider.faces) or not kept.any():
        return cells
    before = (collider.triangles_center - frame.origin) @ frame.normal
    own_back = (before < 0) & (collider.face_normals @ frame.normal < 0)
    own_layer_faces = np.abs(before) < own_layer
    holding = np.flatnonzero(~(own_back | own_layer_faces))  # the faces a cell may lie behind
    if not len(holding):
        return cells
    scene = raycasting_scene(collider.vertices, collider.faces[holding])
    centres = _cell_centres(cells, frame, cfg.cell)[kept]
    nearest = scene.compute_closest_points(centres.astype(np.float32))
    offset = centres - nearest["points"].numpy()
    normals = collider.face_normals[holding[nearest["primitive_ids"].numpy()]]
    behind = (offset * normals).sum(axis=1) < -INSIDE_DEPTH
    inside = np.zeros(cells.size, bool)
    inside[np.flatnonzero(kept)] = behind & (np.linalg.norm(offset, axis=1) <= INSIDE_REACH)
    return _large_parts(cells & ~inside.reshape(cells.shape), cfg.min_area / cfg.cell ** 2)


def _judged(cells: np.ndarray, frame: Frame, views: DepthViews, depth: np.ndarray, distance: float,
            cfg: PlaneConfig, keep_below: float = 0.0,
            votes: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, int, float, float]:
    """What the views' renders say of a footprint: (its cells carved back where views looked through, and an
    upright one's top trimmed where they stop rendering it (`_trimmed_top`), never below `keep_below` metres;
    the views that render it, the share of the views rendering at it that render it where it lies, and that
    share among the views not blocked by something nearer). `votes`: the raster's `_votes`, when cast already
    (every hull of a footprint is judged on the one vote)."""
    on, through, behind = votes if votes is not None else \
        _votes(_cell_centres(cells, frame, cfg.cell), frame.normal, views, depth, 2 * distance)
    seen = on.sum(axis=0)
    # carved where views looked through (a reflection's depth shows in some views only: kept)
    looked_through = (through >= 2) & (seen < cfg.carve_seen_share * (seen + through))
    cells = _large_parts(_carve(cells, looked_through.reshape(cells.shape)), cfg.min_area / cfg.cell ** 2)
    kept = cells.ravel()
    seen_by = int((on[:, kept].sum(axis=1) >= MIN_CELLS_SEEN).sum())
    # a surface the renders put behind what most views show in front is a reflection's ghost ...
    share = seen[kept].sum() / max(int((seen + through + behind)[kept].sum()), 1)
    # ... unless nothing stands behind it (a wall bounding the cell)
    unblocked = seen[kept].sum() / max(int((seen + through)[kept].sum()), 1)
    if abs(frame.normal[2]) <= 0.5:
        keep_rows = int((_row_heights(cells.shape[1], frame.origin, frame.v, cfg.cell) <= keep_below).sum())
        cells = _trimmed_top(cells, seen, keep_rows)
    return cells, seen_by, float(share), float(unblocked)


def _lids(cells: np.ndarray, frame: Frame, views: DepthViews, depth: np.ndarray, distance: float,
          collider: trimesh.Trimesh, walls: list[np.ndarray], band: float, cfg: PlaneConfig) -> tuple[np.ndarray, int]:
    """The hulls of a level footprint, each judged alone, that are lids: rendered where they lie by
    min_seen_share_missing of the views rendering at them, outside the collider and off the lower tops it
    holds (`_below_no_lower_top`), with the collider over at most MAX_LID_COVERED of their cells, and no wall
    bounding the capture within `band` of them (`walls`: their patches' plan points). Machines' tops at one
    height are one plane and its footprint many hulls; a top seen at a graze from cameras a little above it
    is rendered in place by few views, and with the rest of its plane it falls short (hard seed 4's press
    top, 1.30 m high, cameras at 1.45-1.55 m: rendered in place by 24.8 % of the views rendering at it, with
    its plane's three other hulls 15.9 %; the collider held 35 % of it). The other hulls that the views
    render as often are no tops: the shelving's middle, the collider over 55-57 % of their cells (the tops':
    1-11 %), or a far wall's fused layer (the collider over 25-48 %), which touches the wall (0.01-0.09 m
    from its patch; the tops 2.3 m and more). (The cells kept, and the most views rendering one hull.)"""
    labels, count = ndimage.label(cells, structure=np.ones((3, 3)))
    votes = _votes(_cell_centres(cells, frame, cfg.cell), frame.normal, views, depth, 2 * distance)
    hulls = [_judged(labels == hull, frame, views, depth, distance, cfg, votes=votes) for hull in range(1, count + 1)]
    rendered = np.zeros_like(cells)
    for judged, seen_by, share, _ in hulls:
        if seen_by >= cfg.min_views and share >= cfg.min_seen_share_missing:
            rendered |= judged
    if not rendered.any():
        return rendered, 0
    scene = raycasting_scene(collider.vertices, collider.faces)
    rendered = _below_no_lower_top(_outside(collider, rendered, frame, cfg), frame, collider, scene, cfg)
    near_walls = cKDTree(np.concatenate(walls)[:, :2]) if walls else None
    kept, seen_most = np.zeros_like(cells), 0
    for hull, (_, seen_by, _, _) in enumerate(hulls, start=1):
        lid = rendered & (labels == hull)
        if not lid.any():
            continue
        centres = _cell_centres(lid, frame, cfg.cell)[lid.ravel()]
        covered = np.isfinite(cast_along(scene, centres + LID_CLEARANCE * frame.normal, frame.normal)[0]).mean()
        if covered > MAX_LID_COVERED or (near_walls is not None and near_walls.query(centres[:, :2])[0].min() <= band):
            continue
        kept |= lid
        seen_most = max(seen_most, seen_by)
    return kept, seen_most


def _below_no_lower_top(cells: np.ndarray, frame: Frame, collider: trimesh.Trimesh, scene: Any,
                        cfg: PlaneConfig) -> np.ndarray:
    """A lid's cells less those over a level face the collider holds LID_CLEARANCE to LOWER_TOP_DEPTH below
    (facing up within normal_agreement_deg): that lower top's, which the lid's plane runs over (hard seed 4's
    crates side by side, tops at 0.46 and 0.38 m: the plane of both, 0.49 m, ran 11 cm over the lower, whose
    top the collider held 88 %)."""
    kept = cells.ravel()
    if not kept.any():
        return cells
    centres = _cell_centres(cells, frame, cfg.cell)[kept]
    depth, face = cast_along(scene, centres, -frame.normal)
    hit = np.isfinite(depth)
    level = np.zeros(len(depth), bool)
    level[hit] = collider.face_normals[face[hit]] @ frame.normal >= np.cos(np.radians(cfg.normal_agreement_deg))
    lower = level & (depth > LID_CLEARANCE) & (depth <= LOWER_TOP_DEPTH)
    out = np.zeros(cells.size, bool)
    out[np.flatnonzero(kept)] = lower
    return _large_parts(cells & ~out.reshape(cells.shape), cfg.min_area / cfg.cell ** 2)


def _panel_plane(panel: Panel, cameras: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(normal facing the mean camera, centre) of a panel's quad."""
    (ax, ay), (bx, by) = panel.ends
    normal = np.array([ay - by, bx - ax, 0.0]) / np.hypot(bx - ax, by - ay)
    centre = np.array([(ax + bx) / 2, (ay + by) / 2, panel.top / 2])
    return (normal if (cameras.mean(axis=0) - centre) @ normal >= 0 else -normal), centre


@dataclass(frozen=True)
class _Wall:
    cells: np.ndarray
    frame: Frame  # its normal level
    centre: np.ndarray  # the middle of its support
    pinned_top: float  # metres: the wall stands at least this high (its SfM points reach it; 0 without them)


@dataclass(frozen=True)
class _WallLine:
    """A placed wall's line in plan: its level normal's offset, and how far it runs along itself."""

    level: np.ndarray  # (2,) unit plan normal
    offset: float  # metres: plan points p on the wall have p . level = offset
    ends: tuple[float, float]  # metres along (-level[1], level[0]): where it starts and ends

    @staticmethod
    def of(normal: np.ndarray, plan: np.ndarray) -> "_WallLine":
        """The line of the wall facing `normal` through its plan points (its support, or its patch's
        corners): their median offset, their WALL_STRAY_SHARE quantiles along it."""
        level = normal[:2] / np.linalg.norm(normal[:2])
        along = plan @ np.array([-level[1], level[0]])
        low, high = np.quantile(along, [WALL_STRAY_SHARE, 1 - WALL_STRAY_SHARE])
        return _WallLine(level, float(np.median(plan @ level)), (float(low), float(high)))


def _on_crossing_walls(points: np.ndarray, normal: np.ndarray, placed: list[_WallLine], band: float) -> np.ndarray:
    """Whether each point lies within `band` of a placed wall turned more than LAYER_TURN_DEG from `normal`
    (within its run, and `band` past its ends). Where two walls meet, a band on a slant across the corner
    holds both walls' ends, and a wall voted for by position there bridged them: hard seed 6's low wall's
    top edge (0.6 m of it) and the east wall's foot, 3.4 m apart, made a 4.1 m wall across the corner,
    35-62 cm from anything, from 48 points (the true walls: 281-735 a metre). A point is one wall's."""
    claimed = np.zeros(len(points), bool)
    level = normal[:2] / np.linalg.norm(normal[:2])
    for line in placed:
        if abs(line.level @ level) >= np.cos(np.radians(LAYER_TURN_DEG)):
            continue  # the same wall (a layer of it), or one parallel to it
        along = points[:, :2] @ np.array([-line.level[1], line.level[0]])
        claimed |= (np.abs(points[:, :2] @ line.level - line.offset) <= band) \
            & (along >= line.ends[0] - band) & (along <= line.ends[1] + band)
    return claimed


def _bounding_wall(points: np.ndarray, sfm: np.ndarray, cameras: np.ndarray, normal: np.ndarray,
                   centre: np.ndarray, band: float, cfg: PlaneConfig) -> _Wall | None:
    """The upright plane as a wall bounding what was captured, or None when it bounds nothing
    (`_nothing_behind`). Seen only from across the cell, such a wall renders and fuses as a layer as
    thick as `band`, its normals scattered, and only in fragments, where the views saw it between the
    machines: all the points in the band (fused, rendered and SfM: `points`, `sfm`) are its support,
    placed by `_wall_line`, and its fragments are one surface (the rectangle they span, carved later where
    views looked through an opening)."""
    level = np.array([normal[0], normal[1], 0.0]) / np.linalg.norm(normal[:2])
    level, centre = _wall_line(points, sfm, level, centre, band)
    if centre is None:
        return None
    everything = np.concatenate([points, sfm])
    cells, frame = _footprint(np.zeros((0, 3)), np.zeros((0, 3)), everything, level, centre, band, cfg,
                              bounding=True)
    if cells is None or not _nothing_behind(everything, cameras, cells, frame, cfg.cell):
        return None
    return _Wall(cells, frame, centre, _pinned_top(sfm, frame.normal, centre, band))


def _pinned_top(sfm: np.ndarray, level: np.ndarray, centre: np.ndarray, band: float) -> float:
    """How high a wall's SfM points reach (the PINNED_TOP quantile of those within `band / 4` of it), 0 with
    fewer than MIN_PINNING_POINTS. Seen from across the cell past machines as tall as the camera, a wall's
    upper part is seen by few views and its splats there render transparent, so the renders stop well
    below its top; its features still triangulate there (hard seed 5's east wall: renders to 1.2 m, SfM
    points to 1.9 m of 2 m)."""
    on = _near_plane(sfm, level, centre, band / 4)
    return float(np.quantile(on[:, 2], PINNED_TOP)) if len(on) >= MIN_PINNING_POINTS else 0.0


def _wall_line(points: np.ndarray, sfm: np.ndarray, level: np.ndarray, centre: np.ndarray,
               band: float) -> tuple[np.ndarray, np.ndarray | None]:
    """A wall's level plane (normal, and a point on it; None without support) from the points within
    `band` of the vote's plane. Its yaw (one degree is 9 cm over a 5 m wall): the line through the SfM
    points on it where there are enough (triangulated features scatter least), else the yaw within
    WALL_YAW_DEG whose half-band holds the most of the points (a least-squares fit to a thick layer cut
    on a slant takes the cut's slant). Its offset: the median of the layer about that line."""
    near = np.abs((points - centre) @ level) <= band
    if near.sum() < 3:
        return level, None
    pinned = _near_plane(sfm, level, centre, band)
    if len(pinned) >= MIN_PINNING_POINTS:
        for reach in (band, band / 2, band / 4):  # each fit nearer the last: SfM floaters lean on it less
            inliers = _near_plane(pinned, level, centre, reach)
            if len(inliers) < MIN_PINNING_POINTS:
                break
            along = np.linalg.svd(inliers[:, :2] - inliers[:, :2].mean(axis=0), full_matrices=False)[2][0]
            fitted = np.array([-along[1], along[0], 0.0])
            level = fitted if fitted @ level >= 0 else -fitted
            centre = inliers.mean(axis=0)  # the next, nearer fit about this line, not the vote's
    else:
        level = _densest_yaw(points[near], level, centre, band / 2)
    for _ in range(3):  # the median of the whole layer, centred on it
        offsets = (points - centre) @ level
        layer = np.abs(offsets) <= band
        if layer.sum() < 3:
            return level, None
        middle = points[layer].mean(axis=0)
        centre = middle + (np.median(offsets[layer]) - (middle - centre) @ level) * level
    return level, centre


def _near_plane(points: np.ndarray, normal: np.ndarray, centre: np.ndarray, reach: float) -> np.ndarray:
    """The points within `reach` of the plane through `centre` with unit `normal`."""
    return points[np.abs((points - centre) @ normal) <= reach]


def _densest_yaw(points: np.ndarray, level: np.ndarray, centre: np.ndarray, width: float) -> np.ndarray:
    """The level normal within WALL_YAW_DEG of `level` whose `width`-wide band holds the most points
    (the middle of the yaws that tie: a thin wall fits the band over a range of them)."""
    yaws = np.radians(np.arange(-WALL_YAW_DEG, WALL_YAW_DEG + 1e-9, WALL_YAW_STEP_DEG))
    counts = []
    for yaw in yaws:
        offsets = np.sort((points - centre) @ turned(level, yaw))
        counts.append(int((np.searchsorted(offsets, offsets + width, side="right") - np.arange(len(offsets))).max()))
    return turned(level, float(yaws[np.asarray(counts) == max(counts)].mean()))


def _nothing_behind(points: np.ndarray, cameras: np.ndarray, cells: np.ndarray, frame: Frame, cell: float) -> bool:
    """Whether the plane bounds what was captured there: every camera stands in front of it (whoever
    filmed walked on its near side), and at most BEHIND_SHARE of its cells have captured points more
    than BEHIND_DEPTH behind them."""
    if ((cameras - frame.origin) @ frame.normal <= 0).any():
        return False
    far = points[(points - frame.origin) @ frame.normal < -BEHIND_DEPTH]
    i, j, inside = raster_index(far, cells.shape, frame, cell)
    behind = np.zeros_like(cells)
    behind[i[inside], j[inside]] = True
    return (behind & cells).sum() <= BEHIND_SHARE * cells.sum()


def _rendered_points(views: DepthViews, stride: int) -> tuple[np.ndarray, np.ndarray]:
    """What the views rendered, every `stride`-th pixel each way: world points and unit normals (from
    the neighbouring pixels' points, facing the camera); pixels without a full neighbourhood are left out."""
    h, w = views.size
    v, u = np.mgrid[0:h - stride:stride, 0:w - stride:stride]
    points, normals = [], []
    valid = views.valid(0.5)
    for n in range(len(views)):
        rays = np.stack([u + 0.5, v + 0.5, np.ones_like(u)], -1) @ np.linalg.inv(views.K[n]).T
        world = {}
        for dv, du in ((0, 0), (0, stride), (stride, 0)):
            z = np.where(valid[n, v + dv, u + du], views.depth[n, v + dv, u + du], np.nan)
            shifted = np.stack([u + du + 0.5, v + dv + 0.5, np.ones_like(u)], -1) @ np.linalg.inv(views.K[n]).T
            world[dv, du] = ((shifted * z[..., None]) @ views.world_from_cam[n, :3, :3].T
                             + views.world_from_cam[n, :3, 3])
        normal = np.cross(world[0, stride] - world[0, 0], world[stride, 0] - world[0, 0])
        length = np.linalg.norm(normal, axis=-1)
        good = np.isfinite(length) & (length > 0)
        normal = normal[good] / length[good, None]
        facing = (rays[good] @ views.world_from_cam[n, :3, :3].T * normal).sum(axis=1)
        normals.append(np.where(facing[:, None] > 0, -normal, normal))
        points.append(world[0, 0][good])
    return np.concatenate(points), np.concatenate(normals)


def _refit(points: np.ndarray, normal: np.ndarray, centre: np.ndarray, distance: float,
           max_turn_deg: float) -> tuple[np.ndarray, np.ndarray]:
    """The plane refit to the rendered depth near it: what the views saw lies on the surface, while
    the fused surface blends in what a few views saw behind it (a glossy front's reflections). A refit
    that turns the plane further than `max_turn_deg` found another surface (a wall's foot: the floor)."""
    near = np.abs((points - centre) @ normal) <= distance
    if near.sum() < 50:
        return normal, centre
    refit, point = refine_plane(points[near], np.append(normal, -normal @ centre), distance)
    refit = refit if refit @ normal > 0 else -refit
    return (refit, point) if refit @ normal >= np.cos(np.radians(max_turn_deg)) else (normal, centre)


def _covered_share(collider: trimesh.Trimesh, points: np.ndarray, distance: float) -> float:
    from twinscan.meshing.metrics import surface_distance

    return float((surface_distance(collider, points) <= distance).mean())


def _one_per_voxel(points: np.ndarray, normals: np.ndarray, voxel: float) -> tuple[np.ndarray, np.ndarray]:
    """One point and its normal per occupied voxel (`voxel` metres): votes by area, not by sampling density."""
    _, first = np.unique(np.floor(points / voxel).astype(np.int64), axis=0, return_index=True)
    return points[first], normals[first]


def _smoothed(points: np.ndarray, normals: np.ndarray, neighbours: int = NORMAL_NEIGHBOURS) -> np.ndarray:
    """Normals of the best plane through each point's neighbours, facing as its own normal did: a far
    wall fuses bumpy (its faces' normals scatter by tens of degrees) but lies flat at this scale."""
    if len(points) <= neighbours:
        return normals
    _, nearest = cKDTree(points).query(points, k=neighbours)
    local = points[nearest] - points[nearest].mean(axis=1, keepdims=True)
    smooth = np.linalg.eigh(np.einsum("nki,nkj->nij", local, local))[1][:, :, 0]
    return smooth * np.where((smooth * normals).sum(axis=1) < 0, -1.0, 1.0)[:, None]


def _find_planes(points: np.ndarray, normals: np.ndarray, distance: float, min_support: float,
                 cfg: PlaneConfig) -> list[tuple[np.ndarray, np.ndarray, int]]:
    """(normal, centre, support) of upright and level planes, most supported first: repeatedly the
    strongest vote over (orientation, offset), refit to its inliers, whose points then leave the vote."""
    agree = np.cos(np.radians(cfg.normal_agreement_deg))
    level = normals[:, 2] >= np.cos(np.radians(cfg.max_tilt_deg))
    upright = np.abs(normals[:, 2]) <= np.sin(np.radians(cfg.max_tilt_deg))
    free = level | upright
    found = []
    angle_bins = 180
    while len(found) < cfg.max_planes and free.any():
        angle = np.arctan2(normals[:, 1], normals[:, 0])
        angle_bin = np.floor((angle + np.pi) / (2 * np.pi) * angle_bins).astype(np.int64) % angle_bins
        best = None
        for kind, mask in (("upright", upright & free), ("level", level & free)):
            if mask.sum() < min_support:
                continue
            if kind == "upright":
                offset = np.einsum("ij,ij->i", points[mask, :2], normals[mask, :2]) / np.maximum(
                    np.linalg.norm(normals[mask, :2], axis=1), 1e-9)
                keys = angle_bin[mask] * 1_000_000 + np.floor(offset / distance).astype(np.int64) + 500_000
            else:
                keys = np.floor(points[mask, 2] / distance).astype(np.int64)
            values, counts = np.unique(keys, return_counts=True)
            if counts.max() >= min_support and (best is None or counts.max() > best[0]):
                best = (counts.max(), kind, np.flatnonzero(mask)[keys == values[np.argmax(counts)]])
        if best is None:
            break
        _, kind, seeds = best
        seed_normal = normals[seeds].mean(axis=0)
        if kind == "upright":
            seed_normal[2] = 0.0
        seed_normal /= np.linalg.norm(seed_normal)
        seed_centre = points[seeds].mean(axis=0)
        facing = (normals @ seed_normal) >= agree
        plane = np.append(seed_normal, -seed_normal @ seed_centre)
        normal, centre = refine_plane(points[facing & free], plane, distance)
        normal = normal if normal @ seed_normal > 0 else -normal
        inliers = free & (np.abs((points - centre) @ normal) <= distance) & ((normals @ normal) >= agree)
        free &= ~(inliers | np.isin(np.arange(len(points)), seeds))
        tilt = np.degrees(np.arccos(min(abs(normal[2]), 1.0)))
        if inliers.sum() >= min_support and (tilt <= cfg.max_tilt_deg or tilt >= 90 - cfg.max_tilt_deg):
            found.append((normal, centre, int(inliers.sum())))
    return found


def _upright_by_position(points: np.ndarray, sfm: np.ndarray, cameras: np.ndarray, distance: float,
                         min_support: float, cfg: PlaneConfig) -> list[tuple[np.ndarray, np.ndarray, int]]:
    """Upright planes voted for by position alone (the floor plan's lines): a wall seen only from across
    the cell fuses as a thick, bumpy layer whose normals scatter, but its points still line up in plan.
    Each faces the mean of the cameras and sits where the SfM points near it put it (when there are
    enough); once found, the points of its band beside the run it found leave the vote."""
    angles = np.radians(np.arange(0.0, 180.0, 1.0))
    directions = np.column_stack([np.cos(angles), np.sin(angles)])
    width = 2 * distance
    free = np.ones(len(points), bool)
    found = []
    for _ in range(2 * cfg.max_planes):  # the clutter votes too: walls may come late
        if free.sum() < min_support:
            break
        offsets = np.floor(points[free, :2] @ directions.T / width).astype(np.int64)  # (P, A)
        low = offsets.min()
        keys = (offsets - low) * len(angles) + np.arange(len(angles))[None]
        counts = np.bincount(keys.ravel())
        best = int(np.argmax(counts))
        if counts[best] < min_support:
            break
        direction = directions[best % len(angles)]
        normal = np.array([direction[0], direction[1], 0.0])
        offset = (best // len(angles) + low + 0.5) * width
        band = free & (np.abs(points[:, :2] @ direction - offset) <= BAND_WIDTHS * width)
        offset = float(np.median(points[band, :2] @ direction))  # a far wall's points scatter about it
        pinned = np.abs(sfm[:, :2] @ direction - offset) <= BAND_WIDTHS * width
        if pinned.sum() >= MIN_PINNING_POINTS:  # SfM points scatter least: triangulated from features
            offset = float(np.median(sfm[pinned, :2] @ direction))
        near = band & (np.abs(points[:, :2] @ direction - offset) <= width)
        centre = points[near].mean(axis=0) if near.any() else points[band].mean(axis=0)
        if (cameras.mean(axis=0) - centre) @ normal < 0:
            normal = -normal
        peak = free & (np.floor(points[:, :2] @ direction / width) == best // len(angles) + low)
        # no parallel twin of the same surface; but the band is a line across the whole plan, and the
        # fragments of a far wall it crosses must stay in the vote (a hard cell's east wall lost them all)
        free &= ~(band & _along_run(points, near if near.any() else band, direction, cfg.bridge)) & ~peak
        found.append((normal, centre, int(near.sum())))
    return found


def _outermost_walls(points: np.ndarray, cameras: np.ndarray, band: float, min_support: float,
                     bridge: float) -> list[tuple[np.ndarray, np.ndarray, int]]:
    """Upright planes at the outer edge of what was captured: in each plan direction (1 degree steps)
    the fullest band of points beyond every camera with next to nothing more than BEHIND_DEPTH past it;
    the fullest over all directions is a wall (a wall's band holds most when the direction is square to
    it), its layer leaves the vote, and the next is sought. An inward loop sees the walls bounding the
    cell only from across it, in sparse fragments that the position vote's clutter (machine fronts'
    lines crossing them) out-votes and eats. Without the layer leaving, a band slanted across one
    wall's end and the next one's would be a wall too: an open corner closed. And a band counts only
    the points of its longest run along it (no gap wider than `bridge`), and stands where they do: where
    two walls were barely reconstructed but at their ends (hard seed 1: 18 and 30 SfM points on 5 m
    walls), the band through both ends, diagonally across the open corner between them, held more than
    either end's own band."""
    angles = np.radians(np.arange(0.0, 360.0, 1.0))
    directions = np.column_stack([np.cos(angles), np.sin(angles)])
    offsets = points[:, :2] @ directions.T  # (P, A)
    reach = (cameras[:, :2] @ directions.T).max(axis=0)
    step = band / OUTER_STEPS
    ordered = np.sort(offsets, axis=0).T
    free = np.ones(len(points), bool)
    found = []
    while len(found) < OUTER_MAX_WALLS:
        counts, starts = np.zeros(len(angles), np.int64), np.zeros(len(angles))
        for a in range(len(angles)):
            beyond = offsets[free, a]
            beyond = beyond[beyond > reach[a]]
            if len(beyond) < min_support:
                continue
            windows = np.convolve(np.bincount(((beyond - reach[a]) / step).astype(np.int64)),
                                  np.ones(OUTER_STEPS, np.int64), "valid")  # band-wide, one step apart
            start = reach[a] + np.arange(len(windows)) * step
            # what was captured past a band bounds it out, whether or not a wall took it before
            past = len(points) - np.searchsorted(ordered[a], start + band / 2 + BEHIND_DEPTH)
            bounding = np.flatnonzero((windows >= min_support) & (past <= OUTER_PAST_SHARE * windows))
            runs = [_longest_run(points[free & (offsets[:, a] >= start[b]) & (offsets[:, a] < start[b] + band)],
                                 directions[a], bridge).sum() for b in bounding]
            if runs and max(runs) >= min_support:
                best = int(bounding[int(np.argmax(runs))])
                counts[a], starts[a] = max(runs), start[best]
        a = int(np.argmax(counts))
        if counts[a] < min_support:
            break
        inside = free & (offsets[:, a] >= starts[a]) & (offsets[:, a] < starts[a] + band)
        run = points[inside][_longest_run(points[inside], directions[a], bridge)]
        found.append((np.array([-directions[a, 0], -directions[a, 1], 0.0]), run.mean(axis=0), int(counts[a])))
        free &= np.abs(offsets[:, a] - (starts[a] + band / 2)) > band / 2 + BEHIND_DEPTH  # its whole layer
    return found


def _longest_run(points: np.ndarray, direction: np.ndarray, bridge: float) -> np.ndarray:
    """Mask of `points` in their longest run along the plan line normal to `direction`."""
    return _along_run(points, np.ones(len(points), bool), direction, bridge) if len(points) else np.zeros(0, bool)


def _along_run(points: np.ndarray, support: np.ndarray, direction: np.ndarray, bridge: float) -> np.ndarray:
    """Mask of the points beside the longest run of `support` along the plan line normal to `direction`
    (runs split where the support has a gap wider than `bridge`): the stretch the vote found a surface on."""
    along = points[:, :2] @ np.array([-direction[1], direction[0]])
    ordered = np.sort(along[support])
    breaks = np.flatnonzero(np.diff(ordered) > bridge)
    starts, ends = np.r_[0, breaks + 1], np.r_[breaks, len(ordered) - 1]
    longest = int(np.argmax(ends - starts))
    return (along >= ordered[starts[longest]] - bridge) & (along <= ordered[ends[longest]] + bridge)


def _axes(normal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """In-plane axes with u x v = normal: level planes along x, y; upright ones along the floor and up."""
    if abs(normal[2]) > 0.5:
        u = np.array([1.0, 0.0, 0.0])
    else:
        u = np.cross(np.array([0.0, 0.0, 1.0]), normal)
    u -= (u @ normal) * normal
    u /= np.linalg.norm(u)
    return u, np.cross(normal, u)


def _footprint(points: np.ndarray, normals: np.ndarray, loose: np.ndarray, normal: np.ndarray, centre: np.ndarray,
               distance: float, cfg: PlaneConfig, bounding: bool = False) -> tuple[np.ndarray | None, Frame | None]:
    """The cells of the plane its support covers (the fused surface facing its way, and `loose`
    without normals: SfM points, rendered depth), grouped and closed to their hulls (`_hulls`); for a
    wall `bounding` the capture, the rectangle they span (`_rectangle`), whose columns all stand on the
    floor: what the machines before such a wall hide of it is its foot, however high they are)."""
    near = np.abs((points - centre) @ normal) <= distance
    near &= (normals @ normal) >= np.cos(np.radians(cfg.normal_agreement_deg))
    support = np.concatenate([points[near], loose[np.abs((loose - centre) @ normal) <= distance]])
    if len(support) < 3:
        return None, None
    u, v = _axes(normal)
    coords = np.stack([(support - centre) @ u, (support - centre) @ v], axis=1)
    low = np.floor(coords.min(axis=0) / cfg.cell) - 1
    ij = (np.floor(coords / cfg.cell) - low).astype(np.int64)
    occupied = np.zeros(ij.max(axis=0) + 2, bool)
    occupied[ij[:, 0], ij[:, 1]] = True
    reach = max(1, int(round(cfg.bridge / cfg.cell / 2)))
    cells = _rectangle(ij, occupied.shape) if bounding else _hulls(occupied, reach)
    origin = centre + low[0] * cfg.cell * u + low[1] * cfg.cell * v
    if abs(normal[2]) <= 0.5:
        cells, origin = _down_to_floor(cells, origin, v, cfg.cell, np.inf if bounding else cfg.bridge)
    return _large_parts(cells, cfg.min_area / cfg.cell ** 2), Frame(origin, u, v, normal)


def _rectangle(ij: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """The cells of a raster of `shape` in the rectangle its support's cells `ij` (one row per support
    point) span: up to the highest, and along the wall from the WALL_STRAY_SHARE to the
    1 - WALL_STRAY_SHARE quantile of their columns. A wall bounding the capture is seen in fragments
    between the machines before it, and the hull of those cut its upper corners off on a slant; a few
    strays in its band past its ends (the floor's fringe beyond the sample's low wall: 27 of 4,990
    points each way) would carry it metres on."""
    filled = np.zeros(shape, bool)
    i0, i1 = np.quantile(ij[:, 0], [WALL_STRAY_SHARE, 1 - WALL_STRAY_SHARE]).round().astype(np.int64)
    filled[i0:i1 + 1, ij[:, 1].min():ij[:, 1].max() + 1] = True
    return filled


def _down_to_floor(cells: np.ndarray, origin: np.ndarray, v: np.ndarray, cell: float,
                   reach: float) -> tuple[np.ndarray, np.ndarray]:
    """An upright patch's columns whose foot ends within `reach` of the floor carried down to it (what
    stands on the floor meets it; its foot is what machines in front hide), nothing below z = 0. (The
    cells, grown downwards, and the raster's new origin.)"""
    extra = max(0, int(np.ceil(origin[2] / (cell * v[2]))))
    cells = np.pad(cells, ((0, 0), (extra, 0)))
    origin = origin - extra * cell * v
    rows = np.arange(cells.shape[1])
    heights = _row_heights(cells.shape[1], origin, v, cell)
    foot = np.argmax(cells, axis=1)
    grounded = cells.any(axis=1) & (origin[2] + foot * cell * v[2] <= reach)
    cells |= grounded[:, None] & (rows[None] < foot[:, None])
    return cells & (heights > 0)[None], origin


def _row_heights(count: int, origin: np.ndarray, v: np.ndarray, cell: float) -> np.ndarray:
    """(count,) heights above the floor of an upright raster's row centres (`v` its up axis)."""
    return origin[2] + (np.arange(count) + 0.5) * cell * v[2]


def _hulls(occupied: np.ndarray, reach: int) -> np.ndarray:
    """The occupied cells grouped where they come within 2 * `reach` cells of each other, each group
    closed to its convex hull (an alpha shape with a large alpha): what lies between the fragments of one
    surface is that surface, unless views looked through it (carved later). A cell joins a hull when its
    centre lies inside or on it; only the cells in the group's bounding box are tested."""
    groups, count = ndimage.label(ndimage.binary_dilation(occupied, structure=_disk(reach)), structure=np.ones((3, 3)))
    cells = occupied.copy()
    for group in range(1, count + 1):
        members = np.argwhere(occupied & (groups == group))
        corners = (members[:, None, :] + np.array([[0, 0], [0, 1], [1, 0], [1, 1]])[None]).reshape(-1, 2)
        (i0, j0), (i1, j1) = corners.min(axis=0), corners.max(axis=0)
        i, j = np.mgrid[i0:i1, j0:j1]
        centres = np.column_stack([i.ravel(), j.ravel()]) + 0.5
        # facets a x + b y + c <= 0 inside; a centre on a facet (a diagonal edge passes through some) is in
        facets = ConvexHull(corners).equations
        inside = (centres @ facets[:, :2].T + facets[:, 2] <= HULL_TOLERANCE).all(axis=1)
        cells[i.ravel()[inside], j.ravel()[inside]] = True
    return cells


def _carve(cells: np.ndarray, looked_through: np.ndarray) -> np.ndarray:
    """`cells` less the looked-through cells reached from outside the patch: the hull shrinks back from
    an edge it overshot or an opening views saw through, but takes no holes in its middle, where a
    glossy front's reflections make views look through it."""
    region, _ = ndimage.label(~cells | (cells & looked_through))
    open_to_outside = np.unique(region[~cells])
    return cells & ~np.isin(region, open_to_outside[open_to_outside > 0])


def _disk(radius: int) -> np.ndarray:
    i, j = np.mgrid[-radius:radius + 1, -radius:radius + 1]
    return i ** 2 + j ** 2 <= radius ** 2


def _large_parts(cells: np.ndarray, min_cells: float) -> np.ndarray:
    labels, count = ndimage.label(cells, structure=np.ones((3, 3)))
    if count == 0:
        return cells
    sizes = np.bincount(labels.ravel())
    sizes[0] = 0
    return (sizes >= min_cells)[labels]


def _cell_centres(cells: np.ndarray, frame: Frame, cell: float) -> np.ndarray:
    """(I * J, 3) world centres of every cell of the raster, row-major."""
    i, j = np.mgrid[0:cells.shape[0], 0:cells.shape[1]]
    return (frame.origin + ((i.ravel() + 0.5) * cell)[:, None] * frame.u
            + ((j.ravel() + 0.5) * cell)[:, None] * frame.v)


def _votes(centres: np.ndarray, normal: np.ndarray, views: DepthViews, depth: np.ndarray,
           tolerance: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What the renders of the views in front of the plane say of each of its points: ((N, P) view n
    rendered the surface at it; (P,) views that rendered something further away through it, so nothing
    solid stands there; (P,) views that rendered something nearer in front of it)."""
    on = np.zeros((len(views), len(centres)), bool)
    through = np.zeros(len(centres), np.int64)
    behind = np.zeros(len(centres), np.int64)
    for n in range(len(views)):
        if (views.world_from_cam[n, :3, 3] - centres[0]) @ normal <= 0:
            continue  # a view from behind the plane sees its back: no evidence on its front
        inside, row, col, z = views.pixels(n, centres)
        rendered = depth[n, row, col]
        valid = inside & (rendered > 0)
        reach = np.maximum(tolerance, DEPTH_SHARE * z)  # far renders are rougher
        on[n] = valid & (np.abs(rendered - z) <= reach)
        through += valid & (rendered > z + reach)
        behind += valid & (rendered < z - reach)
    return on, through, behind

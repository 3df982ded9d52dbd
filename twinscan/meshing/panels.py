"""Textureless upright panels the collider lacks (partitions, guards, plain doors), from their outlines.

A panel of one flat colour gives SfM nothing to triangulate and the splats nothing to pin: no SfM point,
no supported splat, no fused face lies on it, so no plane is found on it (planes.py), and a robot drives
through it. What the photos do show is its outline: two vertical edges where it ends against what stands
behind it, and between them a face that is flat (no image gradient) in every view that looks at it.

The twin is Z up, so an upright edge at plan point (x, y) projects to a known image direction in every
view: plan cells vote with the image gradient across that direction, and a real edge gathers strong
responses at all its heights in most of the views that see it (`_edge_columns`). Two edge columns whose
span projects onto flat pixels in nearly every view that sees it, where the views that see past it show
texture on what stands behind (a plain wall already in the twin is flat from everywhere, and so says
nothing), bound a panel (`_flat_span`), standing on the floor up to where its flat face ends, and clear of
the walk the phone took (`_clear_of_walk`: a glossy panel's mirror images have edges too).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
import trimesh
from scipy.spatial import cKDTree

from twinscan.meshing.metrics import sample_surface
from twinscan.meshing.raycast import mesh_depths
from twinscan.meshing.views import DepthViews, spread

CELL = 0.02  # metres: the plan raster edge columns are voted on
EDGE_HEIGHTS = np.arange(0.20, 1.01, 0.10)  # metres: where an edge column is probed (a panel reaches them)
EDGE_GRADIENT = 6.0  # levels per pixel across the projected upright (`colour_gradient`): an edge there
EDGE_ALIGNMENT = np.cos(np.radians(25.0))  # ... counting only gradients this close to across it
EDGE_SLACK_PX = 1  # the response is the strongest this many pixels either side across the upright
EDGE_HITS = 0.7  # a view sees an edge at a column when this share of its visible heights are edges
MIN_EDGE_HEIGHTS = 4  # ... of at least this many visible heights
EDGE_VIEWS = 60  # the vote takes at most this many views, spread over the walk (more add time, not edges)
MIN_EDGE_VIEWS = 6  # a column's vote needs this many views to see it
MIN_EDGE_SCORE = 0.4  # share of the views seeing a column that see an edge there: a panel's end
MAX_COLUMNS = 120  # the strongest columns only: pairs of them are judged one by one
FLAT_GRADIENT = 3.0  # levels per pixel: a pixel this smooth is flat (sensor noise passes, texture does not)
FLAT_VIEW_SHARE = 0.8  # a view shows a span flat when this share of its samples are flat ...
FLAT_VIEWS = 0.8  # ... and a panel needs this share of the views that see its span to show it flat
MIN_PANEL_VIEWS = 5
MIN_VIEW_ANGLE_DEG = 20.0  # views looking along a span closer than this to its plane say nothing of it
KNOWN_BEHIND = 0.2  # and this share of its samples must have a surface known behind them (else nothing says
TEXTURED_BEHIND = 0.5  # it is not a plain backdrop), of which this share of those another view confirms some
# view sees textured past it.
# Measured with the known surface filling what the renders lack: true panels 28-45 % of their samples, a
# span seen only through a red guard in front of it 14 % (hard cell seed 0, 2026-12-04)
# And one view at least must see the span flat before a backdrop another view renders there too, for this
# share of its samples: a panel hides what stands behind it from some view. Hard seed 6: a span over open
# floor, seen only by 7 views from across the cell (5.5-5.9 m) through an open corner, its backdrop the
# dark past the corner and far floor whose renders there are floaters: at best 6 % of a view's samples;
# the true panels of seeds 2, 3 and 6, at best 77-97 % (seed 3's plain panel: one view of its six, 87 %;
# the other five see it from across the cell before a far wall no other view renders there), 2026-12-05
CONFIRMED_VIEW = 0.4
KNOWN_REACH = 0.10  # metres: plan cells this near the collider are its business, not a panel's ...
# ... when it stands there at this share of the probed heights. Fusion keeps fragments of a panel where its
# edge meets textured ground or a neighbour (hard seed 4: the plain panel's foot, 0.1-0.24 m, and 27 cm of
# the guard's end, 0.26-0.53 m): cells near any known surface went unprobed, so both panels lost an end
# and came out paired with columns 0.2-0.5 m behind them, turned 9 and 33 degrees
KNOWN_HEIGHTS = 0.5
OCCLUSION = 0.10  # metres: a known surface this much nearer than a sample hides it
MAX_DEPTH = 8.0  # metres: further off, a 2 cm column is a third of a pixel wide at 640 pixels
MIN_LENGTH, MAX_LENGTH = 0.30, 3.00  # metres: a panel's width
WALK_CLEARANCE = 0.30  # metres: no panel stands this near the path the phone took
SPAN_STEPS = 12  # samples along a span (its middle 80 %), at each of SPAN_HEIGHTS
SPAN_HEIGHTS = np.arange(0.20, 1.01, 0.20)
TOP_STEP = 0.05  # metres: the top is probed at this spacing, up to MAX_TOP
MAX_TOP = 3.0
# metres: a panel's collider is a closed slab this thick. Its outline (2 cm edge columns at either end, each
# at one corner of the board) says where it stands, not how thick it is. A single quad lies on one face
# of the board, has no top or ends, and as a collider it is one sheet of triangles, which fast or thin
# bodies pass through; a slab is a solid. Hard cells seeds 0, 3, 5 (6 cm partition, 5 cm guard),
# structure F@5 through the pickled mesh stage: quad 0.776, 0.870, 0.881; slab 3 cm 0.787, 0.877,
# 0.891; 4 cm 0.790, 0.877, 0.891; 5 cm 0.792, 0.876, 0.891 (2026-12-04).
PANEL_THICKNESS = 0.04
# A span's end is an edge column, but the column a panel's end pairs with may be something past it: a
# glossy guard's far end is an edge in a third of the views that see it, below MIN_EDGE_SCORE, and hard seed
# 1's guard came out paired with a column 0.24 m past that end and 0.15 m off its line, 7 degrees turned
# (its face flat up to 0.23 m before that column). An end the flat face stops more than END_GAP short of
# is moved to where the face ends most sharply (END_WINDOW steps of CELL flat in FLAT_VIEWS of the views
# before it, against after it), on a line turned up to END_TURN_DEG from the span about its other end.
# The hard cells' true ends: the face flat to within 0.02-0.10 m of them (seed 1, 2026-12-05)
END_GAP = 0.15  # metres
END_TURN_DEG, END_TURN_STEP_DEG = 12.0, 1.0
END_WINDOW = 4
OVERLAP = 0.10  # metres: a span this near an accepted one for most of its length is the same panel ...
SAME_TURN_DEG = 30.0  # ... as is one touching it and turned less than this from it


@dataclass(frozen=True)
class Panel:
    ends: np.ndarray  # (2, 2) plan points of its upright edges
    top: float  # metres above the floor
    views: int  # views that see its span


def textureless_panels(views: DepthViews, depth: np.ndarray, known: trimesh.Trimesh) -> list[Panel]:
    """Panels standing on the floor that the `known` surface (collider and patches) lacks, found by their
    edges in the photos (`views.colour`); `depth` is the views' rendered depth, 0 where none."""
    depth = _with_known(views, depth, known)
    gradients = [colour_gradient(colour) for colour in views.colour]
    flat = np.stack([np.hypot(gx, gy) < FLAT_GRADIENT for gx, gy in gradients])
    known_plan = _known_plan(known)
    columns, edge_views = _edge_columns(views, depth, gradients, known_plan)
    path = views.world_from_cam[:, :2, 3]
    flat_spans = [(edge_views[i] + edge_views[j], seen, columns[i], columns[j])
                  for i, j in _spans(columns, known_plan, path)
                  if (seen := _flat_span(views, depth, flat, columns[i], columns[j], SPAN_HEIGHTS))]
    panels: list[Panel] = []
    # the strongest outline first: of the spans that share one end, the other end seen as an edge by the
    # most views is the panel's (a column 12 cm past a partition's corner, seen as an edge from one side,
    # also bounds a span that looks flat); then the most views
    for _, seen, a, b in sorted(flat_spans, key=lambda span: (-span[0], -span[1])):
        if any(_same_panel(a, b, panel.ends) for panel in panels):
            continue
        if panels:  # judged again behind the panels accepted so far: a span behind a blank panel sees it flat
            seen = _flat_span(views, depth, flat, a, b, SPAN_HEIGHTS)
        if seen:
            a, b = _flat_ends(views, depth, flat, a, b)
            panel = Panel(np.array([a, b]), _top(views, depth, flat, a, b), seen)
            panels.append(panel)
            depth = _with_panel(views, depth, panel)
    return panels


def colour_gradient(colour: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(gx, gy) per pixel, levels per pixel, of the colour channel that changes most there.

    A panel's outline is a change of colour, not always of brightness: the hard cells' red guard stands
    before brown crates of about its grey level, and on grey alone its end near them gave no edge column
    (the guard came out paired with a column 33 cm behind it, or not at all). And a face flat in grey
    may be textured in hue: flat here means flat in every channel.
    """
    smooth = cv2.GaussianBlur(colour.astype(np.float32), (3, 3), 0)
    gx, gy = cv2.Sobel(smooth, cv2.CV_32F, 1, 0) / 8, cv2.Sobel(smooth, cv2.CV_32F, 0, 1) / 8
    strongest = np.argmax(gx ** 2 + gy ** 2, axis=2)[..., None]
    return np.take_along_axis(gx, strongest, 2)[..., 0], np.take_along_axis(gy, strongest, 2)[..., 0]


def panel_mesh(panels: list[Panel]) -> trimesh.Trimesh:
    """One closed upright slab per panel, PANEL_THICKNESS thick about the line of its outline, from the
    floor to its top."""
    slabs = []
    for panel in panels:
        a, b = panel.ends
        along = b - a
        length = float(np.linalg.norm(along))
        yaw = np.arctan2(along[1], along[0])
        transform = trimesh.transformations.rotation_matrix(yaw, [0, 0, 1])
        transform[:3, 3] = [*(a + b) / 2, panel.top / 2]
        slabs.append(trimesh.creation.box((length, PANEL_THICKNESS, panel.top), transform))
    if not slabs:
        return trimesh.Trimesh()
    return trimesh.util.concatenate(slabs)


def _with_known(views: DepthViews, depth: np.ndarray, known: trimesh.Trimesh) -> np.ndarray:
    """The views' rendered `depth`, and the `known` surface's where the renders hold nothing. A glossy
    panel's splats fade to nothing (they model its reflections, far behind it), and so may those of the
    wall behind it when that wall is seen only from across the cell; the wall's patch is what says the
    panel's flat face is no plain backdrop."""
    if not len(known.faces):
        return depth
    h, w = views.size
    own = mesh_depths(known, views.K, views.world_from_cam, w, h)
    return np.where(depth > 0, depth, np.where(np.isfinite(own), own, 0.0))


@dataclass(frozen=True)
class _KnownPlan:
    """Where the known surface stands in plan, at each height edges are probed at."""

    levels: tuple[cKDTree | None, ...]  # plan positions of its samples near each of EDGE_HEIGHTS
    mins: np.ndarray
    maxes: np.ndarray


def _known_plan(known: trimesh.Trimesh) -> _KnownPlan | None:
    """Plan positions of the known surface at the heights panels are probed at."""
    if len(known.faces) == 0:
        return None
    samples = sample_surface(known, max(20_000, int(known.area / CELL ** 2)))
    low, high = EDGE_HEIGHTS[0] - KNOWN_REACH, EDGE_HEIGHTS[-1] + KNOWN_REACH
    samples = samples[(samples[:, 2] >= low) & (samples[:, 2] <= high)]
    if not len(samples):
        return None
    half_step = (EDGE_HEIGHTS[1] - EDGE_HEIGHTS[0]) / 2
    levels = tuple(cKDTree(level[:, :2]) if len(level := samples[np.abs(samples[:, 2] - z) <= half_step]) else None
                   for z in EDGE_HEIGHTS)
    return _KnownPlan(levels, samples[:, :2].min(axis=0), samples[:, :2].max(axis=0))


def _near_known(known_plan: _KnownPlan | None, plan: np.ndarray) -> np.ndarray:
    """Whether the known surface stands within KNOWN_REACH of each plan point at KNOWN_HEIGHTS of the probed
    heights: a solid the collider holds, not a fragment of the panel that fusion kept."""
    if known_plan is None:
        return np.zeros(len(plan), bool)
    heights = sum(np.isfinite(tree.query(plan, distance_upper_bound=KNOWN_REACH)[0])
                  for tree in known_plan.levels if tree is not None)
    return np.asarray(heights) >= KNOWN_HEIGHTS * len(EDGE_HEIGHTS)


def _visible(views: DepthViews, depth: np.ndarray, n: int, points: np.ndarray):
    """Where view n sees `points` (in the image, within MAX_DEPTH, no known surface in front): (mask,
    row, col, depth)."""
    inside, row, col, z = views.pixels(n, points)
    rendered = depth[n, row, col]
    hidden = (rendered > 0) & (rendered < z - OCCLUSION)
    return inside & (z < MAX_DEPTH) & ~hidden, row, col, z


def _edge_columns(views: DepthViews, depth: np.ndarray, gradients,
                  known_plan: _KnownPlan | None) -> tuple[np.ndarray, np.ndarray]:
    """(K, 2) plan points where an upright edge stands that the known surface does not hold, strongest
    first, and (K,) how many views see an edge at each."""
    cameras = views.world_from_cam[:, :2, 3]
    lower, upper = cameras.min(axis=0), cameras.max(axis=0)
    if known_plan is not None:  # panels stand among what was captured, or where the cameras walked
        lower, upper = np.minimum(lower, known_plan.mins), np.maximum(upper, known_plan.maxes)
    i, j = np.mgrid[int(np.floor(lower[0] / CELL)):int(np.ceil(upper[0] / CELL)),
                    int(np.floor(lower[1] / CELL)):int(np.ceil(upper[1] / CELL))]
    cells = np.column_stack([i.ravel() - i.min(), j.ravel() - j.min()])
    plan = np.column_stack([i.ravel(), j.ravel()]) * CELL  # on a raster fixed in the twin frame
    probe = np.flatnonzero(~_near_known(known_plan, plan))
    points = _at_heights(plan[probe], EDGE_HEIGHTS)
    seeing = np.zeros(len(probe), np.int64)
    edged = np.zeros(len(probe), np.int64)
    strength = np.zeros(len(probe))  # summed edge response, in EDGE_GRADIENTs: breaks the score's ties
    for n in spread(len(views), EDGE_VIEWS):
        visible, row, col, _ = _visible(views, depth, n, points)
        seen = np.flatnonzero(visible)
        response = np.zeros(len(points), np.float32)
        response[seen] = _edge_response(gradients[n], row[seen], col[seen], _across_upright(views, n, points[seen]))
        heights = visible.reshape(len(EDGE_HEIGHTS), -1).sum(axis=0)
        hits = (response > EDGE_GRADIENT).reshape(len(EDGE_HEIGHTS), -1).sum(axis=0)
        sees = heights >= MIN_EDGE_HEIGHTS
        seeing += sees
        edged += sees & (hits >= EDGE_HITS * heights)
        strength += np.where(sees, response.reshape(len(EDGE_HEIGHTS), -1).sum(axis=0) / np.maximum(heights, 1), 0.0) \
            / EDGE_GRADIENT
    score, tie, count = np.zeros(len(plan)), np.zeros(len(plan)), np.zeros(len(plan), np.int64)
    score[probe] = np.where(seeing >= MIN_EDGE_VIEWS, edged / np.maximum(seeing, 1), 0.0)
    count[probe] = edged
    tie[probe] = strength / np.maximum(seeing, 1)
    candidates = np.flatnonzero(score >= MIN_EDGE_SCORE)
    taken = np.zeros(cells.max(axis=0) + 1, bool)
    reach = int(np.ceil(OVERLAP / CELL))
    disk = np.argwhere(np.hypot(*np.mgrid[-reach:reach + 1, -reach:reach + 1]) * CELL <= OVERLAP) - reach
    columns: list[int] = []
    # strongest first, one per OVERLAP; of a run of cells as often seen as an edge (a column seen from one
    # side is one along the views' rays), the one with the strongest response, not the first in the raster
    for k in candidates[np.lexsort((-tie[candidates], -score[candidates]))]:
        if len(columns) == MAX_COLUMNS:
            break
        if not taken[cells[k, 0], cells[k, 1]]:
            columns.append(k)
            around = np.clip(cells[k] + disk, 0, np.array(taken.shape) - 1)
            taken[around[:, 0], around[:, 1]] = True
    return plan[columns].reshape(-1, 2), count[columns]


def _edge_response(gradient: tuple[np.ndarray, np.ndarray], row: np.ndarray, col: np.ndarray,
                   across: np.ndarray) -> np.ndarray:
    """The image gradient across the upright at each pixel, where it points across it (EDGE_ALIGNMENT),
    the strongest within EDGE_SLACK_PX across it: an edge blurs over a pixel or two, and a pose a pixel
    off would miss it."""
    gx, gy = gradient
    h, w = gx.shape
    response = np.zeros(len(row), np.float32)
    for step in range(-EDGE_SLACK_PX, EDGE_SLACK_PX + 1):
        r = np.clip(row + np.rint(step * across[:, 1]).astype(np.int64), 0, h - 1)
        c = np.clip(col + np.rint(step * across[:, 0]).astype(np.int64), 0, w - 1)
        along_across = np.abs(gx[r, c] * across[:, 0] + gy[r, c] * across[:, 1])
        upright = along_across >= EDGE_ALIGNMENT * np.hypot(gx[r, c], gy[r, c])  # texture edges lie any way
        response = np.maximum(response, np.where(upright, along_across, 0.0))
    return response


def _across_upright(views: DepthViews, n: int, points: np.ndarray) -> np.ndarray:
    """(P, 2) unit image directions across the image of the upright line through each point in view n."""
    rotation, translation = views.cam_from_world[n, :3, :3], views.cam_from_world[n, :3, 3]
    cam = points @ rotation.T + translation
    z = np.maximum(cam[:, 2], 1e-6)
    up = rotation[:, 2]  # d(cam)/d(world z)
    du = views.K[n, 0, 0] * (up[0] * z - cam[:, 0] * up[2]) / z ** 2
    dv = views.K[n, 1, 1] * (up[1] * z - cam[:, 1] * up[2]) / z ** 2
    length = np.maximum(np.hypot(du, dv), 1e-9)
    return np.column_stack([-dv / length, du / length])


def _spans(columns: np.ndarray, known_plan: _KnownPlan | None, path: np.ndarray) -> list[tuple[int, int]]:
    """Pairs of edge columns (indices) a panel could stand between: as wide as a panel, nothing known
    along the way, and clear of the walk (`path`: the cameras' plan positions in the order filmed)."""
    pairs = []
    for i in range(len(columns)):
        for j in range(i + 1, len(columns)):
            a, b = columns[i], columns[j]
            if not MIN_LENGTH <= np.linalg.norm(b - a) <= MAX_LENGTH:
                continue
            if not _near_known(known_plan, _middle(a, b)).any() and _clear_of_walk(path, a, b):
                pairs.append((i, j))
    return pairs


def _clear_of_walk(path: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """Whether span a-b keeps WALK_CLEARANCE from the walk (the plan path through the cameras, in the order
    filmed): the phone was there, and whoever held it stood behind it. A glossy panel mirrors what stands
    before it, and the mirror image's edges line up across the views that see them in it like an edge
    standing behind the panel; a span to such a column lay 0.21 m from the walk (hard seed 5), the true
    panels 0.94-1.25 m (seeds 3, 5)."""
    along = a + np.linspace(0.0, 1.0, max(2, int(np.ceil(np.linalg.norm(b - a) / CELL)) + 1))[:, None] * (b - a)
    path = np.vstack([path, path[-1:]])  # one camera: a walk of one point
    return bool((_segment_distance(along, path[:-1], path[1:]) >= WALK_CLEARANCE).all())


def _segment_distance(points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """(P, S) plan distances from each point to each segment starts[s]-ends[s]."""
    step = ends - starts
    t = ((points[:, None] - starts[None]) * step[None]).sum(-1) / np.maximum((step * step).sum(-1), 1e-12)
    nearest = starts[None] + np.clip(t, 0.0, 1.0)[..., None] * step[None]
    return np.linalg.norm(points[:, None] - nearest, axis=-1)


def _middle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(SPAN_STEPS, 2) plan points along the middle 80 % of span a-b: its ends are edges, not face."""
    return a + np.linspace(0.1, 0.9, SPAN_STEPS)[:, None] * (b - a)


def _at_heights(plan: np.ndarray, heights: np.ndarray) -> np.ndarray:
    """(len(heights) * P, 3) the plan points (P, 2) at each height in turn: the points of upright lines."""
    return np.concatenate([np.column_stack([plan, np.full(len(plan), z)]) for z in heights])


def _across(towards: np.ndarray, facing: np.ndarray) -> np.ndarray:
    """Whether views at plan offsets `towards` (K, 2) from a span, `facing` (K,) their offsets' component along
    its normal, look across it rather than along it (MIN_VIEW_ANGLE_DEG): a view along a span sees whatever
    lies in line with it as its face."""
    return np.abs(facing) >= np.sin(np.radians(MIN_VIEW_ANGLE_DEG)) * np.linalg.norm(towards, axis=1)


def _span_points(a: np.ndarray, b: np.ndarray, heights: np.ndarray) -> np.ndarray:
    return _at_heights(_middle(a, b), heights)


def _flat_span(views: DepthViews, depth: np.ndarray, flat: np.ndarray, a: np.ndarray, b: np.ndarray,
               heights: np.ndarray) -> int:
    """How many views see the span between plan points a and b at `heights` flat, when enough of them
    do (FLAT_VIEWS of those that see it) and surfaces are known behind it that show texture to the
    views that look past it (`_textured_behind`), in one view at least for CONFIRMED_VIEW of its
    samples; else 0."""
    points = _span_points(a, b, heights)
    pixels = {}
    normal = np.array([a[1] - b[1], b[0] - a[0]]) / np.linalg.norm(b - a)
    towards = views.world_from_cam[:, :2, 3] - (a + b) / 2
    for n in np.flatnonzero(_across(towards, towards @ normal)):
        visible, row, col, _ = _visible(views, depth, n, points)
        if visible.sum() >= len(points) / 2:
            pixels[n] = (row[visible], col[visible])
    flat_views = sum(flat[n, row, col].mean() >= FLAT_VIEW_SHARE for n, (row, col) in pixels.items())
    if len(pixels) < MIN_PANEL_VIEWS or flat_views < FLAT_VIEWS * len(pixels):
        return 0
    behind = np.array([_textured_behind(views, depth, flat, n, row, col, a, b) for n, (row, col) in pixels.items()])
    samples = np.array([len(row) for row, _ in pixels.values()])
    known, confirmed, textured = behind.sum(axis=0)
    if known < KNOWN_BEHIND * samples.sum() or textured < TEXTURED_BEHIND * confirmed \
            or (behind[:, 1] / samples).max() < CONFIRMED_VIEW:
        return 0
    return len(pixels)


def _textured_behind(views: DepthViews, depth: np.ndarray, flat: np.ndarray, n: int, row: np.ndarray,
                     col: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[int, int, int]:
    """Of view n's flat pixels at (row, col): how many have a surface known behind them, how many of those
    surfaces another view also renders there, from the same side (its ray in plan within 90 degrees of
    view n's: a blank panel's other face lies within the depth tolerance) and looking past the span a-b
    rather than through it, and how many of those such a view sees textured. A surface no other view
    renders where view n put it (the floaters a blank panel's splats leave in the views across the cell)
    says nothing of texture. Hard seed 5: a blank panel lost to the floaters behind it, and a span off
    its end, seen only from behind it, taken for a panel by its back face's edges seen from the front."""
    keep = flat[n, row, col] & (depth[n, row, col] > 0)
    row, col = row[keep], col[keep]
    if not len(row):
        return 0, 0, 0
    rays = np.column_stack([col + 0.5, row + 0.5, np.ones(len(row))]) @ np.linalg.inv(views.K[n]).T
    surface = (rays * depth[n, row, col][:, None]) @ views.world_from_cam[n, :3, :3].T + views.world_from_cam[n, :3, 3]
    from_n = surface[:, :2] - views.world_from_cam[n, :2, 3]
    confirmed = np.zeros(len(surface), bool)
    textured = np.zeros(len(surface), bool)
    for m in range(len(views)):
        if m == n:
            continue
        inside, r, c, z = views.pixels(m, surface)
        rendered = depth[m, r, c]
        sees = inside & (rendered > 0) & (np.abs(rendered - z) <= np.maximum(OCCLUSION, 0.03 * z))
        sees &= ~_crosses(views.world_from_cam[m, :2, 3], surface[:, :2], a, b)
        sees &= np.einsum("ij,ij->i", surface[:, :2] - views.world_from_cam[m, :2, 3], from_n) > 0
        confirmed |= sees
        textured |= sees & ~flat[m, r, c]
    return len(surface), int(confirmed.sum()), int(textured.sum())


def _crosses(origin: np.ndarray, targets: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Whether the plan segments origin -> each target cross the segment a-b."""
    def side(p, q, r):
        return np.sign((q[..., 0] - p[..., 0]) * (r[..., 1] - p[..., 1])
                       - (q[..., 1] - p[..., 1]) * (r[..., 0] - p[..., 0]))
    return (side(origin, targets, a) != side(origin, targets, b)) & (side(a, b, origin) != side(a, b, targets))


def _flat_ends(views: DepthViews, depth: np.ndarray, flat: np.ndarray, a: np.ndarray,
               b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The span's ends, each moved to where its flat face ends when that is more than END_GAP short of it
    (`_face_end`, about the other end) and the span so ended is still a panel's (`_flat_span`)."""
    for _ in range(2):  # b about a, then a about the (new) b
        end = _face_end(views, depth, flat, a, b)
        if end is not None and _flat_span(views, depth, flat, a, end, SPAN_HEIGHTS):
            b = end
        a, b = b, a
    return a, b


def _face_end(views: DepthViews, depth: np.ndarray, flat: np.ndarray, a: np.ndarray,
              b: np.ndarray) -> np.ndarray | None:
    """Where the flat face running from `a` towards `b` ends most sharply, on lines turned up to
    END_TURN_DEG from a-b, when on a-b itself it ends more than END_GAP short of b; else None."""
    length = float(np.linalg.norm(b - a))
    turns = np.radians(np.arange(-END_TURN_DEG, END_TURN_DEG + 1e-9, END_TURN_STEP_DEG))
    heading = np.arctan2(b[1] - a[1], b[0] - a[0]) + turns
    directions = np.column_stack([np.cos(heading), np.sin(heading)])
    steps = np.arange(0.0, min(1.5 * length, MAX_LENGTH) + CELL / 2, CELL)
    share = _flat_share(views, depth, flat, a, directions, steps)  # (turns, steps)
    straight, at_b = len(turns) // 2, int(round(length / CELL))
    flat_on_line = np.flatnonzero(share[straight, :at_b + 1] >= FLAT_VIEWS)
    if len(flat_on_line) and length - steps[flat_on_line[-1]] <= END_GAP:
        return None
    best, end = 0.0, None
    for t in range(len(turns)):
        for k in range(max(int(np.ceil(MIN_LENGTH / CELL)), END_WINDOW), len(steps) - END_WINDOW):
            if share[t, END_WINDOW:k + 1].mean() < FLAT_VIEWS:
                continue
            sharpness = share[t, k - END_WINDOW:k + 1].mean() - share[t, k + 1:k + 1 + END_WINDOW].mean()
            if sharpness > best:
                best, end = sharpness, a + steps[k] * directions[t]
    return end


def _flat_share(views: DepthViews, depth: np.ndarray, flat: np.ndarray, a: np.ndarray, directions: np.ndarray,
                steps: np.ndarray) -> np.ndarray:
    """(D, S) share of the views seeing the upright line at a + steps[s] * directions[d] (at SPAN_HEIGHTS;
    at least MIN_PANEL_VIEWS of them, not looking along the line) that see it flat (FLAT_VIEW_SHARE of
    its heights); 0 where fewer see it."""
    plan = (a + steps[None, :, None] * directions[:, None, :]).reshape(-1, 2)
    normals = np.repeat(np.column_stack([-directions[:, 1], directions[:, 0]]), len(steps), axis=0)
    points = _at_heights(plan, SPAN_HEIGHTS)
    seeing = np.zeros(len(plan), np.int64)
    flat_seeing = np.zeros(len(plan), np.int64)
    for n in range(len(views)):
        towards = views.world_from_cam[n, :2, 3] - plan
        facing = _across(towards, np.einsum("ij,ij->i", towards, normals))
        visible, row, col, _ = _visible(views, depth, n, points)
        visible = visible.reshape(len(SPAN_HEIGHTS), -1)
        heights = visible.sum(axis=0)
        sees = facing & (heights >= len(SPAN_HEIGHTS) / 2)
        flat_share = (visible & flat[n, row, col].reshape(visible.shape)).sum(axis=0) / np.maximum(heights, 1)
        seeing += sees
        flat_seeing += sees & (flat_share >= FLAT_VIEW_SHARE)
    share = np.where(seeing >= MIN_PANEL_VIEWS, flat_seeing / np.maximum(seeing, 1), 0.0)
    return share.reshape(len(directions), len(steps))


def _top(views: DepthViews, depth: np.ndarray, flat: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """The height up to which the span stays flat in the views that see it (probed every TOP_STEP from
    the highest height the span was tested at)."""
    top = float(SPAN_HEIGHTS[-1])
    for height in np.arange(top + TOP_STEP, MAX_TOP, TOP_STEP):
        if not _flat_span(views, depth, flat, a, b, np.array([height])):
            break
        top = float(height)
    return top + TOP_STEP / 2


def _same_panel(a: np.ndarray, b: np.ndarray, ends: np.ndarray) -> bool:
    """Whether span a-b is the accepted span `ends` again: most of it within OVERLAP of it, or touching
    it (crossing it, or an end within OVERLAP of it) turned less than SAME_TURN_DEG from it. A column
    next to an edge pairs with the far end too, and one a few cm off an end with the other end at a
    slant: hard seed 5's partition came out twice, the second slab 18 degrees turned and crossing the
    first (its near end 10 cm off the partition's). A panel meeting another at a corner turns more."""
    along = a + np.linspace(0.0, 1.0, SPAN_STEPS)[:, None] * (b - a)
    p, q = ends
    near = _segment_distance(along, p[None], q[None])[:, 0] <= OVERLAP
    if near.mean() > 0.5:
        return True
    touching = near[[0, -1]].any() or (_segment_distance(ends, a[None], b[None])[:, 0] <= OVERLAP).any() \
        or bool(_crosses(a, b[None], p, q)[0])
    turn = np.degrees(np.arccos(min(abs((b - a) @ (q - p)) / (np.linalg.norm(b - a) * np.linalg.norm(q - p)), 1.0)))
    return touching and turn < SAME_TURN_DEG


def _with_panel(views: DepthViews, depth: np.ndarray, panel: Panel) -> np.ndarray:
    """`depth` with the panel in it, where it stands nearer than what was rendered (or nothing was)."""
    h, w = views.size
    own = mesh_depths(panel_mesh([panel]), views.K, views.world_from_cam, w, h)
    nearer = np.isfinite(own) & ((depth <= 0) | (own < depth))
    return np.where(nearer, own, depth)

"""Upright surfaces placed by the photos alone: plane-sweep photo-consistency.

A wall bounding the capture that an inward loop sees only from across the cell, between the machines
before it, keeps few SfM points (its texture is too fine for SIFT at 6-8 m at preview size) and its
splats render it with floaters 30-70 % of the way out (hard seed 4's east wall: no fused or rendered
point within 20 cm of it, 18 SfM points on 10 m2). Its texture still lines up across the views on the one
plane where it lies. Each view's photo, mapped onto a candidate upright plane, is compared with the
others' in small windows (normalized cross-correlation, the mean over the pairs of views); sweeping the
plane's offset outwards from the walk (plane-sweep stereo: Collins 1996; Gallup et al., CVPR 2007), the
views agree on the most cells where the wall lies (hard seed 4: 890 cells, 4 to 30 times as many as on
the planes 0.3 m or more past it), and a cell's own best offset is too noisy to trust: 3 to 5 views see
each. What the known surface hides from a view (the machines before the wall) is left out of its samples.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from twinscan.meshing.views import DepthViews, spread

CELL = 0.03  # metres: the plane's raster (a pixel spans 1.4 cm at 7 m at preview size)
WINDOW = 2  # cells either side: the correlation window is 5 x 5 cells (15 cm)
MIN_WHOLE = (WINDOW + 1) ** 2  # unhidden cells a view needs for one whole window (at a raster's corner, mirrored)
MIN_VIEWS = 3  # a cell's agreement counts where this many views see its whole window
MIN_VARIANCE = 4.0  # grey levels squared: a window flatter than this says nothing (a plain face agrees anywhere)
MIN_AGREEMENT = 0.5  # mean correlation over the pairs of views: a cell they agree on
OCCLUSION = 0.10  # metres: a known surface this much nearer than a sample hides it
MAX_VIEWS = 90  # views spread over the walk (a far wall shows in strips between machines: each view counts)
HEIGHTS = np.arange(0.50, 3.0, CELL)  # metres: nearer the floor, its texture agrees on any plane just past
# the walk (hard seed 4: 332 cells at 0.1-0.25 m on a plane 0.2 m past the west of the walk, where nothing
# stands; a textured room's floor, 55 cells at 0.30-0.36 m on a plane 0.18 m past the walk)
NEAREST, DEPTH = 0.10, 2.50  # metres past the views: the planes swept
COARSE_STEP, FINE_STEP = 0.04, 0.01  # metres: a wall's peak is about 10 cm wide
FINE_REACH = 4 * COARSE_STEP  # metres either side of the coarse peak the fine sweep spans
FINE_SPAN = 5  # fine steps
FINE_CONTRAST = 1.10  # the fine sweep's smoothed agreement peaks where its most is this many times its least: a
# low wall agrees only along its top edge, at every offset within its thickness (hard seed 3: 1.03 over 20 cm,
# its south wall 2.31, its east wall 1.17)
BEYOND = 0.30  # metres: the planes further out than this past the peak are its background ...
PEAK_CONTRAST = 2.0  # ... and it holds this many times their median count of columns agreed on (a low wall
# seen head-on from across the cell peaks broadly: hard seed 3's, 91 columns against 35-59 past it)
COLUMN_CELLS = 3  # a raster column is agreed on where this many of its cells are: a plane is scored by how
# much of its length the views agree on, not its area; a plane crossing a side wall agrees along the line
# where they meet, at every offset (a room without its far wall: 1,101 cells, 12 columns)
MIN_COLUMNS = round(0.5 / CELL)  # columns (0.5 m of wall) agreed on at the peak
TURNS_DEG = (-2.0, -1.5, -1.0, -0.5, 0.5, 1.0, 1.5, 2.0)  # the wall's own yaw is sought this far either side
# of the direction swept (square to the fullest wall, whose fit may itself be a degree off) ...
FINE_TURN_DEG = 0.25  # ... then this far either side of the best
TURN_GAIN = 1.10  # a turn is taken where it agrees on this many times the cells the plane as swept does: a wall
# square to the fullest agrees on about as many over a degree either side (hard seed 4: 1.02 times at most,
# three walls), one a degree off on 2.9-3.8 times as many at its own yaw (default seed 3's three walls; the
# tests' room, 6.5 m away at 160 x 120: 1.17 times)


def turned(level: np.ndarray, yaw: float) -> np.ndarray:
    """The level direction (3,) turned by `yaw` radians about the vertical."""
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([c * level[0] - s * level[1], s * level[0] + c * level[1], 0.0])


@dataclass(frozen=True)
class UprightRaster:
    """Cells on the upright planes {x : x . normal = level}: `along` their horizontal axis (up x normal),
    `heights` above the floor."""

    normal: np.ndarray  # (3,) level unit normal, facing the views
    along: np.ndarray  # (A,) metres
    heights: np.ndarray  # (Z,) metres

    def points(self, level: float) -> np.ndarray:
        """(A, Z, 3) world points of the raster on the plane at `level`."""
        axis = np.cross([0.0, 0.0, 1.0], self.normal)
        return (level * self.normal + self.along[:, None, None] * axis
                + self.heights[None, :, None] * np.array([0.0, 0.0, 1.0]))


def grey_images(views: DepthViews) -> np.ndarray:
    """(N, H, W) float32 grey levels of the views' photos."""
    return np.stack([cv2.cvtColor(colour, cv2.COLOR_RGB2GRAY).astype(np.float32) for colour in views.colour])


@dataclass(frozen=True)
class SweptWall:
    normal: np.ndarray  # (3,) level, facing the views
    level: float  # the plane {x : x . normal = level}
    support: np.ndarray  # (M, 3) raster cells the views agree on there
    peaked: bool  # the fine sweep's agreement peaks there (FINE_CONTRAST), rather than lying flat about it


def swept_wall(views: DepthViews, grey: np.ndarray, known_depth: np.ndarray, normal: np.ndarray,
               along: np.ndarray) -> SweptWall | None:
    """The upright plane beyond every camera where the views' photos agree on the most cells, if it stands
    out (PEAK_CONTRAST) from the planes further out: swept coarse facing `normal`, turned onto the wall's own
    yaw (`_own_yaw`), then swept fine; `along` (A,): the raster along it. None where nothing there agrees."""
    reach = float((views.world_from_cam[:, :3, 3] @ normal).min())  # every view stands before this plane
    chosen = spread(len(views), MAX_VIEWS)
    raster = UprightRaster(normal, along, HEIGHTS)

    def agreed(levels: np.ndarray) -> list[np.ndarray]:
        return [agreeing(views, grey, known_depth, chosen, raster.points(level)) for level in levels]

    coarse = reach - np.arange(NEAREST, DEPTH, COARSE_STEP)
    coarse_cells = agreed(coarse)
    columns = np.array([_columns(cells) for cells in coarse_cells])
    peak = int(np.argmax(columns))
    beyond = columns[coarse <= coarse[peak] - BEYOND]
    if peak == 0 or not len(beyond) or columns[peak] < MIN_COLUMNS or columns[peak] < PEAK_CONTRAST * np.median(beyond):
        return None
    # from here on `agreed` samples the raster as turned
    raster, pivot_level = _own_yaw(views, grey, known_depth, chosen, raster, coarse[peak], coarse_cells[peak])
    fine = pivot_level + np.arange(-FINE_REACH, FINE_REACH + 1e-9, FINE_STEP)
    inner = np.abs(fine - pivot_level) <= FINE_REACH / 2 + 1e-9  # the middle half of the fine sweep
    fine_cells = np.zeros((len(fine), len(raster.along), len(HEIGHTS)), bool)
    fine_cells[inner] = agreed(fine[inner])
    # the cell count smoothed over FINE_SPAN (it varies by +-10 % from one centimetre to the next: hard
    # seed 1's east wall), its contrast over the middle half, whose smoothing reaches no plane past it
    counts = np.convolve(fine_cells.sum(axis=(1, 2)), np.ones(FINE_SPAN) / FINE_SPAN, "same")
    half = np.flatnonzero(inner)
    middle = half[FINE_SPAN // 2:len(half) - FINE_SPAN // 2]
    peaked = bool(counts[middle].max() >= FINE_CONTRAST * max(counts[middle].min(), 1.0))
    if peaked:  # only the columns' median needs the outer planes
        fine_cells[~inner] = agreed(fine[~inner])
    # a flat sweep places nothing (planes._placed does, by the SfM points): its support is where the most
    # cells agree
    best = _column_median(fine_cells) if peaked else int(middle[np.argmax(counts[middle])])
    support = []  # the cells agreed on there and a fine step either side
    for k in (best - 1, best, best + 1):
        if 0 <= k < len(fine):
            level, cells = fine[k], fine_cells[k]
        else:  # past the fine sweep's ends: swept now
            level = fine[best] + (k - best) * FINE_STEP
            cells = agreed(np.array([level]))[0]
        support.append(raster.points(level)[cells])
    return SweptWall(raster.normal, float(fine[best]), np.concatenate(support), peaked)


def _columns(cells: np.ndarray) -> int:
    """How many of the raster's columns (A, Z) the views agree on (COLUMN_CELLS)."""
    return int((cells.sum(axis=1) >= COLUMN_CELLS).sum())


def _own_yaw(views: DepthViews, grey: np.ndarray, known_depth: np.ndarray, chosen: np.ndarray,
             raster: UprightRaster, level: float, cells: np.ndarray) -> tuple[UprightRaster, float]:
    """The raster turned (TURNS_DEG, then FINE_TURN_DEG about the best) about the middle of the columns
    agreed on at the coarse peak (`cells` on the plane at `level`) to where the most cells agree, if that
    gains TURN_GAIN, and its plane's level through that middle. A plane turned a degree from the wall runs
    9 cm nearer it at one end of 5 m than at the other: the views agree on it over a broad plateau whose
    column median lies in front of the face (default seed 3's low wall, swept square to a wall fitted 1.0
    degree off: 339 cells at the coarse peak, 1.4 cm in front; turned 1.0 degree, 977 cells, 0.5 cm). Cells,
    not columns: a wall agreed along its whole length agrees in every column over a degree or two either
    side of its yaw, on most cells only at it."""
    agreed_along = raster.along[np.flatnonzero(cells.sum(axis=1) >= COLUMN_CELLS)]
    axis = np.cross([0.0, 0.0, 1.0], raster.normal)
    pivot = level * raster.normal + float(np.median(agreed_along)) * axis

    def turned_by(turn: float) -> tuple[int, UprightRaster, float]:
        normal = turned(raster.normal, np.radians(turn))
        shift = pivot @ np.cross([0.0, 0.0, 1.0], normal) - pivot @ axis  # the pivot keeps its place in the raster
        candidate, candidate_level = UprightRaster(normal, raster.along + shift, raster.heights), float(pivot @ normal)
        count = int(agreeing(views, grey, known_depth, chosen, candidate.points(candidate_level)).sum())
        return count, candidate, candidate_level

    counted = {turn: turned_by(turn) for turn in TURNS_DEG}
    best = max(counted, key=lambda turn: counted[turn][0])
    counted |= {turn: turned_by(turn) for turn in (best - FINE_TURN_DEG, best + FINE_TURN_DEG) if turn not in counted}
    best = max(counted, key=lambda turn: counted[turn][0])
    count, turned_raster, turned_level = counted[best]
    return (turned_raster, turned_level) if count >= TURN_GAIN * cells.sum() else (raster, level)


def _column_median(cells: np.ndarray) -> int:
    """The fine plane (index into `cells`, (F, A, Z): the cells agreed on at each fine plane) where the
    raster's columns agree, each at the plane where most of its cells do: the median of those planes,
    each column weighted by its count there. The plane where the most cells agree in all leans towards
    the views by 1-2 cm (hard seed 4's three swept walls: 1.2, 1.5, 1.8 cm from their faces; by the
    columns 0.2, 0.5, 0.8), and by 7 cm where a few columns agree at every offset: a wall's end against
    the dark past it, seen from views that look at it from one side, agrees along their rays (hard seed
    7's east wall: 4.8 cm by the columns)."""
    per_column = cells.sum(axis=2)  # (F, A)
    plane, weight = np.argmax(per_column, axis=0), per_column.max(axis=0)
    return int(np.quantile(plane, 0.5, weights=weight, method="inverted_cdf"))


def views_seeing(views: DepthViews, known_depth: np.ndarray, points: np.ndarray, min_points: int) -> int:
    """How many views see at least `min_points` of `points` in their image, unhidden by the known surface."""
    count = 0
    for n in range(len(views)):
        inside, row, col, z = views.pixels(n, points)
        count += int((inside & ~(known_depth[n, row, col] < z - OCCLUSION)).sum() >= min_points)
    return count


def agreeing(views: DepthViews, grey: np.ndarray, known_depth: np.ndarray, chosen: np.ndarray,
              raster: np.ndarray) -> np.ndarray:
    """(A, Z) mask of the raster cells the views agree on (MIN_AGREEMENT, over MIN_VIEWS or more)."""
    agreement, count = _agreement(views, grey, known_depth, chosen, raster)
    return (agreement >= MIN_AGREEMENT) & (count >= MIN_VIEWS)


def _agreement(views: DepthViews, grey: np.ndarray, known_depth: np.ndarray, chosen: np.ndarray,
               raster: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(A, Z) mean normalized cross-correlation over the pairs of views that see each cell's whole window
    unhidden (-1 where fewer than MIN_VIEWS do), and (A, Z) how many do."""
    shape = raster.shape[:2]
    world = raster.reshape(-1, 3)
    h, w = views.size
    total = np.zeros(shape, np.float32)
    squares = np.zeros(shape, np.float32)
    count = np.zeros(shape, np.float32)
    window = (2 * WINDOW + 1, 2 * WINDOW + 1)
    for n in chosen:
        u, v, z = views.project(n, world)
        inside = (z > 0.1) & (u >= 0.5) & (u < w - 0.5) & (v >= 0.5) & (v < h - 0.5)
        if inside.sum() < 2 * WINDOW * WINDOW:
            continue
        row, col = np.clip(v, 0, h - 1).astype(np.int64), np.clip(u, 0, w - 1).astype(np.int64)
        hidden = known_depth[n, row, col] < z - OCCLUSION
        mask = (inside & ~hidden).reshape(shape).astype(np.float32)
        if mask.sum() < MIN_WHOLE:  # no window is whole: the view adds nothing (a side seen from behind its box)
            continue
        value = cv2.remap(grey[n], (u - 0.5).astype(np.float32).reshape(shape), (v - 0.5).astype(np.float32).reshape(shape),
                          cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        whole = cv2.boxFilter(mask, -1, window) > 0.999
        mean = cv2.boxFilter(value, -1, window)
        variance = cv2.boxFilter(value * value, -1, window) - mean * mean
        usable = whole & (variance >= MIN_VARIANCE)
        normalized = np.where(usable, (value - mean) / np.sqrt(np.maximum(variance, 1e-6)), 0.0).astype(np.float32)
        total += normalized
        squares += normalized * normalized
        count += usable
    # sum over pairs of views of the windowed products = window mean of (sum^2 - sum of squares)
    pairs = cv2.boxFilter(total * total - squares, -1, window)
    agreement = np.where(count >= MIN_VIEWS, pairs / np.maximum(count * (count - 1), 1.0), -1.0)
    return agreement.astype(np.float32), count.astype(np.int16)

"""The floor carried past its last SfM points where the photos agree on it.

An inward loop sees the floor behind its own walk only from across the cell, 6-8 m off at grazing
angles: no SfM point, splat or fused face lies there (hard seeds 1 and 2: the slab stopped at the
walkway margin, 0.37 m short of the floor's open west edge). The floor's texture still lines up across
the views on the floor's plane, and much less on level planes a few centimetres above or below it: a
level plane sweep, as the walls' upright one (meshing/sweep.py). Strip by strip out from each side of
the floor's rectangle, the floor runs on while the views agree on a strip at the floor's height more
than at any height OFF_FLOOR or further from it; past the floor's edge (background, a drop, or a wall
the collider holds, which hides it) they agree on nothing there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from twinscan.meshing.floor import Floor
from twinscan.meshing.sweep import CELL, MAX_VIEWS, WINDOW, agreeing
from twinscan.meshing.views import DepthViews, spread

STRIP = 0.10  # metres: the floor is carried on by strips this deep ...
REACH = 1.5  # metres: ... up to this far past a side
INSIDE = 0.15  # metres of the floor within the side swept too: a window at the raster's edge is mirrored
HEIGHTS = np.arange(-0.08, 0.081, 0.02)  # metres about the floor's height: the level planes swept
OFF_FLOOR = 0.04  # metres: heights this far or further from the floor are its background ...
CONTRAST = 2.0  # ... and a strip of floor holds this many times their most cells agreed on at the floor's height
MIN_CELLS_PER_METRE = 1.0  # ... and at least this many per metre of the side (hard seed 1's west strips,
# seen 6-8 m off: 32-47 on 8.8 m; past the floor's edge, the dark: 0-2 at the floor's height, up to 12 below it)


def photographed_floor(floor: Floor, views: DepthViews, grey: np.ndarray, known_depth: np.ndarray,
                       open_sides: np.ndarray) -> Floor:
    """`floor` with each of its `open_sides` ((2, 2): [min, max] x [x, y], True where the floor's extent
    there is not its SfM points') carried out over the strips the photos (`grey`, from `sweep.grey_images`)
    agree on as floor, from the side on without a gap; `known_depth`: the collider and the floor's slab in
    every view (what hides a level plane: the floor known hides what lies under it), inf where there is none.

    Where the SfM points reach a side they stop at the floor's edge (`floor.within_points`), and past an edge
    the photos may still agree on z = 0: a far backdrop that only darkens with the view's elevation looks
    the same from neighbouring views (the sample's border lap, 1-2 m from the floor's edge: 10-20 cm of
    floor past it)."""
    chosen = spread(len(views), MAX_VIEWS)
    bounds = np.array(floor.bounds_xy, dtype=float)
    carried = bounds.copy()
    for axis in (0, 1):
        along = np.arange(bounds[0, 1 - axis], bounds[1, 1 - axis], CELL) + CELL / 2
        for end, outward in ((0, -1.0), (1, 1.0)):
            if not open_sides[end, axis]:
                continue
            side = _Side(bounds[end, axis], outward, axis, along)
            carried[end, axis] += outward * _floor_reach(views, grey, known_depth, chosen, floor.height, side)
    return replace(floor, bounds_xy=carried)


@dataclass(frozen=True)
class _Side:
    position: float  # metres along `axis` where the side stands
    outward: float  # +1 or -1: the way past it along `axis`
    axis: int  # 0: the side runs along y; 1: along x
    along: np.ndarray  # (A,) cell centres along the side


def _floor_reach(views: DepthViews, grey: np.ndarray, known_depth: np.ndarray, chosen: np.ndarray,
                 height: float, side: _Side) -> float:
    """How far past the side, from it on without a gap, the photos agree on a floor at `height` (metres).
    A window reaching over the floor's edge still agrees on the floor it holds, so the strips agreed on
    overshoot the edge by up to WINDOW cells: that much of them is left out."""
    beyond = np.arange(-INSIDE, REACH, CELL) + CELL / 2
    past = beyond > 0
    agreed = np.stack([_strips(agreeing(views, grey, known_depth, chosen,
                                        _level_raster(side.position + side.outward * beyond, side.along, side.axis,
                                                      height + offset))[past], beyond[past])
                       for offset in HEIGHTS])
    background = agreed[np.abs(HEIGHTS) >= OFF_FLOOR - 1e-9].max(axis=0)
    at_floor = agreed[int(np.argmin(np.abs(HEIGHTS)))]
    floor_like = (at_floor >= MIN_CELLS_PER_METRE * np.ptp(side.along)) & (at_floor >= CONTRAST * background)
    if floor_like.all():
        return REACH
    return max(int(np.argmin(floor_like)) * STRIP - WINDOW * CELL, 0.0)


def _level_raster(out: np.ndarray, along: np.ndarray, axis: int, height: float) -> np.ndarray:
    """(O, A, 3) points at `height`: `out` (O,) on `axis`, `along` (A,) on the other."""
    first, second = np.meshgrid(out, along, indexing="ij")
    plan = (first, second) if axis == 0 else (second, first)
    return np.stack([*plan, np.full(first.shape, height)], axis=-1)


def _strips(agreed: np.ndarray, beyond: np.ndarray) -> np.ndarray:
    """(S,) cells agreed on in each STRIP-deep strip past the side; `agreed` (O, A) over `beyond` (O,)."""
    strip = np.floor(beyond / STRIP).astype(np.int64)
    return np.bincount(strip, weights=agreed.sum(axis=1), minlength=int(round(REACH / STRIP)))

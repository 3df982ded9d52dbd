"""Where things go in the view: the floor's extent, the grid, the scale bar, the start camera (pure numpy)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from twinscan.view.twin import TwinView


@dataclass(frozen=True)
class Layout:
    floor_min: np.ndarray  # (2,) xy
    floor_max: np.ndarray
    centre: np.ndarray  # (3,) what the start camera looks at
    radius: float  # of the scene around its centre

    @property
    def grid_size(self) -> tuple[float, float, np.ndarray]:
        """Width and height in whole metres covering the floor, centred on the twin's origin so that the
        grid's lines fall on whole metres of x and y."""
        reach = np.maximum(np.abs(np.floor(self.floor_min)), np.abs(np.ceil(self.floor_max)))
        return float(max(2 * reach[0], 2.0)), float(max(2 * reach[1], 2.0)), np.zeros(3)

    def scale_bar(self, length: float = 1.0) -> np.ndarray:
        """(4, 2, 3) segments: a `length` bar along +X from the twin's origin, just beside the X axis, with
        end ticks and a middle tick."""
        x0, y0 = 0.0, -0.15 * length
        z, tick = 0.01, 0.08 * length
        return np.array([[[x0, y0, z], [x0 + length, y0, z]],
                         [[x0, y0 - tick, z], [x0, y0 + tick, z]],
                         [[x0 + length, y0 - tick, z], [x0 + length, y0 + tick, z]],
                         [[x0 + length / 2, y0 - tick / 2, z], [x0 + length / 2, y0 + tick / 2, z]]])

    def start_camera(self) -> tuple[np.ndarray, np.ndarray]:
        """(position, look_at): from above one corner, looking down at the centre at ~35 degrees."""
        distance = 1.25 * self.radius
        direction = np.array([-0.6, -0.75, 0.55])
        return self.centre + distance * direction / np.linalg.norm(direction), self.centre


def layout(view: TwinView) -> Layout:
    """The floor from the floor slab when there is one, else from the splats (2nd-98th percentiles); the
    start view frames the floor and the capture cameras (far floaters among the splats would shrink it)."""
    centers = view.splats.centers.astype(np.float64)
    low, high = np.percentile(centers, 2, axis=0), np.percentile(centers, 98, axis=0)
    if view.floor is not None:
        floor_min, floor_max = view.floor.vertices[:, :2].min(axis=0), view.floor.vertices[:, :2].max(axis=0)
    else:
        floor_min, floor_max = low[:2], high[:2]
    framed = [np.array([[*floor_min, 0.0], [*floor_max, 0.0]])]
    if view.cameras:
        framed.append(np.array([camera.world_from_cam[:3, 3] for camera in view.cameras]))
    if view.floor is None and not view.cameras:
        framed.append(np.stack([low, high]))
    framed_points = np.concatenate(framed)
    box_low, box_high = framed_points.min(axis=0), framed_points.max(axis=0)
    centre = np.array([(box_low[0] + box_high[0]) / 2, (box_low[1] + box_high[1]) / 2,
                       max(0.0, float(np.median(centers[:, 2])) * 0.5)])
    radius = max(float(np.linalg.norm(box_high[:2] - box_low[:2])) / 2, 0.5)
    return Layout(np.asarray(floor_min, np.float64), np.asarray(floor_max, np.float64), centre,
                  radius if math.isfinite(radius) else 5.0)

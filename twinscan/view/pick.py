"""What a click in the viewer hits: the nearest opaque splat along the ray, else the colliders, else
the floor plane z = 0; and how far that point lies from the colliders."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from twinscan.view.meshes import Triangles

RAY_RADIUS_RAD = 0.004  # a splat centre this close to the ray (in angle) counts as under the cursor
MIN_PICK_OPACITY = 0.3


@dataclass(frozen=True)
class Pick:
    point: tuple[float, float, float]
    hit: str  # "splats", "colliders" or "floor plane"
    collider_distance_m: float | None  # None when there are no colliders

    def line(self) -> str:
        x, y, z = self.point
        text = f"({x:.3f}, {y:.3f}, {z:.3f}) m on the {self.hit}"
        if self.collider_distance_m is not None:
            text += f"; {100 * self.collider_distance_m:.1f} cm from the collider"
        return text


def splat_hit(origin: np.ndarray, direction: np.ndarray, centers: np.ndarray, opacities: np.ndarray,
              radius_rad: float = RAY_RADIUS_RAD) -> np.ndarray | None:
    """The nearest splat centre in front of the ray within `radius_rad` of it (opaque ones only)."""
    offset = centers.astype(np.float64) - origin
    along = offset @ direction
    across = np.linalg.norm(offset - along[:, None] * direction, axis=1)
    near = (along > 1e-3) & (across <= radius_rad * np.maximum(along, 1e-3)) & (opacities.ravel() >= MIN_PICK_OPACITY)
    if not near.any():
        return None
    index = np.flatnonzero(near)[np.argmin(along[near])]
    return centers[index].astype(np.float64)


class ColliderQueries:
    """Ray casts and point distances against the colliders (open3d, built once)."""

    def __init__(self, colliders: list[Triangles]) -> None:
        from twinscan.optional import open3d

        o3d = open3d()
        self.scene = o3d.t.geometry.RaycastingScene()
        self.empty = True
        for mesh in colliders:
            if mesh.count:
                self.scene.add_triangles(mesh.vertices.astype(np.float32), mesh.faces.astype(np.uint32))
                self.empty = False
        self._o3d = o3d

    def cast(self, origin: np.ndarray, direction: np.ndarray) -> np.ndarray | None:
        if self.empty:
            return None
        rays = self._o3d.core.Tensor(np.concatenate([origin, direction])[None].astype(np.float32))
        distance = float(self.scene.cast_rays(rays)["t_hit"].numpy()[0])
        return origin + distance * direction if np.isfinite(distance) else None

    def distance(self, point: np.ndarray) -> float | None:
        if self.empty:
            return None
        query = self._o3d.core.Tensor(point[None].astype(np.float32))
        return float(self.scene.compute_distance(query).numpy()[0])


def pick(origin, direction, centers: np.ndarray, opacities: np.ndarray,
         colliders: ColliderQueries | None) -> Pick | None:
    """The point a click ray hits first (splats, then colliders, then z = 0), or None for the sky."""
    origin = np.asarray(origin, np.float64)
    direction = np.asarray(direction, np.float64)
    direction = direction / np.linalg.norm(direction)
    candidates = []
    if len(centers):
        point = splat_hit(origin, direction, centers, opacities)
        if point is not None:
            candidates.append((point, "splats"))
    if colliders is not None:
        point = colliders.cast(origin, direction)
        if point is not None:
            candidates.append((point, "colliders"))
    if not candidates and direction[2] < -1e-9 and origin[2] > 0:
        candidates.append((origin + (-origin[2] / direction[2]) * direction, "floor plane"))
    if not candidates:
        return None
    point, hit = min(candidates, key=lambda c: float((c[0] - origin) @ direction))
    distance = colliders.distance(point) if colliders is not None else None
    return Pick(tuple(float(v) for v in point), hit, distance)

"""How far to trust each collider face: how many kept frames saw it, how squarely, and from how near.

A face that one frame glimpsed at a grazing angle from across the cell is a guess, however solid it
looks in the simulator. Each view that sees a face's centre (unoccluded by the collider itself) adds
evidence w = |cos(angle between the face normal and the ray)| * min(1, good pixel footprint / actual
footprint); the confidence is 1 - exp(-sum(w) / VIEWS_FOR_TRUST), so two square, near views give 0.63,
four give 0.86, one grazing glimpse from far away stays near 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import trimesh

from twinscan.meshing.raycast import mesh_depths
from twinscan.meshing.views import DepthViews

VIEWS_FOR_TRUST = 2.0  # evidence (in square, near views) that takes the confidence to 1 - 1/e
UNCERTAIN_BELOW = 0.5  # faces under this confidence are called uncertain
GRAZING_COS = float(np.cos(np.radians(70.0)))  # seen only beyond 70 degrees from square-on is grazing
GOOD_FOOTPRINT_M = 0.01  # a pixel covering at most 1 cm of the surface counts in full


@dataclass(frozen=True)
class FaceConfidence:
    confidence: np.ndarray  # (F,) in [0, 1]
    views: np.ndarray  # (F,) how many views saw the face's centre
    best_cos: np.ndarray  # (F,) the squarest view's |cos| (0 where unseen)
    nearest_footprint_m: np.ndarray  # (F,) the nearest view's pixel footprint, metres (inf where unseen)

    @property
    def uncertain(self) -> np.ndarray:
        return self.confidence < UNCERTAIN_BELOW

    def summary(self, areas: np.ndarray) -> dict[str, float]:
        """Area-weighted figures, and why the uncertain faces are uncertain (first reason that applies)."""
        total = float(areas.sum())
        uncertain = self.uncertain
        few = uncertain & (self.views < 2)
        grazing = uncertain & ~few & (self.best_cos < GRAZING_COS)
        far = uncertain & ~few & ~grazing & (self.nearest_footprint_m > GOOD_FOOTPRINT_M)

        def share(mask: np.ndarray) -> float:
            return round(float(areas[mask].sum()) / total, 4) if total > 0 else 0.0

        median = float(np.quantile(self.confidence, 0.5, weights=areas, method="inverted_cdf")) if total > 0 else 0.0
        return {"median": round(median, 3), "uncertain_share": share(uncertain),
                "uncertain_m2": round(float(areas[uncertain].sum()), 3), "few_views_share": share(few),
                "grazing_share": share(grazing), "far_share": share(far)}


def face_confidence(mesh: trimesh.Trimesh, views: DepthViews, tolerance: float) -> FaceConfidence:
    """Per-face evidence from `views`' cameras (their depth and colour are not used: the mesh's own
    depth decides what each camera sees, within `tolerance` metres)."""
    height, width = views.size
    own = DepthViews(depth=mesh_depths(mesh, views.K, views.world_from_cam, width, height),
                     colour=np.zeros((len(views), height, width, 3), np.uint8),
                     alpha=np.ones((len(views), height, width), np.float32), K=views.K,
                     world_from_cam=views.world_from_cam)
    centres, normals = mesh.triangles_center, mesh.face_normals
    seen = own.seen_by(centres, tolerance)
    evidence = np.zeros(len(centres))
    count = seen.sum(axis=0)
    best_cos = np.zeros(len(centres))
    nearest = np.full(len(centres), np.inf)
    for i in range(len(views)):
        if not seen[i].any():
            continue
        rays = centres[seen[i]] - views.world_from_cam[i, :3, 3]
        distance = np.linalg.norm(rays, axis=1)
        cos = np.abs(np.einsum("ij,ij->i", rays, normals[seen[i]])) / np.maximum(distance, 1e-9)
        focal = float(np.sqrt(views.K[i, 0, 0] * views.K[i, 1, 1]))
        footprint = distance / focal
        evidence[seen[i]] += cos * np.minimum(1.0, GOOD_FOOTPRINT_M / footprint)
        best_cos[seen[i]] = np.maximum(best_cos[seen[i]], cos)
        nearest[seen[i]] = np.minimum(nearest[seen[i]], footprint)
    return FaceConfidence(1.0 - np.exp(-evidence / VIEWS_FOR_TRUST), count, best_cos, nearest)

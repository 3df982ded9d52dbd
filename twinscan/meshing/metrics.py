"""How good a mesh is against known geometry: accuracy, completeness, floor flatness, floaters.

Pure functions on trimesh meshes; nearest-surface queries by open3d ray casting (exact distances
to triangles, not to vertices).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import trimesh

from twinscan.meshing.cleanup import unsupported_components
from twinscan.meshing.raycast import raycasting_scene
from twinscan.meshing.views import DepthViews


def surface_distance(mesh: trimesh.Trimesh, points: np.ndarray) -> np.ndarray:
    """Unsigned distance from each point to the nearest point on `mesh`'s triangles."""
    distance = raycasting_scene(mesh.vertices, mesh.faces).compute_distance(np.asarray(points, np.float32))
    return distance.numpy().astype(np.float64)


def sample_surface(mesh: trimesh.Trimesh, count: int, seed: int = 0) -> np.ndarray:
    """`count` points spread uniformly by area over the mesh (deterministic for a seed)."""
    points, _ = trimesh.sample.sample_surface(mesh, count, seed=seed)
    return np.asarray(points)


def accuracy(mesh: trimesh.Trimesh, truth: trimesh.Trimesh, samples: int = 100_000) -> dict[str, float]:
    """Distance (metres) from points on `mesh` to the true surface: how far the mesh strays."""
    distance = surface_distance(truth, sample_surface(mesh, samples))
    return {"median": float(np.median(distance)), "p95": float(np.percentile(distance, 95)),
            "mean": float(distance.mean())}


def seen_surface_points(truth: trimesh.Trimesh, views: DepthViews, samples: int = 100_000,
                        tolerance: float = 0.01, min_views: int = 1) -> np.ndarray:
    """Points of the true surface that at least `min_views` views saw (unoccluded, inside the image)."""
    points = sample_surface(truth, samples)
    return points[views.seen_by(points, tolerance).sum(axis=0) >= min_views]


def completeness(mesh: trimesh.Trimesh, seen_points: np.ndarray, threshold: float = 0.05) -> float:
    """Fraction of seen true-surface points within `threshold` metres of the mesh."""
    return float((surface_distance(mesh, seen_points) <= threshold).mean())


def floor_flatness(mesh: trimesh.Trimesh, band: float = 0.05, max_tilt_deg: float = 10.0,
                   samples: int = 50_000) -> dict[str, float]:
    """RMS height (metres) about z = 0 of the mesh's floor: faces facing up within `band` of z = 0.

    `area` is the floor area found; RMS is 0 for an empty floor, so check the area too.
    """
    normals = mesh.face_normals
    centres = mesh.triangles_center
    floor = (normals[:, 2] >= np.cos(np.radians(max_tilt_deg))) & (np.abs(centres[:, 2]) <= band)
    area = float(mesh.area_faces[floor].sum())
    if not floor.any():
        return {"rms": 0.0, "area": 0.0}
    points = sample_surface(mesh.submesh([np.flatnonzero(floor)], append=True), samples)
    return {"rms": float(np.sqrt(np.mean(points[:, 2] ** 2))), "area": area}


def floating_components(mesh: trimesh.Trimesh, tolerance: float = 0.05) -> int:
    """Components neither resting on the floor (z = 0) nor touching, through others, one that does.

    Judged on the surface alone: a textured mesh's UV seams split vertices, and pieces cut out
    by seams are not components.
    """
    surface = trimesh.Trimesh(mesh.vertices, mesh.faces, process=False)
    surface.merge_vertices(merge_tex=True, merge_norm=True)
    _, floating = unsupported_components(surface, tolerance)
    return int(floating.sum())


FLOOR_SPLIT_M = 0.02  # above this height a point belongs to the structure, at or below it to the floor
UNDER_FLOOR_M = -0.01  # reconstruction below this height (the floor slab's underside) is out of any robot's reach
THRESHOLDS_M = (0.02, 0.05)


@dataclass(frozen=True)
class RegionScore:
    """One region (floor or structure) of a reconstructed surface against the true one.

    Accuracy and precision look from the reconstruction (its surface samples in the region) to the true
    surface; completeness looks from the true points seen in the region to the reconstruction. F-score
    at t is the harmonic mean of precision and completeness at t, as in Tanks and Temples.
    """

    region: str
    true_points: int  # seen true-surface points in the region
    samples: int  # reconstruction surface samples in the region
    median: float  # accuracy, metres
    p95: float
    precision: dict[float, float]  # threshold (m) -> fraction of samples within it of the truth
    completeness: dict[float, float]  # threshold (m) -> fraction of true points within it of the surface

    def f_score(self, threshold: float) -> float:
        p, r = self.precision[threshold], self.completeness[threshold]
        return 2 * p * r / (p + r) if p + r > 0 else 0.0


def region_scores(surface: trimesh.Trimesh, truth: trimesh.Trimesh, seen_points: np.ndarray,
                  samples: int = 1_000_000, split_z: float = FLOOR_SPLIT_M,
                  thresholds: tuple[float, ...] = THRESHOLDS_M) -> dict[str, RegionScore]:
    """Floor and structure scored apart, so a large flat floor cannot hide a poor structure above it.

    A reconstruction sample belongs to the region of its own height, a true point to the region of its
    height; distances are always to the whole other surface (a wall's foot may lie within the floor band).
    Reconstruction under the floor (the slab's sides and underside) is left out: nothing reaches it.
    `samples` over the whole surface: at 200,000 (the structure held a third of them) the hard cells'
    structure p95 moved by up to 0.07 cm with the sampling seed, as much as the bar's margin; at 1,000,000
    by 0.012 cm (docs/benchmarks.md, session 29).
    """
    points = sample_surface(surface, samples)
    points = points[points[:, 2] >= UNDER_FLOOR_M]
    to_truth = surface_distance(truth, points)
    to_surface = surface_distance(surface, seen_points)
    scores = {}
    for region, in_sample, in_truth in (("floor", points[:, 2] <= split_z, seen_points[:, 2] <= split_z),
                                        ("structure", points[:, 2] > split_z, seen_points[:, 2] > split_z)):
        mine, theirs = to_truth[in_sample], to_surface[in_truth]
        scores[region] = RegionScore(
            region, int(in_truth.sum()), int(in_sample.sum()),
            float(np.median(mine)) if len(mine) else float("nan"),
            float(np.percentile(mine, 95)) if len(mine) else float("nan"),
            {t: float((mine <= t).mean()) if len(mine) else 0.0 for t in thresholds},
            {t: float((theirs <= t).mean()) if len(theirs) else float("nan") for t in thresholds})
    return scores

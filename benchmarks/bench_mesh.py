"""Mesh stage core vs open3d Poisson reconstruction, on the same views of the synthetic factory cell.

Renders colour and exact depth of `twinscan.synth`'s cell from a walk around it (the ground truth
mesh is known), then meshes the same views two ways in the same run:
  - twinscan: TSDF fusion + cleanup + floor + decimation + texture (`build_meshes`, preset config);
  - Poisson: the back-projected point cloud, normals estimated and turned towards their camera,
    screened Poisson (open3d, depth 9), low-density vertices (lowest 2 %) trimmed, as usually done.
Prints time, accuracy (mesh to truth), completeness (truth seen by >= 1 / >= 2 views, within 5 cm),
floor flatness and floating components of both.

    python benchmarks/bench_mesh.py [--views 30] [--width 480] [--quality preview]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import trimesh

from twinscan.meshing import DepthViews, MeshConfig, build_meshes, metrics
from twinscan.meshing.raycast import look_at
from twinscan.optional import open3d
from twinscan.presets import get_preset
from twinscan.synth import build_scene, intrinsics, render_frame, scene_mesh


def walk_views(views: int, width: int, height: int) -> DepthViews:
    """Two loops around the cell (eye height and crouched), as a technician's walkthrough."""
    scene = build_scene(seed=0)
    K = intrinsics(width, height, hfov_deg=65.0)
    cameras = [look_at((radius * np.cos(a), radius * np.sin(a), eye), (0, 0, 0.45))
               for radius, eye, count in [(3.7, 1.5, views - views // 3), (2.9, 0.9, views // 3)]
               for a in np.linspace(0, 2 * np.pi, count, endpoint=False)]
    renders = [render_frame(scene, K, world_from_cam, width, height, samples=1) for world_from_cam in cameras]
    depth = np.stack([r.depth for r in renders]).astype(np.float32)
    K_centre_half = K + np.array([[0, 0, 0.5], [0, 0, 0.5], [0, 0, 0]])  # synth: centres at integers
    return DepthViews(depth=depth, colour=np.stack([r.rgb for r in renders]),
                      alpha=np.isfinite(depth).astype(np.float32), K=np.repeat(K_centre_half[None], len(cameras), 0),
                      world_from_cam=np.stack(cameras))


def poisson(views: DepthViews, depth: int = 9, trim_quantile: float = 0.02) -> trimesh.Trimesh:
    o3d = open3d()
    points, colours = views.points(stride=2)
    per_view = views.valid(0.5)[:, ::2, ::2].reshape(len(views), -1).sum(1)
    centres = np.repeat(views.world_from_cam[:, :3, 3], per_view, axis=0)
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
    cloud.colors = o3d.utility.Vector3dVector(colours / 255.0)
    cloud.estimate_normals(o3d.geometry.KDTreeSearchParamKNN(30))
    normals = np.asarray(cloud.normals)
    flip = ((centres - points) * normals).sum(1) < 0
    normals[flip] *= -1
    cloud.normals = o3d.utility.Vector3dVector(normals)
    mesh, density = o3d.geometry.TriangleMesh.create_from_point_cloud_poisson(cloud, depth=depth)
    density = np.asarray(density)
    mesh.remove_vertices_by_mask(density < np.quantile(density, trim_quantile))
    return trimesh.Trimesh(np.asarray(mesh.vertices), np.asarray(mesh.triangles), process=True)


def scores(mesh: trimesh.Trimesh, truth: trimesh.Trimesh, seen: np.ndarray, seen_twice: np.ndarray) -> dict:
    accuracy = metrics.accuracy(mesh, truth)
    return {"median_cm": accuracy["median"] * 100, "p95_cm": accuracy["p95"] * 100,
            "complete_%": metrics.completeness(mesh, seen) * 100,
            "complete2_%": metrics.completeness(mesh, seen_twice) * 100,
            "floor_rms_cm": metrics.floor_flatness(mesh)["rms"] * 100,
            "floating": metrics.floating_components(mesh), "faces": len(mesh.faces)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--views", type=int, default=30)
    parser.add_argument("--width", type=int, default=480)
    parser.add_argument("--quality", default="preview")
    args = parser.parse_args()

    started = time.time()
    views = walk_views(args.views, args.width, args.width * 3 // 4)
    truth = scene_mesh(build_scene(seed=0))
    seen = metrics.seen_surface_points(truth, views, samples=200_000)
    seen_twice = metrics.seen_surface_points(truth, views, samples=200_000, min_views=2)
    print(f"{len(views)} views {args.width}x{args.width * 3 // 4} rendered in {time.time() - started:.1f} s; "
          f"{len(seen)} seen ground-truth points")

    rows = {}
    started = time.time()
    result = build_meshes(views, MeshConfig.from_preset(get_preset(args.quality)))
    seconds = time.time() - started
    with_floor = trimesh.util.concatenate([result.collision, result.floor_slab])
    rows["twinscan visual"] = {"seconds": seconds, **scores(result.visual, truth, seen, seen_twice)}
    rows["twinscan collision+slab"] = {"seconds": seconds, **scores(with_floor, truth, seen, seen_twice)}
    started = time.time()
    baseline = poisson(views)
    rows["open3d Poisson (d=9)"] = {"seconds": time.time() - started, **scores(baseline, truth, seen, seen_twice)}

    columns = ["seconds", "median_cm", "p95_cm", "complete_%", "complete2_%", "floor_rms_cm", "floating", "faces"]
    print(f"{'method':26s}" + "".join(f"{c:>14s}" for c in columns))
    for name, row in rows.items():
        print(f"{name:26s}" + "".join(f"{row[c]:14.2f}" if isinstance(row[c], float) else f"{row[c]:14d}"
                                      for c in columns))
    print("acceptance: median <= 2 cm, p95 <= 6 cm, complete >= 90 %, floor RMS <= 1 cm, floating = 0;\n"
          "complete: truth seen by >= 1 view within 5 cm; complete2: seen by >= 2 views")
    print("twinscan figures:", result.figures)


if __name__ == "__main__":
    main()

"""Mesh stage core vs open3d Poisson reconstruction, same views, same run.

Two sources of views:
  - default: colour and exact depth of `twinscan.synth`'s cell rendered from a walk around it (the
    mesher alone, on perfect depth);
  - `--capture OUT`: a finished capture of the bundled sample, as the mesh stage sees it (the
    SfM-supported splats rendered at the training cameras), scored in the twin's own frame
    against the sample's ground truth (as benchmarks/eval_twin.py); Poisson then also meshes the
    sparse SfM points.
Meshed by:
  - twinscan: TSDF fusion + cleanup + floor + decimation + texture (`build_meshes`, preset config);
    with `--capture`, also with each `--variant FIELD=VALUE` of the config in the same run (default:
    `planes.enabled=false`, the plain median-depth TSDF colliders without planar completion; e.g.
    `min_agreeing_views=0` to fuse every depth pixel unconfirmed); their colliders (collision mesh, planar patches
    and floor slab) are also scored floor and structure apart (accuracy, completeness and F-score at 2
    and 5 cm, truth seen by >= 2);
  - Poisson: the point cloud (back-projected views, or SfM points), normals estimated and turned
    towards a camera that saw the point, screened Poisson (open3d), low-density vertices (lowest 2 %)
    trimmed, as usually done.
Prints time, accuracy (mesh to truth), completeness (truth seen by >= 1 / >= 2 views, within 5 cm),
floor flatness and floating components of each.

    python benchmarks/bench_mesh.py [--views 30] [--width 480] [--quality preview]
    python benchmarks/bench_mesh.py --capture OUT [--quality preview] [--variant planes.enabled=false]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pycolmap
import trimesh
from eval_twin import SAMPLE, truth_in_twin

from twinscan.meshing import DepthViews, MeshConfig, build_meshes, metrics
from twinscan.meshing.build import MeshResult
from twinscan.meshing.stage import stage_views
from twinscan.camera import look_at
from twinscan.optional import open3d
from twinscan.presets import get_preset
from twinscan.synth import build_scene, intrinsics, render_frame, scene_mesh
from twinscan.runtime import init_runtime
from twinscan.workspace import Workspace


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
    """Poisson on the views' back-projected pixels (every second one)."""
    points, _ = views.points(stride=2)
    per_view = views.valid(0.5)[:, ::2, ::2].reshape(len(views), -1).sum(1)
    return poisson_points(points, np.repeat(views.world_from_cam[:, :3, 3], per_view, axis=0), depth, trim_quantile)


def poisson_points(points: np.ndarray, centres: np.ndarray, depth: int = 9,
                   trim_quantile: float = 0.02) -> trimesh.Trimesh:
    """Screened Poisson on `points`, each normal turned towards `centres` (a camera that saw it)."""
    o3d = open3d()
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
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


def sfm_points_and_observers(ws: Path) -> tuple[np.ndarray, np.ndarray]:
    """The capture's SfM points (twin frame) and, for each, the centre of the first camera that saw it."""
    model = pycolmap.Reconstruction(ws / "sfm")
    centres = {image_id: image.projection_center() for image_id, image in model.images.items() if image.has_pose}
    points = [(point.xyz, centres[point.track.elements[0].image_id]) for point in model.points3D.values()]
    return np.array([p for p, _ in points]), np.array([c for _, c in points])


def timed(make):
    """(what `make()` returns, seconds it took)."""
    started = time.time()
    made = make()
    return made, time.time() - started


def twinscan_and_poisson(views: DepthViews, cfg: MeshConfig, truth: trimesh.Trimesh, seen: np.ndarray,
                         seen_twice: np.ndarray, poisson_depth: int,
                         sfm_points: np.ndarray | None = None, sfm_floor: bool = False) -> tuple[dict, MeshResult]:
    """Rows for twinscan's meshes and for Poisson on the same views' back-projected pixels."""
    result, seconds = timed(lambda: build_meshes(views, cfg, sfm_points=sfm_points, sfm_floor=sfm_floor))
    rows = {"twinscan visual": {"seconds": seconds, **scores(result.visual, truth, seen, seen_twice)}}
    if result.floor is not None:  # completeness only: the slab's exact, flat top would flatter accuracy
        slab_top = trimesh.creation.box(bounds=np.append(result.floor.bounds_xy, [[-1e-4], [0.0]], axis=1))
        with_slab = scores(trimesh.util.concatenate([result.visual, slab_top]), truth, seen, seen_twice)
        rows["twinscan visual + slab top"] = {"seconds": seconds, **with_slab, "median_cm": np.nan, "p95_cm": np.nan}
    dense, seconds = timed(lambda: poisson(views, depth=poisson_depth))
    rows[f"Poisson, views (d={poisson_depth})"] = {"seconds": seconds, **scores(dense, truth, seen, seen_twice)}
    return rows, result


def with_variant(cfg: MeshConfig, variant: str) -> MeshConfig:
    """`cfg` with 'field=value' applied, the value typed as the field is; 'planes.enabled=false' reaches
    into a nested config."""
    key, _, text = variant.partition("=")
    head, _, rest = key.partition(".")
    if rest:
        return replace(cfg, **{head: with_variant(getattr(cfg, head), f"{rest}={text}")})
    kind = type(getattr(cfg, key))
    return replace(cfg, **{key: text.lower() in ("1", "true", "yes") if kind is bool else kind(text)})


def capture_rows(ws: Path, sample: Path, cfg: MeshConfig, variants: list[str]) -> tuple[dict, dict]:
    """twinscan (the preset's config and each variant of it) and Poisson (on the splat renders and on
    the SfM points) on a finished capture, scored in its twin frame."""
    twin, _ = truth_in_twin(ws, sample)
    (views, _, points, sfm_floor), seconds = timed(lambda: stage_views(Workspace(ws), cfg))
    print(f"rendered {len(views)} views of the supported splats in {seconds:.0f} s (shared by twinscan and "
          f"dense Poisson, not in their times); {len(twin.seen)} seen ground-truth points")
    rows, result = twinscan_and_poisson(views, cfg, twin.scene, twin.seen, twin.seen_twice, poisson_depth=10,
                                        sfm_points=points, sfm_floor=sfm_floor)
    results = {"preset config (today)": result}
    for variant in variants:
        changed = with_variant(cfg, variant)
        results[variant], seconds = timed(
            lambda: build_meshes(views, changed, sfm_points=points, sfm_floor=sfm_floor))
        rows[f"twinscan visual, {variant}"] = {
            "seconds": seconds, **scores(results[variant].visual, twin.scene, twin.seen, twin.seen_twice)}
    sparse, seconds = timed(lambda: poisson_points(*sfm_points_and_observers(ws), depth=8))
    rows["Poisson, SfM points (d=8)"] = {"seconds": seconds,
                                         **scores(sparse, twin.scene, twin.seen, twin.seen_twice)}
    print_collider_regions(results, twin)
    return rows, result.figures


def print_collider_regions(results: dict[str, MeshResult], twin) -> None:
    """Each variant's colliders (collision mesh, planar patches, slab: what twin.usda holds), floor and
    structure apart."""
    print("\n| colliders | region | accuracy median cm | p95 cm | completeness @2 / @5 cm % | F @2 / @5 cm |")
    print("|---|---|---|---|---|---|")
    for name, result in results.items():
        colliders = trimesh.util.concatenate([m for m in (result.collision, result.planes, result.floor_slab)
                                              if m is not None])
        for region, score in metrics.region_scores(colliders, twin.scene, twin.seen_twice).items():
            print(f"| {name} | {region} | {score.median * 100:.2f} | {score.p95 * 100:.2f} | "
                  f"{score.completeness[0.02] * 100:.1f} / {score.completeness[0.05] * 100:.1f} | "
                  f"{score.f_score(0.02):.3f} / {score.f_score(0.05):.3f} |")


def synthetic_rows(views_count: int, width: int, cfg: MeshConfig) -> tuple[dict, dict]:
    """twinscan and Poisson on exact-depth renders of the synthetic cell."""
    views, seconds = timed(lambda: walk_views(views_count, width, width * 3 // 4))
    truth = scene_mesh(build_scene(seed=0))
    seen = metrics.seen_surface_points(truth, views, samples=200_000)
    seen_twice = metrics.seen_surface_points(truth, views, samples=200_000, min_views=2)
    print(f"{len(views)} views {width}x{width * 3 // 4} rendered in {seconds:.1f} s; {len(seen)} seen ground-truth points")
    rows, result = twinscan_and_poisson(views, cfg, truth, seen, seen_twice, poisson_depth=9)
    with_floor = trimesh.util.concatenate([result.collision, result.floor_slab])
    rows["twinscan collision+slab"] = {"seconds": rows["twinscan visual"]["seconds"],
                                       **scores(with_floor, truth, seen, seen_twice)}
    return rows, result.figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--views", type=int, default=30)
    parser.add_argument("--width", type=int, default=480)
    parser.add_argument("--quality", default="preview")
    parser.add_argument("--capture", type=Path, help="a finished capture of the bundled sample")
    parser.add_argument("--sample", type=Path, default=SAMPLE)
    parser.add_argument("--variant", action="append", default=None, metavar="FIELD=VALUE",
                        help="with --capture: also mesh with this MeshConfig field changed (repeatable, "
                             "nested fields dotted; default: planes.enabled=false, the plain TSDF colliders)")
    args = parser.parse_args()
    cfg = MeshConfig.from_preset(get_preset(args.quality))
    if args.capture:
        rows, figures = capture_rows(args.capture, args.sample, cfg, args.variant or ["planes.enabled=false"])
    else:
        rows, figures = synthetic_rows(args.views, args.width, cfg)

    columns = ["seconds", "median_cm", "p95_cm", "complete_%", "complete2_%", "floor_rms_cm", "floating", "faces"]
    print(f"{'method':32s}" + "".join(f"{c:>14s}" for c in columns))
    for name, row in rows.items():
        print(f"{name:32s}" + "".join(f"{row[c]:14.2f}" if isinstance(row[c], float) else f"{row[c]:14d}"
                                      for c in columns))
    print("acceptance: median <= 2 cm, p95 <= 6 cm, complete >= 90 %, floor RMS <= 1 cm, floating = 0;\n"
          "complete: truth seen by >= 1 view within 5 cm; complete2: seen by >= 2 views")
    print("twinscan figures:", figures)


if __name__ == "__main__":
    init_runtime()  # as the CLI does, before torch or numba run
    main()

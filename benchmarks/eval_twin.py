"""A finished capture of a synthetic sample against its ground truth, in the twin's own frame.

No alignment to ground truth: the twin's x, y origin and yaw are the marker's (the sfm stage anchors
them when it triangulates a marker), z = 0 is the floor and scale comes from the marker, so ground
truth only moves into the marker's frame, which the generator defines. Prints:
  - cameras: position RMSE and rotation error of the registered frames;
  - meshes (#6): accuracy (mesh to truth) median and 95th percentile, completeness of the true
    surface the kept frames saw (within 5 cm of the visual mesh or the floor slab's top), floor
    flatness, floating components;
  - collision bounding box (#7), read from twin.usda's collider prims, against the bounding box of
    the scene the kept frames saw and of the whole generated scene;
  - the floor and the structure above it (z > 2 cm) apart, for the colliders as a simulator loads
    them from twin.usda (every UsdPhysics collider, the slab included) and for the visual mesh:
    accuracy median / p95, precision, completeness and F-score at 2 and 5 cm against the true
    surface seen by >= 2 kept frames. The whole-scene figures above let the floor (most of the
    area) hide the structure; these do not.

    python benchmarks/eval_twin.py OUT [--sample samples/factory_cell]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pycolmap
import trimesh

from twinscan.check.colliders import collider_surface
from twinscan.frames.record import read_frames
from twinscan.meshing import metrics
from twinscan.meshing.raycast import render_mesh_views
from twinscan.recon.sfm.evaluate import pose_error
from twinscan.recon.sfm.record import read_sfm_record
from twinscan.recon.sfm.stage import posed_cameras
from twinscan.synth import load_ground_truth
from twinscan.workspace import Workspace

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "factory_cell"


def twin_from_scene(ws: Path, truth, frames: dict[str, int]) -> np.ndarray:
    """(4, 4) similarity from the generator's frame to the twin's: the marker's frame, when the sfm stage
    anchored the twin there; else (no marker triangulated: arbitrary scale and yaw) the similarity that
    takes the true kept cameras onto the SfM's, which flatters the twin by the alignment, so it is said."""
    world = read_sfm_record(Workspace(ws)).world
    if world.marker_id == truth.marker.id:
        return np.linalg.inv(truth.marker.world_from_marker)
    model = pycolmap.Reconstruction(ws / "sfm")
    names = sorted(image.name for image in model.images.values() if image.has_pose)
    true_centres = truth.world_from_cam[[frames[name] for name in names]][:, :3, 3]
    similarity = pycolmap.estimate_sim3d(true_centres, posed_cameras(model)[:, :3, 3])
    print(f"note: the twin's origin is '{world.origin}', not marker {truth.marker.id}: ground truth moved into it by "
          f"the similarity of the camera centres (scale {similarity.scale:.4f}), not by the twin's own frame")
    return np.vstack([similarity.matrix(), [0.0, 0.0, 0.0, 1.0]])


def cameras_in_twin(to_twin: np.ndarray, world_from_cam: np.ndarray) -> np.ndarray:
    """(N, 4, 4) camera poses moved by the similarity `to_twin`: rotation without its scale."""
    scale = np.cbrt(np.linalg.det(to_twin[:3, :3]))
    moved = to_twin @ world_from_cam
    moved[:, :3, :3] /= scale
    return moved


def collider_bounds(usd_path: Path) -> np.ndarray:
    """(2, 3) world bounding box of every prim with UsdPhysics.CollisionAPI (guides included)."""
    from pxr import Usd, UsdGeom, UsdPhysics

    stage = Usd.Stage.Open(str(usd_path))
    cache = UsdGeom.BBoxCache(Usd.TimeCode.Default(), [UsdGeom.Tokens.default_, UsdGeom.Tokens.guide])
    box = None
    for prim in stage.Traverse():
        if prim.HasAPI(UsdPhysics.CollisionAPI) and prim.IsA(UsdGeom.Boundable):
            bounds = cache.ComputeWorldBound(prim).ComputeAlignedRange()
            corners = np.array([bounds.GetMin(), bounds.GetMax()])
            box = corners if box is None else np.stack([np.minimum(box[0], corners[0]), np.maximum(box[1], corners[1])])
    return box


@dataclass(frozen=True)
class TwinTruth:
    """A sample's ground truth moved into a finished capture's twin frame."""

    to_twin: np.ndarray  # (4, 4) generator frame -> twin frame
    scene: trimesh.Trimesh  # the true surface, twin frame
    seen: np.ndarray  # true surface points the kept frames saw (>= 1 view), twin frame
    seen_twice: np.ndarray  # ... seen by >= 2 kept frames


def truth_in_twin(ws: Path, sample: Path) -> tuple[TwinTruth, dict[str, int]]:
    """The ground truth in the twin frame, and the kept frames' names -> source indices."""
    truth = load_ground_truth(sample)
    frames = {entry.name: entry.source_index for entry in read_frames(Workspace(ws))}
    to_twin = twin_from_scene(ws, truth, frames)
    scene = trimesh.load(sample / "scene.ply", force="mesh")
    scene.apply_transform(to_twin)
    K = truth.K.copy()
    K[:2] *= 0.5
    K[:2, 2] += 0.5  # half size; the generator puts pixel centres at integers
    kept = truth.world_from_cam[sorted(frames.values())]
    views = render_mesh_views(scene, K, cameras_in_twin(to_twin, kept), truth.width // 2, truth.height // 2)
    seen = metrics.seen_surface_points(scene, views)
    seen_twice = metrics.seen_surface_points(scene, views, min_views=2)
    return TwinTruth(to_twin, scene, seen, seen_twice), frames


def print_region_table(surfaces: dict[str, trimesh.Trimesh], twin: TwinTruth) -> None:
    """Floor and structure apart, against the true surface seen by >= 2 kept frames."""
    print("\n| surface | region | true points | accuracy median cm | p95 cm | precision / completeness / F @ 2 cm "
          "| @ 5 cm |")
    print("|---|---|---|---|---|---|---|")
    for name, surface in surfaces.items():
        for region, score in metrics.region_scores(surface, twin.scene, twin.seen_twice).items():
            at = {t: f"{score.precision[t] * 100:.1f} / {score.completeness[t] * 100:.1f} / {score.f_score(t):.3f}"
                  for t in metrics.THRESHOLDS_M}
            print(f"| {name} | {region} | {score.true_points} | {score.median * 100:.2f} | {score.p95 * 100:.2f} | "
                  f"{at[0.02]} | {at[0.05]} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workspace", type=Path)
    parser.add_argument("--sample", type=Path, default=SAMPLE)
    args = parser.parse_args()
    ws = args.workspace
    twin, frames = truth_in_twin(ws, args.sample)
    scene, seen, seen_twice = twin.scene, twin.seen, twin.seen_twice

    model = pycolmap.Reconstruction(ws / "sfm")
    names = sorted(image.name for image in model.images.values() if image.has_pose)
    true_cams = cameras_in_twin(twin.to_twin,
                                load_ground_truth(args.sample).world_from_cam[[frames[name] for name in names]])
    cams = pose_error(posed_cameras(model), true_cams, align=False)
    print(f"cameras ({len(names)}): position RMSE {cams.position_rmse * 100:.2f} cm, rotation mean "
          f"{cams.rotation_mean_deg:.3f} deg, max {cams.rotation_max_deg:.3f} deg (no alignment)")

    meshes = {name: trimesh.load(ws / "mesh" / f"{name}.obj", force="mesh")
              for name in ("visual", "collision", "floor")}
    floor = meshes["floor"]
    top = (floor.face_normals[:, 2] > 0.99) & (np.abs(floor.triangles_center[:, 2]) < 1e-6)
    slab_top = floor.submesh([np.flatnonzero(top)], append=True) if top.any() else None
    above = meshes["visual"].triangles_center[:, 2] > 0.02  # the visual floor is a flat grid at z = 0:
    structure = meshes["visual"].submesh([np.flatnonzero(above)], append=True)  # judge the rest on its own
    surfaces = {"visual": meshes["visual"], "visual above the floor (z > 2 cm)": structure,
                "collision": meshes["collision"],
                "visual + slab top": trimesh.util.concatenate([meshes["visual"], slab_top]) if slab_top else None}
    print(f"\n{len(seen)} seen surface points of {scene.area:.1f} m2\n")
    print("| mesh | faces | accuracy median cm | p95 cm | completeness % (seen by >= 2 views) | floor RMS cm | floating |")
    print("|---|---|---|---|---|---|---|")
    for name, mesh in surfaces.items():
        if mesh is None:
            continue
        if name == "visual + slab top":  # completeness only: the slab's flat top would flatter accuracy
            accuracy = {"median": float("nan"), "p95": float("nan")}
        else:
            accuracy = metrics.accuracy(mesh, scene)
        print(f"| {name} | {len(mesh.faces)} | {accuracy['median'] * 100:.2f} | {accuracy['p95'] * 100:.2f} | "
              f"{metrics.completeness(mesh, seen) * 100:.1f} ({metrics.completeness(mesh, seen_twice) * 100:.1f}) | "
              f"{metrics.floor_flatness(mesh)['rms'] * 100:.2f} | "
              f"{metrics.floating_components(mesh)} |")

    from pxr import Usd

    print_region_table({"colliders (twin.usda)": collider_surface(Usd.Stage.Open(str(ws / "twin.usda"))),
                        "visual mesh": meshes["visual"]}, twin)

    colliders = collider_bounds(ws / "twin.usda")
    objects = meshes["collision"].bounds
    seen_box = np.stack([seen.min(axis=0), seen.max(axis=0)])
    seen_objects = seen[seen[:, 2] > 0.01]
    seen_objects_box = np.stack([seen_objects.min(axis=0), seen_objects.max(axis=0)])
    print("\n| bounding box (twin frame, m) | min | max | worst gap to it, cm |")
    print("|---|---|---|---|")
    rows = [("USD colliders (structure + slab)", colliders, seen_box),
            ("scene the frames saw", seen_box, None), ("whole generated scene", scene.bounds, None),
            ("collision structure (no floor)", objects, seen_objects_box),
            ("scene above the floor, seen", seen_objects_box, None)]
    for name, box, reference in rows:
        gap = f"{np.abs(box - reference).max() * 100:.1f}" if reference is not None else ""
        print(f"| {name} | {np.round(box[0], 3).tolist()} | {np.round(box[1], 3).tolist()} | {gap} |")


if __name__ == "__main__":
    main()

"""Where the splats put a surface: their median depth at the capture's training cameras against the generator's
truth, signed, by surface (floor / structure) and by how squarely the ray meets it, beside the twin's surface
(visual mesh, planar patches, floor slab: what `twinscan render` draws depth from) at the same pixels.

    python benchmarks/bench_splat_depth.py OUT --sample GEN [--every 8]

Why: the mesh stage fuses these depths (TSDF), so a bias here is the mesh's bias, and at the held-out frames a
surface a centimetre behind the truth is an outline a centimetre narrower and a face seen at a graze missed by
decimetres (docs/render.md, where the hard cells' depth fails). Positive: behind the true surface. Pixels within
3 px of a true silhouette are left out (their error is the outline's), as are pixels the splats leave
transparent (their median depth does not exist there).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from bench_render import COVERED_M, near_depth_edges, true_scene
from twinscan.gaussians.backend import select_render_backend
from twinscan.meshing.metrics import FLOOR_SPLIT_M
from twinscan.meshing.render import render_depth_views
from twinscan.render.geometry import Rays, splat_drawn
from twinscan.render.twin import load_render_twin
from twinscan.runtime import init_runtime

SQUARENESS = ((0.0, 0.26), (0.26, 0.5), (0.5, 0.87), (0.87, 1.01))  # |cos| between ray and normal: graze .. square on


def signed_errors(ws: Path, sample: Path, every: int, device: str) -> dict[str, np.ndarray]:
    """Per judged pixel: the splats' and the twin surface's depth minus the truth, |cos| of the ray against
    the true normal, and whether the pixel is floor."""
    twin = load_render_twin(ws)
    cap = twin.capture
    chosen = np.flatnonzero(~cap.heldout)[::every]
    splats = render_depth_views(twin.splats, cap.Ks[chosen], np.linalg.inv(cap.world_from_cam[chosen]), cap.width,
                                cap.height, select_render_backend(device))
    truth = true_scene(sample)
    columns: dict[str, list[np.ndarray]] = {"splats": [], "surface": [], "squareness": [], "floor": []}
    for k, i in enumerate(chosen):
        rays = Rays.of(cap.Ks[i], cap.world_from_cam[i], cap.width, cap.height)
        hits, surface = truth.cast_rays(rays), twin.surface.cast_rays(rays).depth
        judged = (np.isfinite(hits.depth) & (hits.depth < COVERED_M) & ~near_depth_edges(hits.depth)
                  & splat_drawn(splats.depth[k], splats.alpha[k]))
        directions = rays.directions.reshape(*hits.depth.shape, 3)
        squareness = np.abs(np.sum(directions * hits.normal, -1)) / np.linalg.norm(directions, axis=-1)
        columns["splats"].append((splats.depth[k] - hits.depth)[judged])
        columns["surface"].append((np.where(np.isfinite(surface), surface, 100.0) - hits.depth)[judged])
        columns["squareness"].append(squareness[judged])
        columns["floor"].append(hits.points[..., 2][judged] <= FLOOR_SPLIT_M)
    return {name: np.concatenate(values) for name, values in columns.items()}


def _figures(error: np.ndarray) -> str:
    typical = error[np.abs(error) < 0.10]  # the bias of the surface, not of the misses
    return (f"{np.median(error) * 100:+.2f} | {np.mean(typical) * 100:+.2f} | "
            f"{100 * np.mean(np.abs(error) > 0.08):.1f} %")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workspace", type=Path)
    parser.add_argument("--sample", type=Path, required=True, help="the generated capture's folder (ground_truth.json)")
    parser.add_argument("--every", type=int, default=8, help="judge every this-th training frame")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    init_runtime()
    e = signed_errors(args.workspace, args.sample, args.every, args.device)
    print(f"\ndepth minus the truth at training frames (every {args.every}th), pixels the true scene covers within "
          f"{COVERED_M:.0f} m, 3+ px from a silhouette, drawn by the splats; + is behind the true surface")
    print("| surface | abs cos, ray and normal | pixels | splats: median cm | mean within 10 cm | more than 8 cm off "
          "| twin surface: median cm | mean within 10 cm | more than 8 cm off |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, where in (("floor", e["floor"]), ("structure", ~e["floor"])):
        for low, high in SQUARENESS:
            mask = where & (e["squareness"] >= low) & (e["squareness"] < high)
            if mask.sum() >= 100:
                print(f"| {name} | {low:.2f}-{min(high, 1.0):.2f} | {mask.sum()} | {_figures(e['splats'][mask])} | "
                      f"{_figures(e['surface'][mask])} |")


if __name__ == "__main__":
    main()

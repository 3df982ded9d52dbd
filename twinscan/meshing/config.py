"""What the mesh stage is asked to do: one frozen, validated config derived from a quality preset."""

from __future__ import annotations

from dataclasses import dataclass

from twinscan.errors import TwinscanError
from twinscan.gaussians.backend import DEVICES
from twinscan.meshing.planes import PlaneConfig
from twinscan.presets import Preset


@dataclass(frozen=True)
class MeshConfig:
    render_max_side: int = 1280  # longest side of the splat renders that are fused, pixels
    resolution: int = 512  # TSDF voxels along the longest side of the captured region
    min_voxel: float = 0.005  # metres: voxel size bounds, whatever the region's extent
    max_voxel: float = 0.04
    trunc_voxels: float = 4.0  # TSDF truncation distance, in voxels
    min_alpha: float = 0.5  # pixels rendered less opaque than this carry no depth
    edge_jump: float = 0.02  # a pixel whose 3x3 neighbourhood spans this relative depth range is a silhouette
    min_weight: float = 1.0  # TSDF voxels with less integration weight (about: views) are not surface
    # a depth pixel further than agreement_beyond metres is fused only where this many other views saw the
    # same surface (0: every pixel), within agreement_tolerance of the depth (fusion.consistent_depth).
    # Nearer depth enters as rendered: it is where the splats are pinned best, and demanding agreement
    # there too cut the machines the walk passed close to (hard cell seed 5, structure complete@5 87.3 ->
    # 85.0 %; beyond 3 m: 86.2 %, with p95 7.34 -> 6.04 cm and F@5 0.899 unchanged). A surface's splats
    # render within a few millimetres from view to view, a bulge's or a reflection's do not: 0.5 % of the
    # depth took p95 further down than 2 % on all four captures measured (seed 5 6.04 -> 5.10 cm, F 0.899
    # -> 0.900), 0.25 % cost completeness (seed 5 85.6 -> 83.4 %). docs/benchmarks.md, 2026-12-04
    min_agreeing_views: int = 2
    agreement_tolerance: float = 0.005
    agreement_beyond: float = 3.0
    min_views: int = 2  # a face must be seen by this many views to count as captured
    min_component_voxels: float = 100.0  # components with less area than this many voxel faces go
    max_floater_voxels: float = 2500.0  # floating components up to this area (voxel faces) go
    hole_perimeter: float = 0.30  # metres: holes with a shorter boundary are filled
    floor_band: float = 0.10  # metres: the floor is searched for within |z| <= band
    walkway_margin: float = 0.5  # metres of floor collider beyond the camera path (the walker stood there)
    floor_max_tilt_deg: float = 10.0
    floor_photos: bool = True  # the floor carried on past its SfM points where the photos agree (floor_edges.py)
    floor_slab_thickness: float = 0.05  # metres: the floor collider is a box from -thickness to z = 0
    collision_faces: int = 50_000
    visual_faces: int = 200_000
    texture_size: int = 2048  # texture atlas side, pixels (0: vertex colours only)
    convex: bool = False  # add a CoACD convex decomposition of the collision mesh
    convex_threshold: float = 0.08  # CoACD concavity threshold (larger: fewer parts)
    convex_max_parts: int = 64
    device: str = "auto"  # the splat renders' rasterizer (twinscan.gaussians.backend): "auto", "cpu" or "cuda"
    planes: PlaneConfig = PlaneConfig()  # planar structure closed where fusion left fragments (meshing/planes.py)

    def __post_init__(self) -> None:
        if self.device not in DEVICES:
            raise TwinscanError(f"unknown device '{self.device}'", f"use one of: {', '.join(DEVICES)}")
        if self.resolution < 16:
            raise TwinscanError(f"mesh resolution {self.resolution} is too small", "use at least 16 voxels")
        if not 0 < self.min_voxel <= self.max_voxel:
            raise TwinscanError(f"voxel bounds {self.min_voxel}..{self.max_voxel} m are invalid",
                                "use 0 < min_voxel <= max_voxel")
        if self.collision_faces < 100 or self.visual_faces < 100:
            raise TwinscanError("face budgets below 100 faces cannot describe a scene",
                                "raise collision_faces / visual_faces")
        if self.min_agreeing_views < 0 or not 0 < self.agreement_tolerance < 1 or self.agreement_beyond < 0:
            raise TwinscanError(f"view agreement {self.min_agreeing_views} views within {self.agreement_tolerance} "
                                f"beyond {self.agreement_beyond} m is invalid",
                                "use 0 or more views, a tolerance between 0 and 1 and a distance of 0 m or more")
        if self.min_views < 1:
            raise TwinscanError(f"min_views must be at least 1 (got {self.min_views})", "use 1 or more")

    @classmethod
    def from_preset(cls, preset: Preset, convex: bool = False, device: str = "auto") -> MeshConfig:
        return cls(render_max_side=preset.max_side, resolution=preset.mesh_resolution,
                   collision_faces=preset.mesh_faces, visual_faces=2 * preset.mesh_faces,
                   texture_size=preset.texture_size, convex=convex, device=device)

    def voxel_size(self, extent: float, pixel_footprint: float = 0.0) -> float:
        """Voxel edge for a captured region whose longest side is `extent` metres.

        Never finer than `pixel_footprint` (the median pixel's size on the surface): voxels
        smaller than the samples that fill them leave the surface in fragments.
        """
        return float(min(max(extent / self.resolution, pixel_footprint, self.min_voxel), self.max_voxel))

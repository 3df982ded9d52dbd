"""Meshes from rendered views: TSDF fusion, cleanup, floor, collision and textured visual meshes.

The core (`build_meshes`) takes `DepthViews` and returns meshes; `run_mesh` is the stage that
renders the splats, calls it and writes OUT/mesh/. `metrics` scores a mesh against known geometry.
"""

from twinscan.meshing.build import MeshResult, build_meshes
from twinscan.meshing.config import MeshConfig
from twinscan.meshing.export import write_meshes
from twinscan.meshing.floor import Floor
from twinscan.meshing.views import DepthViews

from twinscan.meshing.stage import run_mesh

__all__ = ["DepthViews", "Floor", "MeshConfig", "MeshResult", "build_meshes", "run_mesh", "write_meshes"]

"""Camera poses and sparse points (pycolmap), in the twin's metric, Z-up, floor-at-zero frame."""

from twinscan.recon.sfm.config import SfmConfig
from twinscan.recon.sfm.importers import import_colmap, import_transforms
from twinscan.recon.sfm.stage import run_sfm

__all__ = ["SfmConfig", "import_colmap", "import_transforms", "run_sfm"]

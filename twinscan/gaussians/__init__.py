"""Gaussian splats: the data model, standard 3DGS PLY IO and frame transforms (SH included)."""

from twinscan.gaussians.model import Gaussians
from twinscan.gaussians.ply import read_ply, write_ply
from twinscan.gaussians.sh_rotation import rotate_sh, sh_basis, sh_rotation_matrices
from twinscan.gaussians.transform import split_similarity, transform

__all__ = ["Gaussians", "read_ply", "write_ply", "rotate_sh", "sh_basis", "sh_rotation_matrices",
           "split_similarity", "transform"]

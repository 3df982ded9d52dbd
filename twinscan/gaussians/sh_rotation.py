"""Rotation matrices for real spherical harmonics in gsplat's basis (order, signs, normalisation).

Each band l spans a rotation-invariant space, so the matrix D_l with Y_l(R^T d) = D_l Y_l(d) exists
and is found exactly by least squares over sample directions; evaluating gsplat's own basis keeps
the result true to what gsplat renders, without hand-derived Wigner-D sign conventions.
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.linalg

from twinscan.gaussians.model import sh_degree

_RESIDUAL_TOLERANCE = 1e-9


@functools.cache
def _sample_directions(count: int = 64) -> np.ndarray:
    """A Fibonacci sphere: well spread, so every band's least-squares system is well conditioned."""
    i = np.arange(count) + 0.5
    z = 1.0 - 2.0 * i / count
    phi = np.pi * (1.0 + 5.0**0.5) * i
    r = np.sqrt(1.0 - z * z)
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)


def sh_basis(directions: np.ndarray, degree: int) -> np.ndarray:
    """gsplat's real SH basis at unit `directions` (M,3) -> (M, (degree+1)^2), float64."""
    import torch
    from gsplat.cuda._torch_impl import _eval_sh_bases_fast

    dirs = torch.from_numpy(np.ascontiguousarray(directions, dtype=np.float64))
    return _eval_sh_bases_fast((degree + 1) ** 2, dirs).numpy()


def sh_rotation_matrices(rotation: np.ndarray, degree: int) -> list[np.ndarray]:
    """Per band l = 0..degree, the (2l+1)^2 matrix D_l mapping coefficients c to D_l c under `rotation`.

    After the map, the colour seen along R d equals the colour seen along d before.
    """
    rotation = np.asarray(rotation, dtype=np.float64)
    directions = _sample_directions()
    basis = sh_basis(directions, degree)
    basis_of_preimage = sh_basis(directions @ rotation, degree)  # rows: Y(R^T d)
    matrices = []
    for band in range(degree + 1):
        cols = slice(band * band, (band + 1) * (band + 1))
        # The new coefficients c' satisfy Y(d) c' = Y(R^T d) c for every d.
        matrix, *_ = np.linalg.lstsq(basis[:, cols], basis_of_preimage[:, cols], rcond=None)
        residual = np.abs(basis[:, cols] @ matrix - basis_of_preimage[:, cols]).max()
        assert residual < _RESIDUAL_TOLERANCE, f"SH band {band} is not closed under rotation ({residual})"
        matrices.append(matrix)
    return matrices


def rotate_sh(sh: np.ndarray, rotation: np.ndarray) -> np.ndarray:
    """Rotate coefficients sh (N, K, 3); the DC band is unchanged.

    One GEMM over all splats: the block-diagonal band matrices, widened to act on the 3 channels.
    """
    count, coefficients, _ = sh.shape
    per_coefficient = scipy.linalg.block_diag(*sh_rotation_matrices(rotation, sh_degree(coefficients)))
    per_value = np.kron(per_coefficient, np.eye(3)).astype(sh.dtype)
    return (sh.reshape(count, 3 * coefficients) @ per_value.T).reshape(sh.shape)

"""numba kernels: gsplat's fully fused EWA projection and SH colours, forward and backward, on the CPU.

The same functions as gsplat's torch reference (`_quat_scale_to_covar_preci` + `_fully_fused_projection`,
`_spherical_harmonics`), computed as its CUDA kernels do: one pass per Gaussian over all cameras
(parallel over blocks of Gaussians), and a hand-written backward that recomputes the forward's
intermediates instead of saving them. Unlike the torch reference, nothing here is hundreds of
small tensor ops per step.

Gradients are those of the torch reference (clamps, the Jacobian's clamp to the screen bounds,
the det clamp, quaternion normalisation), except that a (camera, Gaussian) pair whose output
gradients are all zero is skipped: culled Gaussians get exactly zero, even where the torch
reference's 0 * inf (a Gaussian at z = 0) would give NaN. Per-block partial sums make the camera
gradient deterministic without atomics. float32 throughout, IEEE arithmetic (no fastmath: the
code is scalar per Gaussian, where it measured no gain, and plain rounding stays closest to the
torch reference's; `error_model="numpy"` divides by zero as torch does, to inf or NaN).
"""

from __future__ import annotations

import numba
import numpy as np
import torch
from torch import Tensor


BLOCK = 128  # Gaussians per parallel work item (and per partial sum of the camera gradient)

F0 = np.float32(0.0)
F1 = np.float32(1.0)
F2 = np.float32(2.0)
HALF = np.float32(0.5)
NORM_EPS = np.float32(1e-12)  # F.normalize's eps
DET_MIN = np.float32(1e-10)  # _fully_fused_projection clamps the blurred determinant
CLIP_MARGIN = np.float32(0.3)  # the Jacobian is evaluated at most 30% of the half-FOV off screen
LOOSE_EXTENT = np.float32(3.33)
SH_C0 = np.float32(0.2820947917738781)
SH_OFFSET = np.float32(0.5)


@numba.njit
def n_blocks(n):
    return (n + BLOCK - 1) // BLOCK


# ---------------------------------------------------------------- small 3x3 helpers (row-major)

@numba.njit(error_model="numpy")
def _rotation(quat, rot):
    """gsplat's quat_to_rotmat of the normalised wxyz quaternion into rot; returns (w, x, y, z, |q|)."""
    norm = max(np.sqrt(quat[0] * quat[0] + quat[1] * quat[1] + quat[2] * quat[2] + quat[3] * quat[3]), NORM_EPS)
    w, x, y, z = quat[0] / norm, quat[1] / norm, quat[2] / norm, quat[3] / norm
    rot[0, 0] = F1 - F2 * (y * y + z * z)
    rot[0, 1] = F2 * (x * y - w * z)
    rot[0, 2] = F2 * (x * z + w * y)
    rot[1, 0] = F2 * (x * y + w * z)
    rot[1, 1] = F1 - F2 * (x * x + z * z)
    rot[1, 2] = F2 * (y * z - w * x)
    rot[2, 0] = F2 * (x * z - w * y)
    rot[2, 1] = F2 * (y * z + w * x)
    rot[2, 2] = F1 - F2 * (x * x + y * y)
    return w, x, y, z, norm


@numba.njit(error_model="numpy")
def _rotation_vjp(w, x, y, z, norm, v_rot, v_quat):
    """d/d quat (unnormalised) of <v_rot, R(quat / |quat|)>, into v_quat."""
    g = v_rot
    v_w = F2 * (x * (g[2, 1] - g[1, 2]) + y * (g[0, 2] - g[2, 0]) + z * (g[1, 0] - g[0, 1]))
    v_x = F2 * (-F2 * x * (g[1, 1] + g[2, 2]) + y * (g[0, 1] + g[1, 0]) + z * (g[0, 2] + g[2, 0])
                + w * (g[2, 1] - g[1, 2]))
    v_y = F2 * (-F2 * y * (g[0, 0] + g[2, 2]) + x * (g[0, 1] + g[1, 0]) + z * (g[1, 2] + g[2, 1])
                + w * (g[0, 2] - g[2, 0]))
    v_z = F2 * (-F2 * z * (g[0, 0] + g[1, 1]) + x * (g[0, 2] + g[2, 0]) + y * (g[1, 2] + g[2, 1])
                + w * (g[1, 0] - g[0, 1]))
    # F.normalize: d(q / |q|) = (I - n n^T) / |q| (no projection where |q| was clamped to eps)
    along = w * v_w + x * v_x + y * v_y + z * v_z if norm > NORM_EPS else F0
    v_quat[0] = (v_w - along * w) / norm
    v_quat[1] = (v_x - along * x) / norm
    v_quat[2] = (v_y - along * y) / norm
    v_quat[3] = (v_z - along * z) / norm


@numba.njit(error_model="numpy")
def _covariance(rot, scale, out):
    """out = (R S)(R S)^T."""
    for i in range(3):
        for k in range(3):
            out[i, k] = (rot[i, 0] * scale[0] * rot[k, 0] * scale[0] + rot[i, 1] * scale[1] * rot[k, 1] * scale[1]
                         + rot[i, 2] * scale[2] * rot[k, 2] * scale[2])


@numba.njit(error_model="numpy")
def _sandwich(a, b, tmp, out):
    """out = a b a^T (tmp: scratch 3x3)."""
    for i in range(3):
        for k in range(3):
            tmp[i, k] = a[i, 0] * b[0, k] + a[i, 1] * b[1, k] + a[i, 2] * b[2, k]
    for i in range(3):
        for k in range(3):
            out[i, k] = tmp[i, 0] * a[k, 0] + tmp[i, 1] * a[k, 1] + tmp[i, 2] * a[k, 2]


@numba.njit(error_model="numpy")
def _add_sandwich_transposed(a, b, tmp, out):
    """out += a^T b a (tmp: scratch 3x3)."""
    for i in range(3):
        for k in range(3):
            tmp[i, k] = b[i, 0] * a[0, k] + b[i, 1] * a[1, k] + b[i, 2] * a[2, k]
    for i in range(3):
        for k in range(3):
            out[i, k] += a[0, i] * tmp[0, k] + a[1, i] * tmp[1, k] + a[2, i] * tmp[2, k]


# ---------------------------------------------------------------- projection

@numba.njit(error_model="numpy")
def _screen_limits(K, width, height):
    """_persp_proj's bounds on x/z and y/z for the Jacobian: (-x_neg, x_pos, -y_neg, y_pos)."""
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    tan_fovx = HALF * width / fx
    tan_fovy = HALF * height / fy
    return (-(cx / fx + CLIP_MARGIN * tan_fovx), (width - cx) / fx + CLIP_MARGIN * tan_fovx,
            -(cy / fy + CLIP_MARGIN * tan_fovy), (height - cy) / fy + CLIP_MARGIN * tan_fovy)


@numba.njit(error_model="numpy")
def _to_camera(view, mean):
    return (view[0, 0] * mean[0] + view[0, 1] * mean[1] + view[0, 2] * mean[2] + view[0, 3],
            view[1, 0] * mean[0] + view[1, 1] * mean[1] + view[1, 2] * mean[2] + view[1, 3],
            view[2, 0] * mean[0] + view[2, 1] * mean[1] + view[2, 2] * mean[2] + view[2, 3])


@numba.njit(error_model="numpy")
def _jacobian(K, x, y, z, limits):
    """The EWA Jacobian's non-zero entries (j00, j02, j11, j12), the clamped x/z, y/z and whether
    each was inside its bound (where the gradient passes to x, y)."""
    u = min(max(x / z, limits[0]), limits[1])
    v = min(max(y / z, limits[2]), limits[3])
    inside_x = (x / z >= limits[0]) & (x / z <= limits[1])
    inside_y = (y / z >= limits[2]) & (y / z <= limits[3])
    tx = z * u
    ty = z * v
    z2 = z * z
    return K[0, 0] / z, -K[0, 0] * tx / z2, K[1, 1] / z, -K[1, 1] * ty / z2, u, v, inside_x, inside_y


@numba.njit(error_model="numpy")
def _covar2d(j00, j02, j11, j12, cov):
    """J cov J^T for J = [[j00, 0, j02], [0, j11, j12]]: (c00, c01, c11)."""
    r0 = (j00 * cov[0, 0] + j02 * cov[2, 0], j00 * cov[0, 1] + j02 * cov[2, 1], j00 * cov[0, 2] + j02 * cov[2, 2])
    r1 = (j11 * cov[1, 0] + j12 * cov[2, 0], j11 * cov[1, 1] + j12 * cov[2, 1], j11 * cov[1, 2] + j12 * cov[2, 2])
    return r0[0] * j00 + r0[2] * j02, r0[1] * j11 + r0[2] * j12, r1[1] * j11 + r1[2] * j12


@numba.njit(parallel=True, error_model="numpy", cache=True)
def project_forward(means, quats, scales, viewmats, Ks, width, height, eps2d, near_plane, far_plane,
                    radii, means2d, depths, conics, compensations):
    """_fully_fused_projection of N Gaussians into C cameras, filling the [C, N, ...] outputs.

    radii are the torch reference's loose ones (3.33 sigma, 0 when culled by near/far or off screen).
    """
    n_cams, n = viewmats.shape[0], means.shape[0]
    width_f, height_f = np.float32(width), np.float32(height)
    for block in numba.prange(n_blocks(n)):
        rot = np.empty((3, 3), np.float32)
        covar = np.empty((3, 3), np.float32)
        covar_c = np.empty((3, 3), np.float32)
        tmp = np.empty((3, 3), np.float32)
        for g in range(block * BLOCK, min(n, (block + 1) * BLOCK)):
            _rotation(quats[g], rot)
            _covariance(rot, scales[g], covar)
            for c in range(n_cams):
                view, K = viewmats[c], Ks[c]
                x, y, z = _to_camera(view, means[g])
                _sandwich(view[:3, :3], covar, tmp, covar_c)
                j00, j02, j11, j12, _, _, _, _ = _jacobian(K, x, y, z, _screen_limits(K, width_f, height_f))
                c00, c01, c11 = _covar2d(j00, j02, j11, j12, covar_c)
                det_orig = c00 * c11 - c01 * c01
                c00 += eps2d
                c11 += eps2d
                det = max(c00 * c11 - c01 * c01, DET_MIN)
                mx = (K[0, 0] * x + K[0, 1] * y + K[0, 2] * z) / z
                my = (K[1, 0] * x + K[1, 1] * y + K[1, 2] * z) / z
                means2d[c, g, 0] = mx
                means2d[c, g, 1] = my
                depths[c, g] = z
                conics[c, g, 0] = c11 / det
                conics[c, g, 1] = -c01 / det
                conics[c, g, 2] = c00 / det
                in_range = (z > near_plane) & (z < far_plane)
                # 0 when culled by depth, as gsplat's CUDA leaves it: at z = 0 the torch reference's
                # NaN would reach the opacity gradient through opacity * compensation
                compensations[c, g] = np.sqrt(max(det_orig / det, F0)) if in_range else F0
                rx = np.ceil(LOOSE_EXTENT * np.sqrt(c00))
                ry = np.ceil(LOOSE_EXTENT * np.sqrt(c11))
                keep = in_range & (mx + rx > F0) & (mx - rx < width_f) & (my + ry > F0) & (my - ry < height_f)
                radii[c, g, 0] = np.int32(rx) if keep else 0
                radii[c, g, 1] = np.int32(ry) if keep else 0


@numba.njit(error_model="numpy")
def _add_view_vjp(view, mean, covar, v_x, v_y, v_z, v_covar_c, tmp, v_view):
    """v_view [3, 4] += d/d [W | t] of p = W mean + t (v_p = (v_x, v_y, v_z)) and of W covar W^T
    (2 v_covar_c W covar)."""
    for k in range(3):
        v_view[0, k] += v_x * mean[k]
        v_view[1, k] += v_y * mean[k]
        v_view[2, k] += v_z * mean[k]
    v_view[0, 3] += v_x
    v_view[1, 3] += v_y
    v_view[2, 3] += v_z
    for i in range(3):
        for k in range(3):
            tmp[i, k] = view[i, 0] * covar[0, k] + view[i, 1] * covar[1, k] + view[i, 2] * covar[2, k]
    for i in range(3):
        for k in range(3):
            v_view[i, k] += F2 * (v_covar_c[i, 0] * tmp[0, k] + v_covar_c[i, 1] * tmp[1, k] + v_covar_c[i, 2] * tmp[2, k])


@numba.njit(parallel=True, error_model="numpy", cache=True)
def project_backward(means, quats, scales, viewmats, Ks, width, height, eps2d, near_plane, far_plane, v_means2d,
                     v_depths, v_conics, v_compensations, with_view_grad, v_means, v_quats, v_scales, v_view_blocks):
    """Gradients of project_forward's means2d, depths, conics and compensations outputs.

    Fills v_means [N, 3], v_quats [N, 4], v_scales [N, 3] and v_view_blocks [blocks, C, 3, 4]
    (each block's part of d/d viewmats[:, :3, :4]; sum over blocks).
    """
    n_cams, n = viewmats.shape[0], means.shape[0]
    width_f, height_f = np.float32(width), np.float32(height)
    for block in numba.prange(n_blocks(n)):
        rot = np.empty((3, 3), np.float32)
        covar = np.empty((3, 3), np.float32)
        covar_c = np.empty((3, 3), np.float32)
        tmp = np.empty((3, 3), np.float32)
        v_covar_c = np.empty((3, 3), np.float32)
        v_covar = np.empty((3, 3), np.float32)
        v_rot = np.empty((3, 3), np.float32)
        v_view = v_view_blocks[block]
        for g in range(block * BLOCK, min(n, (block + 1) * BLOCK)):
            w, qx, qy, qz, norm = _rotation(quats[g], rot)
            scale = scales[g]
            _covariance(rot, scale, covar)
            v_covar[:] = F0
            v_mx_world = F0
            v_my_world = F0
            v_mz_world = F0
            touched = False
            for c in range(n_cams):
                v_a, v_b, v_c = v_conics[c, g, 0], v_conics[c, g, 1], v_conics[c, g, 2]
                v_px, v_py, v_depth, v_comp = v_means2d[c, g, 0], v_means2d[c, g, 1], v_depths[c, g], v_compensations[c, g]
                if v_a == F0 and v_b == F0 and v_c == F0 and v_px == F0 and v_py == F0 and v_depth == F0 and v_comp == F0:
                    continue
                touched = True
                view, K = viewmats[c], Ks[c]
                mean = means[g]
                x, y, z = _to_camera(view, mean)
                _sandwich(view[:3, :3], covar, tmp, covar_c)
                limits = _screen_limits(K, width_f, height_f)
                j00, j02, j11, j12, u, v, inside_x, inside_y = _jacobian(K, x, y, z, limits)
                c00, c01, c11 = _covar2d(j00, j02, j11, j12, covar_c)
                det_orig = c00 * c11 - c01 * c01
                b00 = c00 + eps2d
                b11 = c11 + eps2d
                det_blur = b00 * b11 - c01 * c01
                det = max(det_blur, DET_MIN)

                # conics (b11, -b01, b00) / det and compensation sqrt(max(det_orig / det, 0))
                v_det = -(v_a * b11 - v_b * c01 + v_c * b00) / (det * det)
                v_b00 = v_c / det
                v_b11 = v_a / det
                v_b01 = -v_b / det
                ratio = det_orig / det
                if ratio >= F0 and v_comp != F0 and z > near_plane and z < far_plane:
                    v_ratio = v_comp * HALF / np.sqrt(ratio)
                    v_det_orig = v_ratio / det
                    v_det -= v_ratio * ratio / det
                    v_b00 += v_det_orig * c11
                    v_b11 += v_det_orig * c00
                    v_b01 -= v_det_orig * F2 * c01
                if det_blur >= DET_MIN:
                    v_b00 += v_det * b11
                    v_b11 += v_det * b00
                    v_b01 -= v_det * F2 * c01
                # cov2d = J covar_c J^T; each off-diagonal entry gets half of v_b01
                v00, v01, v11 = v_b00, HALF * v_b01, v_b11
                # VJ = V J (2x3), J = [[j00, 0, j02], [0, j11, j12]]
                vj0 = (v00 * j00, v01 * j11, v00 * j02 + v01 * j12)
                vj1 = (v01 * j00, v11 * j11, v01 * j02 + v11 * j12)
                # v_covar_c = J^T V J
                jt = ((j00, F0), (F0, j11), (j02, j12))
                for i in range(3):
                    for k in range(3):
                        v_covar_c[i, k] = jt[i][0] * vj0[k] + jt[i][1] * vj1[k]
                # v_J = 2 V J covar_c, only the entries that are variables
                v_j00 = F2 * (vj0[0] * covar_c[0, 0] + vj0[1] * covar_c[1, 0] + vj0[2] * covar_c[2, 0])
                v_j02 = F2 * (vj0[0] * covar_c[0, 2] + vj0[1] * covar_c[1, 2] + vj0[2] * covar_c[2, 2])
                v_j11 = F2 * (vj1[0] * covar_c[0, 1] + vj1[1] * covar_c[1, 1] + vj1[2] * covar_c[2, 1])
                v_j12 = F2 * (vj1[0] * covar_c[0, 2] + vj1[1] * covar_c[1, 2] + vj1[2] * covar_c[2, 2])

                fx, fy = K[0, 0], K[1, 1]
                z2 = z * z
                tx = z * u
                ty = z * v
                v_x = F0
                v_y = F0
                v_z = v_depth - (v_j00 * fx + v_j11 * fy) / z2 + F2 * (v_j02 * fx * tx + v_j12 * fy * ty) / (z2 * z)
                v_tx = -v_j02 * fx / z2
                v_ty = -v_j12 * fy / z2
                # tx = z * clamp(x / z): d/dx = 1 and d/dz = 0 inside the bounds, else d/dz = the bound
                if inside_x:
                    v_x += v_tx
                else:
                    v_z += v_tx * u
                if inside_y:
                    v_y += v_ty
                else:
                    v_z += v_ty * v
                # means2d = K[:2, :3] (x, y, z) / z
                mx = (K[0, 0] * x + K[0, 1] * y + K[0, 2] * z) / z
                my = (K[1, 0] * x + K[1, 1] * y + K[1, 2] * z) / z
                v_x += (v_px * K[0, 0] + v_py * K[1, 0]) / z
                v_y += (v_px * K[0, 1] + v_py * K[1, 1]) / z
                v_z += (v_px * (K[0, 2] - mx) + v_py * (K[1, 2] - my)) / z

                # camera frame: p = W mean + t, covar_c = W covar W^T
                v_mx_world += view[0, 0] * v_x + view[1, 0] * v_y + view[2, 0] * v_z
                v_my_world += view[0, 1] * v_x + view[1, 1] * v_y + view[2, 1] * v_z
                v_mz_world += view[0, 2] * v_x + view[1, 2] * v_y + view[2, 2] * v_z
                _add_sandwich_transposed(view[:3, :3], v_covar_c, tmp, v_covar)
                if with_view_grad:
                    _add_view_vjp(view, mean, covar, v_x, v_y, v_z, v_covar_c, tmp, v_view[c])
            v_means[g, 0] = v_mx_world
            v_means[g, 1] = v_my_world
            v_means[g, 2] = v_mz_world
            if not touched:
                v_quats[g, :] = F0
                v_scales[g, :] = F0
                continue
            # covar = M M^T with M = R S: v_M = 2 v_covar M; v_R = v_M S; v_s_j = sum_i v_M_ij R_ij
            for j in range(3):
                v_s = F0
                for i in range(3):
                    v_m = F2 * (v_covar[i, 0] * rot[0, j] + v_covar[i, 1] * rot[1, j] + v_covar[i, 2] * rot[2, j]) * scale[j]
                    v_rot[i, j] = v_m * scale[j]
                    v_s += v_m * rot[i, j]
                v_scales[g, j] = v_s
            _rotation_vjp(w, qx, qy, qz, norm, v_rot, v_quats[g])


# ---------------------------------------------------------------- spherical harmonics

@numba.njit(error_model="numpy")
def _sh_bases(degree, x, y, z, out):
    """gsplat's _eval_sh_bases_fast (Sloan's real SH) at the unit direction (x, y, z), degree <= 3."""
    out[0] = SH_C0
    if degree < 1:
        return
    out[1] = np.float32(-0.48860251190292) * y
    out[2] = np.float32(0.48860251190292) * z
    out[3] = np.float32(-0.48860251190292) * x
    if degree < 2:
        return
    z2 = z * z
    tmp_b = np.float32(-1.092548430592079) * z
    c1 = x * x - y * y
    s1 = F2 * x * y
    out[4] = np.float32(0.5462742152960395) * s1
    out[5] = tmp_b * y
    out[6] = np.float32(0.9461746957575601) * z2 - np.float32(0.3153915652525201)
    out[7] = tmp_b * x
    out[8] = np.float32(0.5462742152960395) * c1
    if degree < 3:
        return
    tmp_c = np.float32(-2.285228997322329) * z2 + np.float32(0.4570457994644658)
    tmp_b = np.float32(1.445305721320277) * z
    c2 = x * c1 - y * s1
    s2 = x * s1 + y * c1
    out[9] = np.float32(-0.5900435899266435) * s2
    out[10] = tmp_b * s1
    out[11] = tmp_c * y
    out[12] = z * (np.float32(1.865881662950577) * z2 - np.float32(1.119528997770346))
    out[13] = tmp_c * x
    out[14] = tmp_b * c1
    out[15] = np.float32(-0.5900435899266435) * c2


@numba.njit(error_model="numpy")
def _sh_bases_vjp(degree, x, y, z, v_bases):
    """d/d (x, y, z) of sum_k v_bases[k] * basis_k(x, y, z) (gsplat's sh_coeffs_to_color_fast_vjp)."""
    v_x = F0
    v_y = F0
    v_z = F0
    if degree < 1:
        return v_x, v_y, v_z
    a1 = np.float32(0.48860251190292)
    v_x -= a1 * v_bases[3]
    v_y -= a1 * v_bases[1]
    v_z += a1 * v_bases[2]
    if degree < 2:
        return v_x, v_y, v_z
    a2 = np.float32(0.5462742152960395)
    b2 = np.float32(-1.092548430592079)
    v_x += v_bases[4] * a2 * F2 * y + v_bases[7] * b2 * z + v_bases[8] * a2 * F2 * x
    v_y += v_bases[4] * a2 * F2 * x + v_bases[5] * b2 * z - v_bases[8] * a2 * F2 * y
    v_z += (v_bases[5] * b2 * y + v_bases[6] * F2 * np.float32(0.9461746957575601) * z + v_bases[7] * b2 * x)
    if degree < 3:
        return v_x, v_y, v_z
    z2 = z * z
    c1 = x * x - y * y
    s1 = F2 * x * y
    # d/dx, d/dy of c1, s1 and of c2 = x c1 - y s1, s2 = x s1 + y c1
    c1_x, c1_y, s1_x, s1_y = F2 * x, -F2 * y, F2 * y, F2 * x
    c2_x = c1 + x * c1_x - y * s1_x
    c2_y = x * c1_y - s1 - y * s1_y
    s2_x = s1 + x * s1_x + y * c1_x
    s2_y = x * s1_y + c1 + y * c1_y
    a3 = np.float32(-0.5900435899266435)
    b3 = np.float32(1.445305721320277)
    tmp_c = np.float32(-2.285228997322329) * z2 + np.float32(0.4570457994644658)
    tmp_c_z = np.float32(-2.285228997322329) * F2 * z
    v_x += (v_bases[9] * a3 * s2_x + v_bases[10] * b3 * z * s1_x + v_bases[13] * tmp_c
            + v_bases[14] * b3 * z * c1_x + v_bases[15] * a3 * c2_x)
    v_y += (v_bases[9] * a3 * s2_y + v_bases[10] * b3 * z * s1_y + v_bases[11] * tmp_c
            + v_bases[14] * b3 * z * c1_y + v_bases[15] * a3 * c2_y)
    v_z += (v_bases[10] * b3 * s1 + v_bases[11] * tmp_c_z * y
            + v_bases[12] * (np.float32(3.0 * 1.865881662950577) * z2 - np.float32(1.119528997770346))
            + v_bases[13] * tmp_c_z * x + v_bases[14] * b3 * c1)
    return v_x, v_y, v_z


@numba.njit(error_model="numpy")
def _unit(d):
    norm = max(np.sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]), NORM_EPS)
    return d[0] / norm, d[1] / norm, d[2] / norm, norm


@numba.njit(parallel=True, error_model="numpy", cache=True)
def sh_forward(degree, dirs, coeffs, colors):
    """colors [C, N, 3] = max(SH_degree(dirs / |dirs|) . coeffs + 0.5, 0); coeffs [N, K, 3] shared by cameras."""
    n_cams, n = dirs.shape[0], dirs.shape[1]
    n_bases = (degree + 1) * (degree + 1)
    for block in numba.prange(n_blocks(n)):
        bases = np.zeros(16, np.float32)
        for g in range(block * BLOCK, min(n, (block + 1) * BLOCK)):
            for c in range(n_cams):
                x, y, z, _ = _unit(dirs[c, g])
                _sh_bases(degree, x, y, z, bases)
                for ch in range(3):
                    value = F0
                    for k in range(n_bases):
                        value += bases[k] * coeffs[g, k, ch]
                    colors[c, g, ch] = max(value + SH_OFFSET, F0)


@numba.njit(parallel=True, error_model="numpy", cache=True)
def sh_backward(degree, dirs, coeffs, v_colors, v_dirs, v_coeffs):
    """Gradients of sh_forward: v_dirs [C, N, 3] and v_coeffs [N, K, 3] (summed over cameras)."""
    n_cams, n = dirs.shape[0], dirs.shape[1]
    n_bases = (degree + 1) * (degree + 1)
    for block in numba.prange(n_blocks(n)):
        bases = np.zeros(16, np.float32)
        v_bases = np.zeros(16, np.float32)
        for g in range(block * BLOCK, min(n, (block + 1) * BLOCK)):
            v_coeffs[g] = F0
            for c in range(n_cams):
                v_dirs[c, g, 0] = F0
                v_dirs[c, g, 1] = F0
                v_dirs[c, g, 2] = F0
                if v_colors[c, g, 0] == F0 and v_colors[c, g, 1] == F0 and v_colors[c, g, 2] == F0:
                    continue
                x, y, z, norm = _unit(dirs[c, g])
                _sh_bases(degree, x, y, z, bases)
                v_bases[:n_bases] = F0
                for ch in range(3):
                    value = F0
                    for k in range(n_bases):
                        value += bases[k] * coeffs[g, k, ch]
                    v_value = v_colors[c, g, ch] if value + SH_OFFSET >= F0 else F0  # clamp_min passes at 0
                    for k in range(n_bases):
                        v_coeffs[g, k, ch] += bases[k] * v_value
                        v_bases[k] += coeffs[g, k, ch] * v_value
                v_x, v_y, v_z = _sh_bases_vjp(degree, x, y, z, v_bases)
                # F.normalize: (I - n n^T) / |d| (no projection where |d| was clamped to eps)
                along = x * v_x + y * v_y + z * v_z if norm > NORM_EPS else F0
                v_dirs[c, g, 0] = (v_x - along * x) / norm
                v_dirs[c, g, 1] = (v_y - along * y) / norm
                v_dirs[c, g, 2] = (v_z - along * z) / norm


# ---------------------------------------------------------------- torch autograd wrappers

def _as_numpy(tensor: Tensor) -> np.ndarray:
    return np.ascontiguousarray(tensor.detach().numpy(), dtype=np.float32)


def _grad_or_zeros(grad: Tensor | None, shape: tuple[int, ...]) -> np.ndarray:
    return np.zeros(shape, np.float32) if grad is None else _as_numpy(grad)


def fully_fused_projection_fast(means: Tensor, quats: Tensor, scales: Tensor, viewmats: Tensor, Ks: Tensor,
                                width: int, height: int, eps2d: float = 0.3, near_plane: float = 0.01,
                                far_plane: float = 1e10) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """gsplat's `_fully_fused_projection` of the covariances `_quat_scale_to_covar_preci(quats, scales)`,
    on float32 CPU tensors: radii [C, N, 2] (loose, no gradient), means2d, depths, conics and
    compensations (always computed; 0 where culled by depth). Differentiable w.r.t. means, quats, scales
    and viewmats."""
    means2d, depths, conics, compensations, radii = _Projection.apply(
        means, quats, scales, viewmats, Ks, width, height, eps2d, near_plane, far_plane)
    return radii, means2d, depths, conics, compensations


def spherical_harmonics_fast(degree: int, dirs: Tensor, coeffs: Tensor) -> Tensor:
    """max(`_spherical_harmonics`(degree, dirs, coeffs) + 0.5, 0) for dirs [C, N, 3] and coeffs [N, K, 3]
    shared by the C cameras, degree <= 3, on float32 CPU tensors; differentiable w.r.t. dirs and coeffs."""
    return _SphericalHarmonics.apply(degree, dirs, coeffs)


class _Projection(torch.autograd.Function):
    @staticmethod
    def forward(ctx, means, quats, scales, viewmats, Ks, width, height, eps2d, near_plane, far_plane):
        inputs = [_as_numpy(x) for x in (means, quats, scales, viewmats, Ks)]
        n_cams, n = len(viewmats), len(means)
        radii = np.empty((n_cams, n, 2), np.int32)
        means2d = np.empty((n_cams, n, 2), np.float32)
        depths = np.empty((n_cams, n), np.float32)
        conics = np.empty((n_cams, n, 3), np.float32)
        compensations = np.empty((n_cams, n), np.float32)
        options = (width, height, np.float32(eps2d), np.float32(near_plane), np.float32(far_plane))
        project_forward(*inputs, *options, radii, means2d, depths, conics, compensations)
        ctx.inputs, ctx.options = inputs, options
        radii = torch.from_numpy(radii)
        ctx.mark_non_differentiable(radii)
        return (torch.from_numpy(means2d), torch.from_numpy(depths), torch.from_numpy(conics),
                torch.from_numpy(compensations), radii)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, v_means2d, v_depths, v_conics, v_compensations, _v_radii):
        means, quats, scales, viewmats, _ = ctx.inputs
        n_cams, n = len(viewmats), len(means)
        v_means = np.empty_like(means)
        v_quats = np.empty_like(quats)
        v_scales = np.empty_like(scales)
        v_view_blocks = np.zeros((n_blocks(n), n_cams, 3, 4), np.float32)
        project_backward(*ctx.inputs, *ctx.options, _grad_or_zeros(v_means2d, (n_cams, n, 2)),
                         _grad_or_zeros(v_depths, (n_cams, n)), _grad_or_zeros(v_conics, (n_cams, n, 3)),
                         _grad_or_zeros(v_compensations, (n_cams, n)), ctx.needs_input_grad[3], v_means, v_quats, v_scales, v_view_blocks)
        v_viewmats = None
        if ctx.needs_input_grad[3]:
            v_viewmats = torch.zeros(n_cams, 4, 4)
            v_viewmats[:, :3, :] = torch.from_numpy(v_view_blocks.sum(axis=0))
        return (torch.from_numpy(v_means), torch.from_numpy(v_quats), torch.from_numpy(v_scales), v_viewmats,
                None, None, None, None, None, None)


class _SphericalHarmonics(torch.autograd.Function):
    @staticmethod
    def forward(ctx, degree, dirs, coeffs):
        dirs_np, coeffs_np = _as_numpy(dirs), _as_numpy(coeffs)
        colors = np.empty(dirs_np.shape, np.float32)
        sh_forward(degree, dirs_np, coeffs_np, colors)
        ctx.degree, ctx.dirs, ctx.coeffs = degree, dirs_np, coeffs_np
        return torch.from_numpy(colors)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, v_colors):
        v_dirs = np.empty_like(ctx.dirs)
        v_coeffs = np.empty_like(ctx.coeffs)
        sh_backward(ctx.degree, ctx.dirs, ctx.coeffs, _as_numpy(v_colors), v_dirs, v_coeffs)
        return None, torch.from_numpy(v_dirs), torch.from_numpy(v_coeffs)

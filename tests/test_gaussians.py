"""Splat PLY IO (exact, hostile-proof) and frame transforms checked against gsplat's own maths."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch
from gsplat.cuda._torch_impl import _quat_scale_to_covar_preci, _spherical_harmonics
from scipy.spatial.transform import Rotation

from twinscan.errors import TwinscanError
from twinscan.gaussians import Gaussians, read_ply, sh_rotation_matrices, split_similarity, transform, write_ply


def random_gaussians(count: int, degree: int, seed: int = 0) -> Gaussians:
    rng = np.random.default_rng(seed)
    quats = rng.normal(size=(count, 4))
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    return Gaussians(
        means=rng.uniform(-3, 3, (count, 3)).astype(np.float32),
        log_scales=rng.uniform(-6, 0, (count, 3)).astype(np.float32),
        quats=quats.astype(np.float32),
        opacity_logits=rng.normal(0, 3, count).astype(np.float32),
        sh=rng.normal(0, 0.5, (count, (degree + 1) ** 2, 3)).astype(np.float32),
    )


def _ply(path: Path, header_lines: list[str], body: bytes) -> Path:
    path.write_bytes(("\n".join(["ply", *header_lines, "end_header"]) + "\n").encode() + body)
    return path


_STANDARD_PROPERTIES = (["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2", "opacity"]
                        + [f"scale_{i}" for i in range(3)] + [f"rot_{i}" for i in range(4)])


def _raw(path: Path, content: bytes) -> Path:
    path.write_bytes(content)
    return path


def _header(count: int, properties: list[str] = _STANDARD_PROPERTIES) -> list[str]:
    return (["format binary_little_endian 1.0", f"element vertex {count}"]
            + [f"property float {name}" for name in properties])


@pytest.mark.parametrize("degree", [0, 1, 3])
def test_ply_round_trip_is_bit_exact(tmp_path: Path, degree: int) -> None:
    splats = random_gaussians(500, degree)
    back = read_ply(write_ply(tmp_path / "splats.ply", splats))
    for name in ("means", "log_scales", "quats", "opacity_logits", "sh"):
        assert getattr(back, name).dtype == np.float32
        np.testing.assert_array_equal(getattr(back, name), getattr(splats, name), err_msg=name)
    assert back.sh_degree == degree


def test_ascii_ply_reads_like_the_binary_one(tmp_path: Path) -> None:
    import plyfile

    splats = random_gaussians(20, 2)
    binary = plyfile.PlyData.read(str(write_ply(tmp_path / "b.ply", splats)))
    plyfile.PlyData(binary.elements, text=True).write(str(tmp_path / "a.ply"))
    back = read_ply(tmp_path / "a.ply")
    np.testing.assert_array_equal(back.sh, splats.sh)
    np.testing.assert_array_equal(back.means, splats.means)


def test_ply_layout_is_the_original_3dgs_one(tmp_path: Path) -> None:
    import plyfile

    splats = random_gaussians(7, 3)
    vertex = plyfile.PlyData.read(str(write_ply(tmp_path / "s.ply", splats)))["vertex"]
    names = [p.name for p in vertex.properties]
    assert names[:9] == ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
    assert names[-8:] == ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
    # Channel-major rest: f_rest_{c*15 + k-1} is coefficient k of channel c.
    assert vertex["f_rest_16"][3] == splats.sh[3, 2, 1]
    assert vertex["f_rest_44"][5] == splats.sh[5, 15, 2]


def test_read_ply_normalises_stored_quaternions(tmp_path: Path) -> None:
    splats = random_gaussians(50, 1)
    scaled = Gaussians(splats.means, splats.log_scales, splats.quats * 3.5, splats.opacity_logits, splats.sh)
    back = read_ply(write_ply(tmp_path / "s.ply", scaled))
    np.testing.assert_allclose(back.quats, splats.quats, atol=1e-6)


def test_header_claiming_a_trillion_splats_is_rejected_without_allocating(tmp_path: Path) -> None:
    path = _ply(tmp_path / "huge.ply", _header(10**12), b"\0" * 4096)
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(TwinscanError, match="truncated or lies"):
        read_ply(path)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert time.perf_counter() - started < 1.0
    assert peak < 10 * 2**20


def test_hostile_plys_are_rejected_with_twinscan_error(tmp_path: Path) -> None:
    row = np.zeros(len(_STANDARD_PROPERTIES), np.float32)
    row[_STANDARD_PROPERTIES.index("rot_0")] = 1.0
    good = _ply(tmp_path / "good.ply", _header(2), np.tile(row, 2).tobytes())
    assert read_ply(good).count == 2

    with_nan = row.copy()
    with_nan[0] = np.nan
    with_inf = row.copy()
    with_inf[_STANDARD_PROPERTIES.index("f_dc_1")] = np.inf
    zero_quat = np.zeros_like(row)
    cases = {
        "is not a PLY file": _raw(tmp_path / "a.ply", b"hello world" * 100),
        "is not a PLY file ": _raw(tmp_path / "b.ply",
                                   b"ply\nformat binary_little_endian 1.0\n" + b"comment x\n" * 9000),
        "malformed PLY header": _ply(tmp_path / "c.ply",
                                     ["format binary_little_endian 1.0", "element vertex two"], b""),
        "lacks the 3DGS properties": _ply(tmp_path / "d.ply", _header(2, _STANDARD_PROPERTIES[:-1]),
                                          np.zeros(2 * (len(_STANDARD_PROPERTIES) - 1), np.float32).tobytes()),
        "truncated": _ply(tmp_path / "e.ply", _header(3), np.tile(row, 2).tobytes()),
        "NaN or infinite values in means": _ply(tmp_path / "f.ply", _header(2), np.stack([row, with_nan]).tobytes()),
        "NaN or infinite values in sh": _ply(tmp_path / "g.ply", _header(2), np.stack([row, with_inf]).tobytes()),
        "zero or NaN rotations": _ply(tmp_path / "h.ply", _header(2), np.stack([row, zero_quat]).tobytes()),
        "f_rest": _ply(tmp_path / "i.ply", _header(1, _STANDARD_PROPERTIES + ["f_rest_0", "f_rest_1"]),
                       np.zeros(len(_STANDARD_PROPERTIES) + 2, np.float32).tobytes()),
        "one 'vertex' element": _ply(tmp_path / "j.ply", _header(1) + ["element face 1",
                                     "property list uchar int vertex_indices"], row.tobytes() + b"\x03" + b"\0" * 12),
        "holds no splats": _ply(tmp_path / "k.ply", _header(0), b""),
        "does not exist": tmp_path / "missing.ply",
    }
    for message, path in cases.items():
        with pytest.raises(TwinscanError, match=message.strip()):
            read_ply(path)


def _colour(splats: Gaussians, directions: np.ndarray) -> np.ndarray:
    return _spherical_harmonics(splats.sh_degree, torch.from_numpy(directions),
                                torch.from_numpy(splats.sh.astype(np.float64))).numpy()


def test_sh_rotation_keeps_the_colour_seen_from_every_direction() -> None:
    splats = random_gaussians(64, 3, seed=1)
    rotation = Rotation.from_rotvec([0.7, -1.9, 0.4]).as_matrix()
    moved = transform(splats, rotation, np.zeros(3), 1.0)
    directions = np.random.default_rng(2).normal(size=(64, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    before = _colour(splats, directions)
    after = _colour(moved, directions @ rotation.T)
    np.testing.assert_allclose(after, before, atol=2e-5)
    # The colour does change along the unrotated direction, so the check above can fail.
    assert np.abs(_colour(moved, directions) - before).max() > 0.1


def test_sh_band_one_rotates_like_a_vector_in_basis_order() -> None:
    rotation = Rotation.from_rotvec([0.3, 0.2, -1.1]).as_matrix()
    band_zero, band_one = sh_rotation_matrices(rotation, 1)
    # gsplat's band-1 basis is c * (-y, z, -x) = c * P d.
    permutation = np.array([[0, -1, 0], [0, 0, 1], [-1, 0, 0]])
    np.testing.assert_allclose(band_zero, [[1.0]], atol=1e-12)
    np.testing.assert_allclose(band_one, permutation @ rotation @ permutation.T, atol=1e-12)


def test_sh_rotation_matrices_are_orthogonal_and_compose() -> None:
    a = Rotation.from_rotvec([0.1, 1.2, -0.5]).as_matrix()
    b = Rotation.from_rotvec([-2.0, 0.3, 0.9]).as_matrix()
    for d_a, d_b, d_ab in zip(sh_rotation_matrices(a, 4), sh_rotation_matrices(b, 4),
                              sh_rotation_matrices(a @ b, 4), strict=True):
        np.testing.assert_allclose(d_a @ d_a.T, np.eye(len(d_a)), atol=1e-10)
        np.testing.assert_allclose(d_a @ d_b, d_ab, atol=1e-10)


def test_similarity_transform_moves_means_covariances_and_keeps_opacity() -> None:
    splats = random_gaussians(200, 2, seed=3)
    rotation = Rotation.from_rotvec([1.0, 0.5, -0.25]).as_matrix()
    translation, scale = np.array([0.5, -2.0, 1.0]), 2.5
    moved = transform(splats, rotation, translation, scale)

    np.testing.assert_allclose(moved.means, scale * splats.means @ rotation.T + translation, atol=1e-5)
    covariances = [_quat_scale_to_covar_preci(torch.from_numpy(g.quats.astype(np.float64)),
                                              torch.from_numpy(g.scales.astype(np.float64)),
                                              compute_preci=False)[0].numpy() for g in (splats, moved)]
    expected = scale**2 * np.einsum("ij,njk,lk->nil", rotation, covariances[0], rotation)
    np.testing.assert_allclose(covariances[1], expected, rtol=1e-4, atol=1e-9)
    np.testing.assert_allclose(np.linalg.norm(moved.quats, axis=1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(moved.opacity_logits, splats.opacity_logits)
    np.testing.assert_array_equal(moved.sh[:, 0], splats.sh[:, 0])


def test_split_similarity_inverts_composition() -> None:
    rotation = Rotation.from_rotvec([0.2, -0.4, 2.0]).as_matrix()
    matrix = np.eye(4)
    matrix[:3, :3], matrix[:3, 3] = 0.37 * rotation, [1, 2, 3]
    r, t, s = split_similarity(matrix)
    np.testing.assert_allclose(r, rotation, atol=1e-12)
    np.testing.assert_allclose(t, [1, 2, 3])
    assert s == pytest.approx(0.37)
    with pytest.raises(TwinscanError):
        split_similarity(np.diag([1.0, 1.0, -1.0, 1.0]))
    with pytest.raises(TwinscanError):
        transform(random_gaussians(2, 0), np.diag([1.0, 2.0, 1.0]), np.zeros(3), 1.0)

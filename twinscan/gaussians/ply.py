"""Read and write splats in the original 3DGS PLY layout, refusing hostile files before allocating.

Layout (one `vertex` element, float32): x y z nx ny nz f_dc_0..2 f_rest_0..(3(K-1)-1) opacity
scale_0..2 rot_0..3, with f_rest channel-major (all red coefficients, then green, then blue).
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import plyfile
from numpy.lib.recfunctions import structured_to_unstructured, unstructured_to_structured

from twinscan.atomic import atomic_path
from twinscan.errors import TwinscanError
from twinscan.gaussians.model import MAX_SH_DEGREE, Gaussians, sh_degree

MAX_HEADER_BYTES = 64 * 1024  # a 3DGS header is ~1.5 KB; anything longer is not one
_END_HEADER = b"end_header"
_BASE_PROPERTIES = ("x", "y", "z", "f_dc_0", "f_dc_1", "f_dc_2", "opacity",
                    "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3")
_FIX = "export the splats as a standard 3DGS PLY (binary, one vertex element) and try again"


def write_ply(path: str | os.PathLike, gaussians: Gaussians) -> Path:
    """Write `gaussians` as a binary little-endian 3DGS PLY; the file appears complete or not at all."""
    path = Path(path)
    rest = gaussians.sh.shape[1] - 1
    names = (["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2"]
             + [f"f_rest_{i}" for i in range(3 * rest)]
             + ["opacity", "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"])
    columns = np.concatenate([
        gaussians.means,
        np.zeros((gaussians.count, 3)),
        gaussians.sh[:, 0, :],
        gaussians.sh[:, 1:, :].transpose(0, 2, 1).reshape(gaussians.count, 3 * rest),
        gaussians.opacity_logits[:, None],
        gaussians.log_scales,
        gaussians.quats,
    ], axis=1, dtype=np.float32)
    vertices = unstructured_to_structured(columns, dtype=np.dtype([(name, "<f4") for name in names]))
    element = plyfile.PlyElement.describe(vertices, "vertex")
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            plyfile.PlyData([element], byte_order="<").write(f)
    return path


def read_ply(path: str | os.PathLike) -> Gaussians:
    """Read a 3DGS PLY. Malformed files raise TwinscanError before any allocation beyond the file's size."""
    path = Path(path)
    if not path.is_file():
        raise TwinscanError(f"splat file {path} does not exist", "pass the path of a 3DGS .ply file")
    header, header_bytes = _read_header(path)
    vertex = _checked_vertex_element(path, header, path.stat().st_size - header_bytes)
    try:
        data = plyfile.PlyData.read(str(path), mmap=False if header.text else "c")["vertex"].data
    except (plyfile.PlyParseError, ValueError, UnicodeDecodeError) as error:
        raise TwinscanError(f"{path} has an unreadable body ({error})", _FIX) from error

    def columns(*names: str) -> np.ndarray:
        return structured_to_unstructured(data[list(names)], dtype=np.float32, copy=True)

    rest = _rest_count(vertex)
    count = vertex.count
    sh = np.concatenate([
        columns("f_dc_0", "f_dc_1", "f_dc_2")[:, None, :],
        columns(*[f"f_rest_{i}" for i in range(rest)]).reshape(count, 3, rest // 3).transpose(0, 2, 1),
    ], axis=1)
    gaussians = Gaussians(means=columns("x", "y", "z"),
                          log_scales=columns("scale_0", "scale_1", "scale_2"),
                          quats=_unit(columns("rot_0", "rot_1", "rot_2", "rot_3"), path),
                          opacity_logits=columns("opacity")[:, 0],
                          sh=np.ascontiguousarray(sh))
    for name in ("means", "log_scales", "quats", "opacity_logits", "sh"):
        bad = ~np.isfinite(getattr(gaussians, name))
        if bad.any():
            raise TwinscanError(f"{path} holds {int(bad.sum())} NaN or infinite values in {name}",
                                "re-export the splats from a finished training run (NaNs mean it diverged)")
    return gaussians


def _read_header(path: Path) -> tuple[plyfile.PlyData, int]:
    """Parse the header from a bounded prefix of the file; return it and its length in bytes."""
    with open(path, "rb") as f:
        prefix = f.read(MAX_HEADER_BYTES)
    end = prefix.find(_END_HEADER)
    newline = prefix.find(b"\n", end)
    if not prefix.startswith(b"ply") or end < 0 or newline < 0:
        raise TwinscanError(f"{path} is not a PLY file (no 'ply ... end_header' in its first "
                            f"{MAX_HEADER_BYTES // 1024} KiB)", _FIX)
    try:
        # plyfile's own parser, so our size check and its reader agree on the layout.
        header = plyfile.PlyData._parse_header(io.BytesIO(prefix[:newline + 1]))
    except (plyfile.PlyParseError, UnicodeDecodeError, ValueError, KeyError) as error:
        raise TwinscanError(f"{path} has a malformed PLY header ({error})", _FIX) from error
    return header, newline + 1


def _checked_vertex_element(path: Path, header: plyfile.PlyData, body_bytes: int) -> plyfile.PlyElement:
    names = [element.name for element in header.elements]
    if names != ["vertex"]:
        raise TwinscanError(f"{path} has elements {names}; a 3DGS PLY has exactly one 'vertex' element "
                            "(compressed or mesh PLYs are not splat files)", _FIX)
    vertex = header["vertex"]
    properties = [p.name for p in vertex.properties]
    missing = [name for name in _BASE_PROPERTIES if name not in properties]
    if missing:
        raise TwinscanError(f"{path} lacks the 3DGS properties {missing}", _FIX)
    if any(isinstance(p, plyfile.PlyListProperty) for p in vertex.properties):
        raise TwinscanError(f"{path} has list properties in its vertex element", _FIX)
    rest = _rest_count(vertex)
    if rest % 3 or sh_degree(rest // 3 + 1) < 0 or any(f"f_rest_{i}" not in properties for i in range(rest)):
        raise TwinscanError(f"{path} has {rest} f_rest properties; expected 3((degree+1)^2 - 1) numbered "
                            f"from 0 for a degree 0..{MAX_SH_DEGREE}", _FIX)
    if vertex.count <= 0:
        raise TwinscanError(f"{path} holds no splats", "train the splats before packaging them")
    # Binary rows have a fixed size; an ASCII value takes at least two bytes (a digit and a separator).
    row_bytes = 2 * len(properties) if header.text else vertex.dtype().itemsize
    if vertex.count * row_bytes > body_bytes:
        raise TwinscanError(f"{path} is truncated or lies: its header claims {vertex.count} splats "
                            f"({vertex.count * row_bytes} bytes) but the body holds {body_bytes} bytes",
                            "copy the file again in full, or re-export it")
    return vertex


def _rest_count(vertex: plyfile.PlyElement) -> int:
    return sum(p.name.startswith("f_rest_") for p in vertex.properties)


def _unit(quats: np.ndarray, path: Path) -> np.ndarray:
    """Normalise quaternions (3DGS stores them unnormalised); unit ones are left bit-exact."""
    norms = np.linalg.norm(quats.astype(np.float64), axis=1, keepdims=True)
    if not np.all(norms > 1e-12):
        raise TwinscanError(f"{path} holds {int(np.sum(~(norms > 1e-12)))} zero or NaN rotations", _FIX)
    needs = np.abs(norms - 1.0) > 1e-6
    return np.where(needs, quats / norms, quats).astype(np.float32)

"""What a fresh machine needs works from pip alone."""

from __future__ import annotations

import subprocess
import sys


def test_open3d_imports_in_a_fresh_process_through_twinscan() -> None:
    """open3d's wheel needs libusb-1.0.so.0; twinscan must provide it from the libusb-package wheel."""
    code = ("from twinscan.optional import open3d; o3d = open3d(); "
            "mesh = o3d.geometry.TriangleMesh.create_box(); print(len(mesh.triangles))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "12"

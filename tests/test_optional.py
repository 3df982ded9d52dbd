"""The heavy backends behind twinscan.optional import quietly: what they print is not the user's business."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def test_a_check_on_a_cpu_machine_prints_no_warp_cuda_warning(tmp_path: Path) -> None:
    pytest.importorskip("newton")
    from test_check import author_twin

    twin = author_twin(tmp_path / "sound.usda")
    result = subprocess.run([sys.executable, "-m", "twinscan.cli.app", "check", str(twin)], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert "Warp CUDA warning" not in output and "NVIDIA CUDA driver" not in output, output
    assert "Warp 1." not in output  # nor warp's greeting
    assert output.startswith("PASS ") and "25/25 probes rested" in output, output


def test_other_native_stderr_output_is_kept(capfd: pytest.CaptureFixture[str]) -> None:
    import os

    from twinscan.optional import _native_stderr_without

    with _native_stderr_without(b"Warp CUDA warning:"):
        os.write(2, b"Warp CUDA warning: Could not find or load the NVIDIA CUDA driver.\nsomething else\n")
    assert capfd.readouterr().err == "something else\n"

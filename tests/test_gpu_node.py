"""The GPU node's choices, decided the same on any machine: where SIFT runs, which preset `auto` picks.

The pure rules are tested on every combination; this machine's own answer comes from the real
pycolmap and torch (on a CPU-only machine: the CPU, preview)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pycolmap
import pytest
import torch

from twinscan.errors import TwinscanError
from twinscan.options import CaptureOptions
from twinscan.pipeline import stage_configs
from twinscan.presets import PRESETS, choose_preset, preset_choice
from twinscan.gaussians.raster import cuda_available
from twinscan.recon.sfm.device import choose_sfm_device, sfm_device

ROOT = Path(__file__).resolve().parent.parent


def test_sift_runs_on_the_gpu_only_with_the_cuda_build_and_a_visible_gpu() -> None:
    chosen = {(requested, build, gpu): choose_sfm_device(requested, build, gpu).name
              for requested in ("auto", "cpu", "cuda") for build in (False, True) for gpu in (False, True)
              if (requested, build, gpu) != ("cuda", True, False)}
    assert chosen == {
        ("auto", False, False): "cpu", ("auto", False, True): "cpu", ("auto", True, False): "cpu",
        ("auto", True, True): "cuda",
        ("cpu", False, False): "cpu", ("cpu", False, True): "cpu", ("cpu", True, False): "cpu", ("cpu", True, True): "cpu",
        # the CPU wheel on a GPU node: the splats still use the GPU, SfM says why it did not
        ("cuda", False, False): "cpu", ("cuda", False, True): "cpu", ("cuda", True, True): "cuda",
    }
    assert "CPU wheel" in choose_sfm_device("cuda", False, True).reason
    assert "no GPU is visible" in choose_sfm_device("auto", True, False).reason


def test_device_cuda_on_the_cuda_build_without_a_gpu_and_unknown_devices_are_refused() -> None:
    with pytest.raises(TwinscanError, match="no CUDA GPU is visible"):
        choose_sfm_device("cuda", True, False)
    with pytest.raises(TwinscanError, match="unknown device 'gpu'"):
        choose_sfm_device("gpu", True, True)


def test_this_machines_sift_device_follows_pycolmap_and_torch() -> None:
    expected = "cuda" if pycolmap.has_cuda and torch.cuda.is_available() else "cpu"
    assert sfm_device("auto").name == expected
    assert sfm_device("cpu").name == "cpu"


def test_auto_quality_is_standard_on_a_usable_gpu_and_preview_otherwise() -> None:
    assert choose_preset("auto", "auto", True).name == "standard"
    assert choose_preset("auto", "cuda", True).name == "standard"
    assert choose_preset("auto", "auto", False).name == "preview"
    assert choose_preset("auto", "cpu", True).name == "preview"  # the user chose the CPU
    for name in PRESETS:  # the user chose the preset
        assert choose_preset(name, "auto", True) == choose_preset(name, "cpu", False)
        assert choose_preset(name, "auto", True).name == name
    with pytest.raises(TwinscanError, match="unknown quality preset 'ultra'"):
        choose_preset("ultra", "auto", True)


def test_the_gpu_presets_grow_from_standard_to_high() -> None:
    preview, standard, high = PRESETS["preview"], PRESETS["standard"], PRESETS["high"]
    for field in ("max_frames", "max_side", "frame_max_side", "splat_steps", "max_gaussians"):
        assert getattr(preview, field) < getattr(standard, field) < getattr(high, field), field


def test_options_resolve_auto_to_this_machines_preset_before_any_stage_runs() -> None:
    chosen = preset_choice("auto", "auto")
    assert chosen.name == ("standard" if cuda_available() else "preview")
    configs = stage_configs(CaptureOptions())
    assert configs["frames"].max_frames == PRESETS[chosen.name].max_frames
    assert configs["sfm"].device == sfm_device("auto")


def test_a_capture_records_its_preset_and_where_sift_ran(smoke_capture: Path) -> None:
    manifest = json.loads((smoke_capture / "manifest.json").read_text())
    assert manifest["quality"] == {"requested": "smoke", "name": "smoke", "reason": "--quality smoke"}
    sfm = manifest["stages"]["sfm"]
    expected = sfm_device("auto")
    assert sfm["params"]["device"] == {"name": expected.name, "reason": expected.reason}
    assert (sfm["figures"]["sift_device"], sfm["figures"]["sift_device_reason"]) == (expected.name, expected.reason)
    # features chosen by the frames' size (320 px), recorded as a figure; the param says they were not set
    assert sfm["params"]["max_features"] is None and sfm["figures"]["sift_features"] == 4096


def test_the_gpu_check_script_is_valid_bash() -> None:
    subprocess.run(["bash", "-n", str(ROOT / "benchmarks" / "gpu_check.sh")], check=True)

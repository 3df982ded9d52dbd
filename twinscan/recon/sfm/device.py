"""Where SIFT extraction and matching run: the GPU when pycolmap is the CUDA build and a GPU is there.

pycolmap's own default (`Device.auto`) means "the GPU whenever the wheel was built with CUDA", also
on a machine without one and also after `--device cpu`; so the stage decides here and passes
`Device.cpu` or `Device.cuda` explicitly. The CPU wheel (`pycolmap`) is the default install; the
CUDA build (`pycolmap-cuda12`, the `cuda` extra) has the same API.
"""

from __future__ import annotations

from dataclasses import dataclass

from twinscan.errors import TwinscanError

DEVICES = ("auto", "cpu", "cuda")
CUDA_INSTALL_HINT = "pycolmap-cuda12, the cuda extra: README, 'GPU node'"


@dataclass(frozen=True)
class SfmDevice:
    """The device SfM's SIFT runs on and why (both recorded with the sfm stage)."""

    name: str = "cpu"  # "cpu" or "cuda"
    reason: str = "the default"


def choose_sfm_device(requested: str, pycolmap_cuda: bool, gpu_present: bool) -> SfmDevice:
    """The device for SIFT extraction and matching, from `--device` and what this machine has.

    `--device cuda` with the CPU wheel still runs (the splats use the GPU; SfM stays on the CPU and
    says why); `--device cuda` with the CUDA build but no GPU is an error, as it is for the splats.
    """
    if requested not in DEVICES:
        raise TwinscanError(f"unknown device '{requested}'", f"use one of: {', '.join(DEVICES)}")
    if requested == "cpu":
        return SfmDevice("cpu", "--device cpu")
    if not pycolmap_cuda:
        return SfmDevice("cpu", f"pycolmap is the CPU wheel (GPU SIFT needs {CUDA_INSTALL_HINT})")
    if not gpu_present:
        if requested == "cuda":
            raise TwinscanError("--device cuda was asked for, but no CUDA GPU is visible (pycolmap has CUDA)",
                                "use --device cpu or --device auto")
        return SfmDevice("cpu", "pycolmap has CUDA but no GPU is visible")
    return SfmDevice("cuda", f"--device {requested}: pycolmap has CUDA and a GPU is visible")


def sfm_device(requested: str) -> SfmDevice:
    """`choose_sfm_device` for this machine; torch is asked about a GPU only when pycolmap has CUDA."""
    import pycolmap

    cuda_build = bool(pycolmap.has_cuda)
    gpu_present = False
    if cuda_build and requested != "cpu":
        import torch

        gpu_present = torch.cuda.is_available()
    return choose_sfm_device(requested, cuda_build, gpu_present)

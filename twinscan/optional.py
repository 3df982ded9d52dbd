"""Heavy or fragile backends behind one import point each (as trimesh does)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import sys
import tempfile
from collections.abc import Iterator
from types import ModuleType

from twinscan.errors import TwinscanError

RAY_HINT = "pip install 'twinscan[ray]'"


@functools.cache
def open3d() -> ModuleType:
    """Import open3d, first loading the libusb shipped by the `libusb-package` wheel.

    open3d's wheel links libusb-1.0.so.0, which minimal machines lack; loading the wheel's copy
    globally first lets the dynamic linker resolve it by soname, so pip alone is enough.
    """
    try:
        import open3d as o3d  # noqa: F401

        return o3d
    except ImportError:
        pass
    try:
        import libusb_package

        ctypes.CDLL(str(libusb_package.get_library_path()), mode=ctypes.RTLD_GLOBAL)
        import open3d as o3d
    except ImportError as error:
        raise TwinscanError(f"open3d cannot be imported ({error})",
                            "reinstall twinscan: pip install -e . (it brings open3d and libusb-package)") from error
    return o3d


# What warp's native library prints to stderr when it initialises on a machine without a CUDA driver,
# where the CPU is the expected device; the check says which device it used.
_NO_CUDA_DRIVER = b"Warp CUDA warning: Could not find or load the NVIDIA CUDA driver"


@contextlib.contextmanager
def _native_stderr_without(line_start: bytes) -> Iterator[None]:
    """Hold back, from this process's stderr (file descriptor 2, where native libraries write), the
    lines that start with `line_start`; everything else is written back when the block ends."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            kept = [line for line in held.read().splitlines(keepends=True) if not line.startswith(line_start)]
            if kept:
                os.write(2, b"".join(kept))


@functools.cache
def newton() -> ModuleType:
    """Import NVIDIA Newton (and warp), the `physics` extra; one clear error when absent.

    warp's runtime is initialised here, quietly: no greeting, and no "Could not find or load the NVIDIA
    CUDA driver" warning on a CPU-only machine (warp's C++ prints it straight to stderr). warp reads
    `warp.config.kernel_cache_dir` when it initialises, so a different kernel cache is set through
    $WARP_CACHE_PATH before this call (or `warp._src.build.init_kernel_cache(path)` after it).
    """
    try:
        import newton as newton_module
        import warp
    except ImportError as error:
        raise TwinscanError(f"the physics check needs NVIDIA Newton, which cannot be imported ({error})",
                            'pip install "twinscan[physics]" (or run the static checks only)') from error
    warp.config.log_level = warp.LOG_WARNING  # no greeting, no per-kernel "took N ms" lines
    with _native_stderr_without(_NO_CUDA_DRIVER):
        warp.init()
    return newton_module


@functools.cache
def ray() -> ModuleType:
    """Import Ray, the `ray` extra that batch's Ray executor needs; one clear error when absent."""
    try:
        import ray as ray_module
    except ImportError as error:
        raise TwinscanError(f"the ray executor needs Ray, which cannot be imported ({error})",
                            RAY_HINT) from error
    return ray_module

"""Heavy or fragile backends behind one import point each (as trimesh does): whether a module is
there (`available`), importing it with one clear error (`require`), and the install hint for it."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib
import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterator
from types import ModuleType

from twinscan.errors import TwinscanError

# The extra of pyproject.toml that brings each optional module; the others are twinscan's own dependencies.
EXTRAS = {"coacd": "convex", "viser": "viewer", "newton": "physics", "warp": "physics", "ray": "ray"}


def install_hint(module: str) -> str:
    """What to run to get `module`: its extra, or twinscan again when it is a required dependency."""
    extra = EXTRAS.get(module.split(".")[0])
    return f"pip install 'twinscan[{extra}]'" if extra else f"reinstall twinscan: pip install -e . (it depends on {module})"


def available(module: str) -> bool:
    """True when `module` can be imported (found, not imported: cheap)."""
    return importlib.util.find_spec(module) is not None


def require(module: str, purpose: str) -> ModuleType:
    """Import `module`, or one TwinscanError saying what needs it and how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise TwinscanError(f"{purpose} needs {module}, which cannot be imported ({error})",
                            install_hint(module)) from error


RAY_HINT = install_hint("ray")


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
    newton_module = require("newton", "the physics check (NVIDIA Newton)")
    warp = require("warp", "the physics check (NVIDIA Newton)")
    warp.config.log_level = warp.LOG_WARNING  # no greeting, no per-kernel "took N ms" lines
    with _native_stderr_without(_NO_CUDA_DRIVER):
        warp.init()
    return newton_module


@functools.cache
def ray() -> ModuleType:
    """Import Ray, the `ray` extra that batch's Ray executor needs; one clear error when absent."""
    return require("ray", "the ray executor")

"""Heavy or fragile backends behind one import point each (as trimesh does)."""

from __future__ import annotations

import ctypes
import functools
from types import ModuleType

from twinscan.errors import TwinscanError


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


@functools.cache
def newton() -> ModuleType:
    """Import NVIDIA Newton (and warp), the `physics` extra; one clear error when absent."""
    try:
        import newton as newton_module
        import warp  # noqa: F401
    except ImportError as error:
        raise TwinscanError(f"the physics check needs NVIDIA Newton, which cannot be imported ({error})",
                            'pip install "twinscan[physics]" (or run the static checks only)') from error
    return newton_module


@functools.cache
def ray() -> ModuleType:
    """Import Ray, the `ray` extra that batch's Ray executor needs; one clear error when absent."""
    try:
        import ray as ray_module
    except ImportError as error:
        raise TwinscanError(f"the ray executor needs Ray, which cannot be imported ({error})",
                            "pip install 'twinscan[ray]'") from error
    return ray_module

"""Files that appear complete or not at all: write under a temporary name, then rename."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from twinscan.errors import TwinscanError


def _temporary_sibling(path: Path) -> Path:
    """A name in the same folder (same filesystem, so rename is atomic) that no reader trusts."""
    return path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:8]}")


def _raise_for_os_error(error: OSError, path: Path) -> None:
    if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        raise TwinscanError(
            f"could not write {path}: {os.strerror(error.errno)}",
            "free disk space (or raise the file size limit) and run the same command again",
        ) from error
    raise error


@contextlib.contextmanager
def _removed_on_failure(tmp: Path, path: Path) -> Iterator[None]:
    """Remove `tmp` when the body fails; a full disk becomes a TwinscanError that says so."""
    try:
        yield
    except OSError as error:
        _remove(tmp)
        _raise_for_os_error(error, path)
    except BaseException:
        _remove(tmp)
        raise


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces `path`, on failure it is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary_sibling(path)
    with _removed_on_failure(tmp, path):
        yield tmp
        os.replace(tmp, path)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a fresh temporary folder; on success it replaces the folder `path` as a whole."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary_sibling(path)
    tmp.mkdir()
    with _removed_on_failure(tmp, path):
        yield tmp
        if path.exists():
            old = _temporary_sibling(path)
            os.replace(path, old)
            os.replace(tmp, path)
            _remove(old)
        else:
            os.replace(tmp, path)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_bytes(path, (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode())


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

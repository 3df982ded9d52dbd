"""Files that appear complete or not at all: write under a temporary name, then rename."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import resource
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from twinscan.errors import TwinscanError

_NO_ROOM = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_TEMPORARY_MARK = ".tmp-"


def _temporary_sibling(path: Path) -> Path:
    """A name in the same folder (same filesystem, so rename is atomic) that no reader trusts."""
    return path.with_name(f".{path.name}{_TEMPORARY_MARK}{uuid.uuid4().hex[:8]}")


def is_temporary(name: str) -> bool:
    """True for a name `_temporary_sibling` makes: a write in progress, or one a killed run left."""
    return name.startswith(".") and _TEMPORARY_MARK in name


def _files(path: Path) -> Iterator[Path]:
    if path.is_dir():
        yield from (child for child in path.rglob("*") if child.is_file())
    elif path.is_file():
        yield path


def _cut_short(tmp: Path) -> int | None:
    """EFBIG when a file under `tmp` reached the file-size limit (`ulimit -f`): its writer may have
    truncated it without a word (pycolmap's model writer and libpng carry on after a failed write)."""
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY and any(f.stat().st_size >= limit for f in _files(tmp)):
        return errno.EFBIG
    return None


def _no_room(error: Exception, tmp: Path) -> int | None:
    """The errno when a write failed for want of room, also where a library does not raise an OSError
    for it (USD raises its own error naming it; torch.save reports a bad file position)."""
    if isinstance(error, OSError) and error.errno in _NO_ROOM:
        return error.errno
    message = str(error)
    found = next((code for code in _NO_ROOM if os.strerror(code) in message), None)
    if found is None:
        found = _cut_short(tmp)
    if found is None:
        with contextlib.suppress(OSError):
            stats = os.statvfs(tmp.parent)
            if stats.f_blocks > 0 and stats.f_bavail == 0:
                found = errno.ENOSPC
    return found


def _no_room_error(code: int, path: Path) -> TwinscanError:
    return TwinscanError(f"could not write {path}: {os.strerror(code)}",
                         "free disk space (or raise the file size limit) and run the same command again")


def require_free_space(folder: Path, needed: int, what: str) -> None:
    """Refuse to start work that would fill the disk, for writers that abort the process on a full
    disk instead of raising (pycolmap)."""
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise TwinscanError(f"only {free / 1e6:,.0f} MB free in {folder}; {what} needs about {needed / 1e6:,.0f} MB",
                            "free disk space (or use an output folder on a larger disk) and run the same command again")


def _check_complete(tmp: Path, path: Path) -> None:
    """Refuse to rename a write that a silent writer may have truncated at the file-size limit."""
    code = _cut_short(tmp)
    if code is not None:
        raise _no_room_error(code, path)


@contextlib.contextmanager
def _removed_on_failure(tmp: Path, path: Path) -> Iterator[None]:
    """Remove `tmp` when the body fails; a full disk becomes a TwinscanError that says so."""
    try:
        yield
    except TwinscanError:
        _remove(tmp)
        raise
    except Exception as error:
        code = _no_room(error, tmp)
        _remove(tmp)
        if code is not None:
            raise _no_room_error(code, path) from error
        raise
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
        _check_complete(tmp, path)
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
        _check_complete(tmp, path)
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


def remove_leftovers(folder: str | os.PathLike) -> list[Path]:
    """Remove the temporary names that runs killed mid-write (SIGKILL, power loss) left under `folder`.

    Only while nothing else writes there: the workspace calls it when it takes its lock.
    """
    removed = []
    for parent, dirs, files in os.walk(folder):
        for name in [*dirs, *files]:
            if is_temporary(name):
                removed.append(Path(parent) / name)
                _remove(removed[-1])
        dirs[:] = [name for name in dirs if not is_temporary(name)]
    return removed


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

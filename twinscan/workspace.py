"""The capture workspace OUT/: its manifest, its lock, and resumable stages.

A stage is skipped when the manifest says it finished with the same parameters and the same
input fingerprints and its outputs still exist. That is what makes an interrupted run resume.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import json
import os
import platform
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any

from twinscan import __version__, atomic, layout
from twinscan.errors import TwinscanError

_HELD_LOCKS: set[Path] = set()  # workspaces this process holds: nested `locked()` calls re-enter


def _still_at(lock_path: Path, lock_file: Any) -> bool:
    """True when `lock_path` still names the open `lock_file` (not removed, nor replaced by a new file)."""
    try:
        at_path = os.stat(lock_path)
    except FileNotFoundError:
        return False
    opened = os.fstat(lock_file.fileno())
    return (at_path.st_dev, at_path.st_ino) == (opened.st_dev, opened.st_ino)


def _take_lock(lock_path: Path) -> Any:
    """The open, flock-ed lock file at `lock_path`, or None while another process holds it (see
    `Workspace.locked`)."""
    while True:
        lock_file = open(lock_path, "a+")
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_file.close()
            return None
        if _still_at(lock_path, lock_file):
            return lock_file
        lock_file.close()  # the holder removed it as it released: this lock guards nothing; again


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def fingerprint(path: str | os.PathLike) -> str:
    """sha256 of a file's bytes, or of a folder's relative names and file hashes (sorted)."""
    path = Path(path)
    digest = hashlib.sha256()
    if path.is_dir():
        for child in sorted(p for p in path.rglob("*") if p.is_file() and ".tmp-" not in p.name):
            digest.update(child.relative_to(path).as_posix().encode() + b"\0")
            digest.update(fingerprint(child).encode())
    else:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def _jsonable(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return _jsonable(asdict(value))
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        return value.item()
    return value


def tool_versions(*modules: str) -> dict[str, str]:
    """Versions of the named distributions that are importable, plus python and twinscan."""
    from importlib import metadata

    versions = {"twinscan": __version__, "python": platform.python_version()}
    for name in modules:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    return versions


@dataclass
class StageRun:
    """What a running stage reports: its figures, outputs and warnings go into the manifest."""

    name: str
    figures: dict[str, Any] = field(default_factory=dict)
    outputs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class Workspace:
    """A capture folder. Use `with Workspace(out).locked():` around any writes."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self._lock_file: Any = None

    # ---- paths -------------------------------------------------------------------------
    def path(self, relative: str) -> Path:
        """OUT/`relative`; `relative` is one of twinscan.layout's paths."""
        return self.root / relative

    @property
    def manifest_path(self) -> Path:
        return self.root / layout.MANIFEST

    # ---- manifest ----------------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        if not self.manifest_path.exists():
            return {"twinscan_version": __version__, "stages": {}}
        try:
            return json.loads(self.manifest_path.read_text())
        except json.JSONDecodeError as error:
            raise TwinscanError(
                f"{self.manifest_path} is not valid JSON ({error.msg})",
                "delete it to start the workspace afresh, or restore it from a backup",
            ) from error

    def stage_record(self, name: str) -> dict[str, Any] | None:
        return self.manifest()["stages"].get(name)

    def _update(self, name: str, record: dict[str, Any]) -> None:
        manifest = self.manifest()
        manifest["twinscan_version"] = __version__
        manifest["stages"][name] = _jsonable(record)
        atomic.write_json(self.manifest_path, manifest)

    def set_info(self, key: str, value: Any) -> None:
        """Workspace-wide facts (e.g. the source video, the world alignment)."""
        manifest = self.manifest()
        manifest[key] = _jsonable(value)
        atomic.write_json(self.manifest_path, manifest)

    # ---- lock --------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self) -> Iterator[Workspace]:
        """Refuse a second twinscan process on the same workspace (an OS lock dies with us).

        Re-entrant within one process, so the CLI and the stage it calls may both ask for it.
        Taking it removes what a killed run was writing (temporary names), as nothing else writes now.

        The lock is `flock` on OUT/.twinscan.lock, and the file exists only while a run holds it:
        - take: open (create) the file, `flock` it (non-blocking: a holder means refuse), then check
          that the path still names the file we locked; if the holder removed it meanwhile, we hold
          the lock of a file no one else can find, so close it and start again with a fresh file;
        - release: remove the file *while still holding the flock*, then unlock and close. Whoever
          opened the old file before the removal and locks it after finds it no longer at the path
          (above) and retries, so two processes never both believe they hold the workspace.
        A run killed by SIGKILL leaves the file behind, unlocked: the next run takes it over and removes it.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        key = self.root.resolve()
        if key in _HELD_LOCKS:
            yield self
            return
        lock_path = self.root / layout.LOCK
        lock_file = _take_lock(lock_path)
        if lock_file is None:
            raise TwinscanError(
                f"another twinscan run is using {self.root}",
                "wait for it to finish, or use another output folder",
            )
        lock_file.seek(0)
        lock_file.truncate()
        lock_file.write(f"{os.getpid()}\n")
        lock_file.flush()
        _HELD_LOCKS.add(key)
        try:
            atomic.remove_leftovers(self.root)
            yield self
        finally:
            _HELD_LOCKS.discard(key)
            with contextlib.suppress(FileNotFoundError):
                lock_path.unlink()  # still under the flock: see the protocol above
            fcntl.flock(lock_file, fcntl.LOCK_UN)
            lock_file.close()

    def in_use(self) -> bool:
        """True while a twinscan process (this one included) holds the workspace's lock."""
        if self.root.resolve() in _HELD_LOCKS:
            return True
        try:  # never create the file: it exists only while a run holds it (or after one was killed)
            fd = os.open(self.root / layout.LOCK, os.O_RDWR)
        except FileNotFoundError:
            return False
        with os.fdopen(fd, "r+") as lock_file:
            try:
                fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            fcntl.flock(lock_file, fcntl.LOCK_UN)
        return False

    # ---- stages ------------------------------------------------------------------------
    def is_done(self, name: str, params: Any, inputs: dict[str, str]) -> bool:
        """True when `name` finished with these parameters and input fingerprints, outputs intact."""
        record = self.stage_record(name)
        if not record or record.get("status") != "done":
            return False
        if record.get("params") != _jsonable(params) or record.get("inputs") != inputs:
            return False
        return all(self.path(p).exists() for p in record.get("outputs", []))

    @contextlib.contextmanager
    def run_stage(
        self, name: str, params: Any, inputs: dict[str, str], versions: dict[str, str]
    ) -> Iterator[StageRun]:
        """Record a stage's start, then its end: `done` with figures, or `failed` with the reason.

        `inputs` maps an input's name to its fingerprint (see `fingerprint`). Holds the lock.
        """
        with self.locked():
            with self._recorded(name, params, inputs, versions) as run:
                yield run

    @contextlib.contextmanager
    def _recorded(
        self, name: str, params: Any, inputs: dict[str, str], versions: dict[str, str]
    ) -> Iterator[StageRun]:
        started = time.time()
        base = {
            "params": params,
            "inputs": inputs,
            "versions": versions,
            "started": _now(),
        }
        self._update(name, {**base, "status": "running"})
        run = StageRun(name)
        try:
            yield run
        except BaseException as error:
            reason = error.one_line() if isinstance(error, TwinscanError) else repr(error)
            self._update(
                name,
                {**base, "status": "failed", "error": reason, "warnings": run.warnings,
                 "finished": _now(), "seconds": round(time.time() - started, 3)},
            )
            raise
        self._update(
            name,
            {**base, "status": "done", "finished": _now(), "seconds": round(time.time() - started, 3),
             "outputs": run.outputs, "figures": run.figures, "warnings": run.warnings},
        )

"""Where attempts run: strategy dataclasses with one method, `run(pending, options, log_dir)`.

`run` starts attempts taken from the `pending` queue and yields each `(attempt, outcome)` as it ends;
the caller may append retries to `pending` while iterating, and `run` returns once both are empty.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import ModuleType
from typing import Protocol

from twinscan.batch.attempt import Attempt, AttemptOutcome, run_attempt, worker_env
from twinscan import optional
from twinscan.errors import TwinscanError
from twinscan.pipeline import CaptureOptions

Finished = Iterator[tuple[Attempt, AttemptOutcome]]


class Executor(Protocol):
    def run(self, pending: deque[Attempt], options: CaptureOptions, log_dir: Path) -> Finished: ...


def usable_cores() -> int:
    return len(os.sched_getaffinity(0))


def visible_gpus(device: str) -> list[str]:
    """CUDA device ids a child may be pinned to (as CUDA_VISIBLE_DEVICES names them); none for --device cpu."""
    if device == "cpu":
        return []
    import torch

    count = torch.cuda.device_count()
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    return listed.split(",")[:count] if listed else [str(i) for i in range(count)]


def _exit_reason(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        return f"killed by {signal.Signals(-exitcode).name}"
    return f"exit code {exitcode}"


def _child(send: multiprocessing.connection.Connection, attempt: Attempt, options: CaptureOptions, log_dir: Path,
           env: dict[str, str]) -> None:
    os.environ.update(env)  # before run_attempt imports torch and numba
    send.send(run_attempt(attempt, options, log_dir))
    send.close()


@dataclass(frozen=True)
class _Worker:
    process: BaseProcess
    attempt: Attempt
    env: dict[str, str]  # its slot: thread counts and, on a GPU machine, its GPU
    started: float


@dataclass(frozen=True)
class LocalExecutor:
    """Captures on this machine, each attempt in a fresh child process, so a crash or a SIGKILL of
    one costs only that attempt. `workers` at a time: by default one per GPU torch sees (each child
    pinned to its GPU), else one CPU worker; the CPU cores are split evenly between workers."""

    workers: int | None = None

    def run(self, pending: deque[Attempt], options: CaptureOptions, log_dir: Path) -> Finished:
        gpus = visible_gpus(options.device)
        slots = self.workers if self.workers is not None else len(gpus) or 1
        if slots < 1:
            raise TwinscanError(f"--workers {slots} runs nothing", "use --workers 1 or more")
        threads = max(1, usable_cores() // slots)
        free: list[dict[str, str]] = [
            {**worker_env(threads), **({"CUDA_VISIBLE_DEVICES": gpus[i % len(gpus)]} if gpus else {})}
            for i in range(slots)]
        context = multiprocessing.get_context("spawn")  # a clean interpreter: no inherited threads or CUDA state
        running: dict[multiprocessing.connection.Connection, _Worker] = {}
        try:
            while pending or running:
                while pending and free:
                    attempt, env = pending.popleft(), free.pop()
                    receive, send = context.Pipe(duplex=False)
                    process = context.Process(target=_child, args=(send, attempt, options, log_dir, env),
                                              name=f"twinscan-{attempt.job.name}", daemon=True)
                    process.start()
                    send.close()  # the child holds the only sending end: its death reads as EOF here
                    running[receive] = _Worker(process, attempt, env, time.time())
                for receive in multiprocessing.connection.wait(list(running)):
                    worker = running.pop(receive)
                    try:
                        outcome = receive.recv()
                    except EOFError:
                        worker.process.join()
                        outcome = AttemptOutcome.crashed(
                            f"the worker process died ({_exit_reason(worker.process.exitcode)})",
                            time.time() - worker.started)
                    receive.close()
                    worker.process.join()
                    free.append(worker.env)
                    yield worker.attempt, outcome
        finally:
            for worker in running.values():
                worker.process.kill()
                worker.process.join()


def connect_ray(ray: ModuleType, address: str | None, num_cpus: int | None = None) -> None:
    """Start Ray on this machine (address None, at most `num_cpus` workers) or join the cluster at `address`."""
    if address is None:
        ray.init(num_cpus=num_cpus, include_dashboard=False, logging_level="WARNING")
        return
    try:
        ray.init(address=address, logging_level="WARNING")
    except ConnectionError as error:
        raise TwinscanError(
            f"cannot connect to the Ray cluster at {address} ({str(error).splitlines()[0]})",
            "use the address `ray start --head` printed; a cluster with token authentication (the default "
            "when ~/.ray/auth_token exists) also needs RAY_AUTH_MODE=token here") from error


@dataclass(frozen=True)
class RayExecutor:
    """Each attempt a Ray task, on the cluster at `address` (`ray start --head` prints it). Without
    one, Ray's own rule applies: $RAY_ADDRESS, else a cluster `ray start` began on this machine, else
    a local instance started for the batch and stopped after it. A Ray session already open is reused.

    A task asks for `gpus_per_capture` GPUs (default: 1 when the cluster has GPUs and the device is
    not `cpu`) and `cpus_per_capture` CPUs, which are also its torch and numba thread counts. Every
    node needs twinscan installed and ROOT and the videos at the same paths (a shared filesystem).
    """

    address: str | None = None
    cpus_per_capture: int = 1
    gpus_per_capture: float | None = None

    def _gpus(self, ray: ModuleType, device: str) -> float:
        if self.gpus_per_capture is not None:
            return self.gpus_per_capture
        cluster_gpus = ray.cluster_resources().get("GPU", 0)
        if device == "cuda" and not cluster_gpus:
            raise TwinscanError("--device cuda, but the Ray cluster has no GPUs",
                                "connect to a cluster with GPU nodes (--address), or use --device auto or cpu")
        return 1 if device != "cpu" and cluster_gpus else 0

    def run(self, pending: deque[Attempt], options: CaptureOptions, log_dir: Path) -> Finished:
        ray = optional.ray()
        started_here = not ray.is_initialized()
        if started_here:
            connect_ray(ray, self.address)
        task = ray.remote(run_attempt).options(
            num_cpus=self.cpus_per_capture, num_gpus=self._gpus(ray, options.device),
            max_retries=0,  # retries are the batch's, which knows which failures are worth one
            runtime_env={"env_vars": worker_env(self.cpus_per_capture)})
        running: dict = {}
        try:
            while pending or running:
                while pending:
                    attempt = pending.popleft()
                    running[task.remote(attempt, options, log_dir)] = (attempt, time.time())
                [ref], _ = ray.wait(list(running), num_returns=1)
                attempt, submitted = running.pop(ref)
                try:
                    outcome = ray.get(ref)
                except ray.exceptions.RayError as error:  # the worker or its node died
                    outcome = AttemptOutcome.crashed(f"the Ray task failed ({str(error).splitlines()[0]})",
                                                     time.time() - submitted)
                yield attempt, outcome
        finally:
            for ref in running:
                ray.cancel(ref, force=True)
            if started_here:
                ray.shutdown()

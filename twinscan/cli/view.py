"""`twinscan view OUT` (or `twinscan view OUT/twin.usda`): the twin in a browser, served by viser."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Annotated

import typer

from twinscan import optional
from twinscan.cli.errors import user_errors
from twinscan.progress import say
from twinscan.view.splats import DEFAULT_MAX_SPLATS


@user_errors
def view(path: Annotated[Path, typer.Argument(help="A capture workspace folder (OUT), or its OUT/twin.usda.")],
         host: Annotated[str, typer.Option(
             help="Address to listen on: 127.0.0.1 (this machine only), or 0.0.0.0 on a server.")] = "127.0.0.1",
         port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on (0: any free one).")] = 8080,
         max_splats: Annotated[int, typer.Option(
             min=1, help="Send the browser at most this many splats (the most opaque); more can stall it.")]
         = DEFAULT_MAX_SPLATS,
         ) -> None:
    """Look at the twin in a browser: splats, visual mesh, colliders, floor slab, cameras, marker, probes.

    Z up, metres, a 1 m grid on the floor; click a point to read its coordinates and its distance to
    the collider. Runs headless: open the printed address (on a server: --host 0.0.0.0, or an ssh tunnel).
    Ctrl+C stops it.

    Example: twinscan view cell_twin      twinscan view cell_twin/twin.usda --host 0.0.0.0 --port 8080
    """
    optional.require("viser", "the viewer")
    from twinscan.view import load_twin
    from twinscan.view.ports import ensure_port_free, urls
    from twinscan.view.server import TwinViewer

    started = time.perf_counter()
    ensure_port_free(host, port)  # before the load: a taken port fails at once
    twin = load_twin(path, max_splats=max_splats)
    for notice in twin.notices():
        say(("notice", "yellow"), f" {notice}")
    stopping = threading.Event()
    # Ctrl+C and SIGTERM both set the event: the main thread leaves its wait at one known place, instead of
    # a KeyboardInterrupt raised wherever it happens to be
    previous = {sig: signal.signal(sig, lambda *_: stopping.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    viewer = TwinViewer(twin, host=host, port=port)
    try:
        addresses = "  ".join(urls(host, viewer.port))
        say(("view", "bold green"), f" {twin.root}: open {addresses} "
            f"(ready in {time.perf_counter() - started:.1f} s; Ctrl+C stops)")
        while not stopping.wait(0.5):
            pass
    finally:
        viewer.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    say("view: stopped")

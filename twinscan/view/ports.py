"""Refuse a port that is taken before viser silently moves to the next free one."""

from __future__ import annotations

import socket

from twinscan.errors import TwinscanError


def ensure_port_free(host: str, port: int) -> None:
    """Bind (host, port) as the server will (SO_REUSEADDR, as asyncio does) and let it go again."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except socket.gaierror as error:
            raise TwinscanError(f"cannot listen on host {host!r} ({error.strerror})",
                                "pass --host 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)") from None
        except OSError as error:
            raise TwinscanError(f"port {port} on {host} is in use ({error.strerror})",
                                "pass another --port, or stop what listens there") from None


def urls(host: str, port: int) -> list[str]:
    """The addresses to open: a wildcard host is reachable as this machine's name and as localhost."""
    if host in ("0.0.0.0", "::", ""):
        return [f"http://{socket.gethostname()}:{port}", f"http://localhost:{port}"]
    return [f"http://{host}:{port}" if ":" not in host else f"http://[{host}]:{port}"]

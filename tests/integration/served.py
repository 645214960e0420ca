"""ASGI apps served over real HTTP on loopback, each by uvicorn in a thread of the test, for
tests of the edge, which forwards over real connections: started on a free port, stopped
(and the port closed) when the block ends."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn
from starlette.types import ASGIApp

from tests.waiting import eventually

START_SECONDS = 30.0


@dataclass
class Served:
    url: str
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self) -> None:
        """As a process stopping would: connections refused from now on."""
        self.server.should_exit = True
        self.thread.join(START_SECONDS)
        assert not self.thread.is_alive(), f"{self.url} did not stop"


@contextlib.contextmanager
def served(app: ASGIApp, **options: Any) -> Iterator[Served]:
    """``app`` served; ``options``: uvicorn's, as its server sets them."""
    with socket.socket() as listening:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind(("127.0.0.1", 0))
        port = listening.getsockname()[1]
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=1,
        **options,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"served-{port}", daemon=True)
    thread.start()
    eventually(lambda: server.started or not thread.is_alive(), START_SECONDS)
    assert server.started, f"the app on port {port} did not start"
    running = Served(f"http://127.0.0.1:{port}", server, thread)
    try:
        yield running
    finally:
        if thread.is_alive():
            running.stop()

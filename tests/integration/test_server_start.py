"""The in-process control loops start only once the API accepts connections: the reaper
gives workers a full heartbeat timeout from its start to be heard again after a restart, and
a slow start of the API must not spend it (workers would be declared lost while they could
not yet reach the server)."""

from __future__ import annotations

import socket
from pathlib import Path

import uvicorn
from fastapi import FastAPI

from herder.api.wakeups import Wakeups
from herder.server import Server
from herder.settings import Settings, sqlite_url


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def _nothing(scope: object, receive: object, send: object) -> None:
    """An ASGI app that is never called: the test only connects."""


def test_what_starts_with_the_server_starts_once_it_accepts_connections(tmp_path: Path) -> None:
    port = _free_port()
    config = uvicorn.Config(_nothing, host="127.0.0.1", port=port, lifespan="off")
    reachable: list[bool] = []

    def when_listening() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            reachable.append(True)
        server.should_exit = True

    app = FastAPI()
    app.state.wakeups = Wakeups()
    app.state.settings = Settings(home=tmp_path, database_url=sqlite_url(tmp_path / "unused.db"))
    server = Server(config, app, when_listening)
    server.run()
    assert reachable == [True]

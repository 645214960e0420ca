"""The worker agent on its stream, against the real API served by uvicorn: it takes its work
and sends its reports on one WebSocket, with no claim or report request; where the server (or a
proxy) opens no WebSocket, or the worker is told not to, it long-polls as before; when the
server ends the stream because the registration is over, the worker registers again."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from prometheus_client import REGISTRY
from sqlalchemy import select, update

from herder.api.app import create_app
from herder.server import api_config
from herder.settings import Settings
from herder.store.schema import workers
from herder.store.store import Store
from herder.worker.agent import Agent
from herder.worker.isolation import Isolation
from tests.integration.dispatching import dispatch
from tests.integration.test_worker_agent import config

CLAIM = "/v1/workers/{worker_id}/claim"
REPORTS = "/v1/workers/{worker_id}/reports"


def requests_to(route: str) -> float:
    """Requests to ``route`` this process's API answered so far (its own metric)."""
    return sum(
        REGISTRY.get_sample_value(
            "herder_api_request_duration_seconds_count",
            {"route": route, "method": "POST", "status": status},
        )
        or 0.0
        for status in ("2xx", "4xx", "5xx")
    )


def open_streams() -> float:
    return REGISTRY.get_sample_value("herder_worker_streams") or 0.0


@dataclass
class Served:
    url: str
    store: Store
    admin: dict[str, str]
    worker_token: str


@contextmanager
def served(store: Store, tmp_path: Path, **listening: Any) -> Iterator[Served]:
    """The API on a free port of loopback, as ``herder server`` serves it (``listening``:
    uvicorn's settings to change, say ``ws="none"`` for a server that opens no WebSocket)."""
    bootstrap = store.access.bootstrap()
    assert bootstrap is not None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = Settings(home=tmp_path, database_url=store.database.url)
    app = create_app(store, settings)
    server = uvicorn.Server(api_config(app, settings, host="127.0.0.1", port=port, **listening))
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 15
        while not server.started:  # it started: it listens, its app's lifespan ran
            assert thread.is_alive(), "the API stopped before it started"
            assert time.monotonic() < deadline, "the API did not start"
            time.sleep(0.01)
        admin = {"Authorization": f"Bearer {bootstrap.admin_key}"}
        yield Served(f"http://127.0.0.1:{port}", store, admin, bootstrap.worker_token)
    finally:
        server.should_exit = True
        thread.join(timeout=10)


async def until(check: Callable[[], bool], store: Store, within: float = 20.0) -> None:
    """Until ``check`` holds, running a dispatcher pass meanwhile."""
    deadline = asyncio.get_running_loop().time() + within
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting"
        await asyncio.to_thread(dispatch, store)
        await asyncio.sleep(0.05)


def run_state(server: Served, run_id: str) -> str:
    answer = httpx.get(f"{server.url}/v1/runs/{run_id}", headers=server.admin)
    state: str = answer.json()["state"]
    return state


def start_runs(server: Served, count: int) -> list[str]:
    job = {"name": "echo", "runtime": "shell", "command": "echo streamed"}
    created = httpx.post(f"{server.url}/v1/jobs", headers=server.admin, json=job)
    assert created.status_code == 201, created.text
    runs = []
    for _ in range(count):
        run = httpx.post(
            f"{server.url}/v1/jobs/{created.json()['id']}/runs", headers=server.admin, json={}
        )
        assert run.status_code == 201, run.text
        runs.append(run.json()["id"])
    return runs


def run_agent(
    server: Served, tmp_path: Path, scenario: Callable[[Agent], Any], **changes: Any
) -> None:
    settings = config(
        tmp_path,
        server_url=server.url,
        token=server.worker_token,
        isolation=Isolation.NONE,
        **changes,
    )

    async def main() -> None:
        stop = asyncio.Event()
        agent = Agent(settings)
        running = asyncio.create_task(agent.run(stop))
        try:
            async with asyncio.timeout(60):
                await scenario(agent)
        finally:
            stop.set()
            await running

    asyncio.run(main())


def test_a_worker_takes_its_work_and_reports_on_its_stream_with_no_request(
    store: Store, tmp_path: Path
) -> None:
    with served(store, tmp_path) as server:
        claims, reports = requests_to(CLAIM), requests_to(REPORTS)

        async def scenario(agent: Agent) -> None:
            await until(lambda: open_streams() == 1, store)
            runs = start_runs(server, 3)
            await until(lambda: all(run_state(server, run) == "succeeded" for run in runs), store)
            assert requests_to(CLAIM) == claims
            assert requests_to(REPORTS) == reports
            logs = httpx.get(f"{server.url}/v1/runs/{runs[0]}/logs", headers=server.admin)
            assert "streamed" in logs.text

        run_agent(server, tmp_path, scenario)
        assert open_streams() == 0


def test_a_worker_long_polls_where_the_server_opens_no_websocket(
    store: Store, tmp_path: Path
) -> None:
    with served(store, tmp_path, ws="none") as server:
        claims, reports = requests_to(CLAIM), requests_to(REPORTS)

        async def scenario(agent: Agent) -> None:
            runs = start_runs(server, 2)
            await until(lambda: all(run_state(server, run) == "succeeded" for run in runs), store)
            assert requests_to(CLAIM) > claims
            assert requests_to(REPORTS) > reports
            assert open_streams() == 0

        run_agent(server, tmp_path, scenario)


def test_a_worker_told_not_to_stream_long_polls(store: Store, tmp_path: Path) -> None:
    with served(store, tmp_path) as server:
        claims = requests_to(CLAIM)

        async def scenario(agent: Agent) -> None:
            (run,) = start_runs(server, 1)
            await until(lambda: run_state(server, run) == "succeeded", store)
            assert requests_to(CLAIM) > claims
            assert open_streams() == 0

        run_agent(server, tmp_path, scenario, stream=False)


def test_a_worker_whose_stream_the_server_ends_as_lost_registers_again(
    store: Store, tmp_path: Path
) -> None:
    with served(store, tmp_path) as server:

        async def scenario(agent: Agent) -> None:
            await until(lambda: open_streams() == 1, store)
            first = agent.connection.worker_id
            with store.database.write() as connection:  # as the reaper does
                connection.execute(
                    update(workers).where(workers.c.id == first).values(state="lost")
                )
            await until(lambda: agent.connection.worker_id != first, store)
            (run,) = start_runs(server, 1)
            await until(lambda: run_state(server, run) == "succeeded", store)
            with store.database.read() as connection:
                alive = (
                    connection.execute(select(workers.c.id).where(workers.c.state == "alive"))
                    .scalars()
                    .all()
                )
            assert alive == [agent.connection.worker_id]

        run_agent(server, tmp_path, scenario)

"""Running the system: ``herder up``, ``server``, ``scheduler`` and ``worker``."""

from __future__ import annotations

import asyncio
import signal
import socket
from pathlib import Path
from typing import Annotated

import typer

from herder.cli.common import LOG_FORMAT, HomeOption, app, fail, out, pairs
from herder.credentials import home_directory
from herder.settings import Settings


def _check_port_free(host: str, port: int) -> None:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise fail(f"cannot listen on {host}:{port}: {error.strerror}; try --port") from error


@app.command()
def up(
    home: HomeOption = None,
    port: Annotated[int | None, typer.Option(help="API port (default 8080)")] = None,
) -> None:
    """Run the whole system here: API, store (SQLite) and a local worker. Ctrl-C stops it."""
    from herder.server import prepare, serve

    settings = Settings.from_environment(home=home, port=port)
    _check_port_free(settings.host, settings.port)
    prepared = prepare(settings)
    out.print(f"Herder is up at [bold]{settings.url}[/] (dashboard and API; docs at /docs)")
    out.print(f"Admin key saved to {prepared.client_file} (mode 0600); the CLI finds it there.")
    if prepared.new_admin_key:
        out.print("A default tenant and its admin key were created on this first start.")
    out.print("Press Ctrl-C to stop.")
    serve(settings, prepared, with_worker=True, with_scheduler=True)


@app.command()
def server(
    home: HomeOption = None,
    host: Annotated[str | None, typer.Option(help="address to listen on")] = None,
    port: Annotated[int | None, typer.Option(help="API port (default 8080)")] = None,
    with_scheduler: Annotated[
        bool, typer.Option(help="also run the control loops here (else: herder scheduler)")
    ] = False,
) -> None:
    """Run an API server (no worker). Point HERDER_DATABASE_URL at PostgreSQL to scale out."""
    from herder.server import prepare, serve

    settings = Settings.from_environment(home=home, host=host, port=port)
    _check_port_free(settings.host, settings.port)
    prepared = prepare(settings)
    out.print(f"Herder API listening on {settings.url}; admin key in {prepared.client_file}")
    serve(settings, prepared, with_worker=False, with_scheduler=with_scheduler)


@app.command()
def scheduler(home: HomeOption = None) -> None:
    """Run the control loops (reaper, …) under leases; run several for high availability."""
    import logging

    from herder.server import start_scheduler
    from herder.store.store import Store

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s scheduler %(levelname)s %(message)s"
    )
    settings = Settings.from_environment(home=home)
    store = Store(settings.database_url)
    store.migrate()
    running = start_scheduler(settings, store, listen=True)
    out.print(f"Herder scheduler {running.holder} running against {store.database.dialect}")
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: running.stop())
    running.wait()
    store.close()


@app.command()
def worker(
    server_url: Annotated[str, typer.Option("--server", help="API URL, e.g. http://host:8080")],
    token: Annotated[
        str | None, typer.Option(envvar="HERDER_WORKER_TOKEN", help="worker token")
    ] = None,
    name: Annotated[str | None, typer.Option(help="default: the host name")] = None,
    cpu: Annotated[float | None, typer.Option(help="cores to offer (default: all)")] = None,
    memory_mb: Annotated[int | None, typer.Option(help="memory to offer (default: all)")] = None,
    gpus: Annotated[int | None, typer.Option(help="GPUs to offer (default: detected)")] = None,
    label: Annotated[list[str], typer.Option(help="KEY=VALUE, repeatable")] = [],  # noqa: B006
    max_slots: Annotated[int, typer.Option(help="most attempts at once")] = 256,
    home: Annotated[Path | None, typer.Option(help="cache and workspaces")] = None,
    run_uid_base: Annotated[
        int, typer.Option(help="when root: attempts run as uids from here up")
    ] = 61000,
    python: Annotated[str | None, typer.Option(help="interpreter for python jobs")] = None,
    kill_grace: Annotated[float, typer.Option(help="seconds between SIGTERM and SIGKILL")] = 5.0,
    address: Annotated[
        str | None,
        typer.Option(help="where gang peers reach it (default: its address towards the server)"),
    ] = None,
) -> None:
    """Run a worker agent that takes attempts from a Herder server."""
    import logging

    from herder.worker.agent import Agent, WorkerConfig
    from herder.worker.capacity import detect_capacity
    from herder.worker.uids import default_python

    if not token:
        raise fail("a worker token is needed: --token or HERDER_WORKER_TOKEN")
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT.format(role="worker"))
    logging.getLogger("httpx").setLevel(logging.WARNING)
    config = WorkerConfig(
        server_url=server_url,
        token=token,
        name=name or socket.gethostname(),
        capacity=detect_capacity(cpu, memory_mb, gpus),
        home=(home or home_directory() / "worker").absolute(),
        python=python or default_python(),
        max_slots=max_slots,
        labels=pairs(label, "label"),
        run_uid_base=run_uid_base,
        kill_grace_seconds=kill_grace,
        address=address or "",
    )

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await Agent(config).run(stop)

    asyncio.run(main())

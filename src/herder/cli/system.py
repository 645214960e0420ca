"""Running the system: ``herder up``, ``server`` and ``scheduler`` (``worker`` is in
workers.py); its upkeep against the database and blob store: ``herder system …``."""

from __future__ import annotations

import gc
import signal
import socket
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from herder.cli.common import HomeOption, app, fail, out
from herder.credentials import where_the_cli_finds
from herder.settings import Settings

system_app = typer.Typer(
    help="The system's upkeep, run against its database and blob store as a server's settings "
    "name them.",
    no_args_is_help=True,
)
app.add_typer(system_app, name="system")


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
    tls: Annotated[
        bool,
        typer.Option(
            "--tls", help="serve HTTPS with a certificate made for this machine (in HOME/tls)"
        ),
    ] = False,
) -> None:
    """Run the whole system here: API, store (SQLite) and a local worker. Ctrl-C stops it;
    the runs its worker still runs then end cancelled."""
    from herder.server import prepare, serve

    settings = Settings.from_environment(home=home, port=port)
    ca_file = None
    if tls:
        from herder.tls import local_certificate

        made = local_certificate(settings.home / "tls")
        settings = replace(settings, tls_certificate=made.certificate, tls_key=made.key)
        ca_file = made.certificate  # its own authority: the CLI and the worker trust it alone
    _check_tls(settings)
    _check_port_free(settings.host, settings.port)
    prepared = prepare(settings, ca_file=ca_file)
    out.print(f"Herder is up at [bold]{settings.url}[/] (dashboard and API; docs at /docs)")
    out.print(
        f"Admin key saved to {prepared.client_file} (mode 0600); "
        f"{where_the_cli_finds(settings.home)}."
    )
    if prepared.new_admin_key:
        out.print("A default tenant and its admin key were created on this first start.")
    out.print("Press Ctrl-C to stop (runs still running then end cancelled).")
    serve(settings, prepared, with_worker=True, with_scheduler=True, say=out.print)


def _check_tls(settings: Settings) -> None:
    """Both a certificate and its key, or neither; each readable and a pair."""
    from herder.tls import ServerCertificate, TlsError

    certificate, key = settings.tls_certificate, settings.tls_key
    if certificate is None and key is None:
        return
    if certificate is None or key is None:
        raise fail("HTTPS needs both --tls-cert and --tls-key (HERDER_TLS_CERT, HERDER_TLS_KEY)")
    try:
        ServerCertificate(certificate, key).check()
    except TlsError as error:
        raise fail(str(error)) from None


@app.command()
def server(
    home: HomeOption = None,
    host: Annotated[str | None, typer.Option(help="address to listen on")] = None,
    port: Annotated[int | None, typer.Option(help="API port (default 8080)")] = None,
    with_scheduler: Annotated[
        bool, typer.Option(help="also run the control loops here (else: herder scheduler)")
    ] = False,
    processes: Annotated[
        int,
        typer.Option(min=1, max=64, help="API processes sharing the port (PostgreSQL only)"),
    ] = 1,
    tls_cert: Annotated[
        Path | None,
        typer.Option(help="serve HTTPS with this certificate chain (PEM; HERDER_TLS_CERT)"),
    ] = None,
    tls_key: Annotated[
        Path | None, typer.Option(help="the certificate's private key (PEM; HERDER_TLS_KEY)")
    ] = None,
    drain_seconds: Annotated[
        float | None,
        typer.Option(
            min=0,
            max=600,
            help="stopping, answer /readyz 503 this long while still serving, for a load "
            "balancer to take the process out first (HERDER_DRAIN_SECONDS; default 0)",
        ),
    ] = None,
) -> None:
    """Run an API server (no worker). Point HERDER_DATABASE_URL at PostgreSQL to scale out."""
    from herder.telemetry import multiprocess

    settings = Settings.from_environment(
        home=home,
        host=host,
        port=port,
        tls_certificate=tls_cert.absolute() if tls_cert else None,
        tls_key=tls_key.absolute() if tls_key else None,
        drain_seconds=drain_seconds,
    )
    _check_tls(settings)
    if processes > 1 and not settings.database_url.startswith("postgres"):
        raise fail(
            "--processes above 1 needs PostgreSQL (HERDER_DATABASE_URL=postgresql://…): "
            "on SQLite the processes would not hear each other's notices"
        )
    _check_port_free(settings.host, settings.port)
    metrics_directory = settings.home / f"metrics-{settings.port}"
    if processes > 1:  # before anything imports prometheus_client
        multiprocess.prepare(metrics_directory)
    from herder.prefork import serve_processes
    from herder.server import prepare, serve

    prepared = prepare(settings)
    out.print(f"Herder API listening on {settings.url}; admin key in {prepared.client_file}")
    if processes == 1:
        serve(settings, prepared, with_worker=False, with_scheduler=with_scheduler)
        return
    prepared.store.close()  # each process opens its own connections after the fork
    out.print(f"{processes} API processes" + (" and the control loops" if with_scheduler else ""))
    try:
        serve_processes(settings, processes, with_scheduler=with_scheduler)
    finally:
        multiprocess.finish(metrics_directory)


@app.command()
def scheduler(
    home: HomeOption = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(min=1, max=65535, help="serve this process's /metrics on this port"),
    ] = None,
    metrics_address: Annotated[
        str, typer.Option(help="the address --metrics-port listens on")
    ] = "127.0.0.1",
) -> None:
    """Run the control loops (reaper, …) under leases; run several for high availability."""
    import logging

    from prometheus_client import REGISTRY, start_http_server

    from herder.control.scheduler import start_scheduler
    from herder.server_keys import check_channel_keys, migrate, server_keyring, server_store
    from herder.telemetry import tracing
    from herder.telemetry.cell_info import CellInfo

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s scheduler %(levelname)s %(message)s"
    )
    tracing.configure("scheduler")  # placements' spans, when OTEL_EXPORTER_OTLP_* says where
    settings = Settings.from_environment(home=home)
    keyring = server_keyring(settings)  # the alert sender opens the channels' secrets
    store = server_store(settings, keyring)
    migrate(store)
    check_channel_keys(store, keyring)
    # A burst of fires makes hundreds of thousands of objects that live for one pass; with
    # CPython's default thresholds full collections ran in the middle of it, 100-150 ms each
    # with every loop stopped. What start-up made is left out of collections for good.
    gc.freeze()
    gc.set_threshold(50_000, 10, 10)
    if metrics_port is not None:
        _check_port_free(metrics_address, metrics_port)
        REGISTRY.register(CellInfo(settings))  # which cell's scheduler it is, in cells
        start_http_server(metrics_port, metrics_address)  # its loops, fires, placements, …
    running = start_scheduler(settings, store, listen=True)
    out.print(f"Herder scheduler {running.holder} running against {store.database.dialect}")
    if metrics_port is not None:
        out.print(f"Its metrics: http://{metrics_address}:{metrics_port}/metrics")
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: running.stop())
    running.wait()
    store.close()
    tracing.shutdown()


@system_app.command("move-artifacts")
def move_artifacts(home: HomeOption = None) -> None:
    """Move the programs uploaded before artifacts lived in the blob store from the database
    to it (HERDER_COLD_STORE; by default HOME/cold), each checked against its sha256 first.
    Safe while the system runs, and to stop at any point: run again, it goes on with what is
    left, and once all are moved it moves nothing. Run it once no server of an older release
    is left: those read programs from the database only."""
    from herder.app.artifacts import move_to_blob_store
    from herder.server_keys import migrate
    from herder.store.store import Store

    settings = Settings.from_environment(home=home)
    store = Store(settings.database_url, artifact_blobs=settings.artifact_blobs())
    try:
        migrate(store)
        done = move_to_blob_store(store)
    finally:
        store.close()
    out.print(
        f"moved {done.moved} artifact(s) from the database to the blob store at "
        f"{settings.blob_store_url}"
    )
    if done.forgotten:
        out.print(f"deleted {done.forgotten} database copies of bytes no artifact names")
    if done.damaged:
        named = ", ".join(f"{tenant_id}/{sha256}" for tenant_id, sha256 in done.damaged)
        raise fail(
            f"left {len(done.damaged)} artifact(s) in the database whose bytes there are not "
            f"what their sha256 names (tenant/sha256): {named}; upload them again"
        )

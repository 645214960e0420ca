"""Running the server: ``herder server`` (API alone) and ``herder up`` (API plus a local
worker as a child process talking to it over loopback HTTP, the remote-worker protocol)."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI

from herder.api.app import create_app
from herder.api.limits import DEFAULT_BODY_LIMIT
from herder.api.wakeups import Wakeups
from herder.app.retirement import retire
from herder.control.scheduler import Scheduler, start_scheduler
from herder.credentials import WORKER_TOKEN_FILE, ClientCredentials, write_private
from herder.domain.lifecycle.reap import shut_down
from herder.home import secure_home
from herder.http_head import SERVER_KEEP_ALIVE_SECONDS, BoundedHttpToolsProtocol
from herder.server_keys import check_keyring, migrate, server_keyring, server_store
from herder.settings import Settings
from herder.store.store import Store
from herder.telemetry import tracing

log = logging.getLogger("herder.server")

WORKER_STOP_SECONDS = 15.0
LOCAL_WORKER = "local"  # the name of herder up's own worker
SHUTDOWN_REASON = "stopped: herder up was shut down"  # how its runs end when it stops
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class PreparedHome:
    store: Store
    client_file: Path
    worker_token: str
    new_admin_key: str | None  # shown once, on the first start
    ca_file: Path | None = None  # the authority its clients trust (herder up --tls)


def prepare(settings: Settings, *, ca_file: Path | None = None) -> PreparedHome:
    """Make the home and database private, migrate the store; on a first start create the
    default tenant, its admin key and a worker token, saved (0600) in the home directory
    (with ``ca_file``, the authority the CLI is to trust for this server)."""
    secure_home(settings.home, settings.database_url)
    keyring = server_keyring(settings)
    store = server_store(settings, keyring)
    migrate(store)
    check_keyring(store, keyring)
    bootstrap = store.access.bootstrap()
    token_file = settings.home / WORKER_TOKEN_FILE
    saved = ClientCredentials.load(settings.home)
    admin_key = bootstrap.admin_key if bootstrap else (saved.api_key if saved else None)
    if admin_key is None:
        raise SystemExit(
            f"{settings.home} has no saved admin key for the existing database; set "
            "HERDER_API_KEY or point HERDER_HOME at the directory that created it"
        )
    ca = str(ca_file) if ca_file else None
    client_file = ClientCredentials(settings.url, admin_key, ca).save(settings.home)
    if bootstrap:
        worker_token = bootstrap.worker_token
    elif token_file.exists():
        worker_token = token_file.read_text().strip()
    else:
        worker_token = store.access.create_worker_token("embedded worker")
    write_private(token_file, worker_token)
    return PreparedHome(
        store, client_file, worker_token, bootstrap.admin_key if bootstrap else None, ca_file
    )


def die_with_parent() -> None:
    """In the child: get SIGTERM if ``herder up`` dies, so no worker is left orphaned."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def start_local_worker(
    settings: Settings, token: str, ca_file: Path | None = None
) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "herder.cli",
        "worker",
        "--server",
        settings.url,
        "--home",
        str(settings.home / "worker"),
        "--name",
        LOCAL_WORKER,
        "--shutdown-reason",
        SHUTDOWN_REASON,
        *(["--ca-file", str(ca_file)] if ca_file else []),
    ]
    if os.geteuid() != 0:
        # Only root can sandbox attempts. Trying Herder alone on one's own machine is a
        # trusted fleet of one: said loudly, never the default of a worker started by hand.
        log.warning(
            "not running as root: the local worker runs jobs as your own user, unsandboxed "
            "(--isolation none); run herder up as root to sandbox every attempt"
        )
        command += ["--isolation", "none"]
    environment = {**os.environ, "HERDER_WORKER_TOKEN": token}
    return subprocess.Popen(command, env=environment, preexec_fn=die_with_parent)  # noqa: PLW1509


def retire_local_worker(prepared: PreparedHome) -> None:
    """The local worker of an earlier start of this home is gone: say so now, rather than
    let runs be placed on it until the reaper finds it silent (they would end lost), and
    forget it rather than list it lost for good."""
    for worker_id in retire(prepared.store, _token_id(prepared), LOCAL_WORKER):
        log.info("the local worker %s of an earlier start is gone; forgotten", worker_id)


def stopping(running: int) -> str:
    """What ``herder up`` says as it stops: the runs it stops, and how they will end."""
    if not running:
        return "Stopping: no run is running on the local worker."
    runs = "1 run is" if running == 1 else f"{running} runs are"
    return (
        f"Stopping: {runs} running on the local worker; each gets SIGTERM, then SIGKILL "
        f"after its stop grace ({WORKER_STOP_SECONDS:g} s at most), and ends cancelled, "
        f"'{SHUTDOWN_REASON}' (herder run rerun ID runs one again)."
    )


def stop_local_worker(
    prepared: PreparedHome, worker: subprocess.Popen[bytes], say: Callable[[str], None]
) -> None:
    """Place nothing more on the worker, say what stops, stop the worker while the API still
    takes its reports, then end what they did not (attempts never delivered, a report lost)
    the same way, and forget it."""
    token_id = _token_id(prepared)
    say(stopping(prepared.store.workers.drain_named(token_id, LOCAL_WORKER)))
    stop_process(worker)
    retire(
        prepared.store,
        token_id,
        LOCAL_WORKER,
        lambda attempts: shut_down(attempts, SHUTDOWN_REASON),
    )


def _token_id(prepared: PreparedHome) -> str:
    return prepared.store.access.authenticate_worker_token(prepared.worker_token)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(WORKER_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class Server(uvicorn.Server):
    """Answers open long-polls as soon as a stop is asked for, so stopping takes no longer
    than the requests in flight; calls ``when_listening`` once it accepts connections. At the
    first SIGINT or SIGTERM it drains: ``/readyz`` answers 503 for the app's
    ``drain_seconds`` while it serves on, so a load balancer takes it out before it stops
    taking connections; then ``before_exit`` runs (in a thread: the API keeps serving) before
    the API stops. A second signal stops it at once."""

    def __init__(
        self,
        config: uvicorn.Config,
        app: FastAPI,
        when_listening: Callable[[], None] = lambda: None,
        before_exit: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(config)
        self._wakeups: Wakeups = app.state.wakeups
        self._when_listening = when_listening
        self._before_exit = _after_draining(app, before_exit)
        self._exiting: threading.Thread | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self._when_listening()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self._before_exit is not None and self._exiting is None:
            self._exiting = threading.Thread(
                target=self._exit_after, args=(self._before_exit, sig, frame), daemon=True
            )
            self._exiting.start()
            return
        self._wakeups.close()
        super().handle_exit(sig, frame)

    def finish_exit(self) -> None:
        """Wait for ``before_exit`` if it runs."""
        if self._exiting is not None:
            self._exiting.join()

    def _exit_after(self, before: Callable[[], None], sig: int, frame: FrameType | None) -> None:
        try:
            before()
        finally:
            self._wakeups.close()
            super().handle_exit(sig, frame)


def _after_draining(
    app: FastAPI, before_exit: Callable[[], None] | None
) -> Callable[[], None] | None:
    """What runs at the first signal: the drain (when the settings ask for one), then
    ``before_exit``."""
    seconds = app.state.settings.drain_seconds
    if seconds <= 0:
        return before_exit

    def drain_then_exit() -> None:
        app.state.draining.set()
        log.info("draining: /readyz answers 503 for %gs before the API stops", seconds)
        time.sleep(seconds)  # the balancer's checks see it; requests still reaching us are served
        if before_exit is not None:
            before_exit()

    return drain_then_exit


def api_config(app: FastAPI, settings: Settings, **listening: Any) -> uvicorn.Config:
    """How an API process serves ``app``: bounded request heads, quiet logs, HTTPS when the
    settings name a certificate (checked by ``ServerCertificate.check`` at start)."""
    tls: dict[str, Any] = {}
    if settings.tls_certificate is not None:
        tls = {"ssl_certfile": str(settings.tls_certificate), "ssl_keyfile": str(settings.tls_key)}
    return uvicorn.Config(
        app,
        http=BoundedHttpToolsProtocol,
        ws_max_size=DEFAULT_BODY_LIMIT,  # a worker's stream frame: a report, as its request
        timeout_keep_alive=SERVER_KEEP_ALIVE_SECONDS,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=3,
        **listening,
        **tls,
    )


def serve(
    settings: Settings,
    prepared: PreparedHome,
    *,
    with_worker: bool,
    with_scheduler: bool,
    say: Callable[[str], None] = print,
) -> None:
    """``say``: where ``herder up`` tells what it stops as it stops."""
    tracing.configure("api")  # before the app: it adds the request spans' middleware
    app = create_app(prepared.store, settings)
    schedulers: list[Scheduler] = []

    def start_loops() -> None:
        """Only once workers can reach the API: the reaper gives each a full heartbeat
        timeout from its start, which a slow start of the API must not spend. In-process,
        notices reach the scheduler from the API's listener or the store itself."""
        if with_scheduler:
            schedulers.append(start_scheduler(settings, prepared.store, listen=False))

    config = api_config(app, settings, host=settings.host, port=settings.port)
    worker = None
    if with_worker:
        retire_local_worker(prepared)
        worker = start_local_worker(settings, prepared.worker_token, prepared.ca_file)
    local = worker
    before_exit = None if local is None else lambda: stop_local_worker(prepared, local, say)
    server = Server(config, app, start_loops, before_exit)
    try:
        server.run()
    finally:
        server.finish_exit()  # a second Ctrl-C stopped the API first: the store is still used
        if worker is not None:
            with contextlib.suppress(ProcessLookupError):
                stop_process(worker)
        for scheduler in schedulers:
            scheduler.stop()
        prepared.store.close()
        tracing.shutdown()

"""``herder server --processes N``: N API processes accepting on one listening socket, so the
API is not held to one core by the GIL.

The parent binds the socket, then forks every child — the N API processes and, with
``--with-scheduler``, one for the control loops — while it still has no thread and no
database connection, and from then on only supervises: a child that dies is started again
(after a pause, so a child that cannot start does not spin), and SIGINT or SIGTERM stops them
all. Each child opens its own store connections and its own notification ``Listener``, so a
notice reaches a worker's long-poll whichever process holds it. Only PostgreSQL carries
notices between processes; on SQLite the CLI refuses more than one process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import time
from collections.abc import Callable
from types import FrameType

from herder.api.app import create_app
from herder.control.scheduler import start_scheduler
from herder.server import WORKER_STOP_SECONDS, Server, api_config, die_with_parent
from herder.server_keys import server_keyring, server_store
from herder.settings import Settings
from herder.store.store import Store
from herder.telemetry import multiprocess, tracing

log = logging.getLogger("herder.server")

RESTART_PAUSE_SECONDS = 1.0
LISTEN_BACKLOG = 2048


def serve_processes(settings: Settings, processes: int, *, with_scheduler: bool) -> None:
    """Run until SIGINT or SIGTERM; returns once every child has exited."""
    listening = socket.socket(socket.AF_INET6 if ":" in settings.host else socket.AF_INET)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind((settings.host, settings.port))
    listening.listen(LISTEN_BACKLOG)
    roles: list[Callable[[], None]] = [lambda: _api(settings, listening)] * processes
    if with_scheduler:
        roles.append(lambda: _scheduler(settings))
    children = {_fork(role): role for role in roles}
    stopping = False

    def stop(_signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for pid in children:
            _signal(pid, signal.SIGTERM)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    deadline = None
    while children:
        if stopping and deadline is None:
            deadline = time.monotonic() + settings.drain_seconds + WORKER_STOP_SECONDS
        pid, status = os.waitpid(-1, os.WNOHANG if stopping else 0)
        if pid == 0:  # stopping: wait for the rest, then kill what lingers
            if deadline is not None and time.monotonic() > deadline:
                for left in children:
                    _signal(left, signal.SIGKILL)
            time.sleep(0.05)
            continue
        role = children.pop(pid, None)
        multiprocess.child_ended(pid)
        if role is not None and not stopping:
            log.error("API process %d ended (%s); starting another", pid, _how(status))
            time.sleep(RESTART_PAUSE_SECONDS)
            if not stopping:
                children[_fork(role)] = role
    listening.close()


def _fork(role: Callable[[], None]) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        for number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(number, signal.SIG_DFL)
        die_with_parent()
        role()
        code = 0
    except BaseException:
        log.exception("a server process failed")
    finally:
        os._exit(code)


def _server_store(settings: Settings) -> Store:
    """The store a server process opens, with the secrets keys (the API serves the channels'
    secrets, the scheduler's alert sender opens them)."""
    return server_store(settings, server_keyring(settings))


def _api(settings: Settings, listening: socket.socket) -> None:
    tracing.configure("api")  # after the fork: the exporter's thread is the child's own
    store = _server_store(settings)
    try:
        app = create_app(store, settings)
        Server(api_config(app, settings), app).run(sockets=[listening])
    finally:
        store.close()
        tracing.shutdown()


def _scheduler(settings: Settings) -> None:
    tracing.configure("scheduler")
    store = _server_store(settings)
    running = start_scheduler(settings, store, listen=True)
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: running.stop())
    running.wait()
    store.close()
    tracing.shutdown()


def _signal(pid: int, number: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, number)


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit code {os.waitstatus_to_exitcode(status)}"

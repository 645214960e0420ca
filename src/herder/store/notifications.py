"""Wake-ups across processes on PostgreSQL: LISTEN/NOTIFY.

A transaction that makes work (a submit) or has news for one worker (a cancel, freed
capacity) sends a notification that is delivered when it commits; every API replica listens
and wakes its long-polling workers. Notifications only make waiters wake sooner — the claim
loop still polls — so a lost one costs latency, never correctness. On SQLite (one process)
the in-process wake-ups suffice and these calls do nothing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import psycopg
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url

from herder.store.database import Database

WORK_CHANNEL = "herder_work"
WORKER_CHANNEL = "herder_worker"
RECONNECT_SECONDS = 1.0

log = logging.getLogger("herder.store")


def notify_work(database: Database, connection: Connection) -> None:
    if database.is_postgres:
        connection.execute(text(f"SELECT pg_notify('{WORK_CHANNEL}', '')"))


def notify_worker(database: Database, connection: Connection, worker_id: str) -> None:
    if database.is_postgres:
        connection.execute(
            text(f"SELECT pg_notify('{WORKER_CHANNEL}', :worker)"), {"worker": worker_id}
        )


class Listener:
    """A thread that LISTENs on both channels and calls ``on_work()`` / ``on_worker(id)``."""

    def __init__(
        self,
        database: Database,
        on_work: Callable[[], None],
        on_worker: Callable[[str], None],
    ) -> None:
        url = make_url(database.url)
        self._conninfo = psycopg.conninfo.make_conninfo(
            host=url.host or "", port=str(url.port or 5432), dbname=url.database or "",
            user=url.username or "", password=url.password or "",
        )  # fmt: skip
        self._on_work = on_work
        self._on_worker = on_worker
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pg-listener", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._listen()
            except psycopg.Error as error:
                log.warning("notification listener lost its connection: %s", error)
                self._stopping.wait(RECONNECT_SECONDS)

    def _listen(self) -> None:
        with psycopg.connect(self._conninfo, autocommit=True) as connection:
            connection.execute(f"LISTEN {WORK_CHANNEL}")
            connection.execute(f"LISTEN {WORKER_CHANNEL}")
            while not self._stopping.is_set():
                for notification in connection.notifies(timeout=0.5):
                    if notification.channel == WORK_CHANNEL:
                        self._on_work()
                    else:
                        self._on_worker(notification.payload)

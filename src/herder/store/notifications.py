"""Notices of committed changes that waiting workers care about.

A transaction that makes work (a submit) or has news for one worker (a cancel, freed
capacity) leaves a notice that is delivered once it commits: straight to this process's
subscribers, and on PostgreSQL by one NOTIFY per transaction to the ``Listener`` of every
other process (a listener skips its own process's, delivered already). Notices
only make waiters wake sooner — the claim still polls — so a lost one costs latency, never
correctness.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Iterable

import psycopg
from sqlalchemy import Connection
from sqlalchemy.engine import make_url

from herder.domain.lifecycle.changes import Notice, NoticeKind
from herder.store.database import Database

WORK_CHANNEL = "herder_work"
WORKER_CHANNEL = "herder_worker"  # payload "<kind>:<worker id>", kinds below
DUE_CHANNEL = "herder_due"  # something got a due time: the reaper should look again
ALERTS_CHANNEL = "herder_alerts"  # an alert delivery was queued: the sender should post it
CHANNELS = (WORK_CHANNEL, WORKER_CHANNEL, DUE_CHANNEL, ALERTS_CHANNEL)
CANCEL = str(NoticeKind.CANCEL)  # the worker must stop something (cancel, preempt, a member)
CAPACITY = str(NoticeKind.CAPACITY)  # the worker freed capacity: the dispatcher may place more
ASSIGNED = str(NoticeKind.ASSIGNED)  # attempts were placed on the worker: its claim may answer
RECONNECT_SECONDS = 1.0

log = logging.getLogger("herder.store")


def send(database: Database, connection: Connection, notices: Iterable[Notice]) -> None:
    """Leave each of a decision's notices, delivered when the transaction commits."""
    for notice in sorted(notices, key=lambda item: (item.kind, item.worker_id)):
        if notice.kind is NoticeKind.WORK:
            notify_work(database, connection)
        elif notice.kind is NoticeKind.DUE:
            database.notify(connection, DUE_CHANNEL)
        else:
            database.notify(connection, WORKER_CHANNEL, f"{notice.kind}:{notice.worker_id}")


def notify_work(database: Database, connection: Connection) -> None:
    database.notify(connection, WORK_CHANNEL)


def notify_alert_delivery(database: Database, connection: Connection) -> None:
    database.notify(connection, ALERTS_CHANNEL)


def notify_cancel(database: Database, connection: Connection, worker_id: str) -> None:
    database.notify(connection, WORKER_CHANNEL, f"{CANCEL}:{worker_id}")


def notify_capacity(database: Database, connection: Connection, worker_id: str) -> None:
    database.notify(connection, WORKER_CHANNEL, f"{CAPACITY}:{worker_id}")


def notify_assigned(database: Database, connection: Connection, worker_id: str) -> None:
    database.notify(connection, WORKER_CHANNEL, f"{ASSIGNED}:{worker_id}")


class Listener:
    """A thread that LISTENs on the channels and hands what it hears to the subscribers. It
    also listens on a channel of its own, on which ``stop`` wakes it at once."""

    def __init__(self, database: Database) -> None:
        url = make_url(database.url)
        self._conninfo = psycopg.conninfo.make_conninfo(
            host=url.host or "", port=str(url.port or 5432), dbname=url.database or "",
            user=url.username or "", password=url.password or "",
        )  # fmt: skip
        self._database = database
        self._stopping = threading.Event()
        self._own_channel = f"herder_listener_{secrets.token_hex(6)}"
        self._thread = threading.Thread(target=self._run, name="pg-listener", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        try:  # rather than wait out the listener's poll
            with psycopg.connect(self._conninfo, autocommit=True, connect_timeout=2) as wake:
                wake.execute(f"NOTIFY {self._own_channel}")
        except psycopg.Error as error:
            log.info("could not wake the notification listener (it stops within 0.5 s): %s", error)
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
            for channel in (*CHANNELS, self._own_channel):
                connection.execute(f"LISTEN {channel}")
            while not self._stopping.is_set():
                for notification in connection.notifies(timeout=0.5):
                    if self._stopping.is_set():
                        return
                    if notification.channel == self._own_channel:
                        continue
                    if not self._database.is_own_backend(notification.pid):
                        self._database.deliver(notification.channel, notification.payload)

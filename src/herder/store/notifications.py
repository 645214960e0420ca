"""Notices of committed changes that waiting workers care about.

A transaction that makes work (a submit) or has news for one worker (a cancel, freed
capacity) leaves a notice that is delivered once it commits: straight to this process's
subscribers, and on PostgreSQL by one NOTIFY per transaction to the ``Listener`` (``listener``)
of every other process (a listener skips its own process's, delivered already). Notices
only make waiters wake sooner — the claim still polls — so a lost one costs latency, never
correctness.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from herder.domain.lifecycle.changes import Notice, NoticeKind
from herder.store.database import Database

if TYPE_CHECKING:
    from herder.store.listener import Listener

WORK_CHANNEL = "herder_work"
WORKER_CHANNEL = "herder_worker"  # payload "<kind>:<worker id>", kinds below
DUE_CHANNEL = "herder_due"  # something got a due time: the reaper should look again
ALERTS_CHANNEL = "herder_alerts"  # an alert delivery was queued: the sender should post it
CHANNELS = (WORK_CHANNEL, WORKER_CHANNEL, DUE_CHANNEL, ALERTS_CHANNEL)
CANCEL = str(NoticeKind.CANCEL)  # the worker must stop something (cancel, preempt, a member)
CAPACITY = str(NoticeKind.CAPACITY)  # the worker freed capacity: the dispatcher may place more
ASSIGNED = str(NoticeKind.ASSIGNED)  # attempts were placed on the worker: its claim may answer
HANDED = str(NoticeKind.HANDED)  # it freed capacity and was handed what waited: nothing to place


def send(database: Database, connection: Connection, notices: Iterable[Notice]) -> None:
    """Leave each of a decision's notices, delivered when the transaction commits."""
    for notice in sorted(notices, key=lambda item: (item.kind, item.worker_id)):
        if notice.kind is NoticeKind.WORK:
            notify_work(database, connection)
        elif notice.kind is NoticeKind.DUE:
            database.notify(connection, DUE_CHANNEL)
        else:
            database.notify(connection, WORKER_CHANNEL, f"{notice.kind}:{notice.worker_id}")


def handed_off(database: Database, connection: Connection, worker_id: str) -> None:
    """The worker's freed capacity took every run waiting, in this transaction: the notices
    that would wake the dispatcher for them (work, capacity) say ``handed`` instead, which
    tells the rest that the worker's attempts ended and the dispatcher to read it again."""
    database.withdraw(connection, WORK_CHANNEL)
    database.withdraw(connection, WORKER_CHANNEL, f"{CAPACITY}:{worker_id}")
    database.notify(connection, WORKER_CHANNEL, f"{HANDED}:{worker_id}")


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


def listener_for(database: Database) -> Listener | None:
    """A listener for the notices of other processes: PostgreSQL's; SQLite has no other
    process to hear. Its module (and psycopg) loads here, so a process on SQLite never
    loads it."""
    if not database.is_postgres:
        return None
    from herder.store.listener import Listener

    return Listener(database, CHANNELS)

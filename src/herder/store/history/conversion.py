"""Turning PostgreSQL's plain history tables into partitioned ones (migration 0015) online:
servers go on writing while it runs, and no statement of theirs waits on it for more than
about a second.

For each table, children first (``HISTORY_TABLES``):

1. shadow   a partitioned table beside it with the declared keys and indexes and the
            slices its rows and the coming weeks need (``shadow``); one transaction,
            new tables only (and a moment's lock on tenants for runs' foreign key)
2. mirror   a trigger on the plain table writes each row written into the shadow too
            (``mirror``); waits for the writers in flight
3. copy     the rows there were, 5,000 a transaction in key order, each batch's rows
            locked ``FOR KEY SHARE`` while it runs (a delete of one waits for it)
4. swap     one transaction: the plain table and its indexes renamed aside, the mirror
            dropped, the shadow and its indexes given their names, the serial's sequence
            handed over; for runs, the guards' trigger installed (``guard_fill``)
5. drop     the plain table, renamed aside

Before runs, the guard tables of their unique keys are made empty, for the copy and the
mirror to fill; the fires' slices are made up last. The foreign keys between history tables
go with the plain tables, children first. No step locks two tables that servers write
apart: a server's transaction holding one and waiting for the other would deadlock with it
(the swap's two, a table and its shadow, are written together, the table first). Every
transaction waits at most a second for a lock and is tried again (``brief_transactions``).
Each step finds what an interrupted run left (a shadow, a mirror, a table partitioned
already, one aside) and goes on from there: run again, the conversion finishes the job,
copying the table it was at from its start.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from functools import partial

from sqlalchemy import Connection, Engine, text

from herder.store.history.brief_transactions import ROW_LOCK_TIMEOUT, in_brief_transaction
from herder.store.history.guard_fill import create_guard_tables, guard_tables_exist
from herder.store.history.guards import take_keys_on_insert
from herder.store.history.mirror import copy_batch, install_mirror, remove_mirror
from herder.store.history.partitions import FIRE_KEYS, HISTORY_TABLES, HistoryTable
from herder.store.history.shadow import (
    aside_name,
    create_shadow,
    exists,
    is_partitioned,
    shadow_of,
    slice_up,
    swap,
)

log = logging.getLogger("herder.store")
# Foreign keys between history tables: a slice could not be detached while a later slice
# of another table pointed into it. Rows of one run are written and dropped together. The
# shadows are made without them; the plain tables keep theirs until they are dropped (a
# drop before would lock two tables in one statement: one half of a deadlock with a server
# writing both in the other order).
FOREIGN_KEYS_BETWEEN_HISTORY_TABLES = {
    "fk_attempts_run_id_runs": "attempts",
    "fk_run_events_run_id_runs": "run_events",
    "fk_log_chunks_attempt_id_attempts": "log_chunks",
    "fk_attempt_logs_attempt_id_attempts": "attempt_logs",
}


def partition_history(engine: Engine, now: datetime) -> None:
    """Convert every history table, in transactions of its own (not the migration's)."""
    for history in HISTORY_TABLES:
        if history.name == "runs":
            in_brief_transaction(engine, lambda connection: _guard_tables(connection, now))
        _convert(engine, history, now)
    in_brief_transaction(
        engine, lambda connection: slice_up(connection, FIRE_KEYS, FIRE_KEYS.name, now)
    )


def _convert(engine: Engine, history: HistoryTable, now: datetime) -> None:
    if not in_brief_transaction(engine, lambda c: is_partitioned(c, history.name)):
        started = time.monotonic()
        in_brief_transaction(engine, lambda connection: _shadow(connection, history, now))
        in_brief_transaction(engine, lambda connection: install_mirror(connection, history))
        rows = _copy(engine, history)
        _execute(engine, f'ANALYZE "{shadow_of(history).name}"')  # planned as its rows at once
        in_brief_transaction(engine, lambda connection: _swap(connection, history))
        log.info("history conversion: %s partitioned, %d rows copied in %.1f s",
                 history.name, rows, time.monotonic() - started)  # fmt: skip
    _execute(engine, f'DROP TABLE IF EXISTS "{aside_name(history)}"')


def _shadow(connection: Connection, history: HistoryTable, now: datetime) -> None:
    if not exists(connection, shadow_of(history).name):
        create_shadow(connection, history, now)


def _copy(engine: Engine, history: HistoryTable) -> int:
    rows, after = 0, None
    while True:
        copy = partial(copy_batch, history=history, after=after)
        batch = in_brief_transaction(engine, copy, lock_timeout=ROW_LOCK_TIMEOUT)
        rows, after = rows + batch.rows, batch.last_key
        if after is None:
            return rows


def _swap(connection: Connection, history: HistoryTable) -> None:
    connection.execute(
        text(f'LOCK TABLE "{history.name}", "{shadow_of(history).name}" IN ACCESS EXCLUSIVE MODE')
    )
    remove_mirror(connection, history)
    swap(connection, history)
    if history.name == "runs":
        take_keys_on_insert(connection)


def _execute(engine: Engine, statement: str) -> None:
    in_brief_transaction(engine, lambda connection: connection.execute(text(statement)))


def _guard_tables(connection: Connection, now: datetime) -> None:
    if not guard_tables_exist(connection):
        create_guard_tables(connection, now)

"""Turning the plain history tables PostgreSQL has into partitioned ones (the migration to
time slices): each table is renamed aside, a partitioned table of the same columns takes its
name, with the declared keys and indexes (PostgreSQL's rule: the slice key in every unique
one), slices covering the rows there are and the time ahead, then the rows move and the old
table goes."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, ForeignKeyConstraint, Table, UniqueConstraint, text
from sqlalchemy.schema import AddConstraint, CreateIndex

from herder.domain.history import slices_between, slices_wanted
from herder.store.history.guards import GUARDED_UNIQUE_KEYS, create_guards
from herder.store.history.partitions import (
    FIRE_KEYS,
    HISTORY_TABLES,
    HistoryTable,
    create_default_partition,
    create_slice,
)
from herder.store.schema import metadata

HISTORY_NAMES = frozenset(table.name for table in HISTORY_TABLES)
# Foreign keys between history tables: a slice could not be detached while a later slice
# of another table pointed into it. Rows of one run are written and dropped together.
FOREIGN_KEYS_BETWEEN_HISTORY_TABLES = {
    "fk_attempts_run_id_runs": "attempts",
    "fk_run_events_run_id_runs": "run_events",
    "fk_log_chunks_attempt_id_attempts": "log_chunks",
    "fk_attempt_logs_attempt_id_attempts": "attempt_logs",
}


def partition_history(connection: Connection, now: datetime) -> None:
    for name, table in FOREIGN_KEYS_BETWEEN_HISTORY_TABLES.items():
        connection.execute(text(f'ALTER TABLE "{table}" DROP CONSTRAINT IF EXISTS "{name}"'))
    for history in HISTORY_TABLES:
        _partition(connection, history, metadata.tables[history.name], now)
    create_guards(connection)
    _slice_up(connection, FIRE_KEYS, FIRE_KEYS.name, now)


def _partition(connection: Connection, history: HistoryTable, table: Table, now: datetime) -> None:
    aside = f"{history.name}_unpartitioned"
    connection.execute(text(f'ALTER TABLE "{history.name}" RENAME TO "{aside}"'))
    _drop_keys_and_indexes(connection, aside)
    connection.execute(
        text(
            f'CREATE TABLE "{history.name}" (LIKE "{aside}" INCLUDING DEFAULTS)'
            f' PARTITION BY RANGE ("{history.key}")'
        )
    )
    connection.execute(
        text(
            f'ALTER TABLE "{history.name}" ADD CONSTRAINT "pk_{history.name}"'
            f" PRIMARY KEY ({', '.join(history.primary_key)})"
        )
    )
    _declare_keys_and_indexes(connection, table)
    create_default_partition(connection, history)
    _slice_up(connection, history, aside, now)
    connection.execute(text(f'INSERT INTO "{history.name}" SELECT * FROM "{aside}"'))
    if table.autoincrement_column is not None:
        column, owner = table.autoincrement_column.name, history.name
        connection.execute(
            text(f'ALTER SEQUENCE "{owner}_{column}_seq" OWNED BY "{owner}"."{column}"')
        )
    connection.execute(text(f'DROP TABLE "{aside}"'))


def _slice_up(connection: Connection, history: HistoryTable, rows_in: str, now: datetime) -> None:
    """The slices the rows of ``rows_in`` fall in, and those the coming weeks need."""
    oldest, newest = connection.execute(
        text(f'SELECT min("{history.key}"), max("{history.key}") FROM "{rows_in}"')
    ).one()
    pieces = set(slices_wanted(now))
    if oldest is not None:
        pieces.update(slices_between(history.moment(oldest), history.moment(newest)))
    for piece in sorted(pieces):
        create_slice(connection, history, piece)


def _drop_keys_and_indexes(connection: Connection, table: str) -> None:
    """Their names are the declared ones, which the partitioned table takes over."""
    constraints = connection.execute(
        text(
            "SELECT conname FROM pg_constraint"
            " WHERE conrelid = CAST(:table AS regclass) AND contype IN ('p', 'u')"
        ),
        {"table": table},
    ).scalars()
    for name in list(constraints):
        connection.execute(text(f'ALTER TABLE "{table}" DROP CONSTRAINT "{name}"'))
    indexes = connection.execute(
        text("SELECT indexname FROM pg_indexes WHERE tablename = :table"), {"table": table}
    ).scalars()
    for name in list(indexes):
        connection.execute(text(f'DROP INDEX "{name}"'))


def _declare_keys_and_indexes(connection: Connection, table: Table) -> None:
    """The table's keys and indexes as the schema declares them now, but for an index on
    a column a later migration adds (with that index)."""
    present = set(
        connection.execute(
            text("SELECT column_name FROM information_schema.columns WHERE table_name = :table"),
            {"table": table.name},
        ).scalars()
    )
    for constraint in table.constraints:
        if isinstance(constraint, ForeignKeyConstraint):
            if constraint.referred_table.name not in HISTORY_NAMES:
                connection.execute(AddConstraint(constraint))
        elif isinstance(constraint, UniqueConstraint) and constraint.name in GUARDED_UNIQUE_KEYS:
            _plain_index(connection, table.name, str(constraint.name), constraint.columns.keys())
        elif isinstance(constraint, UniqueConstraint):
            connection.execute(AddConstraint(constraint))
    for index in table.indexes:
        if not {column.name for column in index.columns} <= present:
            continue
        if index.name in GUARDED_UNIQUE_KEYS:
            columns = [column.name for column in index.columns]
            _plain_index(connection, table.name, str(index.name), columns)
        else:
            connection.execute(CreateIndex(index))


def _plain_index(connection: Connection, table: str, name: str, columns: list[str]) -> None:
    connection.execute(text(f'CREATE INDEX "{name}" ON "{table}" ({", ".join(columns)})'))

"""The history tables' time slices on PostgreSQL: each table is ``PARTITION BY RANGE`` over a
sortable id, one partition per slice named like pg_partman's (``runs_p20261123``), and a
``_default`` partition that catches rows no slice holds yet (an odd clock), emptied into a
slice when it is made.

Detaching a slice and dropping it are two steps: a detached slice is a plain table that an
exporter (the cold tier) may read before it is dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import Connection, text

from herder.domain.history import Slice, slice_named
from herder.domain.ids import id_time_ms


@dataclass(frozen=True)
class HistoryTable:
    name: str
    key: str  # the column its slices range over
    prefix: str | None  # of the ids in that column; None: the column is a time
    # PostgreSQL wants the key in every unique key of a partitioned table: the declared
    # primary key, with the key added when it is not in it
    primary_key: tuple[str, ...]

    def partition(self, piece: Slice) -> str:
        return f"{self.name}_{piece.suffix}"

    def bounds(self, piece: Slice) -> tuple[str, str]:
        if self.prefix is None:
            return piece.start.isoformat(), piece.end.isoformat()
        return piece.bounds(self.prefix)

    def moment(self, key: Any) -> datetime:
        """When a row with this key was made (its time, for a time key)."""
        if self.prefix is None:
            return cast(datetime, key)
        return datetime.fromtimestamp(id_time_ms(key) / 1000, tz=UTC)

    @property
    def default_partition(self) -> str:
        return f"{self.name}_default"


# Children first: the order retention detaches and drops them in.
HISTORY_TABLES = (
    HistoryTable("attempt_logs", "attempt_id", "att", ("attempt_id",)),
    HistoryTable("log_chunks", "attempt_id", "att", ("id", "attempt_id")),
    HistoryTable("run_events", "run_id", "run", ("id", "run_id")),
    HistoryTable("attempts", "run_id", "run", ("id", "run_id")),
    HistoryTable("runs", "id", "run", ("id",)),
)
# The guard of runs' fires (``guards``), sliced by the nominal time: the fires of a slice
# past every retention are forgotten with it.
FIRE_KEYS = HistoryTable("run_fire_keys", "scheduled_for", None, ("schedule_id", "scheduled_for"))
SLICED_TABLES = (*HISTORY_TABLES, FIRE_KEYS)
PARTITION_NAME = re.compile(r"^(?P<table>[a-z_]+)_(?P<suffix>p\d{8}|default)$")


_ATTACHED = (
    "SELECT child.relname FROM pg_inherits"
    " JOIN pg_class child ON child.oid = pg_inherits.inhrelid"
    " JOIN pg_class parent ON parent.oid = pg_inherits.inhparent"
    " WHERE parent.relname = :table"
)
# plain tables named like the table's slices: taken out of it and not dropped yet
_DETACHED = (
    "SELECT relname FROM pg_class WHERE relkind = 'r' AND NOT relispartition"
    " AND relnamespace = current_schema()::regnamespace AND starts_with(relname, :table)"
)


def attached_slices(connection: Connection, table: HistoryTable) -> set[Slice]:
    return _slices_named(connection, table, _ATTACHED)


def detached_slices(connection: Connection, table: HistoryTable) -> set[Slice]:
    return _slices_named(connection, table, _DETACHED)


def _slices_named(connection: Connection, table: HistoryTable, query: str) -> set[Slice]:
    names = connection.execute(text(query), {"table": table.name}).scalars()
    return {slice_named(suffix) for name in names if (suffix := _slice_suffix(table, name))}


def create_slice(connection: Connection, table: HistoryTable, piece: Slice) -> None:
    """Make the slice's partition, moving into it what the default partition holds of it (a
    partition cannot be added over rows the default already has)."""
    name, (low, high) = table.partition(piece), table.bounds(piece)
    connection.execute(text(f'CREATE TABLE "{name}" (LIKE "{table.name}" INCLUDING DEFAULTS)'))
    connection.execute(
        text(
            f'WITH moved AS (DELETE FROM "{table.default_partition}"'
            f" WHERE \"{table.key}\" >= '{low}' AND \"{table.key}\" < '{high}' RETURNING *)"
            f' INSERT INTO "{name}" SELECT * FROM moved'
        )
    )
    connection.execute(
        text(
            f'ALTER TABLE "{table.name}" ATTACH PARTITION "{name}"'
            f" FOR VALUES FROM ('{low}') TO ('{high}')"
        )
    )


def create_default_partition(connection: Connection, table: HistoryTable) -> None:
    connection.execute(
        text(f'CREATE TABLE "{table.default_partition}" PARTITION OF "{table.name}" DEFAULT')
    )


def detach_slice(connection: Connection, table: HistoryTable, piece: Slice) -> None:
    connection.execute(
        text(f'ALTER TABLE "{table.name}" DETACH PARTITION "{table.partition(piece)}"')
    )


def drop_detached_slice(connection: Connection, table: HistoryTable, piece: Slice) -> None:
    connection.execute(text(f'DROP TABLE IF EXISTS "{table.partition(piece)}"'))


def _slice_suffix(table: HistoryTable, name: str) -> str | None:
    match = PARTITION_NAME.match(name)
    if match is None or match["table"] != table.name or match["suffix"] == "default":
        return None
    return match["suffix"]

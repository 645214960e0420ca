"""A plain history table's partitioned shadow, which the online conversion (``conversion``)
fills beside it and then swaps in for it.

The shadow is ``runs_shadow`` until the swap: index names are unique in a schema, and the
plain table holds the declared ones, so the shadow's keys and indexes carry the same suffix
(its foreign keys, named per table, take theirs at once). Its slices and default partition
have their final names from the start: the plain table has none. The swap renames the plain
table aside with its indexes, gives the shadow the table's name and its indexes theirs, and
hands it the serial column's sequence: names in the catalog only, a moment's work however
many rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, MetaData, Table, UniqueConstraint, quoted_name, text
from sqlalchemy.schema import AddConstraint, CreateIndex

from herder.domain.history import Slice, slices_between, slices_wanted
from herder.store.history.guards import GUARDED_UNIQUE_KEYS
from herder.store.history.partitions import (
    HISTORY_TABLES,
    HistoryTable,
    attached_slices,
    create_default_partition,
    create_slice,
)
from herder.store.schema import metadata

SHADOW_SUFFIX = "_shadow"
HISTORY_NAMES = frozenset(table.name for table in HISTORY_TABLES)
ASIDE_SUFFIX = "_unpartitioned"
_COLUMNS = (
    "SELECT attname FROM pg_attribute WHERE attrelid = CAST(:table AS regclass)"
    " AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
)
_OWN_INDEXES = (
    "SELECT index.relname FROM pg_index JOIN pg_class index ON index.oid = pg_index.indexrelid"
    " WHERE pg_index.indrelid = CAST(:table AS regclass) ORDER BY index.relname"
)


@dataclass(frozen=True)
class Shadow(HistoryTable):
    """The shadow of the history table ``of``: its slices and default partition named as that
    table's."""

    of: str = ""

    def partition(self, piece: Slice) -> str:
        return f"{self.of}_{piece.suffix}"

    @property
    def default_partition(self) -> str:
        return f"{self.of}_default"


def shadow_of(history: HistoryTable) -> Shadow:
    name = history.name + SHADOW_SUFFIX
    return Shadow(name, history.key, history.prefix, history.primary_key, of=history.name)


def aside_name(history: HistoryTable) -> str:
    """The plain table's name once the shadow has taken its own, until it is dropped."""
    return history.name + ASIDE_SUFFIX


def create_shadow(connection: Connection, history: HistoryTable, now: datetime) -> None:
    """The shadow with the declared keys and indexes, its default partition, and the slices
    the plain table's rows and the coming weeks need."""
    shadow, declared = shadow_of(history), metadata.tables[history.name]
    connection.execute(
        text(
            f'CREATE TABLE "{shadow.name}" (LIKE "{history.name}" INCLUDING DEFAULTS)'
            f' PARTITION BY RANGE ("{history.key}")'
        )
    )
    connection.execute(
        text(
            f'ALTER TABLE "{shadow.name}" ADD CONSTRAINT "pk_{history.name}{SHADOW_SUFFIX}"'
            f" PRIMARY KEY ({', '.join(history.primary_key)})"
        )
    )
    _declare_keys_and_indexes(connection, _renamed(declared), columns(connection, history.name))
    create_default_partition(connection, shadow)
    slice_up(connection, shadow, f'"{history.name}"', now)
    # last: a foreign key locks the table it refers to until the transaction ends
    for constraint in _renamed(declared).foreign_key_constraints:
        if constraint.referred_table.name not in HISTORY_NAMES:
            connection.execute(AddConstraint(constraint))


def swap(connection: Connection, history: HistoryTable) -> None:
    """The shadow becomes the table: the plain one, renamed aside with its indexes, stays to
    be dropped. Locks both tables (the caller has stopped mirroring into the shadow)."""
    shadow, aside = shadow_of(history), aside_name(history)
    connection.execute(text(f'ALTER TABLE "{history.name}" RENAME TO "{aside}"'))
    for number, index in enumerate(_indexes(connection, aside), start=1):
        connection.execute(text(f'ALTER INDEX "{index}" RENAME TO "{aside}_index_{number}"'))
    connection.execute(text(f'ALTER TABLE "{shadow.name}" RENAME TO "{history.name}"'))
    for index in _indexes(connection, history.name):
        final = index.removesuffix(SHADOW_SUFFIX)
        connection.execute(text(f'ALTER INDEX "{index}" RENAME TO "{final}"'))
    serial = metadata.tables[history.name].autoincrement_column
    if serial is not None:  # else dropped with the plain table, which owns it
        owner, column = history.name, serial.name
        connection.execute(
            text(f'ALTER SEQUENCE "{owner}_{column}_seq" OWNED BY "{owner}"."{column}"')
        )


def slice_up(connection: Connection, history: HistoryTable, rows_in: str, now: datetime) -> None:
    """The slices the rows of ``rows_in`` (a table or a subquery, as SQL) fall in, and those
    the coming weeks need, but for the ones there already."""
    oldest, newest = connection.execute(
        text(f'SELECT min("{history.key}"), max("{history.key}") FROM {rows_in} AS keyed')
    ).one()
    pieces = set(slices_wanted(now))
    if oldest is not None:
        pieces.update(slices_between(history.moment(oldest), history.moment(newest)))
    for piece in sorted(pieces - attached_slices(connection, history)):
        create_slice(connection, history, piece)


def columns(connection: Connection, table: str) -> list[str]:
    """The table's columns in their order."""
    return _catalog_names(connection, _COLUMNS, table)


def is_partitioned(connection: Connection, table: str) -> bool:
    kind = connection.execute(
        text("SELECT relkind FROM pg_class WHERE oid = to_regclass(:table)"),
        {"table": f'"{table}"'},
    ).scalar()
    return kind == "p"


def exists(connection: Connection, table: str) -> bool:
    found = connection.execute(text("SELECT to_regclass(:table)"), {"table": f'"{table}"'})
    return found.scalar() is not None


def _renamed(declared: Table) -> Table:
    """The declared table as the shadow: its name, its keys' and indexes' with the suffix,
    its foreign keys' as declared (a copy: the tables it refers to come along)."""
    copies = MetaData()
    for foreign_key in declared.foreign_key_constraints:
        foreign_key.referred_table.to_metadata(copies)
    shadow = declared.to_metadata(copies, name=declared.name + SHADOW_SUFFIX)
    for index in shadow.indexes:
        index.name = quoted_name(f"{index.name}{SHADOW_SUFFIX}", None)
    for constraint in shadow.constraints:
        if isinstance(constraint, UniqueConstraint):
            constraint.name = quoted_name(f"{constraint.name}{SHADOW_SUFFIX}", None)
    return shadow


def _declare_keys_and_indexes(connection: Connection, shadow: Table, present: list[str]) -> None:
    """The shadow's unique keys and indexes as the schema declares them now, but for an index
    on a column a later migration adds (with that index). A unique key of runs a guard table
    holds (``guards``) is a plain index of the same name."""
    guarded = {name + SHADOW_SUFFIX for name in GUARDED_UNIQUE_KEYS}
    for constraint in shadow.constraints:
        if not isinstance(constraint, UniqueConstraint):
            continue
        if constraint.name in guarded:
            _plain_index(connection, shadow.name, str(constraint.name), constraint.columns.keys())
        else:
            connection.execute(AddConstraint(constraint))
    for index in shadow.indexes:
        if not {column.name for column in index.columns} <= set(present):
            continue
        if index.name in guarded:
            indexed = [column.name for column in index.columns]
            _plain_index(connection, shadow.name, str(index.name), indexed)
        else:
            connection.execute(CreateIndex(index))


def _plain_index(connection: Connection, table: str, name: str, columns: list[str]) -> None:
    connection.execute(text(f'CREATE INDEX "{name}" ON "{table}" ({", ".join(columns)})'))


def _indexes(connection: Connection, table: str) -> list[str]:
    """The table's own indexes (a partitioned table's, not its partitions')."""
    return _catalog_names(connection, _OWN_INDEXES, table)


def _catalog_names(connection: Connection, query: str, table: str) -> list[str]:
    return list(connection.execute(text(query), {"table": f'"{table}"'}).scalars())

"""The metadata every table is declared on, with its naming convention, and the pieces of
table declarations more than one module uses."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, ForeignKey, Index, Integer, MetaData, String, Table, and_

from herder.store.types import AutoIncrementId, UtcDateTime

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

ID = String(40)


def owned_columns(name_length: int | None = None) -> list[Column[Any]]:
    """A tenant's row: its id and its tenant, and its name (required) when ``name_length``."""
    columns: list[Column[Any]] = [
        Column("id", ID, primary_key=True),
        Column("tenant_id", ID, ForeignKey("tenants.id"), nullable=False),
    ]
    if name_length is not None:
        columns.append(Column("name", String(name_length), nullable=False))
    return columns


def serial_column() -> Column[int]:
    """An id the database numbers in insertion order: a log's or a history's row."""
    return Column("id", AutoIncrementId, primary_key=True, autoincrement=True)


def stamp_columns() -> list[Column[Any]]:
    """When the row was made and last changed."""
    return [
        Column("created_at", UtcDateTime, nullable=False),
        Column("updated_at", UtcDateTime, nullable=False),
    ]


def version_column() -> Column[int]:
    """1 when created, one more on every change: the ETag, and the guard of a PATCH."""
    return Column("version", Integer, nullable=False, server_default="1")


def ended_index(name: str, table: Table, *columns: str) -> Index:
    """An index of the ended rows only (``finished_at`` set): a submit or a claim writes
    nothing to it."""
    ended = table.c.finished_at.is_not(None)
    return Index(name, *(table.c[c] for c in columns), postgresql_where=ended, sqlite_where=ended)


def deadline_index(name: str, table: Table) -> Index:
    """The rows whose deadline the reaper has still to judge: unfinished, with a deadline not
    yet found missed. Most runs have none, and a run leaves it when it ends: a submit or a
    claim of a run without a deadline writes nothing to it."""
    waiting = and_(
        table.c.deadline_at.is_not(None),
        table.c.deadline_missed_at.is_(None),
        table.c.finished_at.is_(None),
    )
    return Index(name, table.c.deadline_at, postgresql_where=waiting, sqlite_where=waiting)


def missed_index(name: str, table: Table) -> Index:
    """The tenant's rows found past their deadline, in the order they were: what a
    ``deadline_missed`` alert rule reads since its last look. Only missed rows are in it."""
    missed = table.c.deadline_missed_at.is_not(None)
    return Index(
        name, table.c.tenant_id, table.c.deadline_missed_at,
        postgresql_where=missed, sqlite_where=missed,
    )  # fmt: skip

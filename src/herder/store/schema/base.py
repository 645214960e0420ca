"""The metadata every table is declared on, with its naming convention, and the pieces of
table declarations more than one module uses."""

from __future__ import annotations

from sqlalchemy import Index, MetaData, String, Table

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

ID = String(40)


def ended_index(name: str, table: Table, *columns: str) -> Index:
    """An index of the ended rows only (``finished_at`` set): a submit or a claim writes
    nothing to it."""
    ended = table.c.finished_at.is_not(None)
    return Index(name, *(table.c[c] for c in columns), postgresql_where=ended, sqlite_where=ended)

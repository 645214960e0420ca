"""The few statements whose spelling differs between SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

import psycopg
from sqlalchemy import Connection, Table, Update, exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert

from herder.store.database import Database


def insert_ignoring_duplicates(database: Database, table: Table, **values: Any) -> Insert:
    """``INSERT … ON CONFLICT DO NOTHING``: the unique key decides, whoever inserts first."""
    dialect_insert = postgresql.insert if database.is_postgres else sqlite.insert
    statement = dialect_insert(table).on_conflict_do_nothing()
    return statement.values(**values) if values else statement


def update_each(
    connection: Connection, statement: Update, rows: Sequence[Mapping[str, Any]]
) -> list[Any]:
    """Run a guarded ``UPDATE … RETURNING key`` once per parameter row; the keys of the rows
    whose guard held. PostgreSQL gets every row in one pipelined round trip (psycopg's
    ``executemany(returning=True)``); SQLite, in-process, runs them one by one."""
    if not rows:
        return []
    if connection.dialect.name != "postgresql" or len(rows) == 1:
        return [key for row in rows if (key := connection.execute(statement, row).scalar())]
    compiled = statement.compile(dialect=connection.dialect)
    processors: dict[str, Any] = dict(compiled._bind_processors)
    fixed = compiled.params  # the statement's own literals (a guard's expected state)
    params = [
        {
            name: processors[name](_plain(value)) if name in processors else _plain(value)
            for name, value in (fixed | dict(row)).items()
        }
        for row in rows
    ]
    keys = []
    try:
        with connection.connection.dbapi_connection.cursor() as cursor:  # type: ignore[union-attr]
            cursor.executemany(compiled.string, params, returning=True)
            while True:
                keys += [row[0] for row in cursor.fetchall()]
                if not cursor.nextset():
                    break
    except psycopg.Error as error:  # as SQLAlchemy would raise it: the store wraps those
        raise exc.DBAPIError.instance(compiled.string, params, error, psycopg.Error) from error
    return keys


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value

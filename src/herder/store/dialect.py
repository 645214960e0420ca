"""The few statements whose spelling differs between SQLite and PostgreSQL."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from enum import Enum
from typing import Any

import psycopg
from sqlalchemy import (
    JSON,
    Column,
    ColumnElement,
    Connection,
    Table,
    Text,
    Update,
    bindparam,
    cast,
    exc,
    func,
    insert,
    select,
    text,
)
from sqlalchemy import column as sql_column
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import Insert
from sqlalchemy.sql.elements import TextClause

from herder.store.database import Database

SQLITE_IN_LIMIT = 1000  # values in one IN list: SQLite caps the parameters of a statement


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


class Among:
    """``column`` among a list of values bound when the statement runs, so the statement is
    built once. PostgreSQL reads them from one JSON array parameter, whatever the count
    (psycopg writes a long text array item by item, several times slower); SQLite takes an
    expanding IN list of at most ``SQLITE_IN_LIMIT`` values per execution."""

    def __init__(self, dialect: str, column: Column[Any], name: str) -> None:
        self._name = name
        self._json = dialect == "postgresql"
        if self._json:
            values = cast(bindparam(name, type_=Text), JSON)
            self.condition = column.in_(select(func.json_array_elements_text(values)))
        else:
            self.condition = column.in_(bindparam(name, expanding=True))

    def batches(self, values: Sequence[Any], **more: Any) -> list[dict[str, Any]]:
        """The parameters of each execution (with ``more``): none for no values, one on
        PostgreSQL, a chunk each on SQLite."""
        if not values:
            return []
        if self._json:
            return [{self._name: json.dumps(list(values), default=_json_value), **more}]
        return [
            {self._name: list(values[start : start + SQLITE_IN_LIMIT]), **more}
            for start in range(0, len(values), SQLITE_IN_LIMIT)
        ]


def insert_many(connection: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert rows (all with the same keys) in one statement. PostgreSQL gets ``INSERT …
    SELECT … FROM json_to_recordset(…)``: the rows as one JSON document, parsed and planned
    once whatever the count (a JSON column's ``None`` is stored as NULL); SQLite,
    in-process, an executemany."""
    if not rows:
        return
    if connection.dialect.name != "postgresql":
        connection.execute(insert(table), rows)
        return
    statement = _insert_from_json(table, tuple(rows[0]))
    connection.execute(statement, {"rows": json.dumps(rows, default=_json_value)})


def set_each(
    connection: Connection,
    statement: Update,
    key: Column[Any],
    target: Column[Any],
    values: Mapping[Any, Any],
) -> None:
    """``target = values[key]`` for each key, on the rows the guarded ``statement``
    (``update(table).where(guard)``) still matches. PostgreSQL: one ``UPDATE … FROM
    json_to_recordset(…)``; SQLite: an executemany."""
    if not values:
        return
    if connection.dialect.name != "postgresql":
        connection.execute(
            statement.where(key == bindparam("set_key")).values({target: bindparam("set_value")}),
            [{"set_key": one, "set_value": value} for one, value in values.items()],
        )
        return
    pairs = (
        func.json_to_recordset(_json([{"k": one, "v": value} for one, value in values.items()]))
        .table_valued(sql_column("k", key.type), sql_column("v", target.type))
        .render_derived(with_types=True)
    )
    connection.execute(statement.where(key == pairs.c.k).values({target: pairs.c.v}))


@functools.cache
def _insert_from_json(table: Table, names: tuple[str, ...]) -> TextClause:
    """PostgreSQL's ``INSERT … SELECT … FROM json_to_recordset``, built once per shape."""
    columns = ", ".join(names)
    dialect = postgresql.psycopg.dialect()  # type: ignore[no-untyped-call]
    record = ", ".join(f"{name} {table.c[name].type.compile(dialect)}" for name in names)
    return text(
        f"INSERT INTO {table.name} ({columns}) SELECT {columns} "
        f"FROM json_to_recordset(CAST(:rows AS JSON)) AS v({record})"
    )


def _json(value: Any) -> ColumnElement[Any]:
    """A JSON document as one text parameter, cast on the server."""
    return cast(bindparam(None, json.dumps(value, default=_json_value), type_=Text), JSON)


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use an aware UTC time")
        return value.isoformat()
    raise TypeError(f"cannot store {type(value).__name__} as JSON")


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value

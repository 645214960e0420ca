"""The few statements whose spelling differs between SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from enum import Enum
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    Executable,
    String,
    Table,
    Update,
    any_,
    bindparam,
    cast,
    exc,
    func,
    insert,
    select,
    true,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.sql.dml import Insert
from sqlalchemy.types import NullType, TypeEngine

from herder.store.database import Database

SQLITE_IN_LIMIT = 1000  # values in one IN list: SQLite caps the parameters of a statement


def insert_ignoring_duplicates(database: Database, table: Table, **values: Any) -> Insert:
    """``INSERT … ON CONFLICT DO NOTHING``: the unique key decides, whoever inserts first."""
    dialect_insert = postgresql.insert if database.is_postgres else sqlite.insert
    statement = dialect_insert(table).on_conflict_do_nothing()
    return statement.values(**values) if values else statement


def insert_rows(connection: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert many rows (all with the same columns) in one statement (see ``_unnested``)."""
    if len(rows) > 1 and connection.dialect.name == "postgresql":
        connection.execute(*_insert_unnested(table, rows))
    elif rows:
        connection.execute(insert(table), rows)


def rows_insert(
    connection: Connection, table: Table, rows: Sequence[Mapping[str, Any]]
) -> tuple[Executable, Any]:
    """``insert_rows``'s statement and parameters, to run later (on PostgreSQL always the
    unnested insert: one statement that can be a CTE, ``database.deferred``)."""
    if connection.dialect.name == "postgresql":
        return _insert_unnested(table, rows)
    return insert(table), list(rows)


def insert_rows_ignoring_duplicates(
    connection: Connection, table: Table, rows: Sequence[Mapping[str, Any]], key: Column[Any]
) -> list[Any]:
    """``INSERT … ON CONFLICT DO NOTHING RETURNING key`` of many rows (all with the same
    columns) in one statement (see ``_unnested``); the keys inserted."""
    if len(rows) > 1 and connection.dialect.name == "postgresql":
        statement, values = _insert_unnested(table, rows)
        unnested = statement.on_conflict_do_nothing().returning(key)
        return list(connection.execute(unnested, values).scalars())
    dialect_insert = postgresql.insert if connection.dialect.name == "postgresql" else sqlite.insert
    plain = dialect_insert(table).on_conflict_do_nothing().returning(key)
    return list(connection.execute(plain, rows).scalars()) if rows else []


def _insert_unnested(
    table: Table, rows: Sequence[Mapping[str, Any]]
) -> tuple[postgresql.Insert, dict[str, Any]]:
    names = list(rows[0])
    columns, values = _unnested({name: table.c[name].type for name in names}, rows)
    source = select(*(columns[name] for name in names))
    return postgresql.insert(table).from_select(names, source), values


def _unnested(
    kinds: Mapping[str, TypeEngine[Any]], rows: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, ColumnElement[Any]], dict[str, Any]]:
    """Many rows as one PostgreSQL ``SELECT``: a column whose rows differ as an array through
    ``unnest``, one they agree on as a single value. The statement's text is the same
    however many rows, so neither psycopg nor the server parses one the size of the batch
    (a thousand runs' multi-row ``VALUES`` spent most of their time there), and only what
    differs is sent row by row."""
    columns: dict[str, ColumnElement[Any]] = {}
    values: dict[str, Any] = {}
    arrays = 0
    for index, (name, kind) in enumerate(kinds.items()):
        column = [row[name] for row in rows]
        alike = column.count(column[0]) == len(column)
        if alike and (arrays or index < len(kinds) - 1):
            columns[name] = bindparam(f"r_{name}", type_=kind)
            values[f"r_{name}"] = _plain(column[0])
        else:  # an array: the rows differ here (or are all alike, and one must say how many)
            # one dimension: a JSON column's list values stay items, never a nested array
            array = postgresql.ARRAY(kind, dimensions=1)
            columns[name] = func.unnest(bindparam(f"r_{name}", type_=array))
            values[f"r_{name}"] = [_plain(value) for value in column]
            arrays += 1
    return columns, values


def update_each(
    connection: Connection, statement: Update, rows: Sequence[Mapping[str, Any]]
) -> list[Any]:
    """Run a guarded ``UPDATE … RETURNING key`` once per parameter row; the keys of the rows
    whose guard held."""
    return [returned[0] for returned in updated_each(connection, statement, rows)]


def updated_each(
    connection: Connection, statement: Update, rows: Sequence[Mapping[str, Any]]
) -> list[Sequence[Any]]:
    """Run a guarded ``UPDATE … RETURNING …`` once per parameter row; what each row whose
    guard held returned. PostgreSQL gets every row in one pipelined round trip (psycopg's
    ``executemany(returning=True)``, its values as psycopg reads them); SQLite, in-process,
    runs them one by one."""
    if not rows:
        return []
    if connection.dialect.name != "postgresql" or len(rows) == 1:
        found = (connection.execute(statement, row).first() for row in rows)
        return [returned for returned in found if returned is not None]
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
    returned: list[Sequence[Any]] = []
    driver_error = connection.dialect.loaded_dbapi.Error  # psycopg's, loaded with the engine
    try:
        with connection.connection.dbapi_connection.cursor() as cursor:  # type: ignore[union-attr]
            cursor.executemany(compiled.string, params, returning=True)
            while True:
                returned += cursor.fetchall()
                if not cursor.nextset():
                    break
    except driver_error as error:  # as SQLAlchemy would raise it: the store wraps those
        raise exc.DBAPIError.instance(compiled.string, params, error, driver_error) from error
    return returned


class Among:
    """``column`` among a list of string values bound when the statement runs, so the
    statement is built once. PostgreSQL reads them as one array literal in one untyped
    parameter, whatever the count (psycopg writes a long text array item by item, several
    times slower); SQLite takes an expanding IN list of at most ``SQLITE_IN_LIMIT`` values
    per execution."""

    def __init__(self, dialect: str, column: Column[Any], name: str) -> None:
        self._name = name
        self._array = dialect == "postgresql"
        if self._array:
            # ``= ANY(array)``, not ``IN (SELECT …)``: the planner then probes the column's
            # index per value instead of hash-joining whatever it guesses is fewer (after a
            # burst, stale statistics made it scan every running attempt for one worker's).
            # The array is a constant once planned, so where a plan filters rows by it (on
            # statistics from before a burst of 100,000 runs queued, the placement filtered
            # every queued run), each row is looked up in a hash of the values, not compared
            # with each: 0.85 s for 15,000 runs, where reading a JSON array took 17.9 s.
            listed = cast(bindparam(name, type_=NullType()), ARRAY(column.type))
            self.condition = column == func.any(listed)
        else:
            self.condition = column.in_(bindparam(name, expanding=True))

    def batches(self, values: Sequence[Any], **more: Any) -> list[dict[str, Any]]:
        """The parameters of each execution (with ``more``): none for no values, one on
        PostgreSQL, a chunk each on SQLite."""
        if not values:
            return []
        if self._array:
            return [{self._name: array_literal(values), **more}]
        return [
            {self._name: list(values[start : start + SQLITE_IN_LIMIT]), **more}
            for start in range(0, len(values), SQLITE_IN_LIMIT)
        ]


def array_literal(values: Sequence[str]) -> str:
    """PostgreSQL's text form of an array of these strings, each quoted."""
    quoted = (value.replace("\\", "\\\\").replace('"', '\\"') for value in values)
    return "{" + ",".join(f'"{value}"' for value in quoted) + "}"


def set_each(
    connection: Connection,
    statement: Update,
    key: Column[Any],
    target: Column[Any],
    values: Mapping[Any, Any],
) -> None:
    """``target = values[key]`` for each key, on the rows the guarded ``statement``
    (``update(table).where(guard)``) still matches: ``update_rows`` with one value a row."""
    update_rows(
        connection,
        {"k": key.type, "v": target.type},
        [{"k": one, "v": value} for one, value in values.items()],
        lambda row: statement.where(key == row["k"]).values({target: row["v"]}).returning(key),
    )


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def update_rows(
    connection: Connection,
    kinds: Mapping[str, TypeEngine[Any]],
    rows: Sequence[Mapping[str, Any]],
    statement: Callable[[Mapping[str, ColumnElement[Any]]], Update],
) -> list[Any]:
    """``statement(row)`` — a guarded ``UPDATE … RETURNING key`` written over one parameter
    row's columns (named, with their types, in ``kinds``) — applied to every row; the keys
    of the rows whose guard held. PostgreSQL applies them all in one statement joined to
    the rows (see ``_unnested``): the set-based fence, one statement whatever the rows;
    SQLite, in-process, once per row."""
    if not rows:
        return []
    if connection.dialect.name != "postgresql":
        row = {name: bindparam(f"r_{name}", type_=kind) for name, kind in kinds.items()}
        return update_each(
            connection,
            statement(row),
            [{f"r_{name}": values[name] for name in kinds} for values in rows],
        )
    columns, values = _unnested(kinds, rows)
    source = select(*(column.label(name) for name, column in columns.items())).subquery("v")
    result = connection.execute(statement({name: source.c[name] for name in kinds}), values)
    return list(result.scalars())


def minute_of(
    database: Database, column: ColumnElement[datetime]
) -> tuple[ColumnElement[Any], Callable[[Any], datetime]]:
    """The minute a stored time falls in, truncated by the database (so rows are grouped
    there, not fetched), and how to read that minute back as a UTC time."""
    if database.is_postgres:
        return func.date_trunc("minute", column), lambda value: value.astimezone(UTC)
    # SQLite keeps naive UTC text, "YYYY-MM-DD HH:MM:SS.ffffff": the minute is its head.
    return func.substr(column, 1, 16), lambda value: datetime.fromisoformat(value).replace(
        tzinfo=UTC
    )


def one_of(
    database: Database, column: ColumnElement[str], values: Sequence[str]
) -> ColumnElement[bool]:
    """``column IN values`` that an index on ``column`` can serve whatever the count: one
    array parameter on PostgreSQL; on SQLite, past its parameter cap, every row (no filter)."""
    if database.is_postgres:
        return column == any_(bindparam(None, list(values), type_=postgresql.ARRAY(String)))
    if len(values) > SQLITE_IN_LIMIT:
        return true()
    return column.in_(values)

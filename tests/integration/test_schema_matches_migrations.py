"""The migrations, run to their head, make exactly the schema ``store/schema.py`` declares,
on both stores: the repositories query what the migrations built.

Alembic's autogenerate comparison (what would write the next revision) must find nothing to
do: tables, columns, types, nullability, server defaults, indexes, unique constraints and
foreign keys. What it does not compare is checked by reflection: primary keys, descending
index columns, which columns autoincrement, and check constraints.

On PostgreSQL the history tables are partitioned by time (``store/history``), which the
declared schema does not say: their partitions, the guard tables holding runs' unique keys
and the foreign keys between history tables left out are the known differences, each
checked for what it is instead.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from pprint import pformat
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import (
    CheckConstraint,
    Column,
    Connection,
    Index,
    Inspector,
    Table,
    UnaryExpression,
    inspect,
)
from sqlalchemy.sql import operators

from herder.settings import sqlite_url
from herder.store import migrations
from herder.store.database import Database
from herder.store.history.conversion import FOREIGN_KEYS_BETWEEN_HISTORY_TABLES
from herder.store.history.guards import GUARD_TABLES, GUARDED_UNIQUE_KEYS
from herder.store.history.partitions import HISTORY_TABLES, PARTITION_NAME, SLICED_TABLES
from herder.store.schema import metadata
from tests.clones import admin_connection, database_url_named


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def migrated(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Database]:
    """An empty database brought to head by the migrations (not a copy of a template)."""
    if request.param == "sqlite":
        database = Database(sqlite_url(tmp_path_factory.mktemp("schema") / "herder.db"))
        database.migrate()
        yield database
        database.dispose()
        return
    request.getfixturevalue("postgres_template")  # reachable, or skipped as the others are
    name = f"herder_schema_{os.getpid()}"
    with admin_connection() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
        database = Database(database_url_named(name))
        try:
            database.migrate()
            yield database
        finally:
            database.dispose()
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_migrations_have_one_head() -> None:
    """Two revisions written from the same parent would leave the schema ambiguous."""
    heads = ScriptDirectory(str(Path(migrations.__file__).parent)).get_heads()
    assert len(heads) == 1, f"migrations branch: heads {heads}"


def test_autogenerate_finds_nothing_to_migrate(migrated: Database) -> None:
    with migrated.engine.connect() as connection:
        context = MigrationContext.configure(
            connection,
            opts={
                "compare_type": True,
                "compare_server_default": _same_server_default,
                "include_name": _declared_or_unknown,
            },
        )
        differences = compare_metadata(context, metadata)
    if migrated.dialect == "postgresql":
        differences = [found for found in differences if not _partitioning(found)]
    assert differences == [], pformat(differences)


@pytest.mark.parametrize(
    "migrated", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True
)  # SQLite keeps plain tables
def test_postgresql_guards_the_unique_keys_of_partitioned_runs(migrated: Database) -> None:
    """A unique key of ``runs`` cannot hold on a table partitioned by id: a guard table's
    primary key holds it, and a plain index of the same name serves the reads."""
    inspector = inspect(migrated.engine)
    plain = {index["name"] for index in inspector.get_indexes("runs") if not index["unique"]}
    assert set(GUARDED_UNIQUE_KEYS) <= plain
    assert set(GUARD_TABLES) <= set(inspector.get_table_names())
    partitioned = {table.name for table in SLICED_TABLES}
    assert partitioned <= _partitioned_tables(migrated)


def _declared_or_unknown(name: str | None, kind: str, parents: dict[str, Any]) -> bool:
    """Leave out the partitions and guard tables of partitioned history (PostgreSQL)."""
    if kind != "table" or name is None:
        return True
    return PARTITION_NAME.match(name) is None and name not in GUARD_TABLES


def _partitioning(difference: Any) -> bool:
    """A difference partitioned history makes on purpose (see the module's docstring)."""
    kind, subject = difference[0], difference[1]
    name = getattr(subject, "name", None)
    if kind == "add_fk":
        return name in FOREIGN_KEYS_BETWEEN_HISTORY_TABLES
    if kind in {"remove_index", "add_index", "add_constraint"}:
        columns = [column.name for column in getattr(subject, "columns", [])]
        return name in GUARDED_UNIQUE_KEYS or (
            kind == "add_constraint" and _guarded_columns(columns)
        )
    return False


def _guarded_columns(columns: list[str]) -> bool:
    """Alembic names an added unique constraint by its columns, not our convention."""
    return any(name.endswith("_" + "_".join(columns)) for name in GUARDED_UNIQUE_KEYS)


def _partitioned_tables(database: Database) -> set[str]:
    with database.engine.connect() as connection:
        rows = connection.exec_driver_sql(
            "SELECT relname FROM pg_class WHERE relkind = 'p'"
        ).scalars()
        return set(rows)


def test_primary_keys_are_the_declared_ones(migrated: Database) -> None:
    inspector = inspect(migrated.engine)
    partitioned = {table.name: list(table.primary_key) for table in HISTORY_TABLES}
    for table in metadata.sorted_tables:
        reflected = inspector.get_pk_constraint(table.name)
        declared = [column.name for column in table.primary_key.columns]
        if migrated.dialect == "postgresql":  # the slice key belongs in it
            declared = partitioned.get(table.name, declared)
        assert (reflected["name"], reflected["constrained_columns"]) == (
            table.primary_key.name,
            declared,
        ), table.name


def test_descending_index_columns_are_the_declared_ones(migrated: Database) -> None:
    with migrated.engine.connect() as connection:
        for table in metadata.sorted_tables:
            for index in table.indexes:
                reflected = _descending_columns(connection, table.name, str(index.name))
                assert reflected == _declared_descending(index), index.name


def test_autoincrementing_columns_are_the_declared_ones(migrated: Database) -> None:
    inspector = inspect(migrated.engine)
    declared = {
        f"{table.name}.{table.autoincrement_column.name}"
        for table in metadata.sorted_tables
        if table.autoincrement_column is not None
    }
    assert _autoincrementing(inspector, migrated.dialect) == declared


def test_check_constraints_are_the_declared_ones(migrated: Database) -> None:
    inspector = inspect(migrated.engine)
    for table in metadata.sorted_tables:
        reflected = {check["name"] for check in inspector.get_check_constraints(table.name)}
        assert reflected == {check.name for check in _checks(table)}, table.name


def _same_server_default(
    context: MigrationContext,
    inspected_column: Column[Any],
    metadata_column: Column[Any],
    inspected_default: str | None,
    metadata_default: object,
    rendered_metadata_default: str | None,
) -> bool | None:
    """Alembic's SQLite comparison unquotes defaults with ``'(.+)'``, so it sees ``''`` (an
    empty string) differ from itself; here an empty one unquotes too. ``None``: Alembic's."""
    if context.dialect.name != "sqlite":
        return None
    return _unquoted(inspected_default) != _unquoted(rendered_metadata_default)


def _unquoted(default: str | None) -> str | None:
    if default is None:
        return None
    return re.sub(r"^\"?'(.*)'\"?$", r"\1", re.sub(r"^\((.+)\)$", r"\1", default))


def _descending_columns(connection: Connection, table: str, index: str) -> list[str]:
    if connection.dialect.name == "sqlite":  # SQLite's reflection leaves direction out
        rows = connection.exec_driver_sql(f'PRAGMA index_xinfo("{index}")').all()
        return [row.name for row in rows if row.key and row.desc]
    (reflected,) = [found for found in inspect(connection).get_indexes(table)
                    if found["name"] == index]  # fmt: skip
    sorting: dict[str, tuple[str, ...]] = dict(reflected.get("column_sorting", {}))
    names = [str(name) for name in reflected["column_names"]]
    return [name for name in names if "desc" in sorting.get(name, ())]


def _declared_descending(index: Index) -> list[str]:
    return [
        str(getattr(expression.element, "name", expression.element))
        for expression in index.expressions
        if isinstance(expression, UnaryExpression) and expression.modifier is operators.desc_op
    ]


def _autoincrementing(inspector: Inspector, dialect: str) -> set[str]:
    """On PostgreSQL a serial or identity column; on SQLite an ``INTEGER PRIMARY KEY`` (the
    rowid), which is the only column SQLite numbers by itself."""
    found = set()
    for table in inspector.get_table_names():
        if table == "alembic_version" or not _declared_or_unknown(table, "table", {}):
            continue
        columns = inspector.get_columns(table)
        primary = inspector.get_pk_constraint(table)["constrained_columns"]
        for column in columns:
            if dialect == "postgresql":
                numbered = bool(column.get("autoincrement"))
            else:
                numbered = primary == [column["name"]] and str(column["type"]) == "INTEGER"
            if numbered:
                found.add(f"{table}.{column['name']}")
    return found


def _checks(table: Table) -> list[CheckConstraint]:
    return [
        constraint for constraint in table.constraints if isinstance(constraint, CheckConstraint)
    ]

"""Migration 0017 on PostgreSQL: ``attempts.stopped_by`` reaches every slice of attempts,
those attached through the partitioned table and one detached but not yet exported (the cold
tier's export reads a slice as the table's columns)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from alembic import command
from sqlalchemy import text

from herder.store.database import Database
from herder.store.history.partitions import HISTORY_TABLES, attached_slices, detach_slice
from herder.store.migrations import alembic_config
from tests.clones import admin_connection, database_url_named

pytestmark = pytest.mark.postgres
ATTEMPTS = next(table for table in HISTORY_TABLES if table.name == "attempts")


@pytest.fixture
def before_0017(postgres_template: str) -> Iterator[Database]:
    name = f"herder_stopped_by_migration_{os.getpid()}"
    with admin_connection() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    database = Database(database_url_named(name))
    command.upgrade(alembic_config(database), "0016")
    try:
        yield database
    finally:
        database.dispose()
        with admin_connection() as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _has_stopped_by(database: Database, table: str) -> bool:
    with database.read() as connection:
        found = connection.execute(
            text(
                "SELECT count(*) FROM information_schema.columns"
                " WHERE table_name = :table AND column_name = 'stopped_by'"
            ),
            {"table": table},
        ).scalar_one()
    return bool(found)


def test_every_slice_of_attempts_gets_the_column(before_0017: Database) -> None:
    with before_0017.write() as connection:
        detached, *attached = sorted(attached_slices(connection, ATTEMPTS))
        detach_slice(connection, ATTEMPTS, detached)
    before_0017.migrate()
    assert _has_stopped_by(before_0017, "attempts")
    assert _has_stopped_by(before_0017, ATTEMPTS.partition(detached))
    assert all(_has_stopped_by(before_0017, ATTEMPTS.partition(piece)) for piece in attached)

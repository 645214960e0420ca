"""Migration 0017 on PostgreSQL: ``attempts.stopped_by`` reaches every slice of attempts,
those attached through the partitioned table and one detached but not yet exported (the cold
tier's export reads a slice as the table's columns)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import text

from herder.store.database import Database
from herder.store.history.partitions import HISTORY_TABLES, attached_slices, detach_slice
from tests.clones import database_at_revision

pytestmark = pytest.mark.postgres
ATTEMPTS = next(table for table in HISTORY_TABLES if table.name == "attempts")


@pytest.fixture
def before_0017(postgres_template: str) -> Iterator[Database]:
    with database_at_revision("stopped_by_migration", "0016") as database:
        yield database


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

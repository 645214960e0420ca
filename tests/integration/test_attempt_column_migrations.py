"""Migrations adding a column to ``attempts`` on PostgreSQL (0017 ``stopped_by``, 0029
``preempt_reason``): the column reaches every slice of attempts, those attached through the
partitioned table and one detached but not yet exported (the cold tier's export reads a slice
as the table's columns)."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from herder.store.database import Database
from herder.store.history.partitions import HISTORY_TABLES, attached_slices, detach_slice
from tests.clones import database_at_revision

pytestmark = pytest.mark.postgres
ATTEMPTS = next(table for table in HISTORY_TABLES if table.name == "attempts")


def _has(database: Database, table: str, column: str) -> bool:
    with database.read() as connection:
        found = connection.execute(
            text(
                "SELECT count(*) FROM information_schema.columns"
                " WHERE table_name = :table AND column_name = :column"
            ),
            {"table": table, "column": column},
        ).scalar_one()
    return bool(found)


@pytest.mark.parametrize(("before", "column"), [("0016", "stopped_by"), ("0028", "preempt_reason")])
def test_every_slice_of_attempts_gets_the_column(
    postgres_template: str, before: str, column: str
) -> None:
    with database_at_revision(f"{column}_migration", before) as database:
        with database.write() as connection:
            detached, *attached = sorted(attached_slices(connection, ATTEMPTS))
            detach_slice(connection, ATTEMPTS, detached)
        assert not _has(database, "attempts", column)
        database.migrate()
        assert _has(database, "attempts", column)
        assert _has(database, ATTEMPTS.partition(detached), column)
        assert all(_has(database, ATTEMPTS.partition(piece), column) for piece in attached)

"""Migration 0018 on PostgreSQL: ``runs.suspend_requested`` and ``runs.suspensions`` reach
every slice of runs, those attached through the partitioned table and one detached but not
yet exported (the cold tier's export reads a slice as the table's columns)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import text

from herder.store.database import Database
from herder.store.history.partitions import HISTORY_TABLES, attached_slices, detach_slice
from tests.clones import database_at_revision

pytestmark = pytest.mark.postgres
RUNS = next(table for table in HISTORY_TABLES if table.name == "runs")


@pytest.fixture
def before_0018(postgres_template: str) -> Iterator[Database]:
    with database_at_revision("run_suspend_migration", "0017") as database:
        yield database


def _columns(database: Database, table: str) -> set[str]:
    with database.read() as connection:
        return set(
            connection.execute(
                text(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = :table"
                    " AND column_name IN ('suspend_requested', 'suspensions')"
                ),
                {"table": table},
            ).scalars()
        )


def test_every_slice_of_runs_gets_the_columns(before_0018: Database) -> None:
    with before_0018.write() as connection:
        detached, *attached = sorted(attached_slices(connection, RUNS))
        detach_slice(connection, RUNS, detached)
    before_0018.migrate()
    wanted = {"suspend_requested", "suspensions"}
    assert _columns(before_0018, "runs") == wanted
    assert _columns(before_0018, RUNS.partition(detached)) == wanted
    assert all(_columns(before_0018, RUNS.partition(piece)) == wanted for piece in attached)

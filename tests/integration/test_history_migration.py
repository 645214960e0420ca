"""Migration 0015 on a PostgreSQL database that already has history: the plain tables become
partitioned ones holding the same rows, each in its slice, and a fire or an idempotency key
taken before the migration is still taken after it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, text

from herder.clock import epoch_ms
from herder.domain.history import slice_of
from herder.domain.ids import new_id
from herder.store.database import Database
from herder.store.dialect import insert_rows_ignoring_duplicates
from herder.store.schema import runs
from tests.clones import database_at_revision

pytestmark = pytest.mark.postgres
MADE = datetime(2026, 6, 3, 9, 30, tzinfo=UTC)  # months before the migration runs


@pytest.fixture
def before_0015(postgres_template: str) -> Iterator[Database]:
    """A database at revision 0010 with one run of a schedule, its attempt, event and log."""
    with database_at_revision("history_migration", "0010") as database:
        with database.write() as connection:
            for statement in _HISTORY_BEFORE:
                connection.execute(text(statement), _IDS)
        yield database


_IDS = {
    "run": new_id("run", epoch_ms(MADE)),
    "attempt": new_id("att", epoch_ms(MADE + timedelta(seconds=1))),
    "made": MADE,
}
_HISTORY_BEFORE = [
    "INSERT INTO tenants (id, name, weight, is_system, quotas, created_at)"
    " VALUES ('ten_a', 'a', 1, false, '{}', :made)",
    "INSERT INTO runs (id, tenant_id, job_id, job_name, state, priority, spec, cpu_milli,"
    " memory_mb, gpus, idempotency_key, schedule_id, scheduled_for, created_at)"
    " VALUES (:run, 'ten_a', 'job_a', 'a', 'succeeded', 1, '{}', 1000, 256, 0, 'key-1',"
    " 'sch_a', :made, :made)",
    "INSERT INTO attempts (id, run_id, number, worker_id, state, cpu_milli, memory_mb, gpus,"
    " started_at) VALUES (:attempt, :run, 1, 'wrk_a', 'succeeded', 1000, 256, 0, :made)",
    "INSERT INTO run_events (run_id, at, actor, message) VALUES (:run, :made, 'test', 'made')",
    "INSERT INTO log_chunks (attempt_id, seq, stream, data, at)"
    " VALUES (:attempt, 0, 'stdout', 'hi', :made)",
]


def test_the_rows_move_into_their_slices_and_keep_their_unique_keys(
    before_0015: Database,
) -> None:
    before_0015.migrate()
    suffix = slice_of(MADE).suffix
    where = {
        "runs": ("id", _IDS["run"]),
        "attempts": ("run_id", _IDS["run"]),
        "run_events": ("run_id", _IDS["run"]),
        "log_chunks": ("attempt_id", _IDS["attempt"]),
    }
    with before_0015.write() as connection:
        for table, (column, value) in where.items():
            found = connection.execute(
                text(f"SELECT tableoid::regclass::text FROM {table} WHERE {column} = :value"),
                {"value": value},
            ).scalar_one()
            assert found == f"{table}_{suffix}"
        row = dict(connection.execute(select(runs)).one()._mapping)
        again = {**row, "id": new_id("run", epoch_ms(datetime.now(UTC)))}
        same_key = {**again, "schedule_id": None, "scheduled_for": None}
        same_fire = {**again, "idempotency_key": None}
        for repeat in (same_fire, same_key):
            assert insert_rows_ignoring_duplicates(connection, runs, [repeat], runs.c.id) == []

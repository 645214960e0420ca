"""A table that grew faster than autovacuum looks is analysed by the statistics loop, so the
planner stops taking a fresh history slice for an empty one (``store/statistics.py``)."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import text

from herder.store.statistics import FLOOR_ROWS, TableStatistics
from herder.store.store import Store


@pytest.fixture
def grown_table(store: Store) -> Store:
    if not store.database.is_postgres:
        pytest.skip("PostgreSQL's planner; SQLite keeps no statistics for it")
    with store.database.write() as connection:
        connection.execute(text("CREATE TABLE grown (n integer)"))
        connection.execute(text("ANALYZE grown"))  # counted empty, as a slice made ahead is
    return store


def test_a_table_that_grew_from_empty_is_analysed_and_planned_at_its_size(
    grown_table: Store,
) -> None:
    _grow(grown_table, 5 * FLOOR_ROWS)
    assert "grown" in TableStatistics(grown_table.database).refresh_stale()
    assert _planned_rows(grown_table) == 5 * FLOOR_ROWS
    assert _changes_since_analysed(grown_table) == 0


def test_changes_under_what_the_table_held_leave_it_to_autovacuum(grown_table: Store) -> None:
    statistics = TableStatistics(grown_table.database)
    _grow(grown_table, 5 * FLOOR_ROWS)
    statistics.refresh_stale()
    _grow(grown_table, FLOOR_ROWS // 2)  # a tenth of its rows: autovacuum's to judge
    assert "grown" not in statistics.refresh_stale()
    assert _changes_since_analysed(grown_table) == FLOOR_ROWS // 2


def _grow(store: Store, rows: int) -> None:
    """Insert ``rows`` and wait until the server's shared counters show them (each backend
    adds its counts there at commit, flushed at most once a second unless forced)."""
    before = _changes_since_analysed(store)
    with store.database.write() as connection:
        connection.execute(
            text("INSERT INTO grown SELECT generate_series(1, :rows)"), {"rows": rows}
        )
        connection.execute(text("SELECT pg_stat_force_next_flush()"))
    deadline = time.monotonic() + 10
    while _changes_since_analysed(store) < before + rows and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _changes_since_analysed(store) == before + rows


def _changes_since_analysed(store: Store) -> int:
    with store.database.read() as connection:
        return int(
            connection.execute(
                text("SELECT n_mod_since_analyze FROM pg_stat_user_tables WHERE relname = 'grown'")
            ).scalar_one()
        )


def _planned_rows(store: Store) -> int:
    with store.database.read() as connection:
        plan = connection.execute(text("EXPLAIN (FORMAT JSON) SELECT * FROM grown")).scalar_one()
    return int(plan[0]["Plan"]["Plan Rows"])

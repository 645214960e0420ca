"""The set-based helpers behave alike on both stores: a statement per batch, whatever its
size, with the same rows in the end."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Row, select, update

from herder.domain.states import RunState
from herder.store.dialect import SQLITE_IN_LIMIT, Among, insert_rows, set_each
from herder.store.schema import run_events, runs, tenants
from herder.store.store import Store

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def test_rows_inserted_in_bulk_are_found_by_their_ids_as_given(store: Store) -> None:
    rows = [
        {"id": f"ten_{index:04d}", "name": f"t{index}", "quotas": {"max_queued": index},
         "created_at": NOW}
        for index in range(SQLITE_IN_LIMIT + 5)
    ]  # fmt: skip
    with store.database.write() as connection:
        insert_rows(connection, tenants, rows)
        named = Among(connection.dialect.name, tenants.c.id, "ids")
        statement = select(tenants.c.id, tenants.c.quotas, tenants.c.created_at)
        found: list[Row[Any, Any, Any]] = []
        for params in named.batches([row["id"] for row in rows]):
            found += connection.execute(statement.where(named.condition), params).all()
    assert sorted(found) == [(row["id"], row["quotas"], NOW) for row in rows]


def test_values_with_quotes_commas_braces_and_backslashes_are_found_as_given(
    store: Store,
) -> None:
    """PostgreSQL reads the values as one array literal: each is quoted in it."""
    odd = ['a"b', "c,d", "{e}", "f\\g", "h i", "NULL", ""]
    rows = [{"id": value, "name": f"t{index}", "quotas": {}, "created_at": NOW}
            for index, value in enumerate([*odd, "plain"])]  # fmt: skip
    with store.database.write() as connection:
        insert_rows(connection, tenants, rows)
        named = Among(connection.dialect.name, tenants.c.id, "ids")
        (params,) = named.batches(odd)
        found = connection.execute(select(tenants.c.id).where(named.condition), params)
        assert sorted(found.scalars()) == sorted(odd)


def test_set_each_changes_only_the_rows_its_guard_still_matches(store: Store) -> None:
    tenant = store.access.create_tenant("acme")
    with store.database.write() as connection:
        insert_rows(
            connection,
            runs,
            [
                {"id": run_id, "tenant_id": tenant.id, "job_id": "job_1", "job_name": "j",
                 "state": state, "priority": 1, "spec": {}, "cpu_milli": 1, "memory_mb": 1,
                 "gpus": 0, "created_at": NOW}
                for run_id, state in (("run_1", RunState.QUEUED), ("run_2", RunState.RUNNING))
            ],
        )  # fmt: skip
        queued = update(runs).where(runs.c.state == RunState.QUEUED)
        set_each(connection, queued, runs.c.id, runs.c.waiting_reason, {"run_1": "a", "run_2": "b"})
        reasons = dict(connection.execute(select(runs.c.id, runs.c.waiting_reason)).all())
        insert_rows(connection, run_events, [])  # nothing to insert: no statement
    assert reasons == {"run_1": "a", "run_2": None}

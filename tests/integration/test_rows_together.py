"""Many rows in one statement (PostgreSQL: arrays through ``unnest``, a value shared by every
row sent once): each row is written, even when all are alike, and a duplicate key is
nothing."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import func, insert, select

from herder.app.submit import submit
from herder.domain.jobs import JobSpec
from herder.domain.overrides import RunOverrides
from herder.store.dialect import insert_rows, insert_rows_ignoring_duplicates
from herder.store.schema import blobs, run_events
from herder.store.store import Store


def test_rows_all_alike_are_each_written(store: Store) -> None:
    tenant = store.access.create_tenant("t").id
    job = store.jobs.create(tenant, "j", JobSpec(runtime="shell", command="true")).id
    run, _ = submit(store, tenant, job, RunOverrides())
    at = datetime(2026, 11, 21, tzinfo=UTC)
    row = {"run_id": run.id, "at": at, "actor": "test", "message": "the same line"}
    with store.database.write() as connection:
        insert_rows(connection, run_events, [row] * 3)
        written = connection.execute(
            select(func.count()).where(
                run_events.c.run_id == run.id, run_events.c.message == "the same line"
            )
        ).scalar_one()
    assert written == 3


def test_only_the_new_keys_are_inserted_and_returned(store: Store) -> None:
    with store.database.write() as connection:
        connection.execute(insert(blobs).values(sha256="a", size=1, data=b"old"))
        rows = [{"sha256": key, "size": 1, "data": b"new"} for key in ("a", "b", "c")]
        keys = insert_rows_ignoring_duplicates(connection, blobs, rows, blobs.c.sha256)
        stored = dict(connection.execute(select(blobs.c.sha256, blobs.c.data)).all())
    assert sorted(keys) == ["b", "c"]
    assert stored == {"a": b"old", "b": b"new", "c": b"new"}

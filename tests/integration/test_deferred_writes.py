"""A transaction's run events are written once, at its end, in one statement with its notices
(``database.deferred``): what a savepoint rolled back recorded is not written, what it kept is,
in the order recorded; and on PostgreSQL the events and the notices are one round trip."""

from __future__ import annotations

from herder.domain.lifecycle.changes import Event
from herder.store.runs.writes import record_events
from tests.integration.conftest import Api
from tests.integration.test_hand_off import SQLITE_BEGIN, statements_sent


def messages(api: Api, run_id: str) -> list[str]:
    response = api.http.get(f"/v1/runs/{run_id}/events", headers=api.admin)
    assert response.status_code == 200, response.text
    return [event["message"] for event in response.json()]


def test_what_a_savepoint_took_back_is_not_written_and_the_rest_is_in_order(api: Api) -> None:
    run_id = api.start_run(api.create_job()["id"])["id"]
    database = api.store.database
    now = api.store.clock.now()
    with database.write() as connection:
        record_events(connection, now, [Event(run_id, "before the savepoints", "test")])
        refused = connection.begin_nested()
        record_events(connection, now, [Event(run_id, "under a refused start", "test")])
        refused.rollback()
        kept = connection.begin_nested()
        record_events(connection, now, [Event(run_id, "under a kept start", "test")])
        kept.commit()
        record_events(connection, now, [Event(run_id, "after them", "test")])
    written = messages(api, run_id)[-3:]
    assert written == ["before the savepoints", "under a kept start", "after them"]


def test_events_and_notices_are_one_statement_at_the_end(api: Api) -> None:
    run_id = api.start_run(api.create_job()["id"])["id"]
    database = api.store.database
    now = api.store.clock.now()
    before = statements_sent()
    with database.write() as connection:
        for number in range(3):
            record_events(connection, now, [Event(run_id, f"event {number}", "test")])
        database.notify(connection, "herder_test", "three events")
    # the events in one insert, with the notice on PostgreSQL; the commit (and SQLite's BEGIN)
    begin = 0 if database.is_postgres else SQLITE_BEGIN
    assert statements_sent() - before == 2 + begin
    assert messages(api, run_id)[-3:] == ["event 0", "event 1", "event 2"]

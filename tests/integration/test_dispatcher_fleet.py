"""A dispatcher keeps the fleet between passes and reads again only the workers that changed:
it sees the room a completion freed as soon as it hears the notice, never over-commits a
worker on a stale view, and reads the whole fleet again every ``FLEET_REFRESH_SECONDS``.

A dispatcher on a second ``Store`` of the same database stands for one in another process
whose listener missed the notices."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import func, select, update

from herder.control.dispatcher import FLEET_REFRESH_SECONDS, Dispatcher
from herder.domain.states import AttemptState
from herder.store.schema import attempts, workers
from herder.store.store import Store
from tests.integration.conftest import Api
from tests.integration.registered import as_worker
from tests.integration.test_placement import register, run
from tests.integration.test_worker_protocol import completion, report


class Clocked:
    """A dispatcher on a clock the test moves."""

    def __init__(self, store: Store) -> None:
        self.now = 0.0
        self.dispatcher = Dispatcher(store.placement, monotonic=lambda: self.now)

    def step(self, after: float = 0.1) -> None:
        self.now += after
        self.dispatcher.step()


@pytest.fixture
def elsewhere(api: Api) -> Iterator[Store]:
    """The same database through a store of its own: it hears none of ``api``'s notices."""
    store = Store(api.store.database.url)
    yield store
    store.close()


def claimed(api: Api, worker_id: str) -> list[dict[str, Any]]:
    """The worker's claim, with no dispatcher pass of its own."""
    response = api.http.post(
        f"/v1/workers/{worker_id}/claim", headers=as_worker(worker_id), json={"max_runs": 10}
    )
    assert response.status_code == 200, response.text
    assignments: list[dict[str, Any]] = response.json()["assignments"]
    return assignments


def running_on(api: Api, worker_id: str) -> int:
    with api.store.database.read() as connection:
        count: int = connection.execute(
            select(func.count()).where(
                attempts.c.worker_id == worker_id, attempts.c.state == AttemptState.RUNNING
            )
        ).scalar_one()
    return count


def test_a_completion_heard_frees_its_room_for_the_next_pass(api: Api) -> None:
    worker = register(api, "w", capacity={"cpu": 1})
    job = api.create_job("job", resources={"cpu": 1})
    first, second = api.start_run(job["id"]), api.start_run(job["id"])
    dispatcher = Clocked(api.store)
    dispatcher.step()
    (assignment,) = claimed(api, worker)
    assert assignment["run_id"] == first["id"]
    report(api, worker, completions=[completion(assignment)])
    dispatcher.step()  # a quick pass, long before the fleet is read again
    assert run(api, second["id"])["state"] == "running"


def test_a_notice_missed_costs_at_most_a_fleet_refresh(api: Api, elsewhere: Store) -> None:
    worker = register(api, "w", capacity={"cpu": 1})
    job = api.create_job("job", resources={"cpu": 1})
    api.start_run(job["id"])
    second = api.start_run(job["id"])
    dispatcher = Clocked(elsewhere)
    dispatcher.step()
    (assignment,) = claimed(api, worker)
    report(api, worker, completions=[completion(assignment)])
    dispatcher.step()
    assert run(api, second["id"])["state"] == "queued"  # it still sees the worker full
    dispatcher.step(after=FLEET_REFRESH_SECONDS)
    assert run(api, second["id"])["state"] == "running"


def test_a_stale_view_never_over_commits_and_is_read_again(api: Api, elsewhere: Store) -> None:
    worker = register(api, "w", capacity={"cpu": 1})
    stale = Clocked(elsewhere)
    stale.step()  # sees the worker idle
    job = api.create_job("job", resources={"cpu": 1})
    api.start_run(job["id"])
    Clocked(api.store).step()  # another dispatcher fills the worker
    waiting = api.start_run(job["id"])
    stale.step()  # places it on the worker it thinks idle: the store skips the placement
    assert running_on(api, worker) == 1
    stale.step()  # and reads the whole fleet again
    assert running_on(api, worker) == 1
    assert "none has room for it now" in run(api, waiting["id"])["waiting_reason"]


def test_workers_read_again_are_as_a_fresh_snapshot_sees_them(api: Api) -> None:
    busy = register(api, "busy", capacity={"cpu": 2})
    gone = register(api, "gone", capacity={"cpu": 2})
    register(api, "idle", capacity={"cpu": 2})
    placement = api.store.placement
    before = placement.snapshot().workers
    api.start_run(api.create_job("job", resources={"cpu": 1})["id"])
    Clocked(api.store).step()
    with api.store.database.write() as connection:
        connection.execute(update(workers).where(workers.c.id == gone).values(state="lost"))
    again = placement.snapshot(fleet=before, changed={busy, gone}).workers
    assert again == placement.snapshot().workers
    assert [worker.id for worker in again if worker.running] == [busy]

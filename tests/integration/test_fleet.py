"""Draining a worker: nothing new is placed on it, what it runs finishes; and back.
Forgetting a lost one, by hand or after the retention."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from herder.app.retirement import retire
from herder.control.scheduler import Scheduler
from herder.domain.lifecycle.reap import shut_down
from herder.domain.models import Role, WorkerState
from herder.store.schema import attempts, workers
from tests.integration.conftest import Api
from tests.integration.dispatching import dispatch
from tests.integration.registered import as_worker, register_worker


def fleet_states(api: Api) -> dict[str, str]:
    listed = api.http.get("/v1/workers", headers=api.admin).json()
    return {item["id"]: item["state"] for item in listed}


def test_drain_then_undrain_moves_the_worker_and_says_so(api: Api) -> None:
    worker_id = register_worker(api)
    drained = api.http.post(f"/v1/workers/{worker_id}/drain", headers=api.admin)
    assert drained.status_code == 200, drained.text
    assert drained.json()["id"] == worker_id
    assert drained.json()["state"] == "draining"
    assert drained.json()["capacity"] == {"cpu": 2.0, "memory_mb": 2048, "gpus": 0}
    assert fleet_states(api) == {worker_id: "draining"}

    undrained = api.http.post(f"/v1/workers/{worker_id}/undrain", headers=api.admin)
    assert undrained.status_code == 200
    assert undrained.json()["state"] == "alive"
    assert fleet_states(api) == {worker_id: "alive"}


def test_a_draining_worker_still_speaks_the_protocol(api: Api) -> None:
    """Draining is not lost: the worker keeps heartbeating and reporting what it runs."""
    worker_id = register_worker(api)
    api.http.post(f"/v1/workers/{worker_id}/drain", headers=api.admin)
    heartbeat = api.http.post(
        f"/v1/workers/{worker_id}/heartbeat", headers=as_worker(worker_id), json={"running": []}
    )
    assert heartbeat.status_code == 200, heartbeat.text
    claim = api.http.post(
        f"/v1/workers/{worker_id}/claim",
        headers=as_worker(worker_id),
        json={"max_runs": 10, "wait_seconds": 0},
    )
    assert claim.status_code == 200, claim.text
    assert fleet_states(api) == {worker_id: "draining"}


@pytest.mark.parametrize("call", ["heartbeat", "claim"])
def test_a_worker_that_says_it_is_leaving_is_drained_and_given_nothing_new(
    api: Api, call: str
) -> None:
    """A worker stopping (SIGTERM) says so on its next call: placement skips it from then
    on, so it can finish what it runs; it never comes back to alive by itself."""
    leaving, staying = register_worker(api, "leaving"), register_worker(api, "staying")
    said = api.http.post(
        f"/v1/workers/{leaving}/{call}",
        headers=as_worker(leaving),
        json={"running": [], "leaving": True, **({"wait_seconds": 0} if call == "claim" else {})},
    )
    assert said.status_code == 200, said.text
    assert fleet_states(api) == {leaving: "draining", staying: "alive"}
    run = api.start_run(api.create_job()["id"])
    dispatch(api.store)
    with api.store.database.read() as connection:
        placed_on = connection.execute(
            select(attempts.c.worker_id).where(attempts.c.run_id == run["id"])
        ).scalar_one()
    assert placed_on == staying
    again = api.http.post(
        f"/v1/workers/{leaving}/heartbeat", headers=as_worker(leaving), json={"running": []}
    )
    assert again.status_code == 200
    assert fleet_states(api)[leaving] == "draining"


def test_drain_and_undrain_twice_change_nothing_more(api: Api) -> None:
    worker_id = register_worker(api)
    for _ in range(2):
        response = api.http.post(f"/v1/workers/{worker_id}/drain", headers=api.admin)
        assert response.json()["state"] == "draining"
    for _ in range(2):
        response = api.http.post(f"/v1/workers/{worker_id}/undrain", headers=api.admin)
        assert response.json()["state"] == "alive"


def lose(api: Api, worker_id: str) -> None:
    with api.store.database.write() as connection:
        connection.execute(
            update(workers).where(workers.c.id == worker_id).values(state=WorkerState.LOST)
        )


def test_a_lost_worker_cannot_be_drained_or_undrained(api: Api) -> None:
    worker_id = register_worker(api)
    lose(api, worker_id)
    for action in ("drain", "undrain"):
        response = api.http.post(f"/v1/workers/{worker_id}/{action}", headers=api.admin)
        assert response.status_code == 409
        assert response.headers["content-type"] == "application/problem+json"
        assert "is lost" in response.json()["detail"]
    assert fleet_states(api) == {worker_id: "lost"}


def test_an_unknown_worker_answers_404(api: Api) -> None:
    for action in ("drain", "undrain"):
        response = api.http.post(f"/v1/workers/wrk_missing/{action}", headers=api.admin)
        assert response.status_code == 404
        assert "wrk_missing" in response.json()["detail"]


def test_only_system_admins_drain(api: Api) -> None:
    worker_id = register_worker(api)
    tenant_admin = api.as_key(api.other_tenant_key(role=Role.ADMIN))
    system_developer = api.as_key(
        api.store.access.create_api_key(api.tenant_id, Role.DEVELOPER, "d")[1]
    )
    for headers in (tenant_admin, system_developer, api.worker, as_worker(worker_id)):
        response = api.http.post(f"/v1/workers/{worker_id}/drain", headers=headers)
        assert response.status_code == 403
    assert fleet_states(api) == {worker_id: "alive"}


def test_retiring_a_token_and_names_workers_ends_their_attempts_and_spares_the_rest(
    api: Api,
) -> None:
    """What ``herder up`` does at start to the local worker of its earlier start."""
    local, other = register_worker(api, "local"), register_worker(api, "other")
    for worker_id in (local, other):
        api.http.post(f"/v1/workers/{worker_id}/drain", headers=api.admin)
    job = api.create_job(retry={"max_attempts": 2, "initial_delay_seconds": 0})
    api.http.post(f"/v1/workers/{local}/undrain", headers=api.admin)
    run = api.start_run(job["id"])
    dispatch(api.store)
    claimed = api.http.post(
        f"/v1/workers/{local}/claim",
        headers=as_worker(local),
        json={"max_runs": 10, "wait_seconds": 0},
    ).json()["assignments"]
    assert [item["run_id"] for item in claimed] == [run["id"]]
    token_id = api.store.access.authenticate_worker_token(api.worker_token)

    assert retire(api.store, token_id, "local") == [local]
    assert fleet_states(api) == {other: "draining"}  # the retired one is forgotten
    detail = api.http.get(f"/v1/runs/{run['id']}", headers=api.admin).json()
    (attempt,) = detail["attempts"]
    assert attempt["state"] == "lost"
    assert attempt["worker_id"] == local  # the run still says where it ran
    assert "herder up started again" in attempt["reason"]
    assert detail["state"] in ("retry_wait", "queued")  # a lost attempt retries as any
    assert retire(api.store, token_id, "local") == []


def test_retiring_forgets_a_local_worker_already_lost(api: Api) -> None:
    """The ghosts earlier starts left lost go too: one local worker is listed after a start."""
    ghost, other = register_worker(api, "local"), register_worker(api, "other")
    lose(api, ghost)
    token_id = api.store.access.authenticate_worker_token(api.worker_token)

    assert retire(api.store, token_id, "local") == [ghost]
    assert fleet_states(api) == {other: "alive"}


def test_a_lost_worker_is_forgotten_and_the_fleet_no_longer_lists_it(api: Api) -> None:
    lost, alive = register_worker(api, "gone"), register_worker(api, "here")
    lose(api, lost)

    response = api.http.post(f"/v1/workers/{lost}/forget", headers=api.admin)
    assert response.status_code == 200, response.text
    assert response.json()["id"] == lost
    assert response.json()["state"] == "lost"
    assert fleet_states(api) == {alive: "alive"}
    again = api.http.post(f"/v1/workers/{lost}/forget", headers=api.admin)
    assert again.status_code == 404
    assert again.headers["content-type"] == "application/problem+json"


def test_an_alive_or_draining_worker_is_not_forgotten(api: Api) -> None:
    """Its agent still calls: forgotten, it would register anew as alive."""
    alive, draining = register_worker(api, "a"), register_worker(api, "d")
    api.http.post(f"/v1/workers/{draining}/drain", headers=api.admin)
    for worker_id, state in ((alive, "alive"), (draining, "draining")):
        response = api.http.post(f"/v1/workers/{worker_id}/forget", headers=api.admin)
        assert response.status_code == 409
        assert response.headers["content-type"] == "application/problem+json"
        assert f"is {state}" in response.json()["detail"]
    assert fleet_states(api) == {alive: "alive", draining: "draining"}


def test_only_system_admins_forget(api: Api) -> None:
    worker_id = register_worker(api)
    lose(api, worker_id)
    tenant_admin = api.as_key(api.other_tenant_key(role=Role.ADMIN))
    for headers in (tenant_admin, api.worker, as_worker(worker_id)):
        response = api.http.post(f"/v1/workers/{worker_id}/forget", headers=headers)
        assert response.status_code in (401, 403)
    assert fleet_states(api) == {worker_id: "lost"}


def test_lost_workers_are_forgotten_after_the_retention_and_not_before(api: Api) -> None:
    long_lost, lately_lost, alive = (register_worker(api, name) for name in ("x", "y", "z"))
    now = api.store.clock.now()
    with api.store.database.write() as connection:
        for worker_id, silent_for in ((long_lost, 25), (lately_lost, 23), (alive, 25)):
            connection.execute(
                update(workers)
                .where(workers.c.id == worker_id)
                .values(last_heartbeat_at=now - timedelta(hours=silent_for))
            )
    lose(api, long_lost)
    lose(api, lately_lost)

    assert api.store.fleet.forget_lost(timedelta(hours=24)) is False  # nothing more left
    assert fleet_states(api) == {lately_lost: "lost", alive: "alive"}


def test_herder_up_stopping_drains_its_worker_counts_its_runs_and_cancels_what_is_left(
    api: Api,
) -> None:
    """What ``herder up`` does as it stops: nothing more is placed on its worker; the runs
    its report did not end (here: one never delivered) end cancelled by the shutdown."""
    local, other = register_worker(api, "local"), register_worker(api, "other")
    api.http.post(f"/v1/workers/{other}/drain", headers=api.admin)
    job = api.create_job(retry={"max_attempts": 3, "initial_delay_seconds": 0})
    run = api.start_run(job["id"])
    dispatch(api.store)
    token_id = api.store.access.authenticate_worker_token(api.worker_token)

    assert api.store.workers.drain_named(token_id, "local") == 1
    assert fleet_states(api) == {local: "draining", other: "draining"}
    reason = "stopped: herder up was shut down"
    retired = retire(api.store, token_id, "local", lambda attempts: shut_down(attempts, reason))

    assert retired == [local]
    detail = api.http.get(f"/v1/runs/{run['id']}", headers=api.admin).json()
    assert detail["state"] == "cancelled"  # not lost, and not retried
    assert detail["reason"] == reason
    assert [attempt["state"] for attempt in detail["attempts"]] == ["cancelled"]


def test_the_scheduler_forgets_workers_lost_past_its_retention(api: Api) -> None:
    lost, lately = register_worker(api, "gone"), register_worker(api, "lately")
    with api.store.database.write() as connection:
        connection.execute(
            update(workers)
            .where(workers.c.id == lost)
            .values(last_heartbeat_at=api.store.clock.now() - timedelta(hours=2))
        )
    lose(api, lost)
    lose(api, lately)
    scheduler = Scheduler(
        api.store, heartbeat_timeout_seconds=10, lost_worker_retention_hours=1, listen=False
    )
    scheduler.start()
    try:
        deadline = time.monotonic() + 10
        while lost in fleet_states(api) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        scheduler.stop()
    assert fleet_states(api) == {lately: "lost"}

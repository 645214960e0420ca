"""Per-run priority (docs/flow-control.md#priority): a submit may set its run's class up to
its tenant's ``max_priority``; an operator moves a run not started yet to another class, which
changes what goes first but not its place in time; the events say who did it; a started run,
a class above the maximum or a viewer's key are refused with a problem that says why."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select

from herder.domain.models import Role
from herder.store.schema import runs
from tests.integration.conftest import Api, Herder
from tests.integration.dispatching import dispatch
from tests.integration.registered import register_worker
from tests.integration.test_pools import Tenant, fields, make_job


def queue_order(api: Api, tenant: Tenant) -> list[str]:
    response = api.http.get("/v1/queue", headers=tenant.headers)
    assert response.status_code == 200, response.text
    return [entry["run_id"] for entry in response.json()["items"]]


def prioritise(api: Api, tenant: Tenant, run_id: str, priority: str) -> Any:
    return api.http.post(
        f"/v1/runs/{run_id}/priority", headers=tenant.headers, json={"priority": priority}
    )


def job(api: Api, tenant: Tenant) -> str:
    body = {"name": "report", "runtime": "shell", "command": "true"}
    response = api.http.post("/v1/jobs", headers=tenant.headers, json=body)
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


def start(api: Api, tenant: Tenant, job_id: str, **body: Any) -> Any:
    return api.http.post(f"/v1/jobs/{job_id}/runs", headers=tenant.headers, json=body)


def test_a_submit_sets_its_runs_class_up_to_the_tenants_maximum(api: Api) -> None:
    acme = Tenant(api, "acme")
    report = job(api, acme)
    low = start(api, acme, report, priority="low").json()
    high = start(api, acme, report, priority="high").json()
    assert (low["spec"]["priority"], high["spec"]["priority"]) == ("low", "high")
    assert queue_order(api, acme) == [high["id"], low["id"]]
    api.store.access.update_tenant(acme.id, quota_changes={"max_priority": "medium"})
    assert fields(start(api, acme, report, priority="high")) == ["priority"]
    batch = {"runs": [{"job_id": report, "priority": "high"}, {"job_id": report}]}
    answers = api.http.post("/v1/runs/batch", headers=acme.headers, json=batch).json()["items"]
    assert [answer["status"] for answer in answers] == [422, 201]
    assert answers[0]["field"] == "runs.0.priority"


def test_a_rerun_takes_todays_maximum_not_the_class_its_run_asked_for_then(api: Api) -> None:
    """The tenant's ``max_priority`` was lowered after a run asked for ``high``: an operator's
    re-run (a dead letter's too) runs at the maximum, and its events say why. A job's own
    class is its developers' choice: a run of it re-runs at it."""
    acme = Tenant(api, "acme")
    operator = Tenant.__new__(Tenant)
    operator.id = acme.id
    operator.headers = api.as_key(api.store.access.create_api_key(acme.id, Role.OPERATOR, "o")[1])
    report = created_id(make_job(api, acme, "report", priority="low"))
    urgent = created_id(make_job(api, acme, "urgent", priority="high"))
    asked_high = start(api, acme, report, priority="high").json()["id"]
    as_defined = start(api, acme, urgent).json()["id"]
    for run_id in (asked_high, as_defined):
        api.http.post(f"/v1/runs/{run_id}/cancel", headers=acme.headers).raise_for_status()
    api.store.access.update_tenant(acme.id, quota_changes={"max_priority": "low"})
    rerun = api.http.post(f"/v1/runs/{asked_high}/rerun", headers=operator.headers)
    assert rerun.status_code == 201, rerun.text
    assert rerun.json()["spec"]["priority"] == "low"
    stored = api.http.get(f"/v1/runs/{rerun.json()['id']}", headers=acme.headers).json()
    assert stored["spec"]["priority"] == "low"
    with api.store.database.read() as connection:
        rank = connection.execute(
            select(runs.c.priority).where(runs.c.id == rerun.json()["id"])
        ).scalar_one()
    assert rank == 0  # what the claim orders by
    events = api.http.get(f"/v1/runs/{rerun.json()['id']}/events", headers=acme.headers).json()
    assert "at priority low (it ran at high" in events[0]["message"]
    again = api.http.post(f"/v1/runs/{as_defined}/rerun", headers=operator.headers)
    assert again.json()["spec"]["priority"] == "high"


def created_id(response: Any) -> str:
    assert response.status_code == 201, response.text
    job_id: str = response.json()["id"]
    return job_id


def test_an_operator_moves_a_waiting_run_ahead_keeping_its_place_in_time(api: Api) -> None:
    acme = Tenant(api, "acme")
    operator = Tenant.__new__(Tenant)
    operator.id = acme.id
    operator.headers = api.as_key(api.store.access.create_api_key(acme.id, Role.OPERATOR, "o")[1])
    report = job(api, acme)
    first, second = (start(api, acme, report).json()["id"] for _ in range(2))
    with api.store.database.read() as connection:
        queued_at = connection.execute(select(runs.c.queued_at).where(runs.c.id == second)).one()
    moved = prioritise(api, operator, second, "high")
    assert moved.status_code == 200, moved.text
    assert moved.json()["spec"]["priority"] == "high"
    assert queue_order(api, acme) == [second, first]
    with api.store.database.read() as connection:
        assert connection.execute(
            select(runs.c.queued_at, runs.c.priority).where(runs.c.id == second)
        ).one() == (queued_at[0], 2)
    events = api.http.get(f"/v1/runs/{second}/events", headers=acme.headers).json()
    (changed,) = [event for event in events if event["message"] == "priority medium → high"]
    assert changed["actor"].startswith("user:key_")
    assert prioritise(api, operator, second, "high").status_code == 200  # already: no event


def test_a_started_run_a_class_past_the_maximum_or_a_viewer_is_refused(api: Api) -> None:
    acme = Tenant(api, "acme")
    viewer = Tenant.__new__(Tenant)
    viewer.id = acme.id
    viewer.headers = api.as_key(api.store.access.create_api_key(acme.id, Role.VIEWER, "v")[1])
    register_worker(api, "w1")
    report = job(api, acme)
    running = start(api, acme, report).json()["id"]
    dispatch(api.store)
    waiting = start(api, acme, report).json()["id"]
    started = prioritise(api, acme, running, "high")
    assert started.status_code == 409
    assert "is running" in started.json()["detail"]
    api.store.access.update_tenant(acme.id, quota_changes={"max_priority": "low"})
    api.http.post(f"/v1/runs/{waiting}/suspend", headers=acme.headers).raise_for_status()
    assert fields(prioritise(api, acme, waiting, "medium")) == ["priority"]
    assert prioritise(api, viewer, waiting, "low").status_code == 403
    assert fields(prioritise(api, acme, waiting, "urgent")) == ["priority"]
    assert prioritise(api, acme, waiting, "low").status_code == 200


def test_the_cli_starts_a_run_in_a_class_and_moves_it(api: Api, herder: Herder) -> None:
    api.create_job("report", command="true")
    started = herder("run", "start", "report", "--priority", "low", "--json")
    assert started.exit_code == 0, started.output
    run_id = json.loads(started.output)["id"]
    moved = herder("run", "priority", run_id, "high")
    assert moved.exit_code == 0, (moved.output, moved.exception)
    assert "high priority" in moved.output


def test_a_schedule_or_a_task_cannot_choose_its_runs_class_or_start_time(api: Api) -> None:
    """Its runs start when it fires or is reached: a class chosen there would escape the
    tenant's ``max_priority``, a start time would be ignored."""
    acme = Tenant(api, "acme")
    report = job(api, acme)
    for overrides in ({"priority": "high"}, {"delay_seconds": 60},
                      {"run_at": "2030-01-01T00:00:00Z"}):  # fmt: skip
        schedule = {"job_id": report, "cron": "@daily", "overrides": overrides}
        made = api.http.post("/v1/schedules", headers=acme.headers, json=schedule)
        assert fields(made) == ["overrides"], made.text
        tasks = [{"name": "t", "job": "report", "overrides": overrides}]
        flow = api.http.post(
            "/v1/workflows", headers=acme.headers, json={"name": "w", "tasks": tasks}
        )
        assert fields(flow) == ["tasks.0.overrides"], flow.text

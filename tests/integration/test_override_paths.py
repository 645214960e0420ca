"""Every other way a run gets its environment obeys the rules of a one-off run's overrides
(issue 22, item 1), on both stores: a schedule's ``overrides`` and a backfill of it, a
workflow's parameters and its tasks' overrides. Checked against the job when they are
given (422 naming the field, nothing stored); a fire whose job changed since is an error
on the schedule, not a run."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from sqlalchemy import update

from herder.control.firer import Firer
from herder.domain.jobs import JobSpec
from herder.store.schedules import PARTITIONS
from herder.store.schema import jobs
from tests.integration.conftest import Api
from tests.integration.test_schedules import Firing, firing  # noqa: F401
from tests.integration.test_workflows import Fleet, fleet  # noqa: F401

REGION = {"name": "REGION", "enum": ["eu", "us"], "default": "eu"}


def secret_job(api: Api) -> dict[str, Any]:
    put = api.http.put("/v1/secrets/API_TOKEN", headers=api.admin, json={"value": "t0ken"})
    assert put.status_code == 201, put.text
    return api.create_job("uses", secrets={"API_TOKEN": "API_TOKEN"}, parameters=[REGION])


def field_of(response: Any) -> str:
    body = response.json()
    return str(body.get("field") or body["errors"][0]["field"])


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"env": {"API_TOKEN": "mine"}}, "overrides.env.API_TOKEN"),
        ({"env": {"PYTHONWARNINGS": "ignore::antigravity.x"}}, "overrides.env.PYTHONWARNINGS"),
        ({"env": {"REGION": "mars"}}, "overrides.env.REGION"),
        ({"params": {"REGION": "mars"}}, "overrides.params.REGION"),
        ({"params": {"NOPE": "1"}}, "overrides.params.NOPE"),
    ],
)
def test_a_schedules_overrides_are_checked_against_its_job(
    api: Api, overrides: dict[str, Any], field: str
) -> None:
    job = secret_job(api)
    body = {"job_id": job["id"], "cron": "@daily", "overrides": overrides}
    created = api.http.post("/v1/schedules", headers=api.admin, json=body)
    assert created.status_code == 422, created.text
    assert field_of(created) == field
    assert api.http.get("/v1/schedules", headers=api.admin).json()["items"] == []
    good = {"job_id": job["id"], "cron": "@daily", "overrides": {"params": {"REGION": "us"}}}
    schedule = api.http.post("/v1/schedules", headers=api.admin, json=good)
    assert schedule.status_code == 201, schedule.text
    changed = api.http.patch(
        f"/v1/schedules/{schedule.json()['id']}", headers=api.admin, json={"overrides": overrides}
    )
    assert changed.status_code == 422, changed.text
    assert field_of(changed) == field
    kept = api.http.get(f"/v1/schedules/{schedule.json()['id']}", headers=api.admin).json()
    assert kept["spec"]["overrides"]["params"] == {"REGION": "us"}


def test_a_fire_whose_job_no_longer_fits_its_overrides_is_an_error_not_a_run(
    firing: Firing,  # noqa: F811
) -> None:
    store = firing.store
    declared = JobSpec.model_validate(
        {"runtime": "shell", "command": "true", "parameters": [REGION]}
    )
    world = replace(firing, job_id=store.jobs.create(firing.tenant_id, "regional", declared).id)
    schedule = world.schedule(overrides={"params": {"REGION": "us"}})
    narrowed = declared.model_dump(mode="json") | {"parameters": [{**REGION, "enum": ["eu"]}]}
    with store.database.write() as connection:  # changed since: by an older API, say
        connection.execute(update(jobs).where(jobs.c.id == world.job_id).values(spec=narrowed))
    world.clock.advance(60)
    for partition in range(PARTITIONS):
        Firer(store, world.clock, partition).step()
    assert world.runs(schedule) == []
    (event,) = store.schedules.events(world.tenant_id, schedule)
    assert event.kind == "error"
    assert 'parameter REGION: expected one of "eu"' in event.message
    assert store.schedules.get(world.tenant_id, schedule).next_fire_at is not None


def test_a_backfill_of_a_schedule_whose_overrides_no_longer_fit_is_refused(api: Api) -> None:
    job = api.create_job("regional", parameters=[REGION])
    body = {"job_id": job["id"], "cron": "@daily", "overrides": {"params": {"REGION": "us"}}}
    schedule = api.http.post("/v1/schedules", headers=api.admin, json=body).json()
    narrowed = api.http.patch(
        f"/v1/jobs/{job['id']}",
        headers=api.admin,
        json={"parameters": [{**REGION, "enum": ["eu"]}]},
    )
    assert narrowed.status_code == 200, narrowed.text
    backfill = api.http.post(
        f"/v1/schedules/{schedule['id']}/backfills",
        headers=api.admin,
        json={"start": "2026-01-01T00:00:00Z", "end": "2026-01-03T00:00:00Z"},
    )
    assert backfill.status_code == 422, backfill.text
    assert field_of(backfill) == "overrides.params.REGION"
    listed = api.http.get(f"/v1/schedules/{schedule['id']}/backfills", headers=api.admin)
    assert listed.json()["items"] == []
    assert api.http.get("/v1/runs", headers=api.admin).json()["items"] == []


def workflow_of(api: Api, **body: Any) -> str:
    tasks = body.pop("tasks", [{"name": "t", "job": "uses"}])
    response = api.http.post(
        "/v1/workflows", headers=api.admin, json={"name": "flow", "tasks": tasks, **body}
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


@pytest.mark.parametrize(
    ("declared", "given", "field"),
    [
        ({"API_TOKEN": "x"}, {}, "params.API_TOKEN"),  # a secret's variable
        ({"PYTHONPATH": "/x"}, {}, "params.PYTHONPATH"),  # its job does not set it
        ({"REGION": "eu"}, {"REGION": "mars"}, "params.REGION"),  # the job's own parameter
        ({"REGION": "eu"}, {"REGION": 1}, "params.REGION"),
    ],
)
def test_a_workflows_parameters_obey_its_jobs(
    api: Api, declared: dict[str, Any], given: dict[str, Any], field: str
) -> None:
    secret_job(api)
    flow = workflow_of(api, params=declared)
    started = api.http.post(f"/v1/workflows/{flow}/runs", headers=api.admin, json={"params": given})
    assert started.status_code == 422, started.text
    assert field_of(started) == field
    assert api.http.get("/v1/workflow-runs", headers=api.admin).json()["items"] == []
    assert api.http.get("/v1/runs", headers=api.admin).json()["items"] == []


def test_a_tasks_overrides_obey_its_job(api: Api) -> None:
    secret_job(api)
    tasks = [{"name": "t", "job": "uses", "overrides": {"env": {"LD_PRELOAD": "/x.so"}}}]
    flow = workflow_of(api, tasks=tasks)
    started = api.http.post(f"/v1/workflows/{flow}/runs", headers=api.admin, json={})
    assert started.status_code == 422, started.text
    assert field_of(started) == "tasks.0.overrides.env.LD_PRELOAD"


def test_a_workflow_parameter_the_job_declares_reaches_it_checked(
    api: Api,
    fleet: Fleet,  # noqa: F811
) -> None:
    secret_job(api)
    flow = workflow_of(api, params={"REGION": "eu", "DAY": "2026-11-27"})
    started = api.http.post(
        f"/v1/workflows/{flow}/runs", headers=api.admin, json={"params": {"REGION": "us"}}
    )
    assert started.status_code == 201, started.text
    (assignment,) = fleet.held.values() if fleet.claim() else []
    assert assignment["spec"]["env"] == {"REGION": "us", "DAY": "2026-11-27"}

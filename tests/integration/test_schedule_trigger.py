"""``POST /v1/schedules/{id}/trigger``: a schedule fired by hand, now — a run of its job or
workflow that carries the schedule and the moment, under its concurrency policy, paused or
not, its next fire untouched; an operator's, and only within the caller's tenant."""

from __future__ import annotations

from typing import Any

from herder.domain.models import Role
from herder.domain.workflows.spec import WorkflowSpec
from tests.integration.conftest import Api, Herder


def schedule(api: Api, **body: object) -> dict[str, Any]:
    if "workflow_id" not in body and "job_id" not in body:
        body["job_id"] = api.create_job("nightly")["id"]
    response = api.http.post("/v1/schedules", headers=api.admin, json={"cron": "0 3 * * *", **body})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def trigger(api: Api, schedule_id: str, headers: dict[str, str] | None = None) -> Any:
    return api.http.post(f"/v1/schedules/{schedule_id}/trigger", headers=headers or api.admin)


def test_a_trigger_starts_the_jobs_run_as_a_fire_of_the_schedule_now(api: Api) -> None:
    made = schedule(api, overrides={"args": ["from-schedule"]})
    response = trigger(api, made["id"])
    assert response.status_code == 201, response.text
    fired = response.json()
    run = api.http.get(f"/v1/runs/{fired['run_id']}", headers=api.admin).json()
    assert run["schedule_id"] == made["id"]
    assert run["scheduled_for"] == fired["scheduled_for"]
    assert run["spec"]["args"] == ["from-schedule"]  # the schedule's overrides, as a fire's
    after = api.http.get(f"/v1/schedules/{made['id']}", headers=api.admin).json()
    assert after["next_fire_at"] == made["next_fire_at"]  # its cron fires stay as they were
    assert after["fired_count"] == 1
    events = api.http.get(f"/v1/schedules/{made['id']}/events", headers=api.admin).json()
    assert [(event["kind"], event["run_id"]) for event in events] == [
        ("triggered", fired["run_id"])
    ]
    listed = api.http.get("/v1/runs", headers=api.admin, params={"schedule_id": made["id"]})
    assert [one["id"] for one in listed.json()["items"]] == [fired["run_id"]]


def test_a_paused_schedule_can_still_be_fired_by_hand_and_stays_paused(api: Api) -> None:
    made = schedule(api, paused=True)
    response = trigger(api, made["id"])
    assert response.status_code == 201, response.text
    after = api.http.get(f"/v1/schedules/{made['id']}", headers=api.admin).json()
    assert after["paused"] is True
    assert after["next_fire_at"] is None


def test_forbid_refuses_a_trigger_while_its_run_is_active_and_replace_replaces_it(
    api: Api,
) -> None:
    forbidding = schedule(api, concurrency_policy="forbid")
    first = trigger(api, forbidding["id"]).json()["run_id"]
    refused = trigger(api, forbidding["id"])
    assert refused.status_code == 409
    assert f"its run {first} is still queued" in refused.json()["detail"]
    assert (
        api.http.get(f"/v1/schedules/{forbidding['id']}", headers=api.admin).json()["fired_count"]
        == 1
    )

    replacing = schedule(api, job_id=forbidding["job_id"], concurrency_policy="replace")
    old = trigger(api, replacing["id"]).json()["run_id"]
    new = trigger(api, replacing["id"])
    assert new.status_code == 201, new.text
    assert api.http.get(f"/v1/runs/{old}", headers=api.admin).json()["state"] == "cancelled"


def test_a_workflow_schedule_starts_a_workflow_run(api: Api) -> None:
    api.create_job("step")
    spec = WorkflowSpec.model_validate({"tasks": [{"name": "a", "job": "step"}]})
    workflow_id = api.store.workflows.create(api.tenant_id, "flow", spec).id
    made = schedule(api, workflow_id=workflow_id, concurrency_policy="forbid")
    fired = trigger(api, made["id"])
    assert fired.status_code == 201, fired.text
    run_id = fired.json()["workflow_run_id"]
    run = api.http.get(f"/v1/workflow-runs/{run_id}", headers=api.admin).json()
    assert run["schedule_id"] == made["id"]
    again = trigger(api, made["id"])
    assert again.status_code == 409
    assert run_id in again.json()["detail"]

    replacing = schedule(api, workflow_id=workflow_id, concurrency_policy="replace")
    old = trigger(api, replacing["id"]).json()["workflow_run_id"]
    new = trigger(api, replacing["id"])
    assert new.status_code == 201, new.text
    replaced = api.http.get(f"/v1/workflow-runs/{old}", headers=api.admin).json()
    assert replaced["state"] == "cancelled" or replaced["cancel_requested"]


def test_only_an_operator_of_the_schedules_tenant_may_trigger_it(api: Api) -> None:
    made = schedule(api)
    viewer = api.store.access.create_api_key(api.tenant_id, Role.VIEWER, "ro")[1]
    refused = trigger(api, made["id"], api.as_key(viewer))
    assert refused.status_code == 403
    stranger = trigger(api, made["id"], api.as_key(api.other_tenant_key()))
    assert stranger.status_code == 404
    for unknown in ("sch_nosuchschedule", "sch_" + "x" * 5000, "%00", "run_01M8H6Q3P14PFE5XP2"):
        assert trigger(api, unknown).status_code in (404, 422), unknown  # never a 500
    operator = api.store.access.create_api_key(api.tenant_id, Role.OPERATOR, "ops")[1]
    assert trigger(api, made["id"], api.as_key(operator)).status_code == 201
    runs = api.http.get("/v1/runs", headers=api.admin, params={"schedule_id": made["id"]})
    assert len(runs.json()["items"]) == 1  # the refused ones made nothing


def test_the_cli_triggers_a_schedule_by_the_start_of_its_id(api: Api, herder: Herder) -> None:
    made = schedule(api)
    result = herder("schedule", "trigger", made["id"][:14])
    assert result.exit_code == 0, result.output
    assert "fired" in result.output
    quiet = herder("schedule", "trigger", made["id"], "-q")
    assert quiet.exit_code == 0, quiet.output
    assert quiet.output.strip().startswith("run_")

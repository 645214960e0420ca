"""Workflow tasks that wait (docs/events.md#waiting-tasks): an approval waits — holding no
worker — for an operator's decision, which the workflow branches on; a wait ends at its time,
on its event, or by its timeout as ``on_timeout`` says; all of it is rows, so it survives a
restart; another tenant cannot decide, a viewer may not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import update

from herder.app.workflows import decide_approval
from herder.app.workflows import start as start_workflow_run
from herder.control.starter import Starter
from herder.domain.alerts.rules import IncidentState, RuleKind
from herder.domain.jobs import JobSpec
from herder.domain.models import Role
from herder.domain.workflows.spec import WorkflowSpec
from herder.store.schema import runs
from tests.integration.conftest import Api
from tests.integration.test_alert_deliveries import World, world
from tests.integration.test_workflows import Fleet, detail, fleet, run_of, start, states, workflow

__all__ = ["fleet", "world"]  # the fixtures, used by name

PUBLISH = [
    {"name": "train", "job": "work"},
    {"name": "review", "approval": {"message": "publish the model?"}, "depends_on": ["train"]},
    {"name": "publish", "job": "work", "depends_on": ["review"]},
    {"name": "discard", "job": "work", "depends_on": ["review"], "trigger_rule": "all_failed"},
]


def decide(api: Api, run_id: str, task: str, verb: str, headers: Any = None, **body: Any) -> Any:
    return api.http.post(
        f"/v1/workflow-runs/{run_id}/tasks/{task}/{verb}", headers=headers or api.admin, json=body
    )


def time_passes(api: Api, *run_ids: str) -> None:
    """As if the waiting runs' time had come, then the starter's pass."""
    past = datetime.now(UTC) - timedelta(seconds=1)
    with api.store.database.write() as connection:
        connection.execute(update(runs).where(runs.c.id.in_(run_ids)).values(run_at=past))
    Starter(api.store).step()


def test_an_approval_holds_no_worker_and_approving_goes_on(api: Api, fleet: Fleet) -> None:
    flow = workflow(api, tasks=PUBLISH)
    run = start(api, flow["id"])
    fleet.end(next(iter(fleet.claim())))
    assert states(api, run["id"])["review"] == "waiting"
    assert fleet.claim() == set()  # nothing to run: the approval holds no worker
    early = decide(api, run["id"], "publish", "approve")
    assert early.status_code == 422, early.text  # publish runs a job: nothing to approve
    approved = decide(api, run["id"], "review", "approve", comment="metrics look good")
    assert approved.status_code == 200, approved.text
    assert {t["task"]: t["state"] for t in approved.json()["tasks"]} == {
        "train": "succeeded", "review": "succeeded", "publish": "queued", "discard": "skipped",
    }  # fmt: skip
    review = api.http.get(f"/v1/runs/{run_of(api, run['id'], 'review')}", headers=api.admin)
    output = review.json()["output"]
    assert output["decision"] == "approved"
    assert output["comment"] == "metrics look good"
    assert output["by"].startswith("user:")
    again = decide(api, run["id"], "review", "reject")
    assert again.status_code == 409, again.text
    assert "succeeded, not waiting" in again.json()["detail"]
    fleet.end(next(iter(fleet.claim())))
    assert detail(api, run["id"])["state"] == "succeeded"
    assert states(api, run["id"])["discard"] == "skipped"


def test_a_rejection_fails_the_approval_and_branches_to_the_clean_up(
    api: Api, fleet: Fleet
) -> None:
    run = start(api, workflow(api, tasks=PUBLISH)["id"])
    fleet.end(next(iter(fleet.claim())))
    rejected = decide(api, run["id"], "review", "reject", comment="accuracy dropped")
    assert rejected.status_code == 200, rejected.text
    assert states(api, run["id"]) == {
        "train": "succeeded", "review": "failed", "publish": "upstream_failed", "discard": "queued",
    }  # fmt: skip
    review = api.http.get(f"/v1/runs/{run_of(api, run['id'], 'review')}", headers=api.admin)
    assert review.json()["output"]["decision"] == "rejected"
    assert "rejected by user:" in review.json()["reason"]


def test_only_an_operator_of_the_tenant_decides(api: Api, fleet: Fleet) -> None:
    run = start(api, workflow(api, tasks=PUBLISH)["id"])
    fleet.end(next(iter(fleet.claim())))
    viewer = api.as_key(api.store.access.create_api_key(api.tenant_id, Role.VIEWER, "v")[1])
    assert decide(api, run["id"], "review", "approve", viewer).status_code == 403
    other = api.as_key(api.other_tenant_key("intruder"))
    assert decide(api, run["id"], "review", "approve", other).status_code == 404
    assert decide(api, run["id"], "nope", "approve").status_code == 404
    assert decide(api, run["id"], "review", "approve", comment="x" * 1001).status_code == 422
    assert states(api, run["id"])["review"] == "waiting"
    operator = api.as_key(api.store.access.create_api_key(api.tenant_id, Role.OPERATOR, "o")[1])
    assert decide(api, run["id"], "review", "approve", operator).status_code == 200


def test_an_unanswered_approval_times_out_as_on_timeout_says(api: Api, fleet: Fleet) -> None:
    tasks = [
        {"name": "review", "approval": {"timeout_seconds": 3600, "on_timeout": "approve"}},
        {"name": "publish", "job": "work", "depends_on": ["review"]},
    ]
    run = start(api, workflow(api, tasks=tasks)["id"])
    review = run_of(api, run["id"], "review")
    waiting = api.http.get(f"/v1/runs/{review}", headers=api.admin).json()
    assert waiting["state"] == "waiting"
    assert waiting["run_at"] is not None
    time_passes(api, review)
    assert states(api, run["id"]) == {"review": "succeeded", "publish": "queued"}
    ended = api.http.get(f"/v1/runs/{review}", headers=api.admin).json()
    assert ended["output"]["decision"] == "approved"
    assert ended["output"]["by"] == "waiter"


def test_a_timed_wait_ends_at_its_time_and_a_cancel_ends_a_waiting_task(
    api: Api, fleet: Fleet
) -> None:
    tasks = [
        {"name": "cool-down", "wait": {"seconds": 600}},
        {"name": "after", "job": "work", "depends_on": ["cool-down"]},
    ]
    flow = workflow(api, tasks=tasks)
    run = start(api, flow["id"])
    Starter(api.store).step()  # not yet: nothing moves
    assert states(api, run["id"])["cool-down"] == "waiting"
    time_passes(api, run_of(api, run["id"], "cool-down"))
    assert states(api, run["id"]) == {"cool-down": "succeeded", "after": "queued"}
    second = start(api, flow["id"])
    cancelled = api.http.post(f"/v1/workflow-runs/{second['id']}/cancel", headers=api.admin)
    assert cancelled.status_code == 200, cancelled.text
    assert detail(api, second["id"])["state"] == "cancelled"
    assert states(api, second["id"])["cool-down"] == "cancelled"


def test_an_event_wait_ends_on_the_matching_event_with_it_as_output(api: Api, fleet: Fleet) -> None:
    tasks = [
        {"name": "data", "wait": {"event": {"name": "dataset.ready",
                                            "filter": "payload.table == 'sales'"},
                                  "timeout_seconds": 86400}},
        {"name": "load", "job": "work", "depends_on": ["data"]},
    ]  # fmt: skip
    run = start(api, workflow(api, tasks=tasks)["id"])
    other = api.http.post(
        "/v1/events", headers=api.admin, json={"name": "dataset.ready", "payload": {"table": "hr"}}
    ).json()["event"]
    assert other["resumed"] == []
    assert states(api, run["id"])["data"] == "waiting"
    sent = api.http.post(
        "/v1/events", headers=api.admin,
        json={"name": "dataset.ready", "payload": {"table": "sales", "rows": 12}},
    ).json()["event"]  # fmt: skip
    data = run_of(api, run["id"], "data")
    assert sent["resumed"] == [data]
    assert states(api, run["id"]) == {"data": "succeeded", "load": "queued"}
    output = api.http.get(f"/v1/runs/{data}", headers=api.admin).json()["output"]
    assert output == {"event_id": sent["id"], "name": "dataset.ready",
                      "payload": {"table": "sales", "rows": 12}}  # fmt: skip
    intruder = api.as_key(api.other_tenant_key("intruder"))
    second = start(api, workflow(api, name="again", tasks=tasks)["id"])
    api.http.post("/v1/events", headers=intruder,
                  json={"name": "dataset.ready", "payload": {"table": "sales"}})  # fmt: skip
    assert states(api, second["id"])["data"] == "waiting"  # another tenant's event ends nothing


def test_an_event_wait_times_out_as_on_timeout_says(api: Api, fleet: Fleet) -> None:
    tasks = [
        {"name": "data", "wait": {"event": {"name": "ready"}, "timeout_seconds": 60,
                                  "on_timeout": "skip"}},
        {"name": "load", "job": "work", "depends_on": ["data"]},
    ]  # fmt: skip
    run = start(api, workflow(api, tasks=tasks)["id"])
    time_passes(api, run_of(api, run["id"], "data"))
    assert states(api, run["id"]) == {"data": "skipped", "load": "skipped"}
    assert detail(api, run["id"])["state"] == "succeeded"


def test_a_wait_task_that_would_run_something_is_refused_naming_the_field(
    api: Api, fleet: Fleet
) -> None:
    cases: list[dict[str, Any]] = [
        {"name": "w", "wait": {"seconds": 5}, "job": "work"},
        {"name": "w", "wait": {"seconds": 5}, "map_over": "params.x"},
        {"name": "w", "wait": {"seconds": 5, "until": "2030-01-01T00:00:00Z"}},
        {"name": "w", "wait": {"until": "tomorrow"}},
        {"name": "w", "wait": {"seconds": 5, "timeout_seconds": 9}},
        {"name": "w", "wait": {"event": {"name": "e", "filter": "payload.a ="}}},
        {"name": "w", "approval": {"timeout_seconds": 0}},
    ]
    for task in cases:
        response = api.http.post(
            "/v1/workflows", headers=api.admin, json={"name": "bad", "tasks": [task]}
        )
        assert response.status_code == 422, (task, response.text)
        assert response.json()["errors"][0]["field"].startswith("tasks.0"), response.json()
    flow = workflow(
        api, params={"at": "soon"}, tasks=[{"name": "w", "wait": {"until": "params.at"}}]
    )
    refused = api.http.post(f"/v1/workflows/{flow['id']}/runs", headers=api.admin, json={})
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["field"] == "tasks.0.wait.until"


def test_an_approval_waiting_past_after_seconds_opens_an_incident_until_decided(
    world: World,
) -> None:
    store = world.store
    channel_id, _ = world.channel()
    world.store.jobs.create(
        world.tenant_id, "ship", JobSpec.model_validate({"runtime": "shell", "command": "true"})
    )
    tasks = [
        {"name": "review", "approval": {}},
        {"name": "ship", "job": "ship", "depends_on": ["review"]},
    ]
    workflow = store.workflows.create(
        world.tenant_id, "release", WorkflowSpec.model_validate({"tasks": tasks})
    )
    world.rule(channel_id, RuleKind.APPROVAL_WAITING, after_seconds=600)
    run, _ = start_workflow_run(store, world.tenant_id, workflow.id, {})
    world.evaluator.step()
    assert world.incidents() == []  # not waited long enough yet
    world.clock.advance(601)
    world.evaluator.step()
    [(key, state)] = world.incidents()
    assert state is IncidentState.OPEN
    (incident,) = store.alert_history.incidents(world.tenant_id).items
    assert incident.summary == (
        f"workflow run {run.id} of release waits for a decision on task review (10 min): "
        "approve or reject it"
    )
    decide_approval(
        store, world.tenant_id, run.id, "review", approved=True, actor="user:k", comment=None
    )
    world.evaluator.step()
    assert world.incidents() == [(key, IncidentState.RESOLVED)]

"""Suspending and resuming a workflow run through the API, with a worker driven by hand:
its task runs are suspended with it, nothing starts while it is suspended — even when a task
ends meanwhile — and a resume starts what became ready and runs it to its end."""

from __future__ import annotations

from typing import Any

import pytest

from herder.client import ApiError
from herder.domain.models import Role
from tests.integration.conftest import Api, Herder
from tests.integration.registered import register_worker
from tests.integration.test_worker_protocol import claim
from tests.integration.test_workflows import Fleet, detail, job, run_of, start, states, workflow

# a and b start with the run (b at low priority: placed after a), c after a; the worker has
# room for one task at a time
TASKS = [
    {"name": "a", "job": "work"},
    {"name": "b", "job": "later"},
    {"name": "c", "job": "work", "depends_on": ["a"]},
]


class OneAtATime(Fleet):
    """A worker with room for one task's run (a core)."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.worker_id = register_worker(api, cpu=1, memory_mb=65536)
        self.held: dict[str, dict[str, Any]] = {}


@pytest.fixture
def fleet(api: Api) -> OneAtATime:
    job(api, "work")
    api.create_job("later", retry={"max_attempts": 1}, priority="low")
    return OneAtATime(api)


def act(api: Api, workflow_run_id: str, action: str, headers: dict[str, str] | None = None) -> Any:
    return api.http.post(
        f"/v1/workflow-runs/{workflow_run_id}/{action}", headers=headers or api.admin
    )


def suspended_with_a_running(api: Api, fleet: OneAtATime) -> str:
    """A running workflow run, a running and b queued, just suspended."""
    run = start(api, workflow(api, tasks=TASKS)["id"])
    assert fleet.claim() == {run_of(api, run["id"], "a")}
    assert states(api, run["id"]) == {"a": "running", "b": "queued", "c": "pending"}
    response = act(api, run["id"], "suspend")
    assert response.status_code == 200, response.text
    assert response.json()["state"] == "suspended"
    return str(run["id"])


def stops(api: Api, fleet: OneAtATime) -> list[str]:
    answer = claim(api, fleet.worker_id)
    assert answer["assignments"] == []  # nothing starts while suspended
    return [*answer["preempt"], *answer["cancel"]]


def test_a_task_ending_while_suspended_starts_nothing_until_resumed(
    api: Api, fleet: OneAtATime
) -> None:
    run_id = suspended_with_a_running(api, fleet)
    a = run_of(api, run_id, "a")
    assert fleet.held[a]["attempt_id"] in stops(api, fleet)  # its worker is told to stop a
    assert states(api, run_id) == {"a": "running", "b": "suspended", "c": "pending"}

    fleet.end(a)  # a succeeds on its own before the stop takes: that stands
    shown = detail(api, run_id)
    assert shown["state"] == "suspended"
    assert states(api, run_id) == {"a": "succeeded", "b": "suspended", "c": "pending"}
    (c,) = [task for task in shown["tasks"] if task["task"] == "c"]
    assert c["reason"] == "the workflow run is suspended: no task starts until it is resumed"
    assert stops(api, fleet) == []

    resumed = act(api, run_id, "resume")
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["state"] == "running"
    assert states(api, run_id) == {"a": "succeeded", "b": "queued", "c": "queued"}
    while taken := fleet.claim():
        for task_run in taken:
            fleet.end(task_run)
    assert detail(api, run_id)["state"] == "succeeded"
    assert act(api, run_id, "resume").status_code == 409  # ended


def test_a_running_task_is_stopped_suspended_and_resumed_as_its_next_attempt(
    api: Api, fleet: OneAtATime
) -> None:
    run_id = suspended_with_a_running(api, fleet)
    a = run_of(api, run_id, "a")
    assert fleet.held[a]["attempt_id"] in stops(api, fleet)
    refused = act(api, run_id, "resume")  # a's worker has not stopped it yet
    assert refused.status_code == 409
    assert "still being stopped" in refused.json()["detail"]

    fleet.end(a, "cancelled")  # the worker stopped it (SIGTERM, grace)
    assert states(api, run_id) == {"a": "suspended", "b": "suspended", "c": "pending"}
    events = api.http.get(f"/v1/runs/{a}/events", headers=api.admin).json()
    assert any("suspend" in event["message"] for event in events)

    assert act(api, run_id, "resume").status_code == 200
    assert states(api, run_id) == {"a": "queued", "b": "queued", "c": "pending"}
    assert act(api, run_id, "resume").status_code == 409  # a second resume
    while taken := fleet.claim():
        for task_run in taken:
            fleet.end(task_run)
    ended = detail(api, run_id)
    assert ended["state"] == "succeeded"
    (a_task,) = [task for task in ended["tasks"] if task["task"] == "a"]
    assert a_task["attempt_count"] == 2


def test_a_suspended_workflow_run_can_be_cancelled(api: Api, fleet: OneAtATime) -> None:
    run_id = suspended_with_a_running(api, fleet)
    a = run_of(api, run_id, "a")
    fleet.end(a, "cancelled")
    cancelled = act(api, run_id, "cancel")
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["state"] == "cancelled"
    assert states(api, run_id) == {"a": "cancelled", "b": "cancelled", "c": "cancelled"}


def test_a_suspended_workflow_run_with_a_task_still_stopping_is_cancelled_when_it_stops(
    api: Api, fleet: OneAtATime
) -> None:
    run_id = suspended_with_a_running(api, fleet)
    cancelling = act(api, run_id, "cancel").json()
    assert (cancelling["state"], cancelling["cancel_requested"]) == ("running", True)
    assert states(api, run_id)["b"] == "cancelled"
    fleet.end(run_of(api, run_id, "a"), "cancelled")
    assert detail(api, run_id)["state"] == "cancelled"


def test_a_suspended_run_keeps_its_slot_under_max_active_runs(api: Api, fleet: OneAtATime) -> None:
    flow = workflow(api, tasks=TASKS[:1], max_active_runs=1)
    first, second = start(api, flow["id"]), start(api, flow["id"])
    assert act(api, first["id"], "suspend").json()["state"] == "suspended"
    assert detail(api, second["id"])["state"] == "queued"
    listed = api.http.get("/v1/workflow-runs?state=suspended", headers=api.admin).json()
    assert [run["id"] for run in listed["items"]] == [first["id"]]
    act(api, first["id"], "cancel")
    assert detail(api, second["id"])["state"] == "running"  # its slot freed by the end


def test_suspend_and_resume_are_refused_where_they_cannot_apply(
    api: Api, fleet: OneAtATime
) -> None:
    flow = workflow(api, tasks=TASKS[:1], max_active_runs=1)
    first, queued = start(api, flow["id"]), start(api, flow["id"])
    assert act(api, first["id"], "resume").status_code == 409  # running, not suspended
    refused = act(api, queued["id"], "suspend")
    assert refused.status_code == 409
    assert refused.headers["content-type"] == "application/problem+json"
    assert act(api, first["id"], "suspend").status_code == 200
    again = act(api, first["id"], "suspend")  # a second suspend: the run as it is
    assert (again.status_code, again.json()["state"]) == (200, "suspended")
    act(api, first["id"], "cancel")
    assert act(api, first["id"], "suspend").status_code == 409  # ended
    assert act(api, first["id"], "resume").status_code == 409
    assert detail(api, queued["id"])["state"] == "running"  # admitted as the first ended
    fleet.claim()
    assert act(api, queued["id"], "cancel").json()["cancel_requested"]
    cancelling = act(api, queued["id"], "suspend")
    assert cancelling.status_code == 409
    assert "being cancelled" in cancelling.json()["detail"]


def test_only_operators_and_above_of_its_own_tenant_suspend_and_resume(
    api: Api, fleet: OneAtATime
) -> None:
    run = start(api, workflow(api, tasks=TASKS[:1])["id"])
    other = api.as_key(api.other_tenant_key())
    missing = "wfrun_00000000000000000000000000"
    for action in ("suspend", "resume"):
        assert act(api, run["id"], action, other).status_code == 404
        assert act(api, missing, action).status_code == 404
    viewer = api.as_key(api.store.access.create_api_key(api.tenant_id, Role.VIEWER, "v")[1])
    for action in ("suspend", "resume"):
        assert act(api, run["id"], action, viewer).status_code == 403
    assert detail(api, run["id"])["state"] == "running"
    for role in (Role.OPERATOR, Role.DEVELOPER):
        key = api.as_key(api.store.access.create_api_key(api.tenant_id, role, str(role))[1])
        assert act(api, run["id"], "suspend", key).json()["state"] == "suspended"
        assert act(api, run["id"], "resume", key).json()["state"] == "running"


def test_the_cli_suspends_and_resumes_a_workflow_run(
    api: Api, fleet: OneAtATime, herder: Herder
) -> None:
    run = start(api, workflow(api, tasks=TASKS[:1])["id"])
    suspended = herder("workflow", "suspend", run["id"])
    assert suspended.exit_code == 0, suspended.output
    assert f"workflow run {run['id']} is suspended" in suspended.output
    shown = herder("workflow", "show", run["id"])
    assert "suspended" in shown.output
    assert "(no task starts until resumed)" in shown.output
    resumed = herder("workflow", "resume", run["id"])
    assert resumed.exit_code == 0, resumed.output
    assert f"workflow run {run['id']} is running" in resumed.output
    again = herder("workflow", "resume", run["id"])
    assert again.exit_code == 1
    assert isinstance(again.exception, ApiError)
    assert again.exception.status == 409

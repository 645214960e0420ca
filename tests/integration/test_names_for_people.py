"""What the API gives the dashboard so it shows people names and not machinery: a run's
attempts and events name their worker by its name; a wait's or an approval's run is no work
done, so the overview counts none as ended (a rejection is no failure) but counts the
approvals waiting; a workflow run lists the approvals it waits on."""

from __future__ import annotations

from typing import Any

from tests.integration.conftest import Api
from tests.integration.test_stats import end_runs, stats
from tests.integration.test_workflow_waits import PUBLISH, decide
from tests.integration.test_workflows import Fleet, fleet, run_of, start, workflow

__all__ = ["fleet"]  # the fixture, used by name


def run_detail(api: Api, run_id: str) -> dict[str, Any]:
    response = api.http.get(f"/v1/runs/{run_id}", headers=api.admin)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def test_a_runs_attempts_and_events_name_the_worker_and_the_key(api: Api) -> None:
    (run_id,) = end_runs(api, ["failed"])
    run = run_detail(api, run_id)
    (attempt,) = run["attempts"]
    assert attempt["worker_name"] == "test-worker"
    by_worker = [e for e in run["events"] if e["actor"] == f"worker:{attempt['worker_id']}"]
    assert by_worker
    assert {event["actor_name"] for event in by_worker} == {"test-worker"}
    rerun = api.http.post(f"/v1/runs/{run_id}/rerun", headers=api.admin)
    assert rerun.status_code == 201, rerun.text
    created = run_detail(api, rerun.json()["id"])["events"][0]
    assert created["actor_name"] == "bootstrap admin (admin)"


def test_approvals_are_no_failures_and_the_waiting_ones_are_counted_and_listed(
    api: Api, fleet: Fleet
) -> None:
    flows = [start(api, workflow(api, name=f"flow{n}", tasks=PUBLISH)["id"]) for n in range(2)]
    assert len(fleet.claim()) == 2
    for run in flows:
        fleet.end(run_of(api, run["id"], "train"))
    overview = stats(api, api.admin)
    assert overview["awaiting_approval"] == 2
    listed = api.http.get("/v1/workflow-runs", headers=api.admin).json()["items"]
    assert {run["id"]: run["awaiting_approval"] for run in listed} == {
        flows[0]["id"]: ["review"],
        flows[1]["id"]: ["review"],
    }
    rejected = decide(api, flows[0]["id"], "review", "reject", comment="no")
    assert rejected.status_code == 200, rejected.text
    assert rejected.json()["awaiting_approval"] == []
    overview = stats(api, api.admin)
    assert overview["awaiting_approval"] == 1
    assert overview["ended"]["failed"] == 0  # the rejection is a decision, not a failure
    assert overview["ended"]["succeeded"] == 2  # the two trainings; no wait counted
    other = stats(api, api.as_key(api.other_tenant_key()))
    assert other["awaiting_approval"] == 0

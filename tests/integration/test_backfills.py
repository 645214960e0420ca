"""Backfills: a schedule's past nominal times run as if fired — each once, a few at a time,
at low priority — for a job's schedule and for a workflow's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from tests.integration.conftest import Api
from tests.integration.test_workflows import Fleet


def hourly_schedule(api: Api, **target: str) -> str:
    response = api.http.post(
        "/v1/schedules", headers=api.admin, json={"cron": "0 * * * *", **target}
    )
    assert response.status_code == 201, response.text
    schedule_id: str = response.json()["id"]
    return schedule_id


def backfill(api: Api, schedule_id: str, status: int = 201, **body: Any) -> dict[str, Any]:
    response = api.http.post(f"/v1/schedules/{schedule_id}/backfills", headers=api.admin, json=body)
    assert response.status_code == status, response.text
    found: dict[str, Any] = response.json()
    return found


def hours_ago(hours: int) -> str:
    now = datetime.now(UTC).replace(minute=30, second=0, microsecond=0) - timedelta(hours=1)
    return (now - timedelta(hours=hours)).isoformat()


def test_a_backfill_runs_each_past_time_once_a_few_at_a_time(api: Api) -> None:
    job = api.create_job("report", retry={"max_attempts": 1})
    fleet = Fleet(api)
    schedule_id = hourly_schedule(api, job_id=str(job["id"]))
    made = backfill(api, schedule_id, start=hours_ago(5), end=hours_ago(0), max_active=2)
    assert (made["state"], made["started"]) == ("running", 2)

    taken = fleet.claim()
    assert len(taken) == 2
    assert {fleet.held[run_id]["spec"]["priority"] for run_id in taken} == {"low"}
    while taken:
        for run_id in taken:
            fleet.end(run_id)
        taken = fleet.claim()
    done = api.http.get(f"/v1/backfills/{made['id']}", headers=api.admin).json()
    assert (done["state"], done["started"], done["already_run"]) == ("finished", 5, 0)

    again = backfill(api, schedule_id, start=hours_ago(5), end=hours_ago(0), max_active=3)
    assert (again["state"], again["started"], again["already_run"]) == ("finished", 0, 5)


def test_a_backfill_of_a_workflow_schedule_starts_workflow_runs(api: Api) -> None:
    api.create_job("step")
    flow = api.http.post(
        "/v1/workflows", headers=api.admin,
        json={"name": "daily", "tasks": [{"name": "a", "job": "step"}]},
    ).json()  # fmt: skip
    schedule_id = hourly_schedule(api, workflow_id=flow["id"])
    made = backfill(api, schedule_id, start=hours_ago(3), end=hours_ago(0))
    assert made["started"] == 1
    runs = api.http.get(
        "/v1/workflow-runs", headers=api.admin, params={"workflow_id": flow["id"]}
    ).json()["items"]
    assert len(runs) == 1
    assert runs[0]["schedule_id"] == schedule_id
    fleet = Fleet(api)
    for _ in range(3):
        (run_id,) = fleet.claim()
        assert fleet.held[run_id]["spec"]["priority"] == "low"
        fleet.end(run_id)
    done = api.http.get(f"/v1/backfills/{made['id']}", headers=api.admin).json()
    assert (done["state"], done["started"]) == ("finished", 3)


def test_a_backfill_of_workflow_runs_that_end_at_once_counts_each_time_it_started(
    api: Api,
) -> None:
    """Each workflow run ends as it starts (its one task maps over an empty list), which asks
    for the backfill's next step from inside the step that started it: every time still
    starts once and is counted."""
    api.create_job("step")
    flow = api.http.post(
        "/v1/workflows", headers=api.admin,
        json={"name": "empty", "params": {"files": []},
              "tasks": [{"name": "a", "job": "step", "map_over": "params.files"}]},
    ).json()  # fmt: skip
    schedule_id = hourly_schedule(api, workflow_id=flow["id"])

    made = backfill(api, schedule_id, start=hours_ago(3), end=hours_ago(0), max_active=1)

    assert (made["state"], made["started"], made["already_run"]) == ("finished", 3, 0)
    runs = api.http.get(
        "/v1/workflow-runs", headers=api.admin, params={"workflow_id": flow["id"]}
    ).json()["items"]
    assert sorted(run["state"] for run in runs) == ["succeeded"] * 3


def test_a_cancelled_backfill_starts_no_more(api: Api) -> None:
    job = api.create_job("report")
    fleet = Fleet(api)
    schedule_id = hourly_schedule(api, job_id=str(job["id"]))
    made = backfill(api, schedule_id, start=hours_ago(5), end=hours_ago(0))
    response = api.http.post(f"/v1/backfills/{made['id']}/cancel", headers=api.admin)
    assert response.json()["state"] == "cancelled"
    (run_id,) = fleet.claim()
    fleet.end(run_id)
    assert fleet.claim() == set()
    again = api.http.post(f"/v1/backfills/{made['id']}/cancel", headers=api.admin)
    assert again.status_code == 409


def test_bad_backfills_are_refused_naming_the_field(api: Api) -> None:
    job = api.create_job("report")
    schedule_id = hourly_schedule(api, job_id=str(job["id"]))
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    cases: list[tuple[dict[str, Any], str]] = [
        ({"start": hours_ago(1), "end": hours_ago(3)}, "body"),
        ({"start": hours_ago(1), "end": future}, "end"),
        ({"start": hours_ago(3), "end": hours_ago(1), "max_active": 0}, "max_active"),
        ({"start": "2026-11-01T00:00:00", "end": hours_ago(1)}, "start"),  # no offset
    ]
    for body, field in cases:
        found = backfill(api, schedule_id, 422, **body)
        assert field in [error["field"] for error in found["errors"]], found
    other = api.as_key(api.other_tenant_key())
    response = api.http.post(
        f"/v1/schedules/{schedule_id}/backfills",
        headers=other,
        json={"start": hours_ago(3), "end": hours_ago(1)},
    )
    assert response.status_code == 404

"""Delayed one-off runs (docs/flow-control.md#delayed-runs): ``run_at`` or ``delay_seconds``
makes a run ``scheduled`` — holding nothing, cancellable — until the starter queues it at its
time in one guarded statement; one in the past starts now, more than a year ahead or both
given is a 422; a batch delays item by item; the CLI takes ``--at`` and ``--in``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import update

from herder.control.starter import MAX_SLEEP_SECONDS, Starter
from herder.store.runs.starting import start_due
from herder.store.schema import runs
from tests.integration.conftest import Api, Herder
from tests.integration.dispatching import dispatch
from tests.integration.registered import register_worker


def submit(api: Api, job_id: str, **body: Any) -> Any:
    return api.http.post(f"/v1/jobs/{job_id}/runs", headers=api.admin, json=body)


def run_of(api: Api, run_id: str) -> dict[str, Any]:
    response = api.http.get(f"/v1/runs/{run_id}", headers=api.admin)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def due_now(api: Api, *run_ids: str) -> None:
    """As if their time had come."""
    past = datetime.now(UTC) - timedelta(seconds=1)
    with api.store.database.write() as connection:
        connection.execute(update(runs).where(runs.c.id.in_(run_ids)).values(run_at=past))


def test_a_delayed_run_is_scheduled_holding_nothing_until_its_time(api: Api) -> None:
    job = api.create_job("report", command="true")
    before = datetime.now(UTC)
    made = submit(api, job["id"], delay_seconds=3600)
    assert made.status_code == 201, made.text
    run = made.json()
    assert run["state"] == "scheduled"
    starts = datetime.fromisoformat(run["run_at"])
    assert before + timedelta(seconds=3599) <= starts <= datetime.now(UTC) + timedelta(hours=1)
    queue = api.http.get("/v1/queue", headers=api.admin).json()["items"]
    assert queue == []
    listed = api.http.get("/v1/runs", headers=api.admin, params={"state": "scheduled"}).json()
    assert [item["id"] for item in listed["items"]] == [run["id"]]
    at = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert submit(api, job["id"], run_at=at).json()["state"] == "scheduled"
    past = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    assert submit(api, job["id"], run_at=past).json()["state"] == "queued"
    assert submit(api, job["id"], delay_seconds=0).json()["state"] == "queued"


def test_too_far_ahead_both_given_or_no_offset_is_a_422(api: Api) -> None:
    job = api.create_job("report", command="true")
    far = (datetime.now(UTC) + timedelta(days=367)).isoformat()
    too_far = submit(api, job["id"], run_at=far)
    assert too_far.status_code == 422
    assert too_far.json()["field"] == "run_at"
    both = submit(api, job["id"], run_at=far, delay_seconds=10)
    assert both.status_code == 422
    assert "run_at and delay_seconds" in both.json()["detail"]
    naive = submit(api, job["id"], run_at="2026-12-01T09:00:00")
    assert naive.status_code == 422
    assert naive.json()["errors"][0]["field"] == "run_at"
    assert submit(api, job["id"], delay_seconds=-1).status_code == 422


def test_the_starter_queues_due_runs_only_and_never_a_cancelled_one(api: Api) -> None:
    job = api.create_job("report", command="true")
    due, later, cancelled = (submit(api, job["id"], delay_seconds=600).json()["id"]
                             for _ in range(3))  # fmt: skip
    assert api.http.post(f"/v1/runs/{cancelled}/cancel", headers=api.admin).json()["state"] == (
        "cancelled"
    )
    due_now(api, due, cancelled)
    starter = Starter(api.store)
    assert starter.step() == MAX_SLEEP_SECONDS  # the next start is ten minutes away
    assert [run_of(api, run_id)["state"] for run_id in (due, later, cancelled)] == [
        "queued", "scheduled", "cancelled",
    ]  # fmt: skip
    events = api.http.get(f"/v1/runs/{due}/events", headers=api.admin).json()
    assert events[-1]["message"] == "its time came: queued"
    assert events[-1]["actor"] == "starter"
    with api.store.database.write() as connection:  # a second holder changes nothing
        assert start_due(connection, datetime.now(UTC)) == 0


def test_a_delayed_run_runs_once_its_time_has_come(api: Api) -> None:
    register_worker(api, "w1")
    job = api.create_job("report", command="true")
    run_id = submit(api, job["id"], delay_seconds=60).json()["id"]
    dispatch(api.store)
    assert run_of(api, run_id)["state"] == "scheduled"
    due_now(api, run_id)
    Starter(api.store).step()
    dispatch(api.store)
    assert run_of(api, run_id)["state"] == "running"


def test_a_batch_delays_item_by_item(api: Api) -> None:
    job = api.create_job("report", command="true")
    far = (datetime.now(UTC) + timedelta(days=400)).isoformat()
    items = [{"job_id": job["id"], "delay_seconds": 600}, {"job_id": job["id"]},
             {"job_id": job["id"], "run_at": far}]  # fmt: skip
    answers = api.http.post("/v1/runs/batch", headers=api.admin, json={"runs": items})
    results = answers.json()["items"]
    assert [result["status"] for result in results][:2] == [201, 201]
    assert results[2]["status"] == 422  # that item alone
    assert results[2]["field"] == "runs.2.run_at"
    states = [run_of(api, result["run_id"])["state"] for result in results[:2]]
    assert states == ["scheduled", "queued"]


def test_the_cli_starts_a_run_later(api: Api, herder: Herder) -> None:
    api.create_job("report", command="true")
    later = herder("run", "start", "report", "--in", "10m", "--json")
    assert later.exit_code == 0, later.output
    assert json.loads(later.output)["state"] == "scheduled"
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S+0000")
    at = herder("run", "start", "report", "--at", tomorrow)
    assert at.exit_code == 0, at.output
    assert "starts at" in at.output
    assert herder("run", "start", "report", "--in", "soon").exit_code != 0


def test_a_run_at_at_the_end_of_time_is_a_422_not_a_500(api: Api) -> None:
    job = api.create_job("report", command="true")
    for far in ("9999-12-31T23:59:59-23:59", "9999-12-31T23:59:59+23:59"):
        answer = submit(api, job["id"], run_at=far)
        assert answer.status_code == 422, answer.text

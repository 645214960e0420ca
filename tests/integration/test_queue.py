"""The queue: queued runs in dispatch order, what they need and why they wait, per tenant."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update

from herder.domain.models import Role
from herder.store.schema import runs
from tests.integration.conftest import Api


def queue(api: Api, headers: dict[str, str] | None = None, **params: Any) -> dict[str, Any]:
    given = {name: value for name, value in params.items() if value is not None}
    response = api.http.get("/v1/queue", headers=headers or api.admin, params=given)
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    return page


def run_ids(page: dict[str, Any]) -> list[str]:
    return [item["run_id"] for item in page["items"]]


@pytest.fixture
def by_priority(api: Api) -> dict[str, list[str]]:
    """Runs submitted low, high, medium, low, high: their ids by priority, in order."""
    jobs = {
        priority: api.create_job(f"job-{priority}", priority=priority)["id"]
        for priority in ("high", "medium", "low")
    }
    submitted: dict[str, list[str]] = {"high": [], "medium": [], "low": []}
    for priority in ("low", "high", "medium", "low", "high"):
        submitted[priority].append(str(api.start_run(jobs[priority])["id"]))
    return submitted


def test_a_preempted_run_keeps_its_place_but_its_wait_starts_again(api: Api) -> None:
    run_id = api.start_run(api.create_job("train")["id"])["id"]
    now = api.store.clock.now()
    with api.store.database.write() as connection:  # queued an hour ago, preempted just now
        connection.execute(
            update(runs)
            .where(runs.c.id == run_id)
            .values(queued_at=now - timedelta(hours=1), preempted_at=now - timedelta(seconds=5))
        )
    (item,) = queue(api)["items"]
    assert 5 <= item["waited_seconds"] < 60


def test_queued_runs_come_in_dispatch_order(api: Api, by_priority: dict[str, list[str]]) -> None:
    page = queue(api)
    assert run_ids(page) == by_priority["high"] + by_priority["medium"] + by_priority["low"]
    assert page["next_cursor"] is None


def test_pages_follow_the_same_order_without_gaps_or_repeats(
    api: Api, by_priority: dict[str, list[str]]
) -> None:
    seen: list[str] = []
    cursor = None
    while True:
        page = queue(api, limit=2, cursor=cursor)
        seen += run_ids(page)
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == by_priority["high"] + by_priority["medium"] + by_priority["low"]


def test_an_item_says_what_the_run_needs_and_why_it_waits(api: Api) -> None:
    job = api.create_job(
        "train",
        priority="high",
        resources={"cpu": 2, "memory_mb": 512, "gpus": 1},
        replicas=2,
        requires={"gpu_model": "h100"},
    )
    run = api.start_run(job["id"])
    (item,) = queue(api)["items"]
    assert item == {
        "run_id": run["id"],
        "tenant_id": api.tenant_id,
        "tenant_name": "default",
        "job_id": job["id"],
        "job_name": "train",
        "priority": "high",
        "resources": {"cpu": 2.0, "memory_mb": 512, "gpus": 1},
        "replicas": 2,
        "requires": {"gpu_model": "h100"},
        "queued_at": item["queued_at"],
        "waited_seconds": item["waited_seconds"],
        "waiting_reason": "not looked at by the dispatcher yet",
    }
    assert item["queued_at"] == run["queued_at"]
    assert 0 <= item["waited_seconds"] < 60


def test_only_queued_runs_are_listed_and_a_job_filter_narrows_them(api: Api) -> None:
    first, second = api.create_job("first")["id"], api.create_job("second")["id"]
    kept = api.start_run(first)
    cancelled = api.start_run(first)
    other = api.start_run(second)
    api.http.post(f"/v1/runs/{cancelled['id']}/cancel", headers=api.admin)
    assert run_ids(queue(api)) == [kept["id"], other["id"]]
    assert run_ids(queue(api, job_id=first)) == [kept["id"]]


def test_a_tenant_sees_its_own_queue_and_the_system_admins_every_tenants(api: Api) -> None:
    mine = api.start_run(api.create_job()["id"])
    team_key = api.as_key(api.other_tenant_key("team", role=Role.DEVELOPER))
    team_job = api.http.post(
        "/v1/jobs", headers=team_key, json={"name": "x", "runtime": "shell", "command": "true"}
    ).json()
    theirs = api.http.post(f"/v1/jobs/{team_job['id']}/runs", headers=team_key).json()

    assert run_ids(queue(api, team_key)) == [theirs["id"]]
    everyone = queue(api)
    assert run_ids(everyone) == [mine["id"], theirs["id"]]
    tenants = {item["run_id"]: item["tenant_id"] for item in everyone["items"]}
    assert tenants[theirs["id"]] != api.tenant_id
    assert tenants[mine["id"]] == api.tenant_id
    # Only the system tenant's admins see past their tenant.
    system_viewer = api.as_key(api.store.access.create_api_key(api.tenant_id, Role.VIEWER, "v")[1])
    assert run_ids(queue(api, system_viewer)) == [mine["id"]]


@pytest.mark.parametrize("cursor", ["nonsense", "cnVuXzE", "MXwyMDI2LTAxLTAxfHJ1bl94"])
def test_a_cursor_not_from_this_listing_gets_422(api: Api, cursor: str) -> None:
    response = api.http.get("/v1/queue", headers=api.admin, params={"cursor": cursor})
    assert response.status_code == 422
    assert response.json()["field"] == "cursor"

"""A tenant's ``max_queued`` holds for the runs that workflows, backfills and schedules make,
not only for its own submissions: a fan-out cannot fill the queue past it (the rest wait,
saying why, and start as room frees), a fire past it is skipped and recorded, a backfill's
next runs wait. A workflow run makes at most ``MAX_RUNS_PER_WORKFLOW_RUN`` runs, and its
cancel ends thousands of runs in one unit of work."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import func, select

from herder.app.workflows import start as start_workflow_run
from herder.clock import SystemClock
from herder.control.reaper import Reaper
from herder.domain.jobs import JobSpec
from herder.domain.tenants import TenantQuotas
from herder.domain.workflows import run_bound
from herder.domain.workflows.spec import WorkflowSpec
from herder.store.schema import run_events, runs, tenants
from herder.store.store import Store
from tests.clocks import ManualClock
from tests.integration.conftest import Api
from tests.integration.test_backfills import backfill, hourly_schedule, hours_ago
from tests.integration.test_schedules import Firing, minute
from tests.integration.test_workflow_schedules import WorkflowFiring
from tests.integration.test_workflows import Fleet, detail, start, workflow

FAN_OUT: dict[str, Any] = {
    "params": {"items": []},
    "tasks": [
        {"name": "each", "job": "work", "map_over": "params.items"},
        {"name": "join", "job": "work", "depends_on": ["each"]},
    ],
}


def limit_tenant(api: Api, **quotas: Any) -> None:
    response = api.http.patch(
        f"/v1/tenants/{api.tenant_id}", headers=api.admin, json={"quotas": quotas}
    )
    assert response.status_code == 200, response.text


def count(store: Store, state: str) -> int:
    with store.database.read() as connection:
        return int(
            connection.execute(
                select(func.count()).select_from(runs).where(runs.c.state == state)
            ).scalar_one()
        )


@pytest.fixture
def fleet(api: Api) -> Fleet:
    api.create_job("work", retry={"max_attempts": 1})
    return Fleet(api)


def test_a_fan_out_queues_no_more_than_max_queued_and_the_rest_wait_saying_why(
    api: Api, fleet: Fleet
) -> None:
    limit_tenant(api, max_queued=3, submit_rate_per_second=1)
    run = start(api, workflow(api, **FAN_OUT)["id"], params={"items": list(range(12))})

    assert (count(api.store, "queued"), count(api.store, "pending")) == (3, 9)
    instances = [task for task in detail(api, run["id"])["tasks"] if task["task"] == "each"]
    held = [task for task in instances if task["state"] == "pending"]
    assert len(held) == 9
    assert {task["reason"] for task in held} == {"tenant at its max_queued 3: 3 queued"}

    most_queued = 0
    for _ in range(30):  # 12 instances, 3 at a time, then the join
        taken = fleet.claim()
        for run_id in taken:
            fleet.end(run_id)
            most_queued = max(most_queued, count(api.store, "queued"))
        if detail(api, run["id"])["state"] != "running":
            break
    ended = detail(api, run["id"])
    assert ended["state"] == "succeeded"
    assert [task["state"] for task in ended["tasks"]] == ["succeeded"] * 13
    assert most_queued == 3  # more started as runs finished, never past the bound


def test_room_that_placement_frees_is_taken_by_the_reapers_pass(api: Api, fleet: Fleet) -> None:
    limit_tenant(api, max_queued=2)
    start(api, workflow(api, **FAN_OUT)["id"], params={"items": list(range(5))})
    assert len(fleet.claim()) == 2  # running now: the queue has room, and nothing ended

    Reaper(api.store, SystemClock(), heartbeat_timeout_seconds=600).step()

    assert (count(api.store, "queued"), count(api.store, "pending")) == (2, 1)
    with api.store.database.read() as connection:
        actors = connection.execute(
            select(run_events.c.actor, run_events.c.message).where(
                run_events.c.from_state == "pending", run_events.c.to_state == "queued"
            )
        ).all()
    assert [tuple(row) for row in actors] == [
        ("max_queued", "room under the tenant's max_queued 2: queued")
    ] * 2


def test_a_backfill_waits_for_room_under_max_queued(api: Api, fleet: Fleet) -> None:
    limit_tenant(api, max_queued=1)
    job = api.create_job("report", retry={"max_attempts": 1})
    schedule_id = hourly_schedule(api, job_id=str(job["id"]))
    made = backfill(api, schedule_id, start=hours_ago(4), end=hours_ago(0), max_active=3)

    assert (count(api.store, "queued"), count(api.store, "pending")) == (1, 2)
    listed = api.http.get("/v1/runs", headers=api.admin, params={"state": "pending"}).json()
    assert {run["waiting_reason"] for run in listed["items"]} == {
        "tenant at its max_queued 1: 1 queued"
    }
    for _ in range(10):
        taken = fleet.claim()
        assert len(taken) <= 1
        for run_id in taken:
            fleet.end(run_id)
    done = api.http.get(f"/v1/backfills/{made['id']}", headers=api.admin).json()
    assert (done["state"], done["started"]) == ("finished", 4)


@pytest.fixture
def firing(database_url: str) -> Iterator[Firing]:
    clock = ManualClock()
    store = Store(database_url, clock=clock)
    tenant = store.access.create_tenant("t").id
    store.access.update_tenant(tenant, quota_changes={"max_queued": 1})
    job = store.jobs.create(tenant, "j", JobSpec(runtime="shell", command="true")).id
    yield Firing(store, clock, tenant, job)
    store.close()


def test_a_fire_past_max_queued_is_skipped_and_recorded(firing: Firing) -> None:
    begun = firing.clock.now()
    schedule_id = firing.schedule()
    for _ in range(2):
        firing.clock.advance(60)
        firing.fire(schedule_id)

    assert firing.runs(schedule_id) == [minute(begun, 1)]
    events = firing.store.schedules.events(firing.tenant_id, schedule_id)
    skipped = [event for event in events if event.kind == "skipped"]
    assert [(e.scheduled_for, e.message) for e in skipped] == [
        (minute(begun, 2), "not fired: tenant at its max_queued 1: 1 queued")
    ]
    assert firing.store.schedules.get(firing.tenant_id, schedule_id).skipped_count == 1


def test_a_workflow_fire_past_max_queued_is_skipped_and_recorded(database_url: str) -> None:
    clock = ManualClock()
    store = Store(database_url, clock=clock)
    try:
        flows = WorkflowFiring(store, clock)
        store.access.update_tenant(flows.tenant_id, quota_changes={"max_queued": 1})
        schedule_id = flows.schedule(flows.workflow())
        for _ in range(2):
            clock.advance(60)
            flows.fire(schedule_id)
        assert [state for _, state in flows.runs(schedule_id)] == ["running"]
        (skipped,) = [e for e in store.schedules.events(flows.tenant_id, schedule_id)
                      if e.kind == "skipped"]  # fmt: skip
        assert skipped.message == "not fired: tenant at its max_queued 1: 1 queued"
    finally:
        store.close()


def test_a_start_that_would_make_too_many_runs_is_refused_naming_params(
    api: Api, fleet: Fleet
) -> None:
    wide: dict[str, Any] = {
        "params": {"items": []},
        "tasks": [
            {"name": f"each{n}", "job": "work", "map_over": "params.items"} for n in range(11)
        ],
    }
    flow = workflow(api, **wide)
    refused = api.http.post(
        f"/v1/workflows/{flow['id']}/runs",
        headers=api.admin,
        json={"params": {"items": list(range(1000))}},
    )
    assert refused.status_code == 422, refused.text
    assert refused.json()["field"] == "params"
    assert "11,000 runs" in refused.json()["detail"]
    listed = api.http.get("/v1/workflow-runs", headers=api.admin).json()
    assert listed["items"] == []  # nothing stored
    by_default = api.http.post(
        "/v1/workflows",
        headers=api.admin,
        json={**wide, "name": "wide", "params": {"items": list(range(1000))}},
    )
    assert by_default.status_code == 422, by_default.text
    assert by_default.json()["field"] == "params"


def test_a_fan_out_past_the_bound_fails_its_task_saying_why(
    api: Api, fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(run_bound, "MAX_RUNS_PER_WORKFLOW_RUN", 5)
    flow = workflow(
        api,
        tasks=[
            {"name": "split", "job": "work"},
            {"name": "each", "job": "work", "depends_on": ["split"], "map_over": "split"},
        ],
    )
    run = start(api, flow["id"])
    (split,) = fleet.claim()
    fleet.end(split, output=list(range(10)))
    ended = detail(api, run["id"])
    assert ended["state"] == "failed"
    each = ended["tasks"][1]
    assert (each["state"], each["reason"]) == (
        "failed",
        "its 10 instance(s) would take the workflow run past 5 runs (it has made 1); a "
        "workflow run makes at most 5",
    )


def test_cancelling_a_wide_fan_out_ends_every_run_in_one_go(api: Api, fleet: Fleet) -> None:
    run = start(api, workflow(api, **FAN_OUT)["id"], params={"items": list(range(1000))})
    running = fleet.claim()
    assert running

    response = api.http.post(f"/v1/workflow-runs/{run['id']}/cancel", headers=api.admin)

    assert response.status_code == 200, response.text
    assert (count(api.store, "queued"), count(api.store, "pending")) == (0, 0)
    assert count(api.store, "cancelled") == 1000 - len(running)
    with api.store.database.read() as connection:
        recorded = connection.execute(
            select(func.count())
            .select_from(run_events)
            .where(run_events.c.message == f"its workflow run {run['id']} was cancelled")
        ).scalar_one()
    assert recorded == 1000  # one event a run: ended, or its worker told to stop it
    for run_id in running:
        fleet.end(run_id, "cancelled")
    ended = detail(api, run["id"])
    assert ended["state"] == "cancelled"
    assert {task["state"] for task in ended["tasks"]} == {"cancelled"}


def test_a_held_run_expires_at_its_start_deadline(database_url: str) -> None:
    clock = ManualClock()
    store = Store(database_url, clock=clock)
    try:
        tenant = store.access.create_tenant("t", quotas=TenantQuotas(max_queued=1)).id
        store.jobs.create(tenant, "work", JobSpec(runtime="shell", command="true"))
        spec = WorkflowSpec.model_validate(
            {
                "params": {"items": [1, 2, 3]},
                "tasks": [
                    {
                        "name": "each",
                        "job": "work",
                        "map_over": "params.items",
                        "overrides": {"start_deadline_seconds": 60},
                    }
                ],
            }
        )
        flow = store.workflows.create(tenant, "flow", spec)
        run, _ = start_workflow_run(store, tenant, flow.id, {})
        assert (count(store, "queued"), count(store, "pending")) == (1, 2)

        clock.advance(61)
        Reaper(store, clock, heartbeat_timeout_seconds=600).step()

        ended = store.workflow_runs.get(tenant, run.id)
        assert ended.state == "failed"
        assert {(task.state, task.reason) for task in ended.tasks} == {
            ("expired", "expired: not started by its start deadline")
        }
    finally:
        store.close()


POSTGRES_ONLY = pytest.mark.parametrize(
    "database_url", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True
)


@POSTGRES_ONLY  # SQLite has one writer at a time: no two can take room at once
def test_a_start_while_another_takes_room_holds_its_runs_until_the_next_release(
    database_url: str,
) -> None:
    store = Store(database_url)
    try:
        tenant = store.access.create_tenant("t", quotas=TenantQuotas(max_queued=5)).id
        store.jobs.create(tenant, "work", JobSpec(runtime="shell", command="true"))
        spec = WorkflowSpec.model_validate(
            {
                "params": {"items": [1, 2, 3]},
                "tasks": [{"name": "each", "job": "work", "map_over": "params.items"}],
            }
        )
        flow = store.workflows.create(tenant, "flow", spec)
        with store.database.engine.connect() as other, other.begin():
            other.execute(  # another transaction taking room for the tenant now
                select(tenants.c.id).where(tenants.c.id == tenant).with_for_update(key_share=True)
            )
            run, _ = start_workflow_run(store, tenant, flow.id, {})  # does not wait for it
        assert (count(store, "queued"), count(store, "pending")) == (0, 3)
        assert {task.reason for task in store.workflow_runs.get(tenant, run.id).tasks} == {
            "tenant at its max_queued 5: 0 queued, and another start is taking room"
        }

        Reaper(store, SystemClock(), heartbeat_timeout_seconds=600).step()

        assert (count(store, "queued"), count(store, "pending")) == (3, 0)
    finally:
        store.close()


def test_a_time_already_run_takes_no_queue_room_from_a_backfills_next_run(api: Api) -> None:
    """A backfill's nominal time that already has a run makes nothing, so it must not take
    the tenant's room under max_queued: the next time's run is queued, not held pending."""
    limit_tenant(api, max_queued=1)
    job = api.create_job("report", retry={"max_attempts": 1})
    fleet = Fleet(api)
    schedule_id = hourly_schedule(api, job_id=str(job["id"]))
    first = backfill(api, schedule_id, start=hours_ago(4), end=hours_ago(3), max_active=1)
    assert first["started"] == 1
    for run_id in fleet.claim():
        fleet.end(run_id)
    assert (count(api.store, "queued"), count(api.store, "pending")) == (0, 0)

    again = backfill(api, schedule_id, start=hours_ago(4), end=hours_ago(2), max_active=2)

    assert (again["started"], again["already_run"]) == (1, 1)
    assert (count(api.store, "queued"), count(api.store, "pending")) == (1, 0)

"""Schedules that start workflows: the schedule machinery as for jobs — one run per nominal
time however many firers try, misfire and concurrency policies — over workflow runs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import pytest
from sqlalchemy import select

from herder.control.firer import Firer
from herder.domain.cron import CronExpression, parse_timezone
from herder.domain.jobs import JobSpec
from herder.domain.schedules import ScheduleSpec, first_fire
from herder.domain.workflows.spec import WorkflowSpec
from herder.store.schedules import partition_of
from herder.store.schema import workflow_runs
from herder.store.store import Store
from tests.clocks import ManualClock
from tests.integration.conftest import Api
from tests.integration.test_schedules import minute


class WorkflowFiring:
    def __init__(self, store: Store, clock: ManualClock) -> None:
        self.store = store
        self.clock = clock
        self.tenant_id = store.access.create_tenant("t").id
        store.jobs.create(self.tenant_id, "step", JobSpec(runtime="shell", command="true"))

    def workflow(self, **spec: object) -> str:
        tasks = [{"name": "a", "job": "step"}, {"name": "b", "job": "step", "depends_on": ["a"]}]
        body = WorkflowSpec.model_validate({"tasks": tasks, **spec})
        return self.store.workflows.create(self.tenant_id, "nightly", body).id

    def schedule(self, workflow_id: str, cron: str = "* * * * *", **spec: object) -> str:
        full = ScheduleSpec.model_validate({"cron": cron, **spec})
        expression = CronExpression.parse(full.cron, allow_seconds=True)
        first = first_fire(expression, parse_timezone(full.timezone), full, self.clock.now())
        created = self.store.schedules.create(
            self.tenant_id, None, full, first, workflow_id=workflow_id
        )
        return created.id

    def fire(self, schedule_id: str, firers: int = 1) -> None:
        for _ in range(firers):
            Firer(self.store, self.clock, partition_of(schedule_id)).step()

    def runs(self, schedule_id: str) -> list[tuple[datetime, str]]:
        with self.store.database.read() as connection:
            rows = connection.execute(
                select(workflow_runs.c.scheduled_for, workflow_runs.c.state)
                .where(workflow_runs.c.schedule_id == schedule_id)
                .order_by(workflow_runs.c.scheduled_for)
            ).all()
        return [(row.scheduled_for, row.state) for row in rows]


@pytest.fixture
def firing(database_url: str) -> Iterator[WorkflowFiring]:
    clock = ManualClock()
    store = Store(database_url, clock=clock)
    yield WorkflowFiring(store, clock)
    store.close()


def test_each_fire_starts_one_workflow_run_however_many_firers_try(
    firing: WorkflowFiring,
) -> None:
    start = firing.clock.now()
    schedule_id = firing.schedule(firing.workflow())
    for _ in range(3):
        firing.clock.advance(60)
        firing.fire(schedule_id, firers=3)
    assert firing.runs(schedule_id) == [(minute(start, n), "running") for n in (1, 2, 3)]
    schedule = firing.store.schedules.get(firing.tenant_id, schedule_id)
    assert schedule.fired_count == 3
    assert schedule.workflow_id is not None
    assert schedule.job_id is None


def test_forbid_skips_a_fire_while_the_last_run_is_active(firing: WorkflowFiring) -> None:
    start = firing.clock.now()
    schedule_id = firing.schedule(firing.workflow(), concurrency_policy="forbid")
    for _ in range(2):
        firing.clock.advance(60)
        firing.fire(schedule_id)
    assert firing.runs(schedule_id) == [(minute(start, 1), "running")]
    events = firing.store.schedules.events(firing.tenant_id, schedule_id)
    assert [event.kind for event in events] == ["fired", "skipped"]
    assert "concurrency policy forbid" in events[-1].message
    assert firing.store.schedules.get(firing.tenant_id, schedule_id).skipped_count == 1


def test_replace_cancels_the_active_run_for_the_new_fire(firing: WorkflowFiring) -> None:
    start = firing.clock.now()
    schedule_id = firing.schedule(firing.workflow(), concurrency_policy="replace")
    for _ in range(2):
        firing.clock.advance(60)
        firing.fire(schedule_id)
    assert firing.runs(schedule_id) == [
        (minute(start, 1), "cancelled"),
        (minute(start, 2), "running"),
    ]


def test_the_workflows_max_active_runs_still_applies(firing: WorkflowFiring) -> None:
    start = firing.clock.now()
    schedule_id = firing.schedule(firing.workflow(max_active_runs=1))
    for _ in range(2):
        firing.clock.advance(60)
        firing.fire(schedule_id)
    assert firing.runs(schedule_id) == [(minute(start, 1), "running"), (minute(start, 2), "queued")]


def test_a_schedule_names_a_job_or_a_workflow_not_both(api: Api) -> None:
    job = api.create_job("step")
    for body in ({}, {"job_id": job["id"], "workflow_id": "wf_x"}):
        response = api.http.post(
            "/v1/schedules", headers=api.admin, json={"cron": "* * * * *", **body}
        )
        assert response.status_code == 422, response.text
    response = api.http.post(
        "/v1/schedules",
        headers=api.admin,
        json={"cron": "* * * * *", "workflow_id": "wf_01M8757VZ9069RNPG962J8YJ2G"},
    )
    assert response.status_code == 404

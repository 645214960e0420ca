"""A schedule's runs: each run names the schedule and fire that started it, and
``GET /v1/runs?schedule_id=`` lists them (the dashboard's schedule page reads it)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from herder.api.app import create_app
from herder.client import HerderClient
from herder.control.firer import Firer
from herder.domain.cron import CronExpression, parse_timezone
from herder.domain.jobs import JobSpec
from herder.domain.models import Role
from herder.domain.schedules import ScheduleSpec, first_fire
from herder.settings import Settings
from herder.store.schedules import partition_of
from herder.store.store import Store
from tests.clocks import ManualClock


@dataclass
class Fired:
    http: TestClient
    store: Store
    clock: ManualClock
    admin_key: str
    tenant_id: str
    job_id: str

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_key}"}

    def every_minute(self) -> str:
        spec = ScheduleSpec(cron="* * * * *")
        expression = CronExpression.parse(spec.cron, allow_seconds=True)
        first = first_fire(expression, parse_timezone(spec.timezone), spec, self.clock.now())
        return self.store.schedules.create(self.tenant_id, self.job_id, spec, first).id

    def fire_next(self, *schedule_ids: str) -> None:
        self.clock.advance(60)
        for partition in {partition_of(schedule_id) for schedule_id in schedule_ids}:
            Firer(self.store, self.clock, partition).step()


@pytest.fixture
def fired(database_url: str, tmp_path: Path) -> Iterator[Fired]:
    clock = ManualClock()
    store = Store(database_url, clock=clock)
    bootstrap = store.access.bootstrap()
    assert bootstrap is not None
    tenant_id = bootstrap.tenant.id
    job_id = store.jobs.create(tenant_id, "j", JobSpec(runtime="shell", command="true")).id
    settings = Settings(home=tmp_path, database_url=database_url)
    with TestClient(create_app(store, settings)) as http:
        yield Fired(http, store, clock, bootstrap.admin_key, tenant_id, job_id)
    store.close()


def minute(moment: datetime, offset: int) -> datetime:
    return moment.replace(second=0, microsecond=0) + timedelta(minutes=offset)


def test_a_schedule_that_fired_twice_lists_its_two_runs_newest_first(fired: Fired) -> None:
    start = fired.clock.now()
    schedule_id = fired.every_minute()
    other_schedule = fired.every_minute()
    fired.fire_next(schedule_id, other_schedule)
    fired.fire_next(schedule_id, other_schedule)
    one_off = fired.http.post(f"/v1/jobs/{fired.job_id}/runs", headers=fired.admin, json={})
    assert one_off.status_code == 201, one_off.text
    assert one_off.json()["schedule_id"] is None

    response = fired.http.get("/v1/runs", headers=fired.admin, params={"schedule_id": schedule_id})
    assert response.status_code == 200, response.text
    listed = response.json()["items"]
    assert [run["schedule_id"] for run in listed] == [schedule_id, schedule_id]
    nominal = [datetime.fromisoformat(run["scheduled_for"]) for run in listed]
    assert nominal == [minute(start, 2), minute(start, 1)]
    # the other filters still apply with it, and the other schedule's runs are its own
    queued = fired.http.get(
        "/v1/runs",
        headers=fired.admin,
        params={"schedule_id": schedule_id, "state": "succeeded"},
    )
    assert queued.json()["items"] == []
    others = fired.http.get(
        "/v1/runs", headers=fired.admin, params={"schedule_id": other_schedule}
    ).json()["items"]
    assert [run["schedule_id"] for run in others] == [other_schedule, other_schedule]
    with HerderClient("http://testserver", fired.admin_key, http=fired.http) as client:
        page = client.list_runs(schedule_id=schedule_id, limit=1)
        assert [run.id for run in page.items] == [listed[0]["id"]]
        assert page.next_cursor is not None


def test_another_tenants_schedule_id_lists_nothing(fired: Fired) -> None:
    schedule_id = fired.every_minute()
    fired.fire_next(schedule_id)
    tenant = fired.store.access.create_tenant("other")
    other_key = fired.store.access.create_api_key(tenant.id, Role.ADMIN, "test")[1]
    response = fired.http.get(
        "/v1/runs",
        headers={"Authorization": f"Bearer {other_key}"},
        params={"schedule_id": schedule_id},
    )
    assert response.status_code == 200
    assert response.json()["items"] == []
    mine = fired.http.get("/v1/runs", headers=fired.admin, params={"schedule_id": schedule_id})
    assert len(mine.json()["items"]) == 1
